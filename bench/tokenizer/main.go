// Command tokenizer measures the encode throughput of turnwise's Llama 3
// tokenizer on generated mixed text; run.sh runs it side by side with
// OpenAI's tiktoken.
//
//	tokenizer gen -o FILE [-mb 4] [-seed 1]
//	tokenizer run -text FILE [-tokenizer tokenizer.json] [-runs 5]
//
// gen writes deterministic mixed text: English-like prose, source code,
// numbers, several scripts, emoji and runs of whitespace. run prints the
// median MB/s over the runs and the number of tokens.
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/turnwise/turnwise/internal/outfile"
	"github.com/turnwise/turnwise/internal/testdata"
	"github.com/turnwise/turnwise/tokenizer"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: tokenizer gen|run [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "gen":
		err = gen(os.Args[2:])
	case "run":
		err = run(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q (want gen or run)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tokenizer bench:", err)
		os.Exit(1)
	}
}

func gen(args []string) error {
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	out := fs.String("o", "", "output file")
	mb := fs.Float64("mb", 4, "size in MB")
	seed := fs.Uint64("seed", 1, "random seed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("gen: -o is required")
	}
	return outfile.WriteFile(*out, []byte(MixedText(*seed, int(*mb*1e6))), 0o644)
}

func run(args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	textPath := fs.String("text", "", "text file to encode")
	tokPath := fs.String("tokenizer", "", "Llama 3 tokenizer.json or tokenizer.model (default: the shared test data's)")
	runs := fs.Int("runs", 5, "timed runs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *tokPath == "" {
		d := testdata.Find()
		if d == "" {
			return fmt.Errorf("run: no -tokenizer given and no shared test data found")
		}
		*tokPath = filepath.Join(d, "llama3", "tokenizer.json")
	}
	data, err := os.ReadFile(*textPath)
	if err != nil {
		return err
	}
	tok, err := tokenizer.Load(*tokPath)
	if err != nil {
		return err
	}
	text := string(data)
	n := len(tok.Encode(text, tokenizer.EncodeOptions{})) // warm-up
	var rates []float64
	for range *runs {
		runtime.GC()
		start := time.Now()
		n = len(tok.Encode(text, tokenizer.EncodeOptions{}))
		rates = append(rates, float64(len(text))/1e6/time.Since(start).Seconds())
	}
	slices.Sort(rates)
	fmt.Printf("%.2f %d\n", rates[len(rates)/2], n)
	return nil
}

// MixedText returns about n bytes of deterministic mixed text.
func MixedText(seed uint64, n int) string {
	g := &textGen{r: rand.New(rand.NewPCG(seed, 0x7e57))}
	for g.b.Len() < n {
		switch x := g.r.IntN(100); {
		case x < 55:
			g.prose()
		case x < 75:
			g.code()
		case x < 83:
			g.numbers()
		case x < 95:
			g.unicode()
		default:
			g.b.WriteString(strings.Repeat(g.pick(" ", "\t", "\n", "  \n"), 1+g.r.IntN(12)))
		}
		g.b.WriteString(g.pick("\n", "\n\n", " ", "\n\n\n"))
	}
	return g.b.String()
}

type textGen struct {
	r *rand.Rand
	b strings.Builder
}

func (g *textGen) pick(s ...string) string { return s[g.r.IntN(len(s))] }

// word makes an English-like word from syllables.
func (g *textGen) word() string {
	onsets := []string{"", "b", "c", "d", "f", "g", "h", "l", "m", "n", "p", "r", "s", "t", "w", "th", "st", "pr", "tr", "ch", "sh", "gr", "pl"}
	vowels := []string{"a", "e", "i", "o", "u", "ea", "ou", "ai", "ee", "io"}
	codas := []string{"", "", "n", "r", "s", "t", "nd", "ng", "st", "ll", "ck", "rt", "ss"}
	var w strings.Builder
	for range 1 + g.r.IntN(3) {
		w.WriteString(g.pick(onsets...) + g.pick(vowels...) + g.pick(codas...))
	}
	return w.String()
}

func (g *textGen) prose() {
	common := []string{"the", "of", "and", "to", "in", "is", "that", "it", "was", "for", "on", "with", "as", "be", "at", "by", "this", "from", "or", "which"}
	for range 5 + g.r.IntN(25) {
		w := g.word()
		if g.r.IntN(2) == 0 {
			w = g.pick(common...)
		}
		if g.r.IntN(10) == 0 {
			w = strings.ToUpper(w[:1]) + w[1:]
		}
		switch g.r.IntN(20) {
		case 0:
			w += "'s"
		case 1:
			w += g.pick("n't", "'ll", "'ve", "'re")
		}
		g.b.WriteString(w)
		g.b.WriteString(g.pick(" ", " ", " ", " ", " ", ", ", "; ", " (", ") ", " \"", "\" ", " - "))
	}
	g.b.WriteString(g.pick(".", "!", "?", "...", ":"))
}

func (g *textGen) code() {
	ident := func() string {
		w := g.word()
		if g.r.IntN(2) == 0 {
			w += strings.ToUpper(g.word()[:1]) + g.word()
		}
		if g.r.IntN(4) == 0 {
			w += "_" + g.word()
		}
		return w
	}
	indent := strings.Repeat(g.pick("\t", "    ", "  "), g.r.IntN(4))
	for range 1 + g.r.IntN(6) {
		g.b.WriteString(indent)
		switch g.r.IntN(6) {
		case 0:
			fmt.Fprintf(&g.b, "func %s(%s %s) (%s, error) {", ident(), ident(), g.pick("int", "string", "[]byte", "*Config"), g.pick("int", "bool"))
		case 1:
			fmt.Fprintf(&g.b, "for (int %s = 0; %s < %d; ++%s) { %s[%s] += %s; }", "i", "i", g.r.IntN(1000), "i", ident(), "i", ident())
		case 2:
			fmt.Fprintf(&g.b, "if %s.%s(%q) != nil && %s >= %d {", ident(), ident(), g.word(), ident(), g.r.IntN(100))
		case 3:
			fmt.Fprintf(&g.b, "%s = {\"%s\": [%d, %d], '%s': None}  # %s", ident(), ident(), g.r.IntN(99), g.r.IntN(99), ident(), g.word())
		case 4:
			fmt.Fprintf(&g.b, "<div class=\"%s\"><a href=\"/%s/%s.html\">%s</a></div>", ident(), g.word(), ident(), g.word())
		default:
			fmt.Fprintf(&g.b, "return %s->%s(%s, &%s) || !%s; // %s", ident(), ident(), ident(), ident(), ident(), g.word())
		}
		g.b.WriteString("\n")
	}
}

func (g *textGen) numbers() {
	for range 1 + g.r.IntN(8) {
		switch g.r.IntN(5) {
		case 0:
			fmt.Fprintf(&g.b, "%d", g.r.Int64N(1e12))
		case 1:
			fmt.Fprintf(&g.b, "%.4f", g.r.Float64()*1000)
		case 2:
			fmt.Fprintf(&g.b, "%d-%02d-%02d", 1900+g.r.IntN(200), 1+g.r.IntN(12), 1+g.r.IntN(28))
		case 3:
			fmt.Fprintf(&g.b, "0x%08X", g.r.Uint32())
		default:
			fmt.Fprintf(&g.b, "%d,%03d.%02d", g.r.IntN(999), g.r.IntN(1000), g.r.IntN(100))
		}
		g.b.WriteString(g.pick(" ", ", ", "\t", " | "))
	}
}

// unicode writes words in other scripts, built from ranges of letters.
func (g *textGen) unicode() {
	ranges := [][2]rune{
		{'à', 'ÿ'},         // accented Latin
		{'а', 'я'},         // Cyrillic
		{'α', 'ω'},         // Greek
		{'一', '龥'},         // CJK ideographs
		{'ぁ', 'ゖ'},         // Hiragana
		{'ا', 'ي'},         // Arabic
		{'가', '힣'},         // Hangul
		{0x1F600, 0x1F64F}, // emoji
	}
	rg := ranges[g.r.IntN(len(ranges))]
	for range 1 + g.r.IntN(10) {
		for range 1 + g.r.IntN(6) {
			g.b.WriteRune(rg[0] + rune(g.r.IntN(int(rg[1]-rg[0]+1))))
		}
		g.b.WriteString(g.pick(" ", " ", "，", "。", ", ", "\u00a0", "\u3000"))
	}
}
