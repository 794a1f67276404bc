package tokenizer

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// checkStream decodes ids one at a time and checks that the pieces join to
// want, and that no piece splits a character of valid text.
func checkStream(t *testing.T, tok Tokenizer, ids []int32, want string) {
	t.Helper()
	d := NewStreamDecoder(tok)
	var b strings.Builder
	for _, id := range ids {
		s, err := d.Next(id)
		if err != nil {
			t.Fatal(err)
		}
		if utf8.ValidString(want) && !utf8.ValidString(s) {
			t.Fatalf("streamed piece %q of valid text is not valid UTF-8", s)
		}
		b.WriteString(s)
	}
	b.WriteString(d.Flush())
	if b.String() != want {
		t.Fatalf("streamed %q, Decode gave %q", b.String(), want)
	}
}

func TestStreamDecoder(t *testing.T) {
	tok := smallBPE(t)
	// "é" and "🦙" have no tokens in the small vocabulary, so their bytes
	// arrive one token at a time.
	ids := tok.Encode("aé🦙b", EncodeOptions{})
	d := NewStreamDecoder(tok)
	var pieces []string
	for _, id := range ids {
		s, err := d.Next(id)
		if err != nil {
			t.Fatal(err)
		}
		pieces = append(pieces, s)
	}
	want := []string{"a", "", "é", "", "", "", "🦙", "b"}
	if strings.Join(pieces, "|") != strings.Join(want, "|") {
		t.Errorf("pieces %q, want %q", pieces, want)
	}
	if s := d.Flush(); s != "" {
		t.Errorf("Flush = %q", s)
	}

	// A truncated character is held back, then flushed as it is.
	s, _ := d.Next(tok.byteIDs[0xF0])
	s2, _ := d.Next(tok.byteIDs[0x9F])
	if s != "" || s2 != "" {
		t.Errorf("incomplete character streamed early: %q %q", s, s2)
	}
	if s := d.Flush(); s != "\xf0\x9f" {
		t.Errorf("Flush = %q, want the held bytes", s)
	}
	// Invalid bytes are not held back.
	for _, b := range []byte{0x80, 0xFF, 0xC0} {
		if s, _ := d.Next(tok.byteIDs[b]); s != string([]byte{b}) {
			t.Errorf("byte %#x: streamed %q", b, s)
		}
	}
	d.Flush()
	if _, err := d.Next(int32(tok.VocabSize())); err == nil {
		t.Error("Next accepted an out-of-range id")
	}

	d = NewStreamDecoder(tok)
	d.SkipSpecial = true
	var b strings.Builder
	for _, id := range tok.Encode("<|begin_of_text|>x<|eot_id|>", EncodeOptions{AllowSpecial: true}) {
		s, err := d.Next(id)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(s)
	}
	if b.String() != "x" {
		t.Errorf("SkipSpecial streamed %q, want %q", b.String(), "x")
	}
	if _, err := d.Next(-3); err == nil {
		t.Error("Next(-3) with SkipSpecial succeeded")
	}
}

func TestCompleteUTF8(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{"", 0},
		{"abc", 3},
		{"a\xc3", 1},
		{"a\xc3\xa9", 3},
		{"\xe6\x97", 0},
		{"x\xf0\x9f\xa6", 1},
		{"x\xf0\x9f\xa6\x99", 5},
		{"\xe0\x80", 2},     // can never be valid
		{"\x80\x80\x80", 3}, // stray continuation bytes
		{"\xff", 1},
		{"\xf5\x80", 2},
	}
	for _, tt := range tests {
		if got := completeUTF8([]byte(tt.in)); got != tt.want {
			t.Errorf("completeUTF8(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}
