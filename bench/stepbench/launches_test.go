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
// step's projections), and the classifier's depend on the tokens only
// through the number of LogitChunk chunks, so a step of T tokens launches
// what the 256-token step does plus (T/256 − 1) times what a further chunk
// adds. That chunk's launches are counted on one and two layers (512
// tokens against 256), where they must agree: a layer whose launches grew
// with the tokens would make them differ. It logs the counts and checks
// that a decoding step is one host call once recorded.
func TestLaunches(t *testing.T) {
	c := llama.Config{Dim: 64, Layers: 32, Heads: 8, KVHeads: 2, HeadDim: 8, FFN: 96, Vocab: 512,
		NormEps: 1e-5, RopeTheta: 500000, MaxSeqLen: 1024, BOS: 1, EOS: []int32{2}}
	b, err := cuda.New(cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() }) // after the models' (the last cleanup registered runs first)
	rng := rand.New(rand.NewPCG(1, 2))
	m, n := loraStepLaunches(t, b, c, rng, 256)
	step := n[256]
	var perChunk [2]int64
	for i := range perChunk {
		small := c
		small.Layers = i + 1
		_, n := loraStepLaunches(t, b, small, rng, 256, 512)
		perChunk[i] = n[512] - n[256]
	}
	if step <= 0 || perChunk[0] <= 0 || perChunk[0] != perChunk[1] {
		t.Errorf("launches per LoRA step: %d at 256 tokens; a further %d-token chunk adds %d on one layer, %d on two: want more than none, the same on both",
			step, llama.LogitChunk, perChunk[0], perChunk[1])
	}
	t.Logf("LoRA step: %d launches at 256 tokens, %d more per further %d-token chunk: %d at 2048 tokens",
		step, perChunk[0], llama.LogitChunk, step+7*perChunk[0])
	for _, batch := range []int{1, 4} {
		prompts := make([][]int32, batch)
		for i := range prompts {
			prompts[i] = randomBatch(rng, c.Vocab, 16).IDs
		}
		var pre, dec bench.Generation
		if _, _, err := generate(m, prompts, 8, 1, &pre, &dec); err != nil {
			t.Fatal(err)
		}
		t.Logf("batch %d: prefill %.0f launches; a decoding step %.1f launches in %.2f host calls", batch, pre.Launches, dec.Launches, dec.Calls)
		// The profiled decoding steps launch one by one what the replays
		// launch at once; the first of the timed ones also zeroes what it
		// takes first, so the profile's count per step is at most theirs.
		checkProfile(t, fmt.Sprintf("decoding at batch %d", batch), dec.Profile, 0, "Attention", "Sample", "Gemm")
		if got := dec.Profile.Ops; dec.Profile.Steps != 8 || sumLaunches(got) > dec.Launches+1e-9 || sumLaunches(got) < dec.Launches-1 {
			t.Errorf("decoding at batch %d: profile of %d steps with %.2f launches each, want 8 steps of about the %.2f counted",
				batch, dec.Profile.Steps, sumLaunches(got), dec.Launches)
		}
		// The sampling of the prefill's logits and the first of the 8
		// steps run plainly (that step also zeroes the buffers it is the
		// first to take), the other 7 are replayed at one call each.
		if dec.Calls > dec.Launches/4 {
			t.Errorf("batch %d: %.2f host calls per decoding step of %.1f launches: not replayed", batch, dec.Calls, dec.Launches)
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
