package tokenizer

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// smallTiktoken writes the small vocabulary of smallJSON as a tiktoken
// file.
func smallTiktoken(t testing.TB) []byte {
	t.Helper()
	tok := smallBPE(t)
	var b bytes.Buffer
	for id := range int32(tok.VocabSize() - Llama3NumSpecial) {
		s, _ := tok.Token(id)
		fmt.Fprintf(&b, "%s %d\n", base64.StdEncoding.EncodeToString([]byte(s)), id)
	}
	return b.Bytes()
}

// editJSON applies edit to the decoded small tokenizer.json and encodes it
// again.
func editJSON(t testing.TB, edit func(doc map[string]any)) []byte {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(smallJSON(t, smallMerges), &doc); err != nil {
		t.Fatal(err)
	}
	edit(doc)
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func model(doc map[string]any) map[string]any { return doc["model"].(map[string]any) }

func TestParseJSONErrors(t *testing.T) {
	valid := smallJSON(t, smallMerges)
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"truncated", valid[:len(valid)/2], "parsing JSON: malformed JSON at byte "},
		{"not json", []byte("{nope"), "parsing JSON"},
		{"no model", []byte("{}"), "no model"},
		{"wordpiece", editJSON(t, func(d map[string]any) { model(d)["type"] = "WordPiece" }), `model type "WordPiece", want BPE`},
		{"no merges", editJSON(t, func(d map[string]any) { delete(model(d), "merges") }), "model has no merges"},
		{"empty merges", editJSON(t, func(d map[string]any) { model(d)["merges"] = []string{} }), "model has no merges"},
		{"merges of numbers", editJSON(t, func(d map[string]any) { model(d)["merges"] = []int{1} }), "merges are neither strings nor pairs"},
		{"merge of three", editJSON(t, func(d map[string]any) { model(d)["merges"] = []string{"a b c"} }), `merge 0 ("a b c") is not two tokens`},
		{"merge pair of three", editJSON(t, func(d map[string]any) { model(d)["merges"] = [][]string{{"a", "b", "c"}} }), "merge 0 has 3 parts"},
		{"merge unknown", editJSON(t, func(d map[string]any) { model(d)["merges"] = []string{"h e", "q z"} }), `merge 1 ("q" "z"): the merged token "qz" is not in the vocabulary`},
		{"merge unknown part", editJSON(t, func(d map[string]any) { model(d)["merges"] = []string{"hel lo"} }), `"lo" is not in the vocabulary`},
		{"duplicate merge", editJSON(t, func(d map[string]any) { model(d)["merges"] = []string{"h e", "i n", "h e"} }), `merge 2 ("h" "e") repeats merge 0`},
		{"no vocab", editJSON(t, func(d map[string]any) { model(d)["vocab"] = map[string]int{} }), "no vocab"},
		{"missing byte", editJSON(t, func(d map[string]any) { delete(model(d)["vocab"].(map[string]any), "a") }), "has id 536, outside 0 to 535 (the file has 536 tokens, and ids must run from 0 without gaps)"},
		{"id gap", editJSON(t, func(d map[string]any) { model(d)["vocab"].(map[string]any)["a"] = 5000 }), `vocab token "a" has id 5000, outside 0 to 536`},
		{"id max int64", editJSON(t, func(d map[string]any) { model(d)["vocab"].(map[string]any)["a"] = int64(math.MaxInt64) }), `vocab token "a" has id 9223372036854775807, outside 0 to 536`},
		{"id min int64", editJSON(t, func(d map[string]any) { model(d)["vocab"].(map[string]any)["a"] = int64(math.MinInt64) }), `vocab token "a" has id -9223372036854775808, outside 0 to 536`},
		{"id -1", editJSON(t, func(d map[string]any) { model(d)["vocab"].(map[string]any)["a"] = -1 }), `vocab token "a" has id -1, outside`},
		{"id 2^32", editJSON(t, func(d map[string]any) { model(d)["vocab"].(map[string]any)["a"] = int64(1 << 32) }), `vocab token "a" has id 4294967296, outside`},
		{"id past int64", editJSON(t, func(d map[string]any) { model(d)["vocab"].(map[string]any)["a"] = uint64(1 << 63) }), "parsing JSON: model.vocab is a JSON number 9223372036854775808, want an integer"},
		{"id fraction", editJSON(t, func(d map[string]any) { model(d)["vocab"].(map[string]any)["a"] = 97.5 }), "parsing JSON: model.vocab is a JSON number 97.5, want an integer"},
		{"added id max int64", editJSON(t, func(d map[string]any) { d["added_tokens"].([]any)[0].(map[string]any)["id"] = int64(math.MaxInt64) }), `added token "<|begin_of_text|>" has id 9223372036854775807, outside 0 to 536`},
		{"added id max int64-1", editJSON(t, func(d map[string]any) { d["added_tokens"].([]any)[0].(map[string]any)["id"] = int64(math.MaxInt64 - 1) }), `has id 9223372036854775806, outside`},
		{"added id min int64", editJSON(t, func(d map[string]any) { d["added_tokens"].([]any)[0].(map[string]any)["id"] = int64(math.MinInt64) }), `has id -9223372036854775808, outside`},
		{"added id one past", editJSON(t, func(d map[string]any) { d["added_tokens"].([]any)[0].(map[string]any)["id"] = 537 }), `added token "<|begin_of_text|>" has id 537, outside 0 to 536`},
		{"added ids repeat", editJSON(t, func(d map[string]any) {
			a := d["added_tokens"].([]any)
			a[1].(map[string]any)["id"] = a[0].(map[string]any)["id"]
		}), `added tokens "<|begin_of_text|>" and "<|end_of_text|>" both have id`},
		{"duplicate id", editJSON(t, func(d map[string]any) { model(d)["vocab"].(map[string]any)["a"] = 0 }), "both have id 0"},
		{"bad spelling", editJSON(t, func(d map[string]any) { v := model(d)["vocab"].(map[string]any); v[" x"] = v["he"]; delete(v, "he") }), `vocab token " x" (id`},
		{"regex", editJSON(t, func(d map[string]any) {
			d["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[0].(map[string]any)["pattern"] = map[string]any{"Regex": `\s+`}
		}), "want the Llama 3 split pattern"},
		{"gpt2 pre-tokenizer", editJSON(t, func(d map[string]any) { d["pre_tokenizer"] = map[string]any{"type": "ByteLevel", "use_regex": true} }), `pre_tokenizer of type "ByteLevel"`},
		{"no pre-tokenizer", editJSON(t, func(d map[string]any) { delete(d, "pre_tokenizer") }), "no pre_tokenizer"},
		{"normalizer", editJSON(t, func(d map[string]any) { d["normalizer"] = map[string]any{"type": "NFC"} }), "normalizer"},
		{"decoder", editJSON(t, func(d map[string]any) { d["decoder"] = map[string]any{"type": "Metaspace"} }), "decoder is not ByteLevel"},
		{"byte fallback", editJSON(t, func(d map[string]any) { model(d)["byte_fallback"] = true }), "byte_fallback"},
		{"added lstrip", editJSON(t, func(d map[string]any) { d["added_tokens"].([]any)[2].(map[string]any)["lstrip"] = true }), "sets single_word, lstrip or rstrip"},
		{"added without id", editJSON(t, func(d map[string]any) { delete(d["added_tokens"].([]any)[0].(map[string]any), "id") }), "has no id"},
		{"added clash", editJSON(t, func(d map[string]any) { d["added_tokens"].([]any)[0].(map[string]any)["id"] = 5 }), "both have id 5"},
		{"no eot", editJSON(t, func(d map[string]any) { d["added_tokens"].([]any)[9].(map[string]any)["content"] = "<|x|>" }), "no <|eot_id|> token"},
		{"duplicate special", editJSON(t, func(d map[string]any) { d["added_tokens"].([]any)[3].(map[string]any)["content"] = "<|eot_id|>" }), `are both "<|eot_id|>"`},
	}
	for _, tt := range tests {
		_, err := ParseJSON(tt.data)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "tokenizer: tokenizer.json: ") {
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.want)
		}
	}
}

func TestParseTiktokenErrors(t *testing.T) {
	valid := smallTiktoken(t)
	lines := strings.Split(strings.TrimSuffix(string(valid), "\n"), "\n")
	with := func(extra ...string) []byte {
		return []byte(strings.Join(append(append([]string(nil), lines...), extra...), "\n"))
	}
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "no tokens"},
		{"bad base64", with("@@@ 1000"), `line 282: bad base64 "@@@"`},
		{"no rank", with("YWJj"), `want "<base64 token> <rank>"`},
		{"bad rank", with("YWJj x"), `bad rank "x"`},
		{"negative rank", with("YWJj -4"), `bad rank "-4"`},
		{"huge rank", with("YWJj 999999999"), "line 282: rank 999999999, outside 0 to 281 (the file has 282 tokens, and ranks must run from 0 without gaps)"},
		{"max rank", with("YWJj 9223372036854775807"), "line 282: rank 9223372036854775807, outside 0 to 281"},
		{"rank past int64", with("YWJj 9223372036854775808"), `line 282: bad rank "9223372036854775808"`},
		{"duplicate rank", with("YWJj 3"), "rank 3 already used on line 4"},
		{"duplicate token", with("YQ== 281"), `token "a" already has rank 97`},
		{"gap", with("YWJj 500"), "line 282: rank 500, outside 0 to 281"},
		{"empty token", with(" 281"), "empty token"},
		{"missing byte", []byte(strings.Join(lines[1:], "\n")), "rank 280, outside 0 to 279"},
		{"too long line", []byte(strings.Repeat("A", 2<<20)), "token too long"},
	}
	for _, tt := range tests {
		_, err := ParseTiktoken(bytes.NewReader(tt.data))
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "tokenizer: tokenizer.model: ") {
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.want)
		}
	}
}

// minimalJSON returns a tokenizer.json of under 600 bytes: three
// vocabulary tokens, one merge and <|eot_id|>, with the added token's id
// given as written. With id 3 it is refused only for lacking the 256 byte
// tokens, after its ids have been laid out.
func minimalJSON(id string) []byte {
	pattern, _ := json.Marshal(llama3Pattern)
	return []byte(`{"added_tokens":[{"id":` + id + `,"content":"<|eot_id|>","special":true}],` +
		`"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":` + string(pattern) +
		`},"behavior":"Isolated"},{"type":"ByteLevel","use_regex":false}]},"decoder":{"type":"ByteLevel"},` +
		`"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]}}`)
}

// TestLoadMaxID loads a small tokenizer.json whose added token has id
// 2^63−1, which once overflowed id+1, passed the gap check and indexed past
// the token table (a panic); it and other extreme ids must be errors naming
// the file.
func TestLoadMaxID(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	if err := os.WriteFile(good, minimalJSON("3"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(good); err == nil || !strings.Contains(err.Error(), "byte 0x00 has no token") {
		t.Fatalf("the file with id 3: error %v, want only the missing byte tokens", err)
	}
	for _, id := range []string{"9223372036854775807", "9223372036854775806", "-9223372036854775808", "4294967296", "2147483648", "4"} {
		path := filepath.Join(dir, "id"+id+".json")
		data := minimalJSON(id)
		if len(data) > 600 {
			t.Fatalf("the file is %d bytes", len(data))
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, load := range []func(string) (*BPE, error){Load, LoadJSON} {
			_, err := load(path)
			want := `added token "<|eot_id|>" has id ` + id + ", outside 0 to 3"
			if err == nil || !strings.HasPrefix(err.Error(), "tokenizer: "+path+": ") || !strings.Contains(err.Error(), want) {
				t.Errorf("id %s: error %v, want one naming %s and containing %q", id, err, path, want)
			}
		}
	}
}

func TestLoadFiles(t *testing.T) {
	dir := t.TempDir()
	js := filepath.Join(dir, "tokenizer.json")
	tk := filepath.Join(dir, "tokenizer.model")
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(js, smallJSON(t, smallMerges), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tk, smallTiktoken(t), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(" {\"model\": "), 0o644); err != nil {
		t.Fatal(err)
	}
	text := randomText(9, 20_000)
	var want []int32
	for _, load := range []func(string) (*BPE, error){Load, LoadJSON} {
		tok, err := load(js)
		if err != nil {
			t.Fatal(err)
		}
		want = tok.Encode(text, EncodeOptions{})
	}
	for _, load := range []func(string) (*BPE, error){Load, LoadTiktoken} {
		tok, err := load(tk)
		if err != nil {
			t.Fatal(err)
		}
		if got := tok.Encode(text, EncodeOptions{}); !equalIDs(got, want) {
			t.Error("the tiktoken file encodes differently from the tokenizer.json")
		}
	}
	for _, tt := range []struct {
		path string
		load func(string) (*BPE, error)
	}{
		{bad, Load}, {bad, LoadJSON}, {bad, LoadTiktoken}, {filepath.Join(dir, "missing"), Load},
		{filepath.Join(dir, "missing"), LoadJSON}, {filepath.Join(dir, "missing"), LoadTiktoken},
	} {
		if _, err := tt.load(tt.path); err == nil || !strings.Contains(err.Error(), tt.path) {
			t.Errorf("loading %s: error %v, want one naming the file", tt.path, err)
		}
	}
}

func TestNewByteLevelBPE(t *testing.T) {
	src := smallBPE(t)
	var tokens []string
	var types []int32
	for id := range int32(src.VocabSize()) {
		s, _ := src.Token(id)
		if src.IsSpecial(id) {
			tokens, types = append(tokens, s), append(types, int32(TokenControl))
			continue
		}
		var b strings.Builder
		for i := range len(s) {
			b.WriteRune(byteRunes[s[i]])
		}
		tokens, types = append(tokens, b.String()), append(types, int32(TokenNormal))
	}
	tok, err := NewByteLevelBPE(tokens, types, smallMerges)
	if err != nil {
		t.Fatal(err)
	}
	text := randomText(4, 20_000) + "<|eot_id|>"
	for _, opts := range []EncodeOptions{{}, {AllowSpecial: true}} {
		if a, b := src.Encode(text, opts), tok.Encode(text, opts); !equalIDs(a, b) {
			t.Errorf("%+v: GGUF-style vocabulary encodes differently", opts)
		}
	}
	tests := []struct {
		name   string
		tokens []string
		types  []int32
		merges []string
		want   string
	}{
		{"types", tokens, types[1:], smallMerges, "token types for"},
		{"spelling", append([]string{" "}, tokens[1:]...), types, smallMerges, `token 0 (" ") is not in byte-level spelling`},
		{"merge", tokens, types, []string{"Ġt"}, "is not two tokens"},
		{"merge token", tokens, types, []string{"Ġ zz"}, `"zz" is not in the vocabulary`},
	}
	for _, tt := range tests {
		if _, err := NewByteLevelBPE(tt.tokens, tt.types, tt.merges); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.want)
		}
	}
}

// extremeIDs are token ids at the edges of the integer types, for the
// fuzz targets' seeds: ids near 2^63 once overflowed the parser's
// arithmetic.
var extremeIDs = []int64{math.MaxInt64, math.MaxInt64 - 1, math.MinInt64, -1, math.MaxInt32, math.MaxInt32 + 1, math.MaxUint32, 1 << 32, 537, 536, 0}

// FuzzParseJSON checks that no tokenizer.json makes the parser panic.
func FuzzParseJSON(f *testing.F) {
	valid := smallJSON(f, smallMerges[:6])
	f.Add(valid)
	f.Add(valid[:len(valid)/3])
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0},"merges":["a a"]}}`))
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":-1}}}`))
	f.Add([]byte(`{"added_tokens":[{"id":99999999999}],"model":{"type":"BPE","vocab":{"a":0}}}`))
	// Extreme ids, in the vocabulary and among the added tokens of a valid
	// file, and in a small file that fails only later.
	for _, id := range extremeIDs {
		f.Add(editJSON(f, func(d map[string]any) { model(d)["vocab"].(map[string]any)["a"] = id }))
		f.Add(editJSON(f, func(d map[string]any) { d["added_tokens"].([]any)[0].(map[string]any)["id"] = id }))
		f.Add(editJSON(f, func(d map[string]any) { d["added_tokens"].([]any)[9].(map[string]any)["id"] = id }))
		f.Add(minimalJSON(fmt.Sprint(id)))
	}
	f.Add(minimalJSON("9223372036854775808"))
	f.Add(minimalJSON("1e300"))
	f.Add(editJSON(f, func(d map[string]any) {
		a := d["added_tokens"].([]any)
		a[1].(map[string]any)["id"] = a[0].(map[string]any)["id"]
	}))
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := ParseJSON(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "tokenizer: tokenizer.json: ") {
				t.Fatalf("error %q lacks the prefix naming the file", err)
			}
			return
		}
		s := "hello wörld <|eot_id|>"
		if out, err := tok.Decode(tok.Encode(s, EncodeOptions{AllowSpecial: true})); err != nil || out != s {
			t.Fatalf("round trip gave %q, %v", out, err)
		}
	})
}

// FuzzParseTiktoken checks that no tokenizer.model makes the parser panic.
func FuzzParseTiktoken(f *testing.F) {
	valid := smallTiktoken(f)
	f.Add(valid)
	f.Add(valid[:len(valid)/2])
	f.Add([]byte("YQ== 0\nYQ== 1\n"))
	f.Add([]byte("YQ== 3\n\n\nYg== 0\n"))
	for _, id := range extremeIDs {
		f.Add(append(bytes.Clone(valid), fmt.Sprintf("YWJj %d\n", id)...))
		f.Add([]byte(fmt.Sprintf("YQ== %d\n", id)))
	}
	f.Add([]byte("YQ== 9223372036854775808\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := ParseTiktoken(bytes.NewReader(data))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "tokenizer: tokenizer.model: ") {
				t.Fatalf("error %q lacks the prefix naming the file", err)
			}
			return
		}
		s := "hello wörld"
		if out, err := tok.Decode(tok.Encode(s, EncodeOptions{})); err != nil || out != s {
			t.Fatalf("round trip gave %q, %v", out, err)
		}
	})
}

// FuzzBPERoundTrip checks that any input, valid UTF-8 or not, decodes back
// to itself, streaming included, with the small vocabulary and (when the
// shared test data is present) Llama 3's.
func FuzzBPERoundTrip(f *testing.F) {
	for _, s := range append([]string{"", " ", "Hello world", "<|eot_id|>x", "\xff\xc3", "  \n\n\t 🦙 1234"}, snippets...) {
		f.Add(s, false)
		f.Add(s, true)
	}
	toks := []*BPE{smallBPE(f)}
	if tok, err := llama3(); err == nil {
		toks = append(toks, tok)
	}
	f.Fuzz(func(t *testing.T, s string, allowSpecial bool) {
		for _, tok := range toks {
			ids := tok.Encode(s, EncodeOptions{AllowSpecial: allowSpecial})
			out, err := tok.Decode(ids)
			if err != nil || out != s {
				t.Fatalf("Decode(Encode(%q)) = %q, %v", s, out, err)
			}
			checkStream(t, tok, ids, out)
			if !allowSpecial {
				for _, id := range ids {
					if tok.IsSpecial(id) {
						t.Fatalf("Encode(%q) without AllowSpecial produced special id %d", s, id)
					}
				}
			}
		}
	})
}
