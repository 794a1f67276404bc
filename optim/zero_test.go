package optim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/commtest"
	"github.com/turnwise/turnwise/engine/cpu"
)

// zeroSizes are parameter sizes that no shard boundary respects.
var zeroSizes = map[string]int{"a": 70, "b": 5, "c": 130, "d": 1, "e": 200}

// newParams returns the parameters of zeroSizes on b in dtype dt, their
// weights drawn from seed.
func newParams(b engine.Backend, dt engine.DType, seed uint64) map[string]*engine.Tensor {
	r := rand.New(rand.NewPCG(seed, 1))
	ps := map[string]*engine.Tensor{}
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		w := make([]float32, zeroSizes[name])
		for i := range w {
			w[i] = float32(r.NormFloat64())
		}
		ps[name] = engine.FromF32(b, dt, w, len(w))
	}
	return ps
}

// rankGrads returns rank's gradient of step s, one slice per parameter.
func rankGrads(rank, s int) map[string][]float32 {
	r := rand.New(rand.NewPCG(uint64(rank), uint64(s)))
	g := map[string][]float32{}
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		g[name] = make([]float32, zeroSizes[name])
		for i := range g[name] {
			g[name][i] = float32(r.NormFloat64())
		}
	}
	return g
}

// TestShardedMatchesUnsharded steps a sharded optimizer on 1, 2 and 3 ranks
// (goroutines over commtest.Local) and one unsharded optimizer given the ranks'
// summed gradients, with clipping on, in f32 and bf16: every rank ends with
// the reference's weights (relative 1e-6: only the norm is summed in another
// order); GatherTo gives the reference's moments and masters; and sharded
// optimizers made afresh and loaded from that state (LoadShard) take the
// next step as the reference does.
func TestShardedMatchesUnsharded(t *testing.T) {
	const steps, scale = 3, 0.5
	c := cfg
	c.MaxGradNorm = 2 // below the gradients' norm: every step clips
	for _, dt := range []engine.DType{engine.F32, engine.BF16} {
		for _, size := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("%v/%d", dt, size), func(t *testing.T) {
				rb := cpu.New(cpu.Options{Threads: 1})
				ref := newOpt(t, rb, c, newParams(rb, dt, 7))
				refStep := func(s int) {
					ref.ZeroGrad()
					for _, p := range ref.Params {
						sum := make([]float32, p.W.Numel())
						for r := range size {
							for i, g := range rankGrads(r, s)[p.Name] {
								sum[i] += g
							}
						}
						engine.SetF32(rb, p.G, sum)
					}
					if res := ref.Step(1e-2, scale); res.Clip >= 1 {
						t.Fatalf("step %d: clip %v; the test wants clipping", s, res.Clip)
					}
				}
				for s := range steps {
					refStep(s)
				}
				state := snapshot(ref) // after `steps` steps
				refStep(steps)

				bs := make([]engine.Backend, size)
				for r := range bs {
					bs[r] = cpu.New(cpu.Options{Threads: 1})
				}
				comms := commtest.Local(bs)
				var wg sync.WaitGroup
				errs := make([]error, size)
				for rank := range size {
					wg.Add(1)
					go func() {
						defer wg.Done()
						errs[rank] = runRank(rank, dt, c, bs[rank], comms[rank], steps, scale, state, ref)
					}()
				}
				wg.Wait()
				for rank, err := range errs {
					if err != nil {
						t.Errorf("rank %d: %v", rank, err)
					}
				}
			})
		}
	}
}

// snapshot returns o's moments and masters on the host, by parameter
// name and then "m", "v", "master" (nil: none).
func snapshot(o *AdamW) map[string]map[string][]float32 {
	s := map[string]map[string][]float32{}
	for _, p := range o.Params {
		s[p.Name] = map[string][]float32{"m": engine.ToF32(o.b, p.M), "v": engine.ToF32(o.b, p.V)}
		if p.Master != nil {
			s[p.Name]["master"] = engine.ToF32(o.b, p.Master)
		}
	}
	return s
}

// runRank is one rank of TestShardedMatchesUnsharded: it steps a sharded
// optimizer `steps` times, checks GatherTo against the reference's state
// then, and steps a fresh optimizer loaded from the gathered state once
// more, checking the weights against ref's, which has taken that step too.
func runRank(rank int, dt engine.DType, c AdamWConfig, b engine.Backend, comm engine.Communicator, steps int, scale float32, state map[string]map[string][]float32, ref *AdamW) error {
	params := newParams(b, dt, 7)
	o, err := NewShardedAdamW(b, c, params, comm)
	if err != nil {
		return err
	}
	defer o.Free()
	step := func(o *AdamW, s int) error {
		o.ZeroGrad()
		for _, p := range o.Params {
			engine.SetF32(b, p.G, rankGrads(rank, s)[p.Name])
		}
		_, err := o.StepSharded(1e-2, scale)
		return err
	}
	for s := range steps {
		if err := step(o, s); err != nil {
			return err
		}
	}
	o.window = 7 // several windows per shard, the last one short
	hb := cpu.New(cpu.Options{Threads: 1})
	full, err := o.GatherTo(hb, true)
	if err != nil {
		return err
	}
	defer full.Free()
	if full.Backend() != hb {
		return fmt.Errorf("gathered onto %v, want the host backend given", full.Backend())
	}
	if full.Steps != steps {
		return fmt.Errorf("gathered %d steps, want %d", full.Steps, steps)
	}
	for _, p := range full.Params {
		for what, got := range map[string]*engine.Tensor{"m": p.M, "v": p.V, "master": p.Master} {
			want := state[p.Name][what]
			if (got == nil) != (want == nil) {
				return fmt.Errorf("%s.%s: gathered %v, the reference has %d elements", p.Name, what, got, len(want))
			}
			if got != nil {
				if err := near(engine.ToF32(hb, got), want, 1e-6); err != nil {
					return fmt.Errorf("gathered %s.%s: %w", p.Name, what, err)
				}
			}
		}
	}
	// A fresh optimizer over the weights of step `steps`, loaded with the
	// gathered state, takes the reference's last step.
	again, err := NewShardedAdamW(b, c, params, comm)
	if err != nil {
		return err
	}
	defer again.Free()
	again.LoadShard(full)
	if err := step(again, steps); err != nil {
		return err
	}
	for i, p := range again.Params {
		if err := near(engine.ToF32(b, p.W), engine.ToF32(ref.b, ref.Params[i].W), 1e-6); err != nil {
			return fmt.Errorf("weights of %s after a resumed step: %w", p.Name, err)
		}
	}
	return nil
}

// near reports the first element of got further than rel (relative to the
// largest magnitude of want) from want.
func near(got, want []float32, rel float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d elements, want %d", len(got), len(want))
	}
	var scale float64
	for _, w := range want {
		scale = max(scale, math.Abs(float64(w)))
	}
	for i := range got {
		if d := math.Abs(float64(got[i]) - float64(want[i])); !(d <= rel*scale) {
			return fmt.Errorf("element %d: %v, want %v", i, got[i], want[i])
		}
	}
	return nil
}
