package llama_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/gguf"
	"github.com/turnwise/turnwise/internal/testdata"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/tokenizer"
)

// storiesText is the documented greedy continuation of BOS by stories260K.
const storiesText = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. " +
	"One day, she saw a big, red ball. She wanted to play with it, but it was too high."

// greedyStories decodes stories260K greedily from BOS on b and returns the
// text.
func greedyStories(t *testing.T, b engine.Backend, dt engine.DType) string {
	t.Helper()
	path := testdata.Path(t, "stories260K", "stories260K.gguf")
	m, err := llama.LoadGGUF(b, path, dt)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUFMetadata(f.Meta)
	if err != nil {
		t.Fatal(err)
	}
	gen, err := m.Generate([][]int32{{m.Config.BOS}}, llama.GenerateOptions{MaxNew: 80, Stop: m.Config.EOS})
	if err != nil {
		t.Fatal(err)
	}
	for i, lp := range gen[0].LogProb {
		if !(lp <= 0) {
			t.Fatalf("log-probability of token %d = %g", i, lp)
		}
	}
	text, err := tok.Decode(gen[0].Tokens)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

func TestStories260KGreedyCPU(t *testing.T) {
	got := greedyStories(t, cpu.New(cpu.Options{}), engine.F32)
	if !strings.HasPrefix(got, storiesText) {
		t.Errorf("greedy decoding from BOS:\n got %q\nwant %q…", got, storiesText)
	}
}

// TestGenerateN checks best-of-N: greedy continuations of a forked cache all
// equal the single greedy continuation, and sampled ones are reproducible
// from the seed and differ from each other.
func TestGenerateN(t *testing.T) {
	path := testdata.Path(t, "stories260K", "stories260K.gguf")
	b := cpu.New(cpu.Options{})
	m, err := llama.LoadGGUF(b, path, engine.F32)
	if err != nil {
		t.Fatal(err)
	}
	prompt := []int32{1, 403, 407, 261, 378}
	one, err := m.Generate([][]int32{prompt}, llama.GenerateOptions{MaxNew: 12})
	if err != nil {
		t.Fatal(err)
	}
	many, err := m.GenerateN(prompt, 3, llama.GenerateOptions{MaxNew: 12})
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range many {
		if fmt.Sprint(g.Tokens) != fmt.Sprint(one[0].Tokens) {
			t.Errorf("greedy fork %d: %v, single: %v", i, g.Tokens, one[0].Tokens)
		}
	}
	opt := llama.GenerateOptions{MaxNew: 12, Seed: 9, Sample: engine.SampleParams{Temperature: 1.2}}
	s1, err := m.GenerateN(prompt, 4, opt)
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := m.GenerateN(prompt, 4, opt)
	distinct := map[string]bool{}
	for i := range s1 {
		if fmt.Sprint(s1[i].Tokens) != fmt.Sprint(s2[i].Tokens) {
			t.Errorf("seeded sample %d differs between runs", i)
		}
		distinct[fmt.Sprint(s1[i].Tokens)] = true
	}
	if len(distinct) < 2 {
		t.Errorf("4 samples at temperature 1.2 are all identical: %v", s1[0].Tokens)
	}
}

// TestGenerationMatchesTraining checks that generation, with its KV cache,
// and the training forward run the same layers: the log-probability
// Generate and GenerateN report for each token equals the one ForwardTrain
// computes for the same token after the same prefix (f32, within 1e-5), with
// the base model and with a LoRA adapter, for several sequences and for one
// (whose decoding steps compute q, k, v and gate, up as one GEMM each, and
// q's and k's RoPE as one op).
func TestGenerationMatchesTraining(t *testing.T) {
	for _, withLoRA := range []bool{false, true} {
		t.Run(fmt.Sprintf("lora=%v", withLoRA), func(t *testing.T) {
			b := cpu.New(cpu.Options{Threads: 2})
			m, err := llama.NewRandom(b, tinyConfig(false), engine.F32, 0.5, 21)
			if err != nil {
				t.Fatal(err)
			}
			var ad *llama.Adapter
			if withLoRA {
				if ad, err = m.NewAdapter(llama.LoRAConfig{Rank: 3, Alpha: 6, Targets: llama.AllProjections}, 4); err != nil {
					t.Fatal(err)
				}
				randomizeB(b, ad, rand.New(rand.NewPCG(8, 9)))
			}
			prompts := [][]int32{{1, 5, 9, 13}, {1, 30}, {1, 7, 8, 20, 21, 22, 3}}
			opt := llama.GenerateOptions{MaxNew: 9, Seed: 3, Sample: engine.SampleParams{Temperature: 1}, Adapter: ad}
			gens, err := m.Generate(prompts, opt)
			if err != nil {
				t.Fatal(err)
			}
			forked, err := m.GenerateN(prompts[2], 2, opt)
			if err != nil {
				t.Fatal(err)
			}
			one, err := m.Generate(prompts[:1], opt)
			if err != nil {
				t.Fatal(err)
			}
			gens = append(append(gens, forked...), one...)
			prompts = append(prompts, prompts[2], prompts[2], prompts[0])

			// Every prompt with its continuation, packed into one batch; each
			// generated token is the target of the position before it.
			var bt llama.Batch
			var at []int // batch row predicting each sequence's first generated token
			for i, g := range gens {
				at = append(at, len(bt.IDs)+len(prompts[i])-1)
				seq := append(slices.Clone(prompts[i]), g.Tokens...)
				for j := range seq {
					tg := int32(-1)
					if j >= len(prompts[i])-1 && j+1 < len(seq) {
						tg = seq[j+1]
					}
					bt.IDs, bt.Targets = append(bt.IDs, seq[j]), append(bt.Targets, tg)
				}
				bt.Lens = append(bt.Lens, len(seq))
			}
			lp := logProbs(t, m, bt, ad)
			compared := 0
			for i, g := range gens {
				if len(g.Tokens) == 0 {
					t.Fatalf("sequence %d generated nothing", i)
				}
				for j, want := range g.LogProb {
					got := lp[at[i]+j]
					if d := math.Abs(float64(got - want)); !(d <= 1e-5) {
						t.Errorf("sequence %d token %d (%d): training forward %v, generation %v (off by %.2g)", i, j, g.Tokens[j], got, want, d)
					}
					compared++
				}
			}
			if compared < len(gens)*2 {
				t.Errorf("compared %d log-probabilities over %d sequences; the test needs longer continuations", compared, len(gens))
			}
		})
	}
}
