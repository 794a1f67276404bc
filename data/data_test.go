package data

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/internal/jsonl"
	"github.com/turnwise/turnwise/tokenizer"
)

// byteTok is a tokenizer for tests: one token per byte, and the Llama 3
// chat special tokens after the 256 byte tokens.
type byteTok struct{}

var specials = []string{tokenizer.BeginOfText, tokenizer.StartHeaderID, tokenizer.EndHeaderID, tokenizer.EOTID}

func (byteTok) Encode(text string, opts tokenizer.EncodeOptions) []int32 {
	var ids []int32
	if opts.AddBOS {
		ids = append(ids, 256)
	}
	for _, b := range []byte(text) {
		ids = append(ids, int32(b))
	}
	return ids
}
func (byteTok) Decode(ids []int32) (string, error) {
	var b []byte
	for _, id := range ids {
		b, _ = byteTok{}.AppendDecoded(b, -1, id)
	}
	return string(b), nil
}
func (byteTok) AppendDecoded(dst []byte, prev, id int32) ([]byte, error) {
	if id < 256 {
		return append(dst, byte(id)), nil
	}
	if int(id-256) < len(specials) {
		return append(dst, specials[id-256]...), nil
	}
	return dst, fmt.Errorf("bad id %d", id)
}
func (byteTok) VocabSize() int          { return 256 + len(specials) }
func (byteTok) BOS() int32              { return 256 }
func (byteTok) EOT() int32              { return 259 }
func (byteTok) IsEOS(id int32) bool     { return id == 259 }
func (byteTok) EOS() []int32            { return []int32{259} }
func (byteTok) IsSpecial(id int32) bool { return id >= 256 }
func (byteTok) SpecialID(name string) (int32, bool) {
	i := slices.Index(specials, name)
	return int32(256 + i), i >= 0
}

func TestReadChatJSONLMalformed(t *testing.T) {
	good := `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]}`
	tests := []struct {
		name, line, want string
	}{
		{"bad json", `{"messages": [`, "not a JSON object"},
		{"array", `[1,2]`, "not a JSON object"},
		{"null", `null`, "not a JSON object"},
		{"no messages", `{"msgs": []}`, `missing "messages"`},
		{"messages not array", `{"messages": "x"}`, "not an array"},
		{"messages null", `{"messages": null}`, "not an array"},
		{"empty messages", `{"messages": []}`, "empty"},
		{"message not object", `{"messages": [3]}`, "message 0 is not a JSON object"},
		{"no role", `{"messages": [{"content": "x"}]}`, "message 0 has no role"},
		{"role number", `{"messages": [{"role": 1, "content": "x"}]}`, "role is not a string"},
		{"unknown role", `{"messages": [{"role": "tool", "content": "x"}]}`, `unknown role "tool"`},
		{"no content", `{"messages": [{"role": "assistant"}]}`, "message 0 has no content"},
		{"content number", `{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": 5}]}`, "message 1: content is not a string"},
		{"content list", `{"messages": [{"role": "assistant", "content": ["a"]}]}`, "content is not a string"},
		{"content null", `{"messages": [{"role": "assistant", "content": null}]}`, "content is not a string"},
		{"no assistant", `{"messages": [{"role": "user", "content": "x"}]}`, "no assistant message"},
		{"invalid UTF-8", `{"messages": [{"role": "assistant", "content": "` + "\xed\xa0\x80" + `"}]}`, "invalid UTF-8 at byte 49"},
		{"overlong", `{"messages": [{"role": "assistant", "content": "` + strings.Repeat("x", jsonl.DefaultMaxLine) + `"}]}`, fmt.Sprintf("line too long: longer than the cap of %d bytes", jsonl.DefaultMaxLine)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := good + "\n\n" + tc.line + "\n" + good + "\n"
			ex, _, err := ReadChatJSONL(strings.NewReader(in), "chat.jsonl", ReadOptions{})
			if err == nil {
				t.Fatalf("no error for %s", tc.line)
			}
			if !strings.Contains(err.Error(), "chat.jsonl:3:") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q; want chat.jsonl:3: and %q", err, tc.want)
			}
			var le *LineError
			if !errors.As(err, &le) || le.Line != 3 {
				t.Errorf("error %v is not a *LineError for line 3", err)
			}
			if len(ex) != 1 {
				t.Errorf("got %d examples before the bad line; want 1", len(ex))
			}
		})
	}
}

func TestReadChatJSONLSkip(t *testing.T) {
	in := strings.Join([]string{
		`{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]}`,
		`garbage`,
		``,
		`   `,
		`{"messages":[]}`,
		`{"messages":[{"role":"assistant","content":"alone"}]}`,
		`{"messages":[{"role":"user","content":"x"}]}`,
		`{"messages":[{"role":"assistant","content":"` + "\xff" + `"}]}`,
		`{"messages":[{"role":"assistant","content":"last"}]}`,
	}, "\n") // no final newline
	ex, skipped, err := ReadChatJSONL(strings.NewReader(in), "f.jsonl", ReadOptions{SkipBadLines: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(ex) != 3 || ex[0].Line != 1 || ex[1].Line != 6 || ex[2].Line != 9 {
		t.Fatalf("examples %+v; want lines 1, 6 and 9", ex)
	}
	if got := ex[0].Messages[2]; got != (tokenizer.Message{Role: "assistant", Content: "hello"}) {
		t.Errorf("message %+v", got)
	}
	var lines []int
	for _, s := range skipped {
		lines = append(lines, s.Line)
		if !strings.HasPrefix(s.Error(), fmt.Sprintf("f.jsonl:%d: ", s.Line)) {
			t.Errorf("skipped error %q does not start with its place", s.Error())
		}
	}
	if !reflect.DeepEqual(lines, []int{2, 5, 7, 8}) {
		t.Errorf("skipped lines %v; want [2 5 7 8]", lines)
	}
}

func TestReadText(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"\n\n  \n", nil},
		{"one doc\nsecond line", []string{"one doc\nsecond line"}},
		{"a\r\nb\r\n\r\n\r\nc\n", []string{"a\nb", "c"}},
		{"\n\nx\n \t\ny\nz\n\n", []string{"x", "y\nz"}},
	}
	for _, tc := range tests {
		got, err := ReadText(strings.NewReader(tc.in), "t.txt")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ReadText(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

func TestTokenizeChat(t *testing.T) {
	c := Chat{Messages: []tokenizer.Message{{Role: "user", Content: "q"}, {Role: "assistant", Content: "ans"}}}
	ids, mask, err := TokenizeChat(byteTok{}, c)
	if err != nil {
		t.Fatal(err)
	}
	var learned []int32
	for i, m := range mask {
		if m {
			learned = append(learned, ids[i])
		}
	}
	if want := []int32{'a', 'n', 's', 259}; !reflect.DeepEqual(learned, want) {
		t.Errorf("loss tokens %v; want %v", learned, want)
	}
	c.Messages[0].Role = "tool"
	c.Line = 7
	if _, _, err := TokenizeChat(byteTok{}, c); err == nil || !strings.Contains(err.Error(), "line 7") {
		t.Errorf("error %v; want one naming line 7", err)
	}
}

func TestTokenizeText(t *testing.T) {
	ids, mask := TokenizeText(byteTok{}, "ab", true)
	if !reflect.DeepEqual(ids, []int32{256, 'a', 'b'}) || !reflect.DeepEqual(mask, []bool{false, true, true}) {
		t.Errorf("got %v %v", ids, mask)
	}
	ids, mask = TokenizeText(byteTok{}, "ab", false)
	if !reflect.DeepEqual(ids, []int32{'a', 'b'}) || !reflect.DeepEqual(mask, []bool{true, true}) {
		t.Errorf("got %v %v", ids, mask)
	}
}

// testExamples returns n examples of varied lengths whose token ids encode
// their example number, with loss on the second half of each.
func testExamples(n int) []Example {
	var exs []Example
	for i := range n {
		l := 2 + (i*7)%13
		ex := Example{IDs: make([]int32, l), Loss: make([]bool, l)}
		for j := range l {
			ex.IDs[j] = int32(i*100 + j)
			ex.Loss[j] = j >= l/2
		}
		exs = append(exs, ex)
	}
	return exs
}

func TestPackerInvariants(t *testing.T) {
	exs := testExamples(40)
	p, err := NewPacker(exs, PackOptions{TokensPerBatch: 32, MaxLen: 10, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	wantTrunc := 0
	for _, ex := range exs {
		if len(ex.IDs) > 10 {
			wantTrunc++
		}
	}
	if st.Truncated != wantTrunc || st.Examples != 40 || st.Dropped != 0 {
		t.Errorf("stats %+v; want %d truncated of 40", st, wantTrunc)
	}
	seen := map[int32]int{}
	for p.Position().Epoch == 0 {
		b := p.Next()
		if len(b.IDs) != len(b.Targets) || len(b.IDs) > 32 || len(b.Lens) == 0 {
			t.Fatalf("batch of %d ids, %d targets, %d seqs", len(b.IDs), len(b.Targets), len(b.Lens))
		}
		sum := 0
		for _, l := range b.Lens {
			seq, tg := b.IDs[sum:sum+l], b.Targets[sum:sum+l]
			ex := exs[seq[0]/100]
			seen[seq[0]/100]++
			if l != min(len(ex.IDs), 10) {
				t.Errorf("sequence of %d tokens from example of %d", l, len(ex.IDs))
			}
			for j := range l {
				want := int32(-1)
				if j+1 < l && ex.Loss[j+1] {
					want = ex.IDs[j+1]
				}
				if seq[j] != ex.IDs[j] || tg[j] != want {
					t.Fatalf("position %d: id %d target %d; want %d %d", j, seq[j], tg[j], ex.IDs[j], want)
				}
				if tg[j] >= 0 && tg[j]/100 != seq[0]/100 {
					t.Fatalf("target %d crosses into another sequence", tg[j])
				}
			}
			sum += l
		}
		if sum != len(b.IDs) {
			t.Errorf("lens sum to %d; batch has %d ids", sum, len(b.IDs))
		}
	}
	if len(seen) != 40 {
		t.Errorf("epoch saw %d distinct examples; want 40", len(seen))
	}
	for i, c := range seen {
		if c != 1 {
			t.Errorf("example %d seen %d times in an epoch", i, c)
		}
	}
}

func TestPackerDeterminismAndResume(t *testing.T) {
	exs := testExamples(25)
	opts := PackOptions{TokensPerBatch: 40, Seed: 11}
	a, _ := NewPacker(exs, opts)
	b, _ := NewPacker(exs, opts)
	var positions []Position
	var batches [][]int32
	for range 30 {
		positions = append(positions, a.Position())
		ba, bb := a.Next(), b.Next()
		if !reflect.DeepEqual(ba, bb) {
			t.Fatal("two packers with one seed differ")
		}
		batches = append(batches, ba.IDs)
	}
	if a.Position().Epoch < 2 {
		t.Fatalf("30 batches did not reach epoch 2: %+v", a.Position())
	}
	for _, k := range []int{0, 3, 9, 17, 29} {
		r, _ := NewPacker(exs, opts)
		if err := r.Seek(positions[k]); err != nil {
			t.Fatal(err)
		}
		for i := k; i < 30; i++ {
			if got := r.Next(); !reflect.DeepEqual(got.IDs, batches[i]) {
				t.Fatalf("resumed at %+v: batch %d differs", positions[k], i)
			}
		}
	}
	other, _ := NewPacker(exs, PackOptions{TokensPerBatch: 40, Seed: 12})
	if reflect.DeepEqual(other.Next().IDs, batches[0]) && reflect.DeepEqual(other.Next().IDs, batches[1]) {
		t.Error("a different seed gave the same order")
	}
	// Epochs are shuffled differently.
	var first [][]int32
	for _, pos := range positions {
		if pos.Index == 0 {
			r, _ := NewPacker(exs, opts)
			r.Seek(pos)
			first = append(first, r.Next().IDs)
		}
	}
	if len(first) >= 2 && reflect.DeepEqual(first[0], first[1]) {
		t.Error("epochs 0 and 1 start with the same batch")
	}
}

func TestPackerErrors(t *testing.T) {
	exs := testExamples(3)
	noLoss := Example{IDs: []int32{1, 2, 3}, Loss: []bool{true, false, false}}
	tests := []struct {
		name string
		exs  []Example
		opts PackOptions
		want string
	}{
		{"zero batch", exs, PackOptions{}, "must be positive"},
		{"max len too big", exs, PackOptions{TokensPerBatch: 4, MaxLen: 5}, "max length"},
		{"ragged", []Example{{IDs: []int32{1}, Loss: nil}}, PackOptions{TokensPerBatch: 4}, "mask entries"},
		{"nothing to learn", []Example{noLoss}, PackOptions{TokensPerBatch: 4}, "no example"},
	}
	for _, tc := range tests {
		if _, err := NewPacker(tc.exs, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v; want %q", tc.name, err, tc.want)
		}
	}
	p, err := NewPacker(append(exs, noLoss), PackOptions{TokensPerBatch: 8})
	if err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Dropped != 1 || st.Examples != 3 {
		t.Errorf("stats %+v; want 1 dropped, 3 kept", st)
	}
	for _, pos := range []Position{{-1, 0}, {0, 3}, {0, -1}} {
		if p.Seek(pos) == nil {
			t.Errorf("Seek(%+v) succeeded", pos)
		}
	}
}

func TestSplit(t *testing.T) {
	xs := make([]int, 100)
	for i := range xs {
		xs[i] = i
	}
	tr, ho, err := Split(xs, 0.1, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr) != 90 || len(ho) != 10 {
		t.Fatalf("split %d/%d; want 90/10", len(tr), len(ho))
	}
	if !slices.IsSorted(tr) || !slices.IsSorted(ho) {
		t.Error("split does not keep order")
	}
	all := slices.Sorted(slices.Values(append(append([]int{}, tr...), ho...)))
	if !reflect.DeepEqual(all, xs) {
		t.Error("split lost or duplicated examples")
	}
	tr2, ho2, _ := Split(xs, 0.1, 5)
	if !reflect.DeepEqual(tr, tr2) || !reflect.DeepEqual(ho, ho2) {
		t.Error("split is not deterministic")
	}
	if _, ho3, _ := Split(xs, 0.1, 6); reflect.DeepEqual(ho, ho3) {
		t.Error("another seed held out the same examples")
	}
	if tr, ho, _ := Split(xs, 0, 1); len(tr) != 100 || ho != nil {
		t.Error("fraction 0 held something out")
	}
	for _, f := range []float64{-0.1, 1, 2} {
		if _, _, err := Split(xs, f, 1); err == nil {
			t.Errorf("fraction %v accepted", f)
		}
	}
}

func FuzzReadChatJSONL(f *testing.F) {
	seeds := []string{
		``,
		"\n\n",
		`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]}`,
		`{"messages":[{"role":"assistant","content":"\u0000<|eot_id|>"}]}` + "\n" + `{"messages":[]}`,
		`{"messages":[{"role":"assistant","content":null}]}`,
		`{"messages":[null]}`,
		`{"messages":{"role":"assistant"}}`,
		`{"messages":[{"role":"assistant","content":"a","role":"user"}]}`,
		"\xff\xfe{",
		`[]`, `"x"`, `1e999`, `{}`,
	}
	for _, s := range seeds {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, in string, skip bool) {
		ex, skipped, err := ReadChatJSONL(strings.NewReader(in), "fuzz", ReadOptions{SkipBadLines: skip})
		if skip && err != nil {
			t.Fatalf("skip mode failed: %v", err)
		}
		for _, s := range skipped {
			if !strings.HasPrefix(s.Error(), "fuzz:") {
				t.Fatalf("error %q without file name", s.Error())
			}
		}
		for _, c := range ex {
			if _, _, err := TokenizeChat(byteTok{}, c); err != nil {
				t.Fatalf("accepted line %d does not tokenize: %v", c.Line, err)
			}
		}
	})
}

// fileWriter returns a function that writes text to a file name in a
// fresh temporary directory and returns its path.
func fileWriter(t *testing.T) func(name, text string) string {
	dir := t.TempDir()
	return func(name, text string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
}

func TestLoadExamples(t *testing.T) {
	write := fileWriter(t)
	tok := tokenizer.Bytes{}
	// Plain text: two documents, each ending with a learned EOS.
	ex, skipped, err := LoadExamples(write("docs.txt", "ab\n\ncd\n"), tok, ReadOptions{})
	if err != nil || len(skipped) != 0 {
		t.Fatal(err, skipped)
	}
	want := []Example{
		{IDs: []int32{tokenizer.BytesBOS, 'a', 'b', tokenizer.BytesEOS}, Loss: []bool{false, true, true, true}},
		{IDs: []int32{tokenizer.BytesBOS, 'c', 'd', tokenizer.BytesEOS}, Loss: []bool{false, true, true, true}},
	}
	if !reflect.DeepEqual(ex, want) {
		t.Errorf("text examples %v, want %v", ex, want)
	}
	// Chat JSONL: a malformed line skipped, the loss on the assistant turn.
	chat := write("chat.jsonl", `{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}`+"\n{nope\n")
	if _, _, err := LoadExamples(chat, tok, ReadOptions{}); err == nil || !strings.Contains(err.Error(), "chat.jsonl:2") {
		t.Errorf("a malformed line gave %v, want an error naming chat.jsonl:2", err)
	}
	ex, skipped, err = LoadExamples(chat, tok, ReadOptions{SkipBadLines: true})
	if err != nil || len(skipped) != 1 || skipped[0].Line != 2 || len(ex) != 1 {
		t.Fatalf("skipping: %d examples, skipped %v, %v", len(ex), skipped, err)
	}
	ids, mask, _ := tokenizer.EncodeChat(tok, []tokenizer.Message{{Role: "user", Content: "q"}, {Role: "assistant", Content: "a"}}, tokenizer.ChatOptions{})
	if !reflect.DeepEqual(ex[0], Example{IDs: ids, Loss: mask}) {
		t.Errorf("chat example %v, want ids %v mask %v", ex[0], ids, mask)
	}
	missing := filepath.Join(filepath.Dir(write("x.txt", "")), "none.txt")
	if _, _, err := LoadExamples(missing, tok, ReadOptions{}); err == nil || !strings.Contains(err.Error(), "none.txt") {
		t.Errorf("a missing file gave %v", err)
	}
}

// TestEpochBatches checks EpochBatches against the batches Next returns
// before the position reaches each epoch, and that counting does not move
// the position or change the batches that follow.
func TestEpochBatches(t *testing.T) {
	for _, tpb := range []int{10, 32, 40, 1000} {
		p, err := NewPacker(testExamples(25), PackOptions{TokensPerBatch: tpb, Seed: 5})
		if err != nil {
			t.Fatal(err)
		}
		want := map[int]int{}
		ref, _ := NewPacker(testExamples(25), PackOptions{TokensPerBatch: tpb, Seed: 5})
		for n := 1; ref.Position().Epoch < 3; n++ {
			ref.Next()
			if e := ref.Position().Epoch; want[e] == 0 && e > 0 {
				want[e] = n // batches done when the position reaches epoch e
			}
		}
		p.Next()
		at := p.Position()
		for e := 1; e <= 3; e++ {
			if got := p.EpochBatches(e); got != want[e] {
				t.Errorf("tokens per batch %d: %d epochs take %d batches, want %d", tpb, e, got, want[e])
			}
		}
		ref.Seek(at)
		if p.Position() != at || !reflect.DeepEqual(p.Next().IDs, ref.Next().IDs) {
			t.Errorf("tokens per batch %d: counting moved the packer", tpb)
		}
	}
}
