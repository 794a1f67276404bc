//go:build cuda || cudaemu

package llama_test

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cuda"
	"github.com/turnwise/turnwise/model/llama"
)

// TestStories260KGreedyCUDA decodes stories260K with the CUDA kernels: on the
// CPU emulator under -tags cudaemu, on a GPU under -tags cuda.
func TestStories260KGreedyCUDA(t *testing.T) {
	b, err := cuda.New(cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := greedyStories(t, b, engine.F32)
	if !strings.HasPrefix(got, storiesText) {
		t.Errorf("greedy decoding from BOS:\n got %q\nwant %q…", got, storiesText)
	}
}

// TestDecodeGraphSameTokens decodes with the decoding step recorded and
// replayed (a CUDA graph) and with every op run one by one, on a small
// random model, and wants the same tokens and log-probabilities bit for bit:
// greedy and sampled, one slot and several (one of which stops early, after
// which the steps run plainly), with and without an adapter. It also wants
// a replayed step to count as many launches as a plain one. TW_CUDA_SYNC
// (set by the GPU bundle) is cleared: under it nothing is recorded.
func TestDecodeGraphSameTokens(t *testing.T) {
	t.Setenv("TW_CUDA_SYNC", "")
	c, err := llama.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	type run struct {
		gens     []llama.Generation
		launches int64
	}
	generate := func(noGraphs bool, prompts [][]int32, opt llama.GenerateOptions, adapter bool) run {
		b, err := cuda.New(cuda.Options{NoGraphs: noGraphs})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		m, err := llama.NewRandom(b, c, engine.BF16, 0.1, 5)
		if err != nil {
			t.Fatal(err)
		}
		if adapter {
			lc := llama.LoRAEvery(4)
			if opt.Adapter, err = m.NewAdapter(lc, 6); err != nil {
				t.Fatal(err)
			}
			opt.Adapter.Each(func(name string, x *engine.Tensor) {
				if strings.HasSuffix(name, "lora_B.weight") { // B ≠ 0, so that the adapter counts
					engine.SetF32(b, x, constant(x.Numel(), 0.02))
				}
			})
		}
		before, _ := b.Launches()
		gens, err := m.Generate(prompts, opt)
		if err != nil {
			t.Fatal(err)
		}
		after, _ := b.Launches()
		return run{gens, after - before}
	}
	for _, k := range []struct {
		name    string
		prompts [][]int32
		opt     llama.GenerateOptions
		adapter bool
	}{
		{"greedy/1", [][]int32{{1, 5, 9}}, llama.GenerateOptions{MaxNew: 12}, false},
		{"sampled/3/adapter", [][]int32{{1, 5, 9}, {1, 7}, {3, 3, 3, 3}},
			llama.GenerateOptions{MaxNew: 12, Sample: engine.SampleParams{Temperature: 1, TopP: 0.9}, Seed: 3}, true},
		{"top-k/2", [][]int32{{1, 5, 9}, {2, 4}},
			llama.GenerateOptions{MaxNew: 8, Sample: engine.SampleParams{Temperature: 1.2, TopK: 20, TopP: 0.9}, Seed: 4}, false},
	} {
		t.Run(k.name, func(t *testing.T) {
			plain := generate(true, k.prompts, k.opt, k.adapter)
			// A stop token that one slot draws mid-way, so that the
			// replayed steps give way to plain ones.
			if len(k.prompts) > 1 {
				k.opt.Stop = []int32{plain.gens[1].Tokens[4]}
				plain = generate(true, k.prompts, k.opt, k.adapter)
			}
			graph := generate(false, k.prompts, k.opt, k.adapter)
			for s := range plain.gens {
				p, g := plain.gens[s], graph.gens[s]
				if !slices.Equal(p.Tokens, g.Tokens) || p.Stopped != g.Stopped {
					t.Fatalf("slot %d: replayed steps gave %v (stopped %v), plain ones %v (stopped %v)", s, g.Tokens, g.Stopped, p.Tokens, p.Stopped)
				}
				for i := range p.LogProb {
					if math.Float32bits(p.LogProb[i]) != math.Float32bits(g.LogProb[i]) {
						t.Fatalf("slot %d token %d: log-probability %v replayed, %v plain", s, i, g.LogProb[i], p.LogProb[i])
					}
				}
			}
			if graph.launches != plain.launches {
				t.Errorf("%d launches with replayed steps, %d plain", graph.launches, plain.launches)
			}
		})
	}
}

func constant(n int, v float32) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// TestStackedCUDA runs the comparisons of the stacked layouts with separate
// buffers — an adapter's A matrices (testStackedLoRA), the base weights
// (testStackedWeights), the KV cache's K and V (testCacheApart) — on the
// CUDA kernels.
func TestStackedCUDA(t *testing.T) {
	b, err := cuda.New(cuda.Options{GEMM: "own"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, c := range []struct {
		name string
		test func(*testing.T, engine.Backend)
	}{{"lora", testStackedLoRA}, {"weights", testStackedWeights}, {"cache", testCacheApart}} {
		t.Run(c.name, func(t *testing.T) { c.test(t, b) })
	}
}
