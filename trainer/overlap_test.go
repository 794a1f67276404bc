package trainer

import (
	"io"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/commtest"
)

// countingComm counts a communicator's all-reduces.
type countingComm struct {
	engine.Communicator
	allReduces *atomic.Int64
}

func (c countingComm) AllReduce(x *engine.Tensor) error {
	c.allReduces.Add(1)
	return c.Communicator.AllReduce(x)
}

// TestOverlapReduceMatches trains 3 ranks (goroutines over commtest.Local,
// whose sums do not depend on how the buffer is cut) for 4 steps of 2
// micro-batches, with the gradients all-reduced whole after the backward
// and overlapped with the last micro-batch's backward, layer by layer:
// every rank ends with the same weights, bit for bit, in both runs — each
// element reduced exactly once — for full fine-tuning and for LoRA; and
// the overlapped run did reduce each of the 2 layers apart from the rest.
func TestOverlapReduceMatches(t *testing.T) {
	const size, steps = 3, 4
	for _, lora := range []bool{false, true} {
		run := func(overlap bool) map[string][]float32 {
			var n atomic.Int64
			trs := make([]*Trainer, size)
			bs := make([]engine.Backend, size)
			for r := range size {
				m, ad, p := setup(t, lora)
				trs[r] = &Trainer{m: m, ad: ad, train: p} // made below, once the communicators are
				bs[r] = m.Backend()
			}
			comms := commtest.Local(bs)
			var wg sync.WaitGroup
			errs := make([]error, size)
			finals := make([]map[string][]float32, size)
			rests := 0
			for r := range size {
				m, ad := trs[r].m, trs[r].ad
				cfg := config("", steps)
				cfg.Comm, cfg.OverlapReduce = countingComm{comms[r], &n}, overlap
				wg.Add(1)
				go func() {
					defer wg.Done()
					tr, err := New(m, ad, trs[r].train, nil, cfg, io.Discard) // broadcasts: a collective
					if err != nil {
						errs[r] = err
						return
					}
					if (tr.p.ov != nil) != overlap {
						t.Errorf("overlap %v: the trainer's reducer is %v", overlap, tr.p.ov)
					}
					if tr.p.ov != nil && r == 0 {
						rests = len(tr.p.ov.rest)
					}
					if errs[r] = tr.Run(); errs[r] == nil {
						finals[r] = weights(m, ad)
					}
				}()
			}
			wg.Wait()
			for r, err := range errs {
				if err != nil {
					t.Fatalf("lora %v, overlap %v, rank %d: %v", lora, overlap, r, err)
				}
				if r > 0 && !maps.EqualFunc(finals[r], finals[0], slices.Equal) {
					t.Errorf("lora %v, overlap %v: rank %d's weights differ from rank 0's", lora, overlap, r)
				}
			}
			perStep := n.Load() / (size * steps)
			if overlap && perStep != int64(2+rests) {
				t.Errorf("lora %v: %d all-reduces a step, want one per layer (2) and per other range (%d)", lora, perStep, rests)
			}
			if !overlap && perStep != 1 {
				t.Errorf("lora %v: %d all-reduces a step without overlap, want 1", lora, perStep)
			}
			return finals[0]
		}
		plain, over := run(false), run(true)
		if !maps.EqualFunc(over, plain, slices.Equal) {
			for name, w := range plain {
				if !slices.Equal(over[name], w) {
					t.Errorf("lora %v: %s differs between the overlapped and the plain all-reduce", lora, name)
				}
			}
		}
	}
}

// TestOverlapRanges: the reducer's ranges — one per layer, the rest in
// buffer order — cover the flat gradient once, without overlap, and each
// parameter lies in its layer's range (or in the rest, outside every
// layer), for full fine-tuning, LoRA, and with a parameter outside the
// model; there is no reducer in one process.
func TestOverlapRanges(t *testing.T) {
	for _, c := range []struct {
		name  string
		lora  bool
		extra bool
	}{{"full", false, false}, {"lora", true, false}, {"lora+head", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			m, ad, _ := setup(t, c.lora)
			var extra map[string]*engine.Tensor
			if c.extra {
				extra = map[string]*engine.Tensor{"value_head.weight": engine.MustAlloc(m.Backend(), engine.F32, m.Config.Dim)}
			}
			p, err := NewParams(m, ad, config("", 1).AdamW, extra)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Free()
			if p.OverlapReduce(nil) {
				t.Fatal("a reducer for one process")
			}
			comms := commtest.Local([]engine.Backend{m.Backend(), m.Backend()})
			if !p.OverlapReduce(comms[0]) {
				t.Fatal("no reducer on two CPU ranks")
			}
			o := p.ov
			n := p.Opt.FlatGrad().Numel()
			owner := make([]int, n) // the layer owning each element, -1 for the rest; -2: none yet
			for i := range owner {
				owner[i] = -2
			}
			claim := func(r [2]int, who int) {
				for i := r[0]; i < r[1]; i++ {
					if owner[i] != -2 {
						t.Fatalf("element %d in the ranges of %d and %d", i, owner[i], who)
					}
					owner[i] = who
				}
			}
			for l, r := range o.layers {
				if r[0] >= r[1] {
					t.Errorf("layer %d has an empty range %v", l, r)
				}
				claim(r, l)
			}
			for _, r := range o.rest {
				claim(r, -1)
			}
			for i, w := range owner {
				if w == -2 {
					t.Fatalf("element %d of %d in no range", i, n)
				}
			}
			for _, q := range p.Opt.Params {
				lo := (q.G.Offset() - p.Opt.FlatGrad().Offset()) / 4
				want := -1
				if sub := layerName.FindStringSubmatch(q.Name); sub != nil {
					if want, err = strconv.Atoi(sub[1]); err != nil {
						t.Fatal(err)
					}
				}
				for i := lo; i < lo+q.G.Numel(); i++ {
					if owner[i] != want {
						t.Fatalf("%s: element %d reduced with %d, want %d", q.Name, i, owner[i], want)
					}
				}
			}
			if c.lora && !c.extra && len(o.rest) != 0 {
				t.Errorf("LoRA: %d ranges outside the layers, want none: every parameter is a layer's", len(o.rest))
			}
		})
	}
}
