package tokenizer

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// smallSPConfig builds a SentencePiece vocabulary laid out like llama2.c's:
// <unk>, <s>, </s>, the 256 byte tokens, merged pieces with falling scores,
// then single characters.
func smallSPConfig() SentencePieceConfig {
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
	for i, m := range []string{"▁t", "he", "▁a", "in", "▁the", "nd", "▁w", "▁and", "on", "ce", "▁O", "▁On", "▁Once", "▁u", "▁up", "▁upon", "▁ti", "me", "▁time", "▁▁", "er", "▁▁▁▁"} {
		add(m, -float32(i), TokenNormal)
	}
	for _, c := range strings.Split("▁ e t a o h n i d s r m c u p w O T , .", " ") {
		add(c, -100, TokenNormal)
	}
	return cfg
}

func smallSP(t testing.TB) *SentencePiece {
	t.Helper()
	tok, err := NewSentencePiece(smallSPConfig())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func spPieces(tok *SentencePiece, ids []int32) []string {
	var out []string
	for _, id := range ids {
		out = append(out, tok.tokens[id])
	}
	return out
}

func TestSentencePieceEncode(t *testing.T) {
	tok := smallSP(t)
	tests := []struct {
		in   string
		opts EncodeOptions
		want string // pieces joined by |
	}{
		{"", EncodeOptions{}, ""},
		{"", EncodeOptions{AddBOS: true}, "<s>"},
		{"the", EncodeOptions{}, "▁the"},
		{"Once upon a time", EncodeOptions{AddBOS: true}, "<s>|▁Once|▁upon|▁a|▁time"},
		{"hand", EncodeOptions{}, "▁|h|a|nd"},
		{"ü!", EncodeOptions{}, "▁|<0xC3>|<0xBC>|<0x21>"},
		{"a    b", EncodeOptions{}, "▁a|▁▁▁▁|<0x62>"},
		{"the</s>and", EncodeOptions{AllowSpecial: true}, "▁the|</s>|▁and"},
		{"the</s>", EncodeOptions{}, "▁the|<0x3C>|<0x2F>|s|<0x3E>"},
		{"\n", EncodeOptions{}, "▁|<0x0A>"},
	}
	for _, tt := range tests {
		got := strings.Join(spPieces(tok, tok.Encode(tt.in, tt.opts)), "|")
		if got != tt.want {
			t.Errorf("Encode(%q, %+v) = %s, want %s", tt.in, tt.opts, got, tt.want)
		}
	}
}

func TestSentencePieceDecode(t *testing.T) {
	tok := smallSP(t)
	id := func(s string) int32 {
		for i, x := range tok.tokens {
			if x == s {
				return int32(i)
			}
		}
		t.Fatalf("no token %q", s)
		return 0
	}
	tests := []struct {
		ids  []int32
		want string
	}{
		{nil, ""},
		{[]int32{id("▁Once"), id("▁upon")}, "Once upon"},
		{[]int32{1, id("▁Once"), id("▁upon")}, "<s>Once upon"},
		{[]int32{id("he"), id("▁Once")}, "he Once"},
		{[]int32{id("▁▁"), id("▁a")}, "  a"},
		{[]int32{id("▁a"), id("<0x0A>"), id("▁t"), id("<0xC3>"), id("<0xBC>")}, "a\n tü"},
		{[]int32{id("▁a"), 2, id("▁a"), 0}, "a</s>a<unk>"},
	}
	for _, tt := range tests {
		got, err := tok.Decode(tt.ids)
		if err != nil || got != tt.want {
			t.Errorf("Decode(%v) = %q, %v; want %q", tt.ids, got, err, tt.want)
		}
	}
	if _, err := tok.Decode([]int32{int32(tok.VocabSize())}); err == nil {
		t.Error("Decode of an out-of-range id succeeded")
	}
	if tok.BOS() != 1 || tok.EOT() != 2 || !equalIDs(tok.EOS(), []int32{2}) || !tok.IsEOS(2) || tok.IsEOS(1) {
		t.Error("BOS/EOS/EOT ids wrong")
	}
	if !tok.IsSpecial(1) || !tok.IsSpecial(0) || tok.IsSpecial(3) || tok.IsSpecial(-1) {
		t.Error("IsSpecial wrong")
	}
	if id, ok := tok.SpecialID("</s>"); !ok || id != 2 {
		t.Errorf("SpecialID(</s>) = %d, %v", id, ok)
	}
}

func TestSentencePieceNoTypes(t *testing.T) {
	cfg := smallSPConfig()
	cfg.Types = nil
	cfg.NoSpacePrefix = true
	tok, err := NewSentencePiece(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ids := tok.Encode("the and", EncodeOptions{})
	if got := strings.Join(spPieces(tok, ids), "|"); got != "t|he|▁and" {
		t.Errorf("pieces %s, want t|he|▁and", got)
	}
	if s, _ := tok.Decode(ids); s != "the and" {
		t.Errorf("Decode = %q", s)
	}
	if !tok.IsSpecial(1) || tok.types[3] != TokenByte || tok.types[0] != TokenUnknown {
		t.Error("types inferred from token text are wrong")
	}
}

func TestNewSentencePieceErrors(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*SentencePieceConfig)
		want   string
	}{
		{"no tokens", func(c *SentencePieceConfig) { *c = SentencePieceConfig{} }, "no tokens"},
		{"scores", func(c *SentencePieceConfig) { c.Scores = c.Scores[1:] }, "scores for"},
		{"types", func(c *SentencePieceConfig) { c.Types = c.Types[1:] }, "token types for"},
		{"bos", func(c *SentencePieceConfig) { c.BOS = 100000 }, "BOS id 100000 out of range"},
		{"eos", func(c *SentencePieceConfig) { c.EOS = -1 }, "EOS id -1 out of range"},
		{"unk", func(c *SentencePieceConfig) { c.Unknown = -5 }, "unknown-token id -5"},
		{"duplicate", func(c *SentencePieceConfig) { c.Tokens[len(c.Tokens)-1] = "he" }, `are both "he"`},
		{"bad byte", func(c *SentencePieceConfig) { c.Tokens[3] = "<0xZZ>" }, "want the form <0xAB>"},
		{"repeated byte", func(c *SentencePieceConfig) { c.Tokens[4] = "<0x00>" }, "both byte 0x00"},
		{"bad type", func(c *SentencePieceConfig) { c.Types[5] = 9 }, "unknown type 9"},
		{"empty", func(c *SentencePieceConfig) { c.Tokens[len(c.Tokens)-1] = "" }, "is empty"},
		{"no fallback", func(c *SentencePieceConfig) { c.Unknown = -1; c.Types[3] = int32(TokenUnused) }, "no byte token for 0x00"},
	}
	for _, tt := range tests {
		cfg := smallSPConfig()
		tt.modify(&cfg)
		_, err := NewSentencePiece(cfg)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.want)
		}
	}
}

func TestSentencePieceRoundTrip(t *testing.T) {
	tok := smallSP(t)
	for _, s := range []string{"Once upon a time", " leading", "trailing  ", "a\n\nb", "ünïcode 🦙", randomText(2, 5000)} {
		s = strings.ReplaceAll(s, spaceMark, "")
		got, err := tok.Decode(tok.Encode(s, EncodeOptions{}))
		if err != nil || got != s {
			t.Errorf("round trip of %q gave %q, %v", clip(s), clip(got), err)
		}
	}
}

// FuzzSentencePiece checks that text without "▁" survives encoding and
// decoding, and that streaming decoding matches.
func FuzzSentencePiece(f *testing.F) {
	for _, s := range []string{"", "Once upon a time", "  x", "a</s>b", "\xff\xfeab", "日本 🦙\n"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	tok := smallSP(f)
	f.Fuzz(func(t *testing.T, s string, allowSpecial bool) {
		ids := tok.Encode(s, EncodeOptions{AllowSpecial: allowSpecial})
		out, err := tok.Decode(ids)
		if err != nil {
			t.Fatal(err)
		}
		checkStream(t, tok, ids, out)
		if strings.Contains(s, spaceMark) || !utf8.ValidString(s) {
			return
		}
		if out != s {
			t.Fatalf("Decode(Encode(%q)) = %q (ids %v)", s, out, ids)
		}
	})
}
