package tokenizer

import (
	"strings"
	"testing"
)

func TestDecodeStream(t *testing.T) {
	tok := Bytes{}
	hello := tok.Encode("héllo", EncodeOptions{})
	cases := []struct {
		name        string
		ids         []int32
		skipSpecial bool
		want        string
		wantErr     string
	}{
		{"empty", nil, false, "", ""},
		{"text", hello, false, "héllo", ""},
		{"special skipped", append([]int32{BytesBOS}, hello...), true, "héllo", ""},
		{"split rune", hello[:2], false, "h\xc3", ""},
		{"bad id", []int32{104, 1 << 20}, false, "", "position 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := DecodeStream(tok, c.ids, c.skipSpecial)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

func TestRenderChatIDs(t *testing.T) {
	tok := Bytes{}
	msgs := []Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "yo"}}
	r, err := RenderChatIDs(tok, msgs, ChatOptions{})
	if err != nil {
		t.Fatal(err)
	}
	text, err := RenderChatFor(tok, msgs, ChatOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ids, mask, err := EncodeChat(tok, msgs, ChatOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Text != text || len(r.IDs) != len(ids) || len(r.AssistantMask) != len(mask) {
		t.Fatalf("rendering %q with %d ids and %d mask bits; want %q, %d, %d", r.Text, len(r.IDs), len(r.AssistantMask), text, len(ids), len(mask))
	}
	ones := 0
	for i, b := range r.AssistantMask {
		if r.IDs[i] != ids[i] || (b == 1) != mask[i] || (b != 0 && b != 1) {
			t.Fatalf("position %d: id %d mask %d, want id %d mask %v", i, r.IDs[i], b, ids[i], mask[i])
		}
		ones += b
	}
	if ones == 0 {
		t.Fatal("no assistant token marked")
	}
}
