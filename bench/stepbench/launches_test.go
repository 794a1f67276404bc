//go:build cuda || cudaemu

package stepbench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/bench"
	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cuda"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/optim"
	"github.com/turnwise/turnwise/trainer"
)

// TestLaunches counts the launches of a LoRA step (rank 16 on every
// projection) and of a decoding step at batch 1 and 4, on a model of
// Llama-3.1-8B's structure — 32 layers, grouped-query attention 4:1, an
// untied classifier — at toy widths: the launches do not depend on the
// widths (except that our GEMM launches twice for a GEMM it splits along
// k, one of few output tiles and k ≥ 1024: none at these widths; at
// Llama's, the LoRA GEMMs, the classifier's input gradient and a decoding
// step's projections).
//
// The training step is counted on all 32 layers, at 64 tokens: its
// launches depend on the tokens only through the number of LogitChunk
// chunks of the classifier (64 and 256 tokens must launch the same), so a
// step of T tokens launches what the 256-token step does plus (T/256 − 1)
// times what a further chunk adds. That chunk's launches are counted on one
// and two layers (512 tokens against 256), where they must agree: a layer
// whose launches grew with the tokens would make them differ. Decoding
// launches the same for every layer, so it is counted on one, two and three
// layers and carried to 32: n(32) = n(1) + 31·(n(2) − n(1)), where
// n(3) − n(2) must equal n(2) − n(1). It logs the counts and checks that a
// decoding step is one host call once recorded.
func TestLaunches(t *testing.T) {
	c := llama.Config{Dim: 64, Layers: 32, Heads: 8, KVHeads: 2, HeadDim: 8, FFN: 96, Vocab: 512,
		NormEps: 1e-5, RopeTheta: 500000, MaxSeqLen: 1024, BOS: 1, EOS: []int32{2}}
	b, err := cuda.New(cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() }) // after the models' (the last cleanup registered runs first)
	rng := rand.New(rand.NewPCG(1, 2))
	batches := []int{1, 4}
	prompts := make([][][]int32, len(batches))
	for i, batch := range batches {
		for range batch {
			prompts[i] = append(prompts[i], randomBatch(rng, c.Vocab, 16).IDs)
		}
	}

	// The step's launches on all 32 layers, at 64 tokens: a step launches
	// the same at any length within one LogitChunk, checked below on one
	// and two layers. A step's launches are not quite linear in the layers
	// (the optimizer updates its tensors in groups).
	_, n32 := loraStepLaunches(t, b, c, rng, 64)
	s32 := float64(n32[64])

	// Counted on 1, 2 and 3 layers: the step at 64, 256 and 512 tokens on
	// 1 and 2, then prefill and decoding at each batch on all three.
	var chunk [2]float64
	prefill, decode, calls := make([][3]float64, len(batches)), make([][3]float64, len(batches)), make([][3]float64, len(batches))
	for l := range 3 {
		small := c
		small.Layers = l + 1
		var seqs []int
		if l < 2 {
			seqs = []int{64, 256, 512}
		}
		m, n := loraStepLaunches(t, b, small, rng, seqs...)
		if l < 2 {
			chunk[l] = float64(n[512] - n[256])
			if n[64] != n[256] {
				t.Errorf("%d-layer model: a LoRA step launches %d at 64 tokens, %d at 256: want the same within one %d-token chunk",
					small.Layers, n[64], n[256], llama.LogitChunk)
			}
		}
		for i, batch := range batches {
			var pre, dec bench.Generation
			if _, _, err := generate(m, prompts[i], 8, 1, &pre, &dec); err != nil {
				t.Fatal(err)
			}
			// The profiled decoding steps launch one by one what the
			// replays launch at once; the first of the timed ones also
			// zeroes what it takes first, so the profile's count per step
			// is at most theirs.
			what := fmt.Sprintf("decoding at batch %d, %d-layer model", batch, small.Layers)
			checkProfile(t, what, dec.Profile, 0, "Attention", "Sample", "Gemm")
			if got := dec.Profile.Ops; dec.Profile.Steps != 8 || sumLaunches(got) > dec.Launches+1e-9 || sumLaunches(got) < dec.Launches-1 {
				t.Errorf("%s: profile of %d steps with %.2f launches each, want 8 steps of about the %.2f counted",
					what, dec.Profile.Steps, sumLaunches(got), dec.Launches)
			}
			prefill[i][l], decode[i][l], calls[i][l] = pre.Launches, dec.Launches, dec.Calls
		}
	}
	if s32 <= 0 || chunk[0] <= 0 || chunk[0] != chunk[1] {
		t.Errorf("launches per LoRA step: %v on 32 layers; a further %d-token chunk adds %v on one layer, %v on two: want more than none, the same on both",
			s32, llama.LogitChunk, chunk[0], chunk[1])
	}
	// Decoding launches the same for each layer: carried from 1, 2 and 3
	// layers to 32.
	at32 := func(what string, n [3]float64) float64 {
		t.Helper()
		if d1, d2 := n[1]-n[0], n[2]-n[1]; d1 <= 0 || math.Abs(d2-d1) > 1e-9*n[2] {
			t.Errorf("%s: %v on 1, 2 and 3 layers: want the same more for each layer", what, n)
		}
		return n[0] + float64(c.Layers-1)*(n[1]-n[0])
	}
	t.Logf("LoRA step, %d layers: %.0f launches at 256 tokens, %.0f more per further %d-token chunk: %.0f at 2048 tokens",
		c.Layers, s32, chunk[0], llama.LogitChunk, s32+7*chunk[0])
	for i, batch := range batches {
		what := fmt.Sprintf("batch %d", batch)
		p32, d32, c32 := at32(what+": prefill launches", prefill[i]), at32(what+": launches per decoding step", decode[i]),
			at32(what+": host calls per decoding step", calls[i])
		t.Logf("batch %d, %d layers: prefill %.0f launches; a decoding step %.1f launches in %.2f host calls", batch, c.Layers, p32, d32, c32)
		// The sampling of the prefill's logits and the first of the 8
		// steps run plainly (that step also zeroes the buffers it is the
		// first to take), the other 7 are replayed at one call each.
		if c32 > d32/4 {
			t.Errorf("batch %d: %.2f host calls per decoding step of %.1f launches: not replayed", batch, c32, d32)
		}
	}
}

// loraStepLaunches builds a model of config c on b with rank-16 LoRA on
// every projection and counts the launches of one training step at each of
// seqs tokens, checking each step's op profile; the model's adapter and
// optimizer state are freed when the test ends.
func loraStepLaunches(t *testing.T, b *cuda.Backend, c llama.Config, rng *rand.Rand, seqs ...int) (*llama.Model, map[int]int64) {
	t.Helper()
	m, err := llama.NewRandom(b, c, engine.BF16, 0.02, 1)
	if err != nil {
		t.Fatal(err)
	}
	ad, err := m.NewAdapter(llama.LoRAEvery(16), 1)
	if err != nil {
		t.Fatal(err)
	}
	tp, err := trainer.NewParams(m, ad, optim.AdamWConfig{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, MaxGradNorm: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tp.Free)
	launches := map[int]int64{}
	for _, seq := range seqs {
		_, n, prof, err := trainSteps(m, ad, tp, randomBatch(rng, c.Vocab, seq), 1)
		if err != nil {
			t.Fatal(err)
		}
		launches[seq] = n
		checkProfile(t, fmt.Sprintf("LoRA step of %d tokens, %d-layer model", seq, c.Layers), prof, float64(n), "Gemm", "AttentionBackward", "AdamWMulti")
	}
	return m, launches
}

// checkProfile checks a step's op profile: present, its ops named, calls
// and times positive and sorted (the most time first), their sum the
// profile's device time and within its wall time, each op in want among
// its ops, extents given for GEMMs and attention, and, when launches > 0,
// the ops' launches summing to it.
func checkProfile(t *testing.T, what string, p *bench.OpProfile, launches float64, want ...string) {
	t.Helper()
	if p == nil || len(p.Ops) == 0 {
		t.Fatalf("%s: no op profile", what)
	}
	sum := 0.0
	for i, o := range p.Ops {
		if o.Op == "" || o.Calls <= 0 || o.Launches < o.Calls || o.Seconds <= 0 {
			t.Errorf("%s: op %d: %+v", what, i, o)
		}
		if (o.Op == "Gemm" || strings.HasPrefix(o.Op, "Attention")) != (o.Extents != "") {
			t.Errorf("%s: op %s with extents %q: want extents for GEMMs and attention only", what, o.Op, o.Extents)
		}
		if i > 0 && o.Seconds > p.Ops[i-1].Seconds {
			t.Errorf("%s: op %d (%s, %v s) after %s (%v s): not the most time first", what, i, o.Op, o.Seconds, p.Ops[i-1].Op, p.Ops[i-1].Seconds)
		}
		sum += o.Seconds
	}
	if math.Abs(sum-p.DeviceS) > 1e-9*sum || p.DeviceS > p.WallS {
		t.Errorf("%s: ops sum to %v s, device time %v s, wall %v s: want the sum, within the wall", what, sum, p.DeviceS, p.WallS)
	}
	for _, w := range want {
		if !slices.ContainsFunc(p.Ops, func(o bench.OpTotal) bool { return o.Op == w }) {
			t.Errorf("%s: no op %s among %d", what, w, len(p.Ops))
		}
	}
	if got := sumLaunches(p.Ops); launches > 0 && got != launches {
		t.Errorf("%s: the profiled ops launched %v, the step %v", what, got, launches)
	}
	t.Logf("%s: %d ops by extents, %.1f%% of %.3f s on the device; most: %s %s %.3f ms", what, len(p.Ops), 100*p.DeviceS/p.WallS, p.WallS,
		p.Ops[0].Op, p.Ops[0].Extents, 1e3*p.Ops[0].Seconds)
}

func sumLaunches(ops []bench.OpTotal) float64 {
	n := 0.0
	for _, o := range ops {
		n += o.Launches
	}
	return n
}
