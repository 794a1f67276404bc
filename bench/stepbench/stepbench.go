// Package stepbench measures a whole model: a LoRA training step of a Llama
// configuration with random weights (forward, backward, AdamW on the
// adapters) at several sequence lengths, with and without recomputation —
// tokens per second, model FLOPs utilization, peak device memory — and the
// prefill and decode phases of generation at several batch sizes.
package stepbench

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/turnwise/turnwise/bench"
	"github.com/turnwise/turnwise/bench/target"
	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/optim"
	"github.com/turnwise/turnwise/trainer"
)

// Options say what to measure.
type Options struct {
	Model     string       // preset name (llama.Preset)
	DType     engine.DType // weights and activations
	LoRARank  int          // adapters of this rank on q, k, v, o, gate, up, down
	SeqLens   []int        // one sequence of each length per step
	Recompute []bool       // each step configuration with these settings
	Steps     int          // timed steps per configuration, after one warm-up
	GenBatch  []int        // generation batch sizes (none: no generation)
	Prompt    int          // prompt tokens per sequence
	NewTokens int          // decode steps timed
	GenReps   int          // repetitions of each generation measurement
	Log       io.Writer    // progress lines (nil: silent)
	Seed      uint64       // weights, adapters and tokens
}

// Peak is the arithmetic peak MFU is taken against.
type Peak struct {
	TFLOPs float64
	Name   string
}

// StepName is the name of a LoRA step result; PyTorch's peer
// (bench/peers/torch_peers.py) names its results the same way.
func StepName(model string, seqLen, rank int, recompute bool) string {
	n := fmt.Sprintf("lora_step/%s/T%d/r%d", model, seqLen, rank)
	if recompute {
		n += "/recompute"
	}
	return n
}

// GenerationName is the name of a generation result (phase "prefill" or
// "decode"), shared with the PyTorch peer like StepName.
func GenerationName(phase, model string, batch, prompt, newTokens int) string {
	if phase == "prefill" {
		return fmt.Sprintf("prefill/%s/b%d/p%d", model, batch, prompt)
	}
	return fmt.Sprintf("decode/%s/b%d/p%d/n%d", model, batch, prompt, newTokens)
}

// FLOPsPerToken is the model arithmetic of one training token of a
// LoRA step on configuration c with rank-r adapters on every projection, for
// sequences of seqLen tokens, and how it is counted. A frozen base costs 4N
// (forward 2N, input gradients 2N: no weight gradients), N the weights that
// multiply activations (the classifier, not the embedding table); the
// adapters 6 per parameter (their weight gradients too); causal attention
// 6·L·H·Dh·T (QKᵀ and PV over the causal half, forward and backward). The
// recomputed forward of --recompute is not model arithmetic and is not
// counted.
func FLOPsPerToken(c llama.Config, r, seqLen int) (float64, string) {
	hd, d := int64(c.HeadDim), int64(c.Dim)
	perLayer := 2*d*int64(c.Heads)*hd + 2*d*int64(c.KVHeads)*hd + 3*d*int64(c.FFN)
	n := int64(c.Layers)*perLayer + int64(c.Vocab)*d
	lora, _ := c.LoRAParams(llama.LoRAConfig{Rank: r, Targets: llama.AllProjections})
	attn := 6 * float64(c.Layers) * float64(c.Heads) * float64(hd) * float64(seqLen)
	total := 4*float64(n) + 6*float64(lora) + attn
	how := fmt.Sprintf("4·N + 6·N_lora + 6·L·H·Dh·T per token: N = %.3g weights that multiply activations (frozen: forward and input gradients only), N_lora = %.3g, attention over the causal half, forward and backward; recomputation not counted",
		float64(n), float64(lora))
	return total, how
}

// Run measures the steps and generation of o on backend b. Memory is
// counted by wrapping b; memInfo (nil: none) reports the device's own
// figures. A configuration that fails (out of memory) is recorded with its
// error and the others still run; only a failure to build the model is
// returned.
func Run(b engine.Backend, memInfo func() (free, total int64, err error), peak Peak, o Options) ([]bench.Step, []bench.Generation, error) {
	c, err := llama.Preset(o.Model)
	if err != nil {
		return nil, nil, err
	}
	tr := target.Track(b)
	defer tr.FreeAll()
	logf := func(format string, a ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, format+"\n", a...)
		}
	}
	t0 := time.Now()
	m, err := llama.NewRandom(tr, c, o.DType, 0.02, o.Seed)
	if err != nil {
		return nil, nil, fmt.Errorf("random %s weights: %w", o.Model, err)
	}
	ad, err := m.NewAdapter(llama.LoRAEvery(o.LoRARank), o.Seed)
	if err != nil {
		return nil, nil, err
	}
	// The adapter's parameters with AdamW, its gradients views of the
	// optimizer's, as every trainer registers them.
	tp, err := trainer.NewParams(m, ad, optim.AdamWConfig{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, MaxGradNorm: 1}, nil)
	if err != nil {
		return nil, nil, err
	}
	defer tp.Free()
	if err := b.Sync(); err != nil {
		return nil, nil, err
	}
	initS := time.Since(t0).Seconds()
	logf("built %s (%s, %s) with rank-%d adapters in %.1f s", o.Model, o.DType, bench.FormatBytes(tr.InUse()), o.LoRARank, initS)

	rng := rand.New(rand.NewPCG(o.Seed, 7))
	var steps []bench.Step
	for _, seq := range o.SeqLens {
		for _, rc := range o.Recompute {
			s := bench.Step{Name: StepName(o.Model, seq, o.LoRARank, rc), Impl: bench.Ours, Model: o.Model,
				Seqs: 1, SeqLen: seq, Tokens: seq, LoRARank: o.LoRARank, Recompute: rc, InitS: initS,
				PeakWhat: "the most bytes held at once through the backend's allocator during the steps: weights, adapters, their gradients and AdamW state, activations and the activation pool's cache (kernel scratch space not included)"}
			s.FLOPsPerToken, s.FLOPCount = FLOPsPerToken(c, o.LoRARank, seq)
			m.Recompute = rc
			m.TrimPool()
			tr.ResetPeak()
			runs, launches, prof, err := trainSteps(m, ad, tp, randomBatch(rng, c.Vocab, seq), o.Steps)
			if launches >= 0 && err == nil {
				s.Launches = float64(launches)
			}
			s.Profile = prof
			if err != nil {
				s.Error = err.Error()
				logf("%s: %v", s.Name, err)
				steps = append(steps, s)
				continue
			}
			s.SetRuns(runs, peak.TFLOPs, peak.Name)
			s.PeakBytes = tr.Peak()
			if memInfo != nil {
				if free, total, err := memInfo(); err == nil {
					s.DeviceUsedBytes = total - free
				}
			}
			logf("%s: %.3f s/step, %.0f tokens/s, %.1f%% MFU, peak %s%s", s.Name, s.Median, s.TokensPerS, 100*s.MFU, bench.FormatBytes(s.PeakBytes),
				brief(s.Profile))
			steps = append(steps, s)
		}
	}
	m.TrimPool()
	var gens []bench.Generation
	for _, batch := range o.GenBatch {
		prompts := make([][]int32, batch)
		for i := range prompts {
			prompts[i] = randomBatch(rng, c.Vocab, o.Prompt).IDs
		}
		pre := bench.Generation{Name: GenerationName("prefill", o.Model, batch, o.Prompt, o.NewTokens), Impl: bench.Ours,
			Model: o.Model, Phase: "prefill", Batch: batch, Prompt: o.Prompt}
		dec := pre
		dec.Name, dec.Phase, dec.NewTokens = GenerationName("decode", o.Model, batch, o.Prompt, o.NewTokens), "decode", o.NewTokens
		preRuns, decRuns, err := generate(m, prompts, o.NewTokens, o.GenReps, &pre, &dec)
		if err != nil {
			pre.Error, dec.Error = err.Error(), err.Error()
		} else {
			pre.SetRuns(preRuns, batch*o.Prompt)
			dec.SetRuns(decRuns, batch*o.NewTokens)
			logf("%s: %.0f tokens/s; %s: %.0f tokens/s, %s launches in %s calls per step%s", pre.Name, pre.TokensPerS, dec.Name, dec.TokensPerS,
				fmt.Sprintf("%.0f", dec.Launches), fmt.Sprintf("%.1f", dec.Calls), brief(dec.Profile))
		}
		gens = append(gens, pre, dec)
	}
	return steps, gens, nil
}

// randomBatch is one sequence of n random tokens predicting random targets.
func randomBatch(r *rand.Rand, vocab, n int) llama.Batch {
	bt := llama.Batch{Lens: []int{n}}
	for range n {
		bt.IDs = append(bt.IDs, int32(r.IntN(vocab)))
		bt.Targets = append(bt.Targets, int32(r.IntN(vocab)))
	}
	return bt
}

// trainSteps runs one warm-up step and then timed ones, each: zero the
// adapter gradients, forward and backward of the mean cross-entropy, AdamW
// with the global norm clipped to 1 — as trainer does — and wait for the
// device. It returns the seconds of each timed step and the kernel launches
// of the last step (the steady state: the warm-up step also launches what
// is done once, such as zeroing buffers first taken), or −1 where the
// backend does not count them; then, where the backend can time its ops,
// one more step profiled op by op (nil where it cannot).
func trainSteps(m *llama.Model, ad *llama.Adapter, tp *trainer.Params, bt llama.Batch, timed int) (runs []float64, launches int64, prof *bench.OpProfile, err error) {
	b := m.Backend()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	n := len(bt.IDs)
	g := make([]float32, n) // the mean cross-entropy's gradient in each log-probability
	for i := range g {
		g[i] = -1 / float32(n)
	}
	dl, err := tp.LossGrad(g) // uploaded once, outside the timed steps
	if err != nil {
		return nil, -1, nil, err
	}
	opt := tp.Opt
	step := func() error {
		opt.ZeroGrad()
		p, err := m.ForwardBackward(bt, ad, dl, nil, tp.AdapterGrads)
		if err != nil {
			return err
		}
		p.Release()
		if r := opt.Step(1e-4, 1); r.Skipped {
			return fmt.Errorf("the gradient norm is %v", r.GradNorm)
		}
		return b.Sync()
	}
	launches = -1
	for i := 0; i <= timed; i++ {
		ops0, _, counts := engine.Launches(b)
		t0 := time.Now()
		if err := step(); err != nil {
			return nil, -1, nil, err
		}
		if i > 0 {
			runs = append(runs, time.Since(t0).Seconds())
		}
		if ops1, _, _ := engine.Launches(b); counts {
			launches = ops1 - ops0
		}
	}
	prof, err = profile(b, 1, step)
	return runs, launches, prof, err
}

// profile runs fn, steps steps, with an op profile under way and sums its
// ops by name and extents, per step; nil where b cannot time its ops.
func profile(b engine.Backend, steps int, fn func() error) (*bench.OpProfile, error) {
	t0 := time.Now()
	ops, err := engine.ProfileOps(b, fn)
	wall := time.Since(t0).Seconds()
	if errors.Is(err, engine.ErrNoOpProfiler) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("profiling: %w", err)
	}
	return sumOps(ops, wall, steps), nil
}

// brief is a progress line's account of a profile: the device's busy
// share and the three ops by extents that took the most; "" for none.
func brief(p *bench.OpProfile) string {
	if p == nil {
		return ""
	}
	var top []string
	for _, o := range p.Ops[:min(3, len(p.Ops))] {
		top = append(top, fmt.Sprintf("%s %.0f%%", strings.TrimSpace(o.Op+" "+o.Extents), 100*o.Seconds/p.DeviceS))
	}
	return fmt.Sprintf("; profiled: device busy %.0f%% of %.3f s, most %s", 100*p.DeviceS/p.WallS, p.WallS, strings.Join(top, ", "))
}

// sumOps is the profile of steps steps that took wall seconds and ran ops:
// the ops summed by name and extents, per step, the most device time first
// (ties: by name, then extents).
func sumOps(ops []engine.OpTime, wall float64, steps int) *bench.OpProfile {
	per := 1 / float64(steps)
	p := &bench.OpProfile{Steps: steps, WallS: wall * per}
	type key struct{ op, extents string }
	at := map[key]int{}
	for _, o := range ops {
		k := key{o.Op, o.Extents}
		i, ok := at[k]
		if !ok {
			i = len(p.Ops)
			at[k] = i
			p.Ops = append(p.Ops, bench.OpTotal{Op: o.Op, Extents: o.Extents})
		}
		t := &p.Ops[i]
		s := o.Time.Seconds() * per
		t.Calls += per
		t.Launches += float64(o.Launches) * per
		t.FLOPs += o.FLOPs * per
		t.Bytes += float64(o.Bytes) * per
		t.Seconds += s
		p.DeviceS += s
	}
	slices.SortFunc(p.Ops, func(a, b bench.OpTotal) int {
		if c := cmp.Compare(b.Seconds, a.Seconds); c != 0 {
			return c
		}
		if c := strings.Compare(a.Op, b.Op); c != 0 {
			return c
		}
		return strings.Compare(a.Extents, b.Extents)
	})
	return p
}

// generate times, reps times after one warm-up, the prefill of prompts into
// a fresh cache and then newTokens greedy decoding steps of every sequence
// (Decode: its forward, sampling and reading the tokens back; the sampling
// of the prefill's logits, which precedes them, included), returning the
// seconds of each phase; pre and dec receive the launches per step of the
// last repetition where the backend counts them. Where the backend can time
// its ops, one more repetition profiles the decoding steps op by op
// (dec.Profile), the ops launched one by one as a profile needs.
func generate(m *llama.Model, prompts [][]int32, newTokens, reps int, pre, dec *bench.Generation) (prefill, decode []float64, err error) {
	b := m.Backend()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	for r := 0; r <= reps; r++ {
		pr, dc, err := generateOnce(m, prompts, newTokens, pre, dec, nil)
		if err != nil {
			return nil, nil, err
		}
		if r > 0 {
			prefill = append(prefill, pr)
			decode = append(decode, dc)
		}
	}
	var ignore bench.Generation // the profiled repetition's counts
	_, _, err = generateOnce(m, prompts, newTokens, &ignore, &ignore, func(decode func() error) (err error) {
		dec.Profile, err = profile(b, newTokens, decode)
		return err
	})
	return prefill, decode, err
}

// generateOnce is one repetition of generate: the prefill, then decoding,
// called by wrap (nil: directly). It returns the seconds of each phase and
// sets the launches of pre and dec.
func generateOnce(m *llama.Model, prompts [][]int32, newTokens int, pre, dec *bench.Generation, wrap func(decode func() error) error) (prefill, decode float64, err error) {
	b := m.Backend()
	kc, err := m.NewCache(len(prompts), len(prompts[0])+newTokens)
	if err != nil {
		return 0, 0, err
	}
	defer m.FreeCache(kc)
	ops0, calls0, _ := engine.Launches(b)
	t0 := time.Now()
	logits, err := m.Forward(kc, prompts, nil)
	if err == nil {
		err = b.Sync()
	}
	t1 := time.Now()
	ops1, calls1, _ := engine.Launches(b)
	decodeAll := func() error {
		// MaxNew newTokens+1: newTokens forwards, no stop token.
		_, err := m.Decode(kc, logits, llama.GenerateOptions{MaxNew: newTokens + 1})
		if err == nil {
			err = b.Sync()
		}
		return err
	}
	if err == nil {
		if wrap == nil {
			err = decodeAll()
		} else {
			err = wrap(decodeAll)
		}
	}
	t2 := time.Now()
	ops2, calls2, _ := engine.Launches(b)
	pre.Launches, pre.Calls = float64(ops1-ops0), float64(calls1-calls0)
	dec.Launches, dec.Calls = float64(ops2-ops1)/float64(newTokens), float64(calls2-calls1)/float64(newTokens)
	return t1.Sub(t0).Seconds(), t2.Sub(t1).Seconds(), err
}
