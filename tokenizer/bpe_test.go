package tokenizer

import (
	"strings"
	"testing"
)

// tokenTexts maps token texts to ids: ordinary tokens by their bytes,
// special tokens by name.
func tokenTexts(t *testing.T, tok *BPE, texts []string) []int32 {
	t.Helper()
	var ids []int32
	for _, s := range texts {
		if id, ok := tok.SpecialID(s); ok {
			ids = append(ids, id)
			continue
		}
		id, ok := tok.TokenID(s)
		if !ok {
			t.Fatalf("no token %q", s)
		}
		ids = append(ids, id)
	}
	return ids
}

func TestSmallBPE(t *testing.T) {
	tok := smallBPE(t)
	tests := []struct {
		in   string
		opts EncodeOptions
		want []string
	}{
		{"", EncodeOptions{}, nil},
		{"", EncodeOptions{AddBOS: true}, []string{"<|begin_of_text|>"}},
		{"the world", EncodeOptions{}, []string{"t", "he", " world"}},
		{" the and", EncodeOptions{}, []string{" the", " and"}},
		{"hello", EncodeOptions{}, []string{"he", "ll", "o"}}, // "h e" outranks "e l"
		{"xyz", EncodeOptions{}, []string{"x", "y", "z"}},
		{"        x", EncodeOptions{}, []string{"    ", "  ", " ", " ", "x"}},
		{"a<|eot_id|>b", EncodeOptions{AllowSpecial: true}, []string{"a", "<|eot_id|>", "b"}},
		{"<|eot_id|><|eot_id|>", EncodeOptions{AllowSpecial: true, AddBOS: true}, []string{"<|begin_of_text|>", "<|eot_id|>", "<|eot_id|>"}},
		{"<|eot_id|>", EncodeOptions{}, []string{"<", "|", "e", "o", "t", "_", "i", "d", "|", ">"}},
		{"<|eot_id", EncodeOptions{AllowSpecial: true}, []string{"<", "|", "e", "o", "t", "_", "i", "d"}},
		{"\xff\xfe", EncodeOptions{}, []string{"\xff", "\xfe"}},
	}
	for _, tt := range tests {
		got := tok.Encode(tt.in, tt.opts)
		var texts []string
		for _, id := range got {
			s, _ := tok.Token(id)
			texts = append(texts, s)
		}
		if strings.Join(texts, "|") != strings.Join(tt.want, "|") {
			t.Errorf("Encode(%q, %+v) = %q, want %q", tt.in, tt.opts, texts, tt.want)
		}
	}
}

// TestEncodeCache checks that the per-call cache of merged pre-tokens
// changes nothing: a long text encodes as its pre-tokens do one by one.
func TestEncodeCache(t *testing.T) {
	for name, tok := range testBPEs(t) {
		text := randomText(21, 300_000)
		got := tok.Encode(text, EncodeOptions{})
		var want []int32
		pieces := 0
		for _, p := range split(text) {
			want = append(want, tok.Encode(p, EncodeOptions{})...)
			pieces++
		}
		if pieces < 2*cacheAfter {
			t.Fatalf("%s: only %d pre-tokens: the cache is not exercised", name, pieces)
		}
		if !equalIDs(got, want) {
			t.Errorf("%s: encoding the whole text differs from encoding its pre-tokens one by one", name)
		}
	}
}
