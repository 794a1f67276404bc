package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/gguf"
	"github.com/turnwise/turnwise/internal/testdata"
)

// tokenize runs "train tokenize" with args and stdin and returns its
// output.
func tokenize(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := runTokenize(args, strings.NewReader(stdin), &out, &errOut)
	return out.String(), err
}

func mustTokenize(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, err := tokenize(t, stdin, args...)
	if err != nil {
		t.Fatalf("tokenize %q: %v", args, err)
	}
	return out
}

// The stories260K sentence and its ids as llama2.c's encoder gives them
// (dummy space prefix, highest-score merges first).
const storySentence = "Once upon a time, there was a little girl named Lily."

var storyIDs = []int32{403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426}

func TestTokenizeStories260K(t *testing.T) {
	path := testdata.Path(t, "stories260K", "stories260K.gguf")
	out := mustTokenize(t, storySentence, "--tokenizer", path)
	var ids []int32
	if err := json.Unmarshal([]byte(out), &ids); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	if !reflect.DeepEqual(ids, storyIDs) {
		t.Errorf("ids %v, want %v", ids, storyIDs)
	}
	out = mustTokenize(t, "", "--tokenizer", path, "--bos", "--text", storySentence)
	if !strings.HasPrefix(out, "[1,403,") {
		t.Errorf("--bos output %q does not start with BOS", out)
	}
	if got := mustTokenize(t, out, "--tokenizer", path, "--decode", "--skip-special"); got != storySentence {
		t.Errorf("decoded %q, want %q", got, storySentence)
	}
	tests := []struct {
		ids  string
		args []string
		want string
	}{
		{"1 403 407 261 378", nil, "<s>Once upon a time"},
		{"1 403 407 261 378", []string{"--skip-special"}, "Once upon a time"},
		{"[403, 407, 261, 378, 432]", nil, "Once upon a time,"},
		{"[261, 378]", nil, "a time"},
		{"378 13 2", nil, "time\n</s>"}, // the leading space of the first token goes
	}
	for _, tt := range tests {
		args := append([]string{"--tokenizer", path, "--decode", "--ids", tt.ids}, tt.args...)
		if got := mustTokenize(t, "", args...); got != tt.want {
			t.Errorf("decode %s %v = %q, want %q", tt.ids, tt.args, got, tt.want)
		}
	}
}

func TestTokenizeLlama3(t *testing.T) {
	path := testdata.Path(t, "llama3", "tokenizer.json")
	if got := mustTokenize(t, "Hello world", "--tokenizer", path); got != "[9906,1917]\n" {
		t.Errorf("encode: %q", got)
	}
	if got := mustTokenize(t, "", "--tokenizer", path, "--text", "x<|eot_id|>", "--allow-special", "--bos"); got != "[128000,87,128009]\n" {
		t.Errorf("encode with specials: %q", got)
	}
	if got := mustTokenize(t, "", "--tokenizer", path, "--text", ""); got != "[]\n" {
		t.Errorf("encode of nothing: %q", got)
	}
	if got := mustTokenize(t, "[128000, 9906, 1917, 128009]", "--tokenizer", path, "--decode"); got != "<|begin_of_text|>Hello world<|eot_id|>" {
		t.Errorf("decode: %q", got)
	}

	conv := `{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]}`
	out := mustTokenize(t, conv, "--tokenizer", path, "--chat", "--date", "01 Feb 2025")
	var res struct {
		Text string  `json:"text"`
		IDs  []int32 `json:"ids"`
		Mask []int   `json:"assistant_mask"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("chat output %q: %v", out, err)
	}
	wantText := "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 01 Feb 2025\n\n<|eot_id|>" +
		"<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
	if res.Text != wantText {
		t.Errorf("chat text %q, want %q", res.Text, wantText)
	}
	n := len(res.IDs)
	if len(res.Mask) != n || n < 3 || !reflect.DeepEqual(res.IDs[n-3:], []int32{9906, 0, 128009}) ||
		!reflect.DeepEqual(res.Mask[n-4:], []int{0, 1, 1, 1}) {
		t.Errorf("chat ids %v, mask %v: want the assistant turn (Hello ! <|eot_id|>) masked", res.IDs, res.Mask)
	}
	for _, m := range res.Mask[:n-3] {
		if m != 0 {
			t.Fatalf("mask %v marks tokens outside the assistant turn", res.Mask)
		}
	}
}

// writeSPGGUF writes a GGUF file holding only a small SentencePiece
// vocabulary.
func writeSPGGUF(t *testing.T, meta map[string]any) string {
	t.Helper()
	tokens := []string{"<unk>", "<s>", "</s>"}
	types := []int32{2, 3, 3}
	for b := range 256 {
		tokens = append(tokens, "<0x"+strings.ToUpper(string("0123456789abcdef"[b>>4])+string("0123456789abcdef"[b&15]))+">")
		types = append(types, 6)
	}
	for _, s := range []string{"▁h", "▁hi", "▁", "h", "i", "!"} {
		tokens = append(tokens, s)
		types = append(types, 1)
	}
	scores := make([]float32, len(tokens))
	for i := range scores {
		scores[i] = -float32(i)
	}
	m := map[string]any{
		"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.scores": scores,
		"tokenizer.ggml.token_type": types, "tokenizer.ggml.bos_token_id": uint32(1), "tokenizer.ggml.eos_token_id": uint32(2),
		"tokenizer.ggml.padding_token_id": uint32(0xFFFFFFFF),
	}
	for k, v := range meta {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	path := filepath.Join(t.TempDir(), "vocab.gguf")
	fd, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := gguf.Write(fd, m, nil); err != nil {
		t.Fatal(err)
	}
	if err := fd.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTokenizeGGUF(t *testing.T) {
	path := writeSPGGUF(t, nil)
	out := mustTokenize(t, "hi hi!\n", "--tokenizer", path, "--bos")
	// <s> ▁hi ▁hi ! <0x0A>
	if out != "[1,260,260,264,13]\n" {
		t.Errorf("encode: %q", out)
	}
	if got := mustTokenize(t, out, "--tokenizer", path, "--decode", "--skip-special"); got != "hi hi!\n" {
		t.Errorf("decode: %q", got)
	}
	noPrefix := writeSPGGUF(t, map[string]any{"tokenizer.ggml.add_space_prefix": false, "tokenizer.ggml.unknown_token_id": nil})
	if out := mustTokenize(t, "hi", "--tokenizer", noPrefix); out != "[262,263]\n" {
		t.Errorf("encode without the space prefix: %q", out)
	}
}

func TestTokenizeErrors(t *testing.T) {
	dir := t.TempDir()
	sp := writeSPGGUF(t, nil)
	notTok := filepath.Join(dir, "x.json")
	if err := os.WriteFile(notTok, []byte(`{"model": 3}`), 0o644); err != nil {
		t.Fatal(err)
	}
	badGGUF := filepath.Join(dir, "bad.gguf")
	if err := os.WriteFile(badGGUF, []byte("GGUF\x03\x00\x00\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		stdin string
		args  []string
		want  string
	}{
		{"no tokenizer", "x", nil, "pass --tokenizer PATH"},
		{"missing file", "x", []string{"--tokenizer", filepath.Join(dir, "nope.json")}, "nope.json"},
		{"not a tokenizer", "x", []string{"--tokenizer", notTok}, notTok},
		{"truncated gguf", "x", []string{"--tokenizer", badGGUF}, "bad.gguf"},
		{"bad flag", "", []string{"--frobnicate"}, "unknown flag: --frobnicate"},
		{"positional", "", []string{"--tokenizer", sp, "hello"}, `unexpected arguments ["hello"]`},
		{"decode and chat", "", []string{"--tokenizer", sp, "--decode", "--chat"}, "cannot be combined"},
		{"bad ids json", "[1, 2", []string{"--tokenizer", sp, "--decode"}, "parsing ids as a JSON array"},
		{"float id", "[1.5]", []string{"--tokenizer", sp, "--decode"}, "id 0 (1.5) is not an integer"},
		{"word id", "1 two", []string{"--tokenizer", sp, "--decode"}, `id 1 ("two") is not an integer`},
		{"negative id", "[-1]", []string{"--tokenizer", sp, "--decode"}, "id 0 (-1) is out of range"},
		{"huge id", "99999999999", []string{"--tokenizer", sp, "--decode"}, "out of range"},
		{"id past vocab", "[1, 9999]", []string{"--tokenizer", sp, "--decode"}, "id 9999 (position 1)"},
		{"trailing json", "[1] [2]", []string{"--tokenizer", sp, "--decode"}, "text after the JSON array"},
		{"chat not json", "hello", []string{"--tokenizer", sp, "--chat"}, "parsing the conversation"},
		{"chat no messages", `{"msgs": []}`, []string{"--tokenizer", sp, "--chat"}, `no "messages" array`},
		{"chat tool role", `[{"role": "tool", "content": "{}"}]`, []string{"--tokenizer", sp, "--chat"}, "tool results are not supported"},
		{"chat tool calls", `[{"role": "assistant", "content": "", "tool_calls": [{}]}]`, []string{"--tokenizer", sp, "--chat"}, "tool calls are not supported"},
		{"chat content list", `[{"role": "user", "content": [{"type": "text"}]}]`, []string{"--tokenizer", sp, "--chat"}, "content must be a string"},
		{"chat no role", `[{"content": "x"}]`, []string{"--tokenizer", sp, "--chat"}, "message 0 has no role"},
		{"chat empty", `[]`, []string{"--tokenizer", sp, "--chat"}, "no messages"},
		{"chat needs llama 3", `[{"role": "user", "content": "x"}]`, []string{"--tokenizer", sp, "--chat"}, "needs a Llama 3 tokenizer"},
		{"gguf model", "x", []string{"--tokenizer", writeSPGGUF(t, map[string]any{"tokenizer.ggml.model": "bert"})}, `GGUF tokenizer model "bert" is not supported`},
		{"gguf no tokens", "x", []string{"--tokenizer", writeSPGGUF(t, map[string]any{"tokenizer.ggml.tokens": nil})}, `"tokenizer.ggml.tokens": metadata key not found`},
		{"gguf scores type", "x", []string{"--tokenizer", writeSPGGUF(t, map[string]any{"tokenizer.ggml.scores": []float64{1}})}, `"tokenizer.ggml.scores" is a []float64, want []float32`},
		{"gguf bos", "x", []string{"--tokenizer", writeSPGGUF(t, map[string]any{"tokenizer.ggml.bos_token_id": uint32(5000)})}, "BOS id 5000 out of range"},
		{"gguf pre", "x", []string{"--tokenizer", writeSPGGUF(t, map[string]any{"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "qwen2"})}, `pre-tokenizer "qwen2" is not supported`},
	}
	for _, tt := range tests {
		_, err := tokenize(t, tt.stdin, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.want)
		}
	}
}

func TestTokenizeThroughRun(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"tokenize"}, strings.NewReader(""), &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "pass --tokenizer") {
		t.Errorf("run tokenize without a tokenizer: exit %d, stderr %q", code, errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"tokenize", "--help"}, strings.NewReader(""), &out, &errOut); code != 0 || !strings.Contains(errOut.String(), "--allow-special") {
		t.Errorf("run tokenize --help: exit %d, stderr %q", code, errOut.String())
	}
}
