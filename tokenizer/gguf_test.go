package tokenizer

import (
	"strings"
	"testing"
)

// spMeta returns GGUF metadata for the small SentencePiece vocabulary.
func spMeta() map[string]any {
	cfg := smallSPConfig()
	return map[string]any{
		"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": cfg.Tokens, "tokenizer.ggml.scores": cfg.Scores,
		"tokenizer.ggml.token_type": cfg.Types, "tokenizer.ggml.bos_token_id": uint32(1), "tokenizer.ggml.eos_token_id": uint32(2),
		"tokenizer.ggml.unknown_token_id": uint32(0), "tokenizer.ggml.padding_token_id": uint32(0xFFFFFFFF),
	}
}

// bpeMeta returns GGUF metadata for the small byte-level vocabulary.
func bpeMeta(t *testing.T) map[string]any {
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
	return map[string]any{
		"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "llama-bpe", "tokenizer.ggml.tokens": tokens,
		"tokenizer.ggml.token_type": types, "tokenizer.ggml.merges": smallMerges,
	}
}

func TestFromGGUFMetadata(t *testing.T) {
	sp, err := FromGGUFMetadata(spMeta())
	if err != nil {
		t.Fatal(err)
	}
	want := smallSP(t).Encode("Once upon a time", EncodeOptions{AddBOS: true})
	if got := sp.Encode("Once upon a time", EncodeOptions{AddBOS: true}); !equalIDs(got, want) {
		t.Errorf("SentencePiece from metadata: %v, want %v", got, want)
	}
	if sp.BOS() != 1 || !sp.IsEOS(2) {
		t.Errorf("BOS %d, EOS %v", sp.BOS(), sp.EOS())
	}

	meta := spMeta()
	meta["tokenizer.ggml.add_space_prefix"] = false
	meta["tokenizer.ggml.unknown_token_id"] = int32(-1)
	meta["tokenizer.ggml.bos_token_id"] = uint64(2)
	noPrefix, err := FromGGUFMetadata(meta)
	if err != nil {
		t.Fatal(err)
	}
	if got := noPrefix.Encode("the", EncodeOptions{}); len(got) != 2 || noPrefix.BOS() != 2 {
		t.Errorf("without a space prefix \"the\" encodes to %v (want t, he); BOS %d", got, noPrefix.BOS())
	}

	bpe, err := FromGGUFMetadata(bpeMeta(t))
	if err != nil {
		t.Fatal(err)
	}
	text := randomText(8, 10_000) + "<|eot_id|>"
	if a, b := smallBPE(t).Encode(text, EncodeOptions{AllowSpecial: true}), bpe.Encode(text, EncodeOptions{AllowSpecial: true}); !equalIDs(a, b) {
		t.Error("byte-level BPE from metadata encodes differently from the tokenizer.json")
	}
}

func TestFromGGUFMetadataErrors(t *testing.T) {
	tests := []struct {
		name string
		base func() map[string]any
		key  string
		val  any // nil deletes the key
		want string
	}{
		{"no model", spMeta, "tokenizer.ggml.model", nil, `"tokenizer.ggml.model": metadata key not found`},
		{"bad model", spMeta, "tokenizer.ggml.model", "bert", `model "bert" is not supported`},
		{"model type", spMeta, "tokenizer.ggml.model", uint32(1), `"tokenizer.ggml.model" is a uint32, want string`},
		{"no tokens", spMeta, "tokenizer.ggml.tokens", nil, `"tokenizer.ggml.tokens": metadata key not found`},
		{"no scores", spMeta, "tokenizer.ggml.scores", nil, `"tokenizer.ggml.scores": metadata key not found`},
		{"types type", spMeta, "tokenizer.ggml.token_type", []uint32{1}, `is a []uint32, want []int32`},
		{"bos type", spMeta, "tokenizer.ggml.bos_token_id", "1", `want an integer token id`},
		{"bos range", spMeta, "tokenizer.ggml.bos_token_id", int64(1 << 40), "token id 1099511627776 out of range"},
		{"bos huge", spMeta, "tokenizer.ggml.bos_token_id", uint64(1 << 63), "out of range"},
		{"bos none", spMeta, "tokenizer.ggml.bos_token_id", uint32(0xFFFFFFFF), "BOS id -1 out of range"},
		{"prefix type", spMeta, "tokenizer.ggml.add_space_prefix", uint8(1), "is a uint8, want bool"},
		{"pre", func() map[string]any { return bpeMeta(t) }, "tokenizer.ggml.pre", "qwen2", `pre-tokenizer "qwen2" is not supported`},
		{"no pre", func() map[string]any { return bpeMeta(t) }, "tokenizer.ggml.pre", nil, `"tokenizer.ggml.pre": metadata key not found`},
		{"no merges", func() map[string]any { return bpeMeta(t) }, "tokenizer.ggml.merges", nil, `"tokenizer.ggml.merges": metadata key not found`},
		{"no types", func() map[string]any { return bpeMeta(t) }, "tokenizer.ggml.token_type", nil, "needs to mark its special tokens"},
	}
	for _, tt := range tests {
		m := tt.base()
		if tt.val == nil {
			delete(m, tt.key)
		} else {
			m[tt.key] = tt.val
		}
		if _, err := FromGGUFMetadata(m); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.want)
		}
	}
}
