package tokenizer

import "testing"

func TestBytes(t *testing.T) {
	var b Bytes
	for _, s := range []string{"", "hello", "héllo wörld ✓", "\x00\xff"} {
		ids := b.Encode(s, EncodeOptions{AddBOS: true})
		if ids[0] != BytesBOS || len(ids) != len(s)+1 {
			t.Fatalf("Encode(%q) = %v", s, ids)
		}
		got, err := b.Decode(append(ids, BytesEOS))
		if err != nil || got != s {
			t.Errorf("Decode(Encode(%q)) = %q, %v", s, got, err)
		}
	}
	if _, err := b.Decode([]int32{258}); err == nil {
		t.Error("id 258 decoded")
	}
	if b.VocabSize() != 258 || !b.IsEOS(257) || b.IsEOS(10) || !b.IsSpecial(256) {
		t.Error("special tokens wrong")
	}
}
