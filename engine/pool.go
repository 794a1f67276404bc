package engine

import (
	"fmt"
	"math/bits"
)

// Allocator hands out device buffers; every Backend is one.
type Allocator interface {
	NewBuffer(nbytes int) (Buffer, error)
	FreeBuffer(Buffer)
}

// PoolStats counts a Pool's traffic.
type PoolStats struct {
	NewBuffers  int // buffers obtained from the allocator
	Reused      int // Gets served from the cache
	BytesInUse  int // bytes handed out and not yet Put back
	BytesCached int // bytes held for reuse
	PeakBytes   int // the most bytes ever in use plus cached

	// Requested is what the tensors in use asked for: BytesInUse before
	// rounding to size classes. HighWater is the most it has ever been, the
	// peak of the tensors a computation keeps at once, which a memory plan
	// predicts (llama.Config.Plan).
	Requested, HighWater int
}

// Pool is a caching allocator: a buffer Put back is kept and handed out again
// to the next Get of the same size class (see sizeClass). A training step
// gets and puts the same sizes every iteration, so after the first one it
// allocates nothing; a workload whose sizes vary (packed batches of
// different lengths) is served by a bounded set of buffers, because sizes
// are rounded up to at most eight classes per power of two. A Pool is not
// safe for concurrent use.
type Pool struct {
	alloc Allocator
	free  map[int][]Buffer // byte size → idle buffers
	live  map[Buffer]int   // buffers handed out → bytes requested
	stats PoolStats
}

// NewPool returns an empty pool drawing from a.
func NewPool(a Allocator) *Pool {
	return &Pool{alloc: a, free: map[int][]Buffer{}, live: map[Buffer]int{}}
}

// Get returns a tensor of the given dtype and shape that owns a whole buffer.
// Its contents are undefined: a reused buffer keeps what was last written.
func (p *Pool) Get(dt DType, shape ...int) (*Tensor, error) {
	req := Shape(shape).Numel() * dt.Size()
	n := sizeClass(req)
	var buf Buffer
	if l := p.free[n]; len(l) > 0 {
		buf = l[len(l)-1]
		p.free[n] = l[:len(l)-1]
		p.stats.Reused++
		p.stats.BytesCached -= n
	} else {
		b, err := p.alloc.NewBuffer(n)
		if err != nil {
			return nil, fmt.Errorf("pool: allocating %v%v (%d bytes): %w", dt, Shape(shape), n, err)
		}
		buf = b
		p.stats.NewBuffers++
	}
	p.live[buf] = req
	p.stats.BytesInUse += n
	p.stats.PeakBytes = max(p.stats.PeakBytes, p.stats.BytesInUse+p.stats.BytesCached)
	p.stats.Requested += req
	p.stats.HighWater = max(p.stats.HighWater, p.stats.Requested)
	return NewTensor(buf, 0, dt, shape...), nil
}

// sizeClass rounds a byte count up to its class: below 4 KiB a multiple of
// 256 bytes, above it one of eight evenly spaced sizes per power of two, so
// that at most an eighth of a buffer goes unused.
func sizeClass(n int) int {
	if n <= 4096 {
		return (n + 255) &^ 255
	}
	step := 1 << (bits.Len(uint(n)) - 1 - 3)
	return (n + step - 1) &^ (step - 1)
}

// MustGet is Get for sizes the caller knows fit; it panics on failure.
func (p *Pool) MustGet(dt DType, shape ...int) *Tensor {
	t, err := p.Get(dt, shape...)
	if err != nil {
		panic(err)
	}
	return t
}

// Put returns t's buffer to the pool. t must have come from Get and must not
// be used afterwards.
func (p *Pool) Put(t *Tensor) {
	buf := t.Buffer()
	req, ok := p.live[buf]
	if !ok {
		panic(fmt.Sprintf("engine: Pool.Put of %v whose buffer is not held from this pool", t))
	}
	delete(p.live, buf)
	p.stats.Requested -= req
	n := buf.Size()
	p.free[n] = append(p.free[n], buf)
	p.stats.BytesInUse -= n
	p.stats.BytesCached += n
}

// Trim frees every cached buffer.
func (p *Pool) Trim() {
	for n, l := range p.free {
		for _, b := range l {
			p.alloc.FreeBuffer(b)
		}
		p.stats.BytesCached -= n * len(l)
		delete(p.free, n)
	}
}

// Stats returns the pool's counters.
func (p *Pool) Stats() PoolStats { return p.stats }
