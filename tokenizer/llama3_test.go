package tokenizer

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/turnwise/turnwise/internal/testdata"
)

// llama3 loads the shared Llama 3 tokenizer.json once per test binary.
var llama3 = sync.OnceValues(func() (*BPE, error) {
	return LoadJSON(filepath.Join(testdata.Find(), "llama3", "tokenizer.json"))
})

func loadLlama3(t testing.TB) *BPE {
	t.Helper()
	testdata.Path(t, "llama3", "tokenizer.json")
	tok, err := llama3()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// readCases reads the llama.cpp vocabulary test vectors: cases.inp holds the
// strings, each followed by a line "__ggml_vocab_test__"; cases.out holds
// one line of space-separated ids per string.
func readCases(t *testing.T) (inputs []string, want [][]int32) {
	t.Helper()
	inp, err := os.ReadFile(testdata.Path(t, "llama3", "cases.inp"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(testdata.Path(t, "llama3", "cases.out"))
	if err != nil {
		t.Fatal(err)
	}
	const sep = "\n__ggml_vocab_test__\n"
	if !strings.HasSuffix(string(inp), sep) {
		t.Fatalf("cases.inp does not end with %q", sep)
	}
	inputs = strings.Split(strings.TrimSuffix(string(inp), sep), sep)
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(inputs) {
		t.Fatalf("%d inputs but %d outputs", len(inputs), len(lines))
	}
	for i, l := range lines {
		var ids []int32
		for _, f := range strings.Fields(l) {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("cases.out line %d: %v", i+1, err)
			}
			ids = append(ids, int32(n))
		}
		want = append(want, ids)
	}
	return inputs, want
}

func TestLlama3Cases(t *testing.T) {
	tok := loadLlama3(t)
	inputs, want := readCases(t)
	if len(inputs) != 46 {
		t.Errorf("%d cases, want 46", len(inputs))
	}
	for i, in := range inputs {
		got := tok.Encode(in, EncodeOptions{})
		if !equalIDs(got, want[i]) {
			t.Errorf("case %d %q:\n got %v\nwant %v", i, in, got, want[i])
		}
	}
}

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestLlama3Vocabulary(t *testing.T) {
	tok := loadLlama3(t)
	if tok.VocabSize() != 128256 {
		t.Errorf("VocabSize = %d, want 128256", tok.VocabSize())
	}
	if tok.BOS() != 128000 || tok.EOT() != 128009 {
		t.Errorf("BOS %d, EOT %d; want 128000, 128009", tok.BOS(), tok.EOT())
	}
	if got := tok.EOS(); !equalIDs(got, []int32{128001, 128008, 128009}) {
		t.Errorf("EOS = %v, want [128001 128008 128009]", got)
	}
	for id, want := range map[int32]bool{128001: true, 128008: true, 128009: true, 128000: false, 13: false} {
		if tok.IsEOS(id) != want {
			t.Errorf("IsEOS(%d) = %v", id, !want)
		}
	}
	for name, want := range map[string]int32{
		BeginOfText: 128000, EndOfText: 128001, StartHeaderID: 128006, EndHeaderID: 128007, EOTID: 128009,
		"<|reserved_special_token_250|>": 128255,
	} {
		if id, ok := tok.SpecialID(name); !ok || id != want {
			t.Errorf("SpecialID(%s) = %d, %v; want %d", name, id, ok, want)
		}
	}
	if !tok.IsSpecial(128000) || !tok.IsSpecial(128255) || tok.IsSpecial(127999) || tok.IsSpecial(-1) || tok.IsSpecial(128256) {
		t.Error("IsSpecial disagrees with the special range 128000..128255")
	}
}

func TestLlama3Special(t *testing.T) {
	tok := loadLlama3(t)
	text := "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
	got := tok.Encode(text, EncodeOptions{AllowSpecial: true, AddBOS: true})
	want := []int32{128000, 128006, 882, 128007, 271, 13347, 128009}
	if !equalIDs(got, want) {
		t.Errorf("with AllowSpecial: %v, want %v", got, want)
	}
	plain := tok.Encode(text, EncodeOptions{})
	for _, id := range plain {
		if tok.IsSpecial(id) {
			t.Fatalf("without AllowSpecial the encoding %v holds special id %d", plain, id)
		}
	}
	for _, ids := range [][]int32{got, plain} {
		dec, err := tok.Decode(ids)
		if err != nil {
			t.Fatal(err)
		}
		if want := text; ids[0] == 128000 {
			want = BeginOfText + text
			if dec != want {
				t.Errorf("Decode = %q, want %q", dec, want)
			}
		} else if dec != want {
			t.Errorf("Decode = %q, want %q", dec, want)
		}
	}
	if _, err := tok.Decode([]int32{1, 128256}); err == nil || !strings.Contains(err.Error(), "128256 out of range") {
		t.Errorf("Decode of an out-of-range id: %v", err)
	}
	if _, err := tok.Decode([]int32{-1}); err == nil {
		t.Error("Decode of -1 succeeded")
	}
}

// TestTiktokenMatchesJSON writes the vocabulary as a tokenizer.model and
// checks that it encodes like the tokenizer.json it came from.
func TestTiktokenMatchesJSON(t *testing.T) {
	js := loadLlama3(t)
	var b strings.Builder
	for id := range int32(128000) {
		s, _ := js.Token(id)
		fmt.Fprintf(&b, "%s %d\n", base64.StdEncoding.EncodeToString([]byte(s)), id)
	}
	path := filepath.Join(t.TempDir(), "tokenizer.model")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	tk, err := LoadTiktoken(path)
	if err != nil {
		t.Fatal(err)
	}
	viaLoad, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if tk.VocabSize() != js.VocabSize() || tk.BOS() != js.BOS() || tk.EOT() != js.EOT() || !equalIDs(tk.EOS(), js.EOS()) {
		t.Errorf("tokenizer.model: vocab %d, BOS %d, EOT %d, EOS %v; tokenizer.json: %d, %d, %d, %v",
			tk.VocabSize(), tk.BOS(), tk.EOT(), tk.EOS(), js.VocabSize(), js.BOS(), js.EOT(), js.EOS())
	}
	// Llama 3.1 names the special tokens that 3.0 left reserved.
	for name, want := range map[string]int32{EOMID: 128008, PythonTag: 128010, "<|finetune_right_pad_id|>": 128004, "<|reserved_special_token_2|>": 128005, "<|reserved_special_token_247|>": 128255} {
		if id, ok := tk.SpecialID(name); !ok || id != want {
			t.Errorf("tokenizer.model SpecialID(%s) = %d, %v; want %d", name, id, ok, want)
		}
	}
	inputs, _ := readCases(t)
	inputs = append(inputs, randomText(7, 200_000), "<|begin_of_text|>x<|eot_id|><|start_header_id|>")
	for _, in := range inputs {
		for _, opts := range []EncodeOptions{{}, {AllowSpecial: true, AddBOS: true}} {
			a, b, c := js.Encode(in, opts), tk.Encode(in, opts), viaLoad.Encode(in, opts)
			if !equalIDs(a, b) || !equalIDs(a, c) {
				t.Errorf("%q %+v: tokenizer.json %v, tokenizer.model %v, Load %v", clip(in), opts, clip32(a), clip32(b), clip32(c))
			}
		}
	}
}

func clip32(ids []int32) []int32 {
	if len(ids) > 20 {
		return ids[:20]
	}
	return ids
}

func TestLlama3RoundTrip(t *testing.T) {
	tok := loadLlama3(t)
	inputs, _ := readCases(t)
	inputs = append(inputs, randomText(3, 100_000), strings.Repeat(" ", 5000)+"x", strings.Repeat("ab", 3000), "\xff\xfe\x80 invalid \xc3")
	for _, in := range inputs {
		for _, opts := range []EncodeOptions{{}, {AllowSpecial: true}} {
			ids := tok.Encode(in, opts)
			out, err := tok.Decode(ids)
			if err != nil || out != in {
				t.Errorf("Decode(Encode(%q, %+v)) = %q, %v", clip(in), opts, clip(out), err)
			}
		}
	}
}

// TestMergeHeapMatchesScan checks the heap merge used for long pre-tokens
// against the rescanning merge used for short ones.
func TestMergeHeapMatchesScan(t *testing.T) {
	for name, tok := range testBPEs(t) {
		r := rand.New(rand.NewPCG(5, 5))
		alphabet := []string{"a", "b", "e", "r", "t", "h", "in", "the", " ", "  ", "é", "🦙", "\n", "1"}
		for range 300 {
			var b strings.Builder
			for range 1 + r.IntN(120) {
				b.WriteString(alphabet[r.IntN(len(alphabet))])
			}
			piece := b.String()
			var w mergeWork
			heapIDs := tok.mergePieceHeap(nil, piece, &w)
			var scanIDs []int32
			if len(piece) <= heapThreshold {
				scanIDs = tok.mergePiece(nil, piece, &w)
			} else {
				scanIDs = scanMerge(tok, piece)
			}
			if !equalIDs(heapIDs, scanIDs) {
				t.Fatalf("%s: %q: heap %v, scan %v", name, piece, heapIDs, scanIDs)
			}
		}
	}
}

// scanMerge is the rescanning merge without the length cut-over.
func scanMerge(tok *BPE, piece string) []int32 {
	var ids []int32
	for i := range len(piece) {
		ids = append(ids, tok.byteIDs[piece[i]])
	}
	for {
		best, bestRank, into := -1, uint32(noRank), int32(0)
		for i := 0; i+1 < len(ids); i++ {
			if r, m := tok.rank(ids[i], ids[i+1]); r < bestRank {
				best, bestRank, into = i, r, m
			}
		}
		if best < 0 {
			return ids
		}
		ids[best] = into
		ids = append(ids[:best+1], ids[best+2:]...)
	}
}

func TestConcurrentEncode(t *testing.T) {
	for name, tok := range testBPEs(t) {
		text := randomText(11, 50_000)
		want := tok.Encode(text, EncodeOptions{})
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if got := tok.Encode(text, EncodeOptions{}); !equalIDs(got, want) {
					t.Errorf("%s: concurrent Encode gave a different result", name)
				}
			}()
		}
		wg.Wait()
	}
}

// testBPEs returns the small test vocabulary and, when the shared test data
// is present, Llama 3's, by name.
func testBPEs(t *testing.T) map[string]*BPE {
	t.Helper()
	toks := map[string]*BPE{"small": smallBPE(t)}
	if testdata.Find() == "" {
		t.Log("shared test data not found: testing the small vocabulary only")
		return toks
	}
	toks["llama3"] = loadLlama3(t)
	return toks
}
