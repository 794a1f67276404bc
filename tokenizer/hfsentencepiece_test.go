package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// spVocab builds a SentencePiece vocabulary laid out as llama2.c's: <unk>,
// <s>, </s>, the 256 byte tokens, the given pieces with their scores, then
// the single characters ▁ a b c d x y z at score -100 and the control token
// <|end|>.
func spVocab(t *testing.T, pieces []string, scores []float32) *SentencePiece {
	t.Helper()
	cfg := SentencePieceConfig{BOS: 1, EOS: 2, Unknown: 0}
	add := func(tok string, score float32, typ TokenType) {
		cfg.Tokens = append(cfg.Tokens, tok)
		cfg.Scores = append(cfg.Scores, score)
		cfg.Types = append(cfg.Types, int32(typ))
	}
	add("<unk>", 0, TokenUnknown)
	add("<s>", 0, TokenControl)
	add("</s>", 0, TokenControl)
	for b := range 256 {
		add(fmt.Sprintf("<0x%02X>", b), 0, TokenByte)
	}
	for i, p := range pieces {
		add(p, scores[i], TokenNormal)
	}
	for _, c := range strings.Split("▁ a b c d x y z", " ") {
		add(c, -100, TokenNormal)
	}
	add("<|end|>", 0, TokenControl)
	tok, err := NewSentencePiece(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestSentencePieceHFMerges checks the merges a SentencePiece vocabulary
// is written with, derived as Hugging Face's converter derives them:
// every split of a token into two tokens, ranked by the score of the token
// they make, then its id, the longer left part first.
func TestSentencePieceHFMerges(t *testing.T) {
	tests := []struct {
		name   string
		pieces []string
		scores []float32
		want   string // merges joined by |
	}{
		{"scores", []string{"ab", "▁ab", "▁a"}, []float32{-2, -3, -1}, "▁ a|a b|▁a b|▁ ab"},
		{"splits of a token", []string{"ab", "bc", "abc", "abcd"}, []float32{-1, -2, -3, -4}, "a b|b c|ab c|a bc|abc d"},
		{"equal scores by id", []string{"yz", "xy", "ab"}, []float32{-1, -1, 0}, "a b|y z|x y"},
		{"the Hugging Face test vocabulary", nil, nil, "▁ t|h e|▁ a|i n|▁t he|n d|▁ w|▁a nd|o n|c e|▁ O|▁O n|▁On ce|▁ u|▁u p|▁up on|▁t i|m e|▁ti me|▁ ▁|e r|▁▁ ▁▁"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok := smallSP(t)
			if tt.pieces != nil {
				tok = spVocab(t, tt.pieces, tt.scores)
			}
			ms, err := tok.hfMerges()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range ms {
				got = append(got, m.left+" "+m.right)
			}
			if g := strings.Join(got, "|"); g != tt.want {
				t.Errorf("merges %s, want %s", g, tt.want)
			}
		})
	}
}

// TestHFFilesSentencePieceErrors checks that a SentencePiece vocabulary a
// Hugging Face BPE cannot encode with as turnwise does is refused with
// ErrNoHFForm, saying why.
func TestHFFilesSentencePieceErrors(t *testing.T) {
	tests := []struct {
		name string
		edit func(cfg *SentencePieceConfig)
		want string
	}{
		{"a byte without a token", func(cfg *SentencePieceConfig) { cfg.Types[3+0x41] = int32(TokenUnused) }, "no byte token <0x41>"},
		{"a token made from a character that is no token", func(cfg *SentencePieceConfig) {
			cfg.Tokens = append(cfg.Tokens, "q▁")
			cfg.Scores = append(cfg.Scores, -50)
			cfg.Types = append(cfg.Types, int32(TokenNormal))
		}, `made from "q"`},
		{"two tokens of one text", func(cfg *SentencePieceConfig) {
			cfg.Tokens = append(cfg.Tokens, "<s>")
			cfg.Scores = append(cfg.Scores, 0)
			cfg.Types = append(cfg.Types, int32(TokenUnused))
		}, `both "<s>"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := smallSPConfig()
			tt.edit(&cfg)
			tok, err := NewSentencePiece(cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, err = HFFiles(tok)
			if !errors.Is(err, ErrNoHFForm) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("HFFiles: %v, want ErrNoHFForm saying %q", err, tt.want)
			}
		})
	}
}

// writeSPFiles writes tok's Hugging Face files to a new directory, with
// edit applied to tokenizer.json, and returns tokenizer.json's path.
func writeSPFiles(t *testing.T, tok Tokenizer, edit func(doc map[string]any)) string {
	t.Helper()
	files, err := HFFiles(tok)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(files["tokenizer.json"], &doc); err != nil {
		t.Fatal(err)
	}
	edit(doc)
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "tokenizer.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLoadFileSentencePiece loads SentencePiece tokenizer.json files laid
// out as Hugging Face writes them, where HFFiles writes otherwise: the
// merges of a token in another order and as [left, right] pairs, no
// leading space, a token that two tokens make but no merge does (never
// merged into, as the file's BPE never makes it), and the EOS token named
// in tokenizer_config.json.
func TestLoadFileSentencePiece(t *testing.T) {
	tok := spVocab(t, []string{"ab", "bc", "abc", "ca"}, []float32{-1, -2, -3, -4})
	model := func(doc map[string]any) map[string]any { return doc["model"].(map[string]any) }

	path := writeSPFiles(t, tok, func(doc map[string]any) {
		model(doc)["merges"] = [][2]string{{"a", "b"}, {"b", "c"}, {"a", "bc"}, {"ab", "c"}, {"c", "a"}}
	})
	back, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sameTokenizer(t, back, tok)

	// Without a leading space.
	cfg := smallSPConfig()
	cfg.NoSpacePrefix = true
	noPrefix, err := NewSentencePiece(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if back, err = LoadFile(writeSPFiles(t, noPrefix, func(map[string]any) {})); err != nil {
		t.Fatal(err)
	}
	sameTokenizer(t, back, noPrefix)
	if sp := back.(*SentencePiece); strings.Join(spPieces(sp, sp.Encode("the", EncodeOptions{})), "|") != "t|he" {
		t.Errorf(`without a leading space, Encode("the") = %s, want t|he`, spPieces(sp, sp.Encode("the", EncodeOptions{})))
	}

	// No merge makes "abc" from "ab" and "c" or "a" and "bc": "abcd" stays
	// "ab", "c", "d".
	path = writeSPFiles(t, tok, func(doc map[string]any) {
		model(doc)["merges"] = []string{"a b", "b c", "c a"}
	})
	back, err = LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sp := back.(*SentencePiece)
	if got := strings.Join(spPieces(sp, sp.Encode("abcd", EncodeOptions{})), "|"); got != "▁|ab|c|d" {
		t.Errorf(`Encode("abcd") without the merges of "abc" = %s, want ▁|ab|c|d`, got)
	}

	// The splits of "abc" ranked apart, with "bc"'s merge between them, as
	// Hugging Face's converter ranks tokens of equal score: "abc" scores
	// at its first merge, above "bc".
	path = writeSPFiles(t, tok, func(doc map[string]any) {
		model(doc)["merges"] = []string{"a b", "ab c", "b c", "a bc", "c a"}
	})
	if back, err = LoadFile(path); err != nil {
		t.Fatal(err)
	}
	sp = back.(*SentencePiece)
	if got, want := sp.scores[sp.vocab["abc"]], sp.scores[sp.vocab["bc"]]; got <= want {
		t.Errorf(`"abc" scores %v, "bc" %v: want "abc" ahead, at the rank of its first merge`, got, want)
	}
	if got := strings.Join(spPieces(sp, sp.Encode("xabc", EncodeOptions{})), "|"); got != "▁|x|abc" {
		t.Errorf(`Encode("xabc") = %s, want ▁|x|abc`, got)
	}

	// The EOS token that tokenizer_config.json names, as a string or as
	// an added token.
	for _, eos := range []any{"<|end|>", map[string]any{"__type": "AddedToken", "content": "<|end|>", "special": true}} {
		path := writeSPFiles(t, tok, func(map[string]any) {})
		cfg, err := json.Marshal(map[string]any{"eos_token": eos})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(filepath.Dir(path), "tokenizer_config.json"), cfg, 0o644); err != nil {
			t.Fatal(err)
		}
		back, err := LoadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if want := int32(tok.VocabSize() - 1); back.EOT() != want {
			t.Errorf("with eos_token %v: EOS %d, want %d", eos, back.EOT(), want)
		}
	}
}

// TestLoadFileSentencePieceErrors checks that a SentencePiece
// tokenizer.json that turnwise cannot encode with as its BPE does is
// refused, naming the file and what differs.
func TestLoadFileSentencePieceErrors(t *testing.T) {
	tok := spVocab(t, []string{"ab", "bc", "abc"}, []float32{-1, -2, -3})
	model := func(doc map[string]any) map[string]any { return doc["model"].(map[string]any) }
	tests := []struct {
		name string
		edit func(doc map[string]any)
		want string
	}{
		{"Metaspace", func(doc map[string]any) {
			doc["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": false}
		}, "pre_tokenizer"},
		{"no normalizer", func(doc map[string]any) { doc["normalizer"] = nil }, "normalizer steps are none"},
		{"another normalizer", func(doc map[string]any) { doc["normalizer"] = map[string]any{"type": "NFKC"} }, "normalizer steps are NFKC"},
		{"no Strip", func(doc map[string]any) {
			dec := doc["decoder"].(map[string]any)
			dec["decoders"] = dec["decoders"].([]any)[:3]
		}, "decoder steps are Replace, ByteFallback, Fuse"},
		{"a split without its merge", func(doc map[string]any) { model(doc)["merges"] = []string{"a b", "b c", "ab c"} }, `no merge of "a" and "bc"`},
		{"a merge of a byte token", func(doc map[string]any) {
			model(doc)["merges"] = append(model(doc)["merges"].([]any), "<0x41> a")
		}, `"<0x41>" is not a normal token`},
		{"ignore_merges", func(doc map[string]any) { model(doc)["ignore_merges"] = true }, "ignore_merges"},
		{"unk_token", func(doc map[string]any) { model(doc)["unk_token"] = "<oov>" }, `unk_token "<oov>"`},
		{"a plain added token", func(doc map[string]any) {
			doc["added_tokens"] = append(doc["added_tokens"].([]any), map[string]any{"id": tok.VocabSize(), "content": "hello", "special": false})
		}, `added token "hello" is not special`},
		{"no </s>", func(doc map[string]any) { // and no tokenizer_config.json
			vocab := model(doc)["vocab"].(map[string]any)
			vocab["<eos>"] = vocab["</s>"]
			delete(vocab, "</s>")
			doc["added_tokens"].([]any)[2].(map[string]any)["content"] = "<eos>"
		}, `the EOS token "</s>"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeSPFiles(t, tok, tt.edit)
			_, err := LoadFile(path)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("LoadFile: %v, want an error naming the file and saying %q", err, tt.want)
			}
		})
	}
}
