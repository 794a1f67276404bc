package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// exportSamples are texts on which a written-out tokenizer must give the
// ids of the original: mixed random text, special-token text and bytes
// that are not UTF-8.
func exportSamples() []string {
	return []string{
		randomText(1, 400), randomText(2, 400), "Hello, world!\n\n  indented\tcode()",
		"<bos>u>hi<eos><|begin_of_text|><|eot_id|>", "\xff\xfe bytes \xc3", "",
	}
}

// sameTokenizer fails t unless got encodes every sample as want does (with
// and without special-token text and BOS), decodes want's ids to the same
// text, and has want's vocabulary size, BOS, EOS and special tokens.
func sameTokenizer(t *testing.T, got, want Tokenizer) {
	t.Helper()
	if got.VocabSize() != want.VocabSize() || got.BOS() != want.BOS() || !equalIDs(got.EOS(), want.EOS()) || got.EOT() != want.EOT() {
		t.Fatalf("vocabulary %d, BOS %d, EOS %v, EOT %d; want %d, %d, %v, %d",
			got.VocabSize(), got.BOS(), got.EOS(), got.EOT(), want.VocabSize(), want.BOS(), want.EOS(), want.EOT())
	}
	for id := range int32(want.VocabSize()) {
		if got.IsSpecial(id) != want.IsSpecial(id) {
			t.Fatalf("token %d: special %v, want %v", id, got.IsSpecial(id), want.IsSpecial(id))
		}
	}
	for _, text := range exportSamples() {
		for _, opts := range []EncodeOptions{{}, {AllowSpecial: true, AddBOS: true}} {
			g, w := got.Encode(text, opts), want.Encode(text, opts)
			if !equalIDs(g, w) {
				t.Fatalf("Encode(%.40q, %+v) = %v…, want %v…", text, opts, g[:min(len(g), 12)], w[:min(len(w), 12)])
			}
			gd, err1 := got.Decode(w)
			wd, err2 := want.Decode(w)
			if err1 != nil || err2 != nil || gd != wd {
				t.Fatalf("Decode of %.40q's ids: %.40q (%v), want %.40q (%v)", text, gd, err1, wd, err2)
			}
		}
	}
}

// exportCases are the tokenizers written out: each kind turnwise has, and
// the Llama 3 tokenizer when the shared test data has it.
func exportCases(t *testing.T) map[string]Tokenizer {
	cases := map[string]Tokenizer{"bytes": Bytes{}, "bpe": smallBPE(t), "sentencepiece": smallSP(t)}
	if tok, err := llama3(); err == nil {
		cases["llama3"] = tok
	}
	return cases
}

// TestGGUFMetadataRoundTrip checks that FromGGUFMetadata builds from
// GGUFMetadata's keys a tokenizer that encodes and decodes as the original
// does, and that the keys are those llama.cpp reads, with their types.
func TestGGUFMetadataRoundTrip(t *testing.T) {
	for name, tok := range exportCases(t) {
		t.Run(name, func(t *testing.T) {
			meta, err := GGUFMetadata(tok)
			if err != nil {
				t.Fatal(err)
			}
			model, _ := meta["tokenizer.ggml.model"].(string)
			tokens, _ := meta["tokenizer.ggml.tokens"].([]string)
			types, _ := meta["tokenizer.ggml.token_type"].([]int32)
			if len(tokens) != tok.VocabSize() || len(types) != len(tokens) {
				t.Fatalf("%d tokens and %d types for a vocabulary of %d", len(tokens), len(types), tok.VocabSize())
			}
			for _, key := range []string{"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"} {
				if _, ok := meta[key].(uint32); !ok {
					t.Errorf("%s is %T, want uint32", key, meta[key])
				}
			}
			switch model {
			case "gpt2":
				if _, ok := meta["tokenizer.ggml.merges"].([]string); !ok {
					t.Errorf("tokenizer.ggml.merges is %T, want []string (llama.cpp refuses a BPE vocabulary without it)", meta["tokenizer.ggml.merges"])
				}
				if pre, _ := meta["tokenizer.ggml.pre"].(string); pre != "default" && pre != "llama-bpe" {
					t.Errorf("tokenizer.ggml.pre = %q", pre)
				}
			case "llama":
				if s, _ := meta["tokenizer.ggml.scores"].([]float32); len(s) != len(tokens) {
					t.Errorf("%d scores for %d tokens", len(s), len(tokens))
				}
			default:
				t.Fatalf("tokenizer.ggml.model = %q", model)
			}
			_, hasTemplate := meta["tokenizer.chat_template"]
			if wantTemplate := name != "sentencepiece"; hasTemplate != wantTemplate { // the others have a chat format
				t.Errorf("tokenizer.chat_template present %v, want %v", hasTemplate, wantTemplate)
			}
			back, err := FromGGUFMetadata(meta)
			if err != nil {
				t.Fatal(err)
			}
			if _, isBytes := tok.(Bytes); isBytes {
				if _, ok := back.(Bytes); !ok {
					t.Fatalf("the byte tokenizer came back as a %T", back)
				}
			}
			sameTokenizer(t, back, tok)
		})
	}
}

// TestHFFilesRoundTrip writes each tokenizer's Hugging Face files, checks
// them against the fields of the formats, and loads tokenizer.json back
// with LoadFile, which must encode and decode as the original does.
func TestHFFilesRoundTrip(t *testing.T) {
	for name, tok := range exportCases(t) {
		t.Run(name, func(t *testing.T) {
			files, err := HFFiles(tok)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			for file, data := range files {
				if err := os.WriteFile(filepath.Join(dir, file), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var doc struct {
				AddedTokens []struct {
					ID      int32  `json:"id"`
					Content string `json:"content"`
					Special bool   `json:"special"`
				} `json:"added_tokens"`
				Normalizer    map[string]any `json:"normalizer"`
				PreTokenizer  map[string]any `json:"pre_tokenizer"`
				PostProcessor map[string]any `json:"post_processor"`
				Decoder       map[string]any `json:"decoder"`
				Model         struct {
					Type         string           `json:"type"`
					Vocab        map[string]int32 `json:"vocab"`
					Merges       []string         `json:"merges"`
					ByteFallback bool             `json:"byte_fallback"`
					UnkToken     string           `json:"unk_token"`
				} `json:"model"`
			}
			if err := json.Unmarshal(files["tokenizer.json"], &doc); err != nil {
				t.Fatal(err)
			}
			ids := map[int32]bool{} // an added token may also be in the vocab
			for _, id := range doc.Model.Vocab {
				ids[id] = true
			}
			for _, a := range doc.AddedTokens {
				ids[a.ID] = true
			}
			if doc.Model.Type != "BPE" || len(ids) != tok.VocabSize() || doc.Model.Merges == nil {
				t.Errorf("model %s of %d tokens and %d added tokens, %d ids (merges %v), want BPE of %d", doc.Model.Type, len(doc.Model.Vocab), len(doc.AddedTokens), len(ids), doc.Model.Merges != nil, tok.VocabSize())
			}
			for _, a := range doc.AddedTokens {
				if a.Special != tok.IsSpecial(a.ID) {
					t.Errorf("added token %d (%q): special %v", a.ID, a.Content, a.Special)
				}
			}
			_, isSP := tok.(*SentencePiece)
			if isSP {
				// Llama's form: spaces become "▁" in the normalizer, bytes
				// fall back to <0xAB> tokens, and the decoder undoes both.
				if doc.Normalizer["type"] != "Sequence" || doc.PreTokenizer != nil || doc.Decoder["type"] != "Sequence" || !doc.Model.ByteFallback || doc.Model.UnkToken != "<unk>" {
					t.Errorf("normalizer %v, pre_tokenizer %v, decoder %v, byte_fallback %v, unk_token %q", doc.Normalizer["type"], doc.PreTokenizer, doc.Decoder["type"], doc.Model.ByteFallback, doc.Model.UnkToken)
				}
			} else if doc.Decoder["type"] != "ByteLevel" || doc.PreTokenizer["type"] == nil {
				t.Errorf("pre_tokenizer %v, decoder %v", doc.PreTokenizer["type"], doc.Decoder["type"])
			}
			if doc.PostProcessor["type"] != "TemplateProcessing" {
				t.Errorf("post_processor %v", doc.PostProcessor["type"])
			}
			var cfg map[string]any
			if err := json.Unmarshal(files["tokenizer_config.json"], &cfg); err != nil {
				t.Fatal(err)
			}
			bosText, _ := tok.Decode([]int32{tok.BOS()})
			if name == "bytes" {
				bosText = "<bos>"
			}
			if cfg["bos_token"] != bosText || cfg["eos_token"] == nil || (cfg["chat_template"] == nil) != isSP {
				t.Errorf("tokenizer_config.json: %v", cfg)
			}
			if err := json.Unmarshal(files["special_tokens_map.json"], &map[string]string{}); err != nil {
				t.Errorf("special_tokens_map.json: %v", err)
			}
			back, err := LoadFile(filepath.Join(dir, "tokenizer.json"))
			if err != nil {
				t.Fatal(err)
			}
			if _, isBytes := tok.(Bytes); isBytes {
				if _, ok := back.(Bytes); !ok {
					t.Fatalf("the byte tokenizer came back as a %T", back)
				}
			}
			sameTokenizer(t, back, tok)
		})
	}
}

// TestLoadFileBytesErrors checks that a tokenizer.json of the 256 bytes
// that differs from the byte tokenizer's elsewhere is refused, saying
// where.
func TestLoadFileBytesErrors(t *testing.T) {
	files, err := HFFiles(Bytes{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		edit func(doc map[string]any)
		want string
	}{
		{func(doc map[string]any) { doc["normalizer"] = map[string]any{"type": "NFC"} }, "normalizer"},
		{func(doc map[string]any) { doc["decoder"] = map[string]any{"type": "Fuse"} }, "decoder"},
		{func(doc map[string]any) { doc["added_tokens"] = doc["added_tokens"].([]any)[:1] }, "added tokens"},
		{func(doc map[string]any) { doc["pre_tokenizer"] = map[string]any{"type": "Whitespace"} }, "pre_tokenizer"},
	} {
		var doc map[string]any
		if err := json.Unmarshal(files["tokenizer.json"], &doc); err != nil {
			t.Fatal(err)
		}
		tc.edit(doc)
		data, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "tokenizer.json")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadFile(path); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("LoadFile with %s changed: %v, want an error naming the file and %q", tc.want, err, tc.want)
		}
	}
}
