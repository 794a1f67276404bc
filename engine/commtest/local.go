package commtest

import (
	"fmt"
	"sync"

	"github.com/turnwise/turnwise/engine"
)

// Local returns the ranks of a job of size ranks that run as goroutines of
// one process: rank r's engine.Communicator, whose tensors live on
// backends[r]. Its collectives meet in host memory and keep the
// Communicator contract — sums in the element dtype in rank order (bf16
// rounded after every addition), bytes moved as they are — so that a test
// runs data-parallel code without processes or sockets. Each rank calls its
// communicator from one goroutine, as the contract wants; a rank that never
// arrives leaves the others waiting (there is no timeout).
func Local(backends []engine.Backend) []engine.Communicator {
	h := &hub{size: len(backends), slots: make([][]byte, len(backends))}
	h.cond = sync.NewCond(&h.mu)
	cs := make([]engine.Communicator, len(backends))
	for r, b := range backends {
		cs[r] = &local{h: h, b: b, rank: r}
	}
	return cs
}

// hub is where the ranks of Local meet.
type hub struct {
	size  int
	mu    sync.Mutex
	cond  *sync.Cond
	slots [][]byte // each rank's published bytes
	count int      // ranks arrived at the current barrier
	gen   int      // barriers passed
}

// barrier returns once every rank has called it.
func (h *hub) barrier() {
	h.mu.Lock()
	defer h.mu.Unlock()
	gen := h.gen
	if h.count++; h.count == h.size {
		h.count, h.gen = 0, h.gen+1
		h.cond.Broadcast()
		return
	}
	for gen == h.gen {
		h.cond.Wait()
	}
}

// local is one rank of Local.
type local struct {
	h    *hub
	b    engine.Backend
	rank int
}

func (c *local) Rank() int { return c.rank }
func (c *local) Size() int { return c.h.size }

// exchange publishes x's bytes and returns every rank's, in rank order.
func (c *local) exchange(x *engine.Tensor) [][]byte {
	raw := make([]byte, x.Bytes())
	c.b.Download(raw, x)
	c.h.slots[c.rank] = raw
	c.h.barrier()
	all := make([][]byte, c.h.size)
	copy(all, c.h.slots)
	c.h.barrier() // every rank has read the slots before they change
	return all
}

// sum returns the sum over the ranks of x (f32 or bf16), added in rank
// order in x's dtype, encoded in it.
func (c *local) sum(x *engine.Tensor) []byte {
	dt := x.DType()
	if dt != engine.F32 && dt != engine.BF16 {
		panic(fmt.Sprintf("commtest: a sum of %v; want f32 or bf16", dt))
	}
	var s []float32
	for _, raw := range c.exchange(x) {
		v := engine.DecodeF32(dt, raw)
		if s == nil {
			s = v
			continue
		}
		for i := range s {
			s[i] += v[i]
		}
		if dt == engine.BF16 { // round after every addition
			s = engine.DecodeF32(dt, engine.EncodeF32(dt, s))
		}
	}
	return engine.EncodeF32(dt, s)
}

func (c *local) AllReduce(x *engine.Tensor) error {
	c.b.Upload(x, c.sum(x))
	return nil
}

func (c *local) ReduceScatter(out, in *engine.Tensor) error {
	if out.DType() != in.DType() || in.Numel() != c.h.size*out.Numel() {
		panic(fmt.Sprintf("commtest: ReduceScatter of %v into %v over %d ranks", in, out, c.h.size))
	}
	n := out.Bytes()
	c.b.Upload(out, c.sum(in)[c.rank*n:(c.rank+1)*n])
	return nil
}

func (c *local) AllGather(out, in *engine.Tensor) error {
	if out.DType() != in.DType() || out.Numel() != c.h.size*in.Numel() {
		panic(fmt.Sprintf("commtest: AllGather of %v into %v over %d ranks", in, out, c.h.size))
	}
	var cat []byte
	for _, raw := range c.exchange(in) {
		cat = append(cat, raw...)
	}
	c.b.Upload(out, cat)
	return nil
}

func (c *local) Broadcast(x *engine.Tensor, root int) error {
	c.b.Upload(x, c.exchange(x)[root])
	return nil
}

func (c *local) Barrier() error { c.h.barrier(); return nil }
func (c *local) Close() error   { return nil }
