package tokenizer

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// smallJSON builds a tokenizer.json for a small byte-level BPE: the 256 byte
// tokens, the given merges (in byte-level spelling, "left right") with their
// results, and the 256 Llama 3.1 special tokens after them.
func smallJSON(t testing.TB, merges []string) []byte {
	t.Helper()
	vocab := map[string]int{}
	for b := range 256 {
		vocab[string(byteRunes[b])] = b
	}
	for _, m := range merges {
		a, b, _ := strings.Cut(m, " ")
		if _, ok := vocab[a+b]; !ok {
			vocab[a+b] = len(vocab)
		}
	}
	var added []map[string]any
	for k, name := range Llama31SpecialTokens() {
		added = append(added, map[string]any{"id": len(vocab) + k, "content": name, "special": true})
	}
	doc := map[string]any{
		"version":      "1.0",
		"added_tokens": added,
		"normalizer":   nil,
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": llama3Pattern}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false},
		}},
		"decoder": map[string]any{"type": "ByteLevel"},
		"model": map[string]any{
			"type": "BPE", "vocab": vocab, "merges": merges, "ignore_merges": true,
			"byte_fallback": false, "continuing_subword_prefix": nil, "end_of_word_suffix": nil,
		},
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// smallMerges is a merge list for smallJSON: a few English pieces.
var smallMerges = []string{
	"Ġ t", "h e", "i n", "Ġ a", "e r", "Ġt he", "o n", "Ġ s", "r e", "in g", "Ġ w", "o r", "Ġw or",
	"l d", "Ġwor ld", "n d", "Ġa nd", "Ġ Ġ", "ĠĠ ĠĠ", "l l", "e l", "h el", "hel l", "o o", "Ġ r",
}

func smallBPE(t testing.TB) *BPE {
	t.Helper()
	tok, err := ParseJSON(smallJSON(t, smallMerges))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// words and snippets feed randomText.
var (
	words    = strings.Fields("the of and to in is was he for it with as his on be at by I this had not are but from or have an they which one you were her all she there would their we him been has when who will more no if out so said what up its about into than them can only other new some could time these two may then do first any my now such like our over man me even most made after also did many before must through back years where much your way well down should because each just those people Mr how too little state good very make world still own see men work long get here between both life being under never day same another know while last might us great old year off come since against go came right used take three")
	snippets = []string{
		"func (t *BPE) Encode(text string) []int32 {\n\treturn nil\n}\n",
		"for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
		"  if x == 3.14159:\n      print(f\"{x!r:>10}\")\n",
		"SELECT id, name FROM users WHERE age >= 21;",
		"<div class=\"row\"><span>Hello</span></div>",
		"Ünïcödé façade, naïve café — “quotes” and ‘more’… ½ ¼ €42",
		"日本語のテキストと中文文本，한국어 텍스트。",
		"Привет, мир! Γειά σου Κόσμε! مرحبا بالعالم שלום עולם",
		"🦙🚀😀👍🏽 👨‍👩‍👧‍👦 ✅ ❤️",
		"I've 'told he's there, 'RE you sure? 'M not sure I'll make it, 'D you",
		"\t\t\n\n   \r\n \u00a0\u3000 ",
		"<|eot_id|><|start_header_id|>user<|end_header_id|>",
		"1234567890 0.5 -17 1e-9 0xFF 3,000,000",
	}
)

// randomText returns about n bytes of mixed text: words, numbers,
// punctuation, code, several scripts, emoji and runs of whitespace.
func randomText(seed uint64, n int) string {
	r := rand.New(rand.NewPCG(seed, 1))
	var b strings.Builder
	for b.Len() < n {
		switch x := r.IntN(100); {
		case x < 70:
			w := words[r.IntN(len(words))]
			if r.IntN(8) == 0 {
				w = strings.ToUpper(w[:1]) + w[1:]
			}
			b.WriteString(w)
		case x < 78:
			fmt.Fprintf(&b, "%d", r.IntN(1000000))
		case x < 85:
			b.WriteString([]string{".", ",", "!", "?", ";", ":", "(", ")", "\"", "'", "-", "..."}[r.IntN(12)])
		case x < 92:
			b.WriteString(snippets[r.IntN(len(snippets))])
		case x < 96:
			b.WriteString(strings.Repeat(" ", 1+r.IntN(6)))
		default:
			b.WriteString([]string{"\n", "\n\n", "\t", "\r\n"}[r.IntN(4)])
		}
		if r.IntN(5) != 0 {
			b.WriteByte(' ')
		}
	}
	return b.String()
}
