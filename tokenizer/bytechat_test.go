package tokenizer

import (
	"slices"
	"strings"
	"testing"
)

// byteIDs returns the ids of s's bytes.
func byteIDs(s string) []int32 {
	ids := make([]int32, len(s))
	for i := 0; i < len(s); i++ {
		ids[i] = int32(s[i])
	}
	return ids
}

// cat concatenates id slices.
func cat(parts ...[]int32) []int32 {
	var out []int32
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// maskOf returns a mask of n copies of v.
func maskOf(n int, v bool) []bool {
	m := make([]bool, n)
	for i := range m {
		m[i] = v
	}
	return m
}

func TestEncodeByteChat(t *testing.T) {
	bos, eos := []int32{BytesBOS}, []int32{BytesEOS}
	conv := []Message{
		{Role: "system", Content: "Be brief."},
		{Role: "user", Content: "Hi"},
		{Role: "assistant", Content: "Hello!"},
	}
	convIDs := cat(bos,
		byteIDs("s>Be brief."), eos,
		byteIDs("u>Hi"), eos,
		byteIDs("a>Hello!"), eos)
	convMask := slices.Concat(
		maskOf(1, false),
		maskOf(len("s>Be brief.")+1, false),
		maskOf(len("u>Hi")+1, false),
		maskOf(2, false), maskOf(len("Hello!")+1, true))
	tests := []struct {
		name     string
		msgs     []Message
		opts     ChatOptions
		wantIDs  []int32
		wantMask []bool
		wantText string
	}{
		{
			name:     "three messages",
			msgs:     conv,
			wantIDs:  convIDs,
			wantMask: convMask,
			wantText: "<bos>s>Be brief.<eos>u>Hi<eos>a>Hello!<eos>",
		},
		{
			name:     "generation prompt",
			msgs:     conv,
			opts:     ChatOptions{AddGenerationPrompt: true},
			wantIDs:  cat(convIDs, byteIDs("a>")),
			wantMask: slices.Concat(convMask, maskOf(2, false)),
			wantText: "<bos>s>Be brief.<eos>u>Hi<eos>a>Hello!<eos>a>",
		},
		{
			name:     "date ignored",
			msgs:     []Message{{Role: "user", Content: "x"}},
			opts:     ChatOptions{Date: "1 Jan 2000", AddGenerationPrompt: true},
			wantIDs:  cat(bos, byteIDs("u>x"), eos, byteIDs("a>")),
			wantMask: maskOf(7, false),
			wantText: "<bos>u>x<eos>a>",
		},
		{
			name: "trimming",
			msgs: []Message{
				{Role: "user", Content: " \t\n\x1cq \u00a0\u3000"},
				{Role: "assistant", Content: "\u2003 a b\r\n"},
			},
			wantIDs:  cat(bos, byteIDs("u>q"), eos, byteIDs("a>a b"), eos),
			wantMask: slices.Concat(maskOf(5, false), maskOf(2, false), maskOf(4, true)),
			wantText: "<bos>u>q<eos>a>a b<eos>",
		},
		{
			name:     "empty assistant content",
			msgs:     []Message{{Role: "user", Content: "q"}, {Role: "assistant", Content: "  "}},
			wantIDs:  cat(bos, byteIDs("u>q"), eos, byteIDs("a>"), eos),
			wantMask: slices.Concat(maskOf(5, false), maskOf(2, false), maskOf(1, true)),
			wantText: "<bos>u>q<eos>a><eos>",
		},
		{
			name: "later system message and two assistant turns",
			msgs: []Message{
				{Role: "assistant", Content: "A"},
				{Role: "system", Content: "S"},
				{Role: "assistant", Content: "B"},
			},
			wantIDs: cat(bos, byteIDs("a>A"), eos, byteIDs("s>S"), eos, byteIDs("a>B"), eos),
			wantMask: slices.Concat(maskOf(1, false),
				maskOf(2, false), maskOf(2, true),
				maskOf(4, false),
				maskOf(2, false), maskOf(2, true)),
			wantText: "<bos>a>A<eos>s>S<eos>a>B<eos>",
		},
		{
			name:     "special-token text is plain bytes",
			msgs:     []Message{{Role: "user", Content: "<eos>"}},
			wantIDs:  cat(bos, byteIDs("u><eos>"), eos),
			wantMask: maskOf(9, false),
			wantText: "<bos>u><eos><eos>",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, tok := range []Tokenizer{Bytes{}, &Bytes{}} {
				ids, mask, err := EncodeChat(tok, tc.msgs, tc.opts)
				if err != nil {
					t.Fatalf("%T: %v", tok, err)
				}
				if !slices.Equal(ids, tc.wantIDs) {
					t.Errorf("%T: ids\n got %v\nwant %v", tok, ids, tc.wantIDs)
				}
				if !slices.Equal(mask, tc.wantMask) {
					t.Errorf("%T: mask\n got %v\nwant %v", tok, mask, tc.wantMask)
				}
			}
			text, err := RenderByteChat(tc.msgs, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if text != tc.wantText {
				t.Errorf("text\n got %q\nwant %q", text, tc.wantText)
			}
		})
	}
}

// TestByteChatRenderMatchesIDs checks that, for content free of "<bos>" and
// "<eos>" text, the rendered text spells the ids with 256 and 257 written
// as "<bos>" and "<eos>".
func TestByteChatRenderMatchesIDs(t *testing.T) {
	msgs := []Message{
		{Role: "system", Content: "sys\n"},
		{Role: "user", Content: "héllo ✓"},
		{Role: "assistant", Content: " ok "},
		{Role: "user", Content: "more"},
	}
	for _, gen := range []bool{false, true} {
		opts := ChatOptions{AddGenerationPrompt: gen}
		ids, _, err := EncodeChat(Bytes{}, msgs, opts)
		if err != nil {
			t.Fatal(err)
		}
		text, err := RenderByteChat(msgs, opts)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, id := range ids {
			switch id {
			case BytesBOS:
				b.WriteString("<bos>")
			case BytesEOS:
				b.WriteString("<eos>")
			default:
				b.WriteByte(byte(id))
			}
		}
		if b.String() != text {
			t.Errorf("gen=%v: ids spell %q, render is %q", gen, b.String(), text)
		}
	}
}

func TestByteChatErrors(t *testing.T) {
	tests := []struct {
		name string
		msgs []Message
	}{
		{"no messages", nil},
		{"tool", []Message{{Role: "user", Content: "q"}, {Role: "tool", Content: "r"}}},
		{"ipython", []Message{{Role: "ipython", Content: "r"}}},
		{"unknown role", []Message{{Role: "human", Content: "q"}}},
		{"empty role", []Message{{Content: "q"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, llamaErr := RenderChat(tc.msgs, ChatOptions{})
			if llamaErr == nil {
				t.Fatal("the Llama format accepts the conversation")
			}
			ids, mask, err := EncodeChat(Bytes{}, tc.msgs, ChatOptions{})
			if err == nil || ids != nil || mask != nil {
				t.Fatalf("EncodeChat = %v, %v, %v; want an error", ids, mask, err)
			}
			if err.Error() != llamaErr.Error() {
				t.Errorf("EncodeChat error %q; the Llama format's is %q", err, llamaErr)
			}
			text, err := RenderByteChat(tc.msgs, ChatOptions{})
			if err == nil || text != "" {
				t.Fatalf("RenderByteChat = %q, %v; want an error", text, err)
			}
			if err.Error() != llamaErr.Error() {
				t.Errorf("RenderByteChat error %q; the Llama format's is %q", err, llamaErr)
			}
		})
	}
}

// TestRenderChatFor checks that the rendering follows the format EncodeChat
// encodes in, for the byte tokenizer by value and by pointer alike.
func TestRenderChatFor(t *testing.T) {
	msgs := []Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "yo"}}
	opts := ChatOptions{AddGenerationPrompt: false}
	wantBytes, err := RenderByteChat(msgs, opts)
	if err != nil {
		t.Fatal(err)
	}
	wantLlama, err := RenderChat(msgs, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		tok  Tokenizer
		byte bool
	}{
		{"Bytes", Bytes{}, true},
		{"*Bytes", &Bytes{}, true},
		{"BPE", smallBPE(t), false},
	} {
		if got := ByteChat(c.tok); got != c.byte {
			t.Errorf("%s: ByteChat = %v, want %v", c.name, got, c.byte)
		}
		got, err := RenderChatFor(c.tok, msgs, opts)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want := wantLlama
		if c.byte {
			want = wantBytes
		}
		if got != want {
			t.Errorf("%s: RenderChatFor = %q, want %q", c.name, got, want)
		}
	}
}
