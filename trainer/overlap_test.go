package trainer

import (
	"io"
	"maps"
	"slices"
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
