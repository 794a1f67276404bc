package cpu

import (
	"runtime"
	"sync/atomic"
	"time"
)

// pool is a backend's worker goroutines: threads-1 of them, started on the
// first op that splits its work, each taking one range of every split while
// the caller takes the first.
//
// Why not a goroutine per range: a new goroutine waits for the runtime to
// wake an idle OS thread, tens of microseconds on a quiet machine, which a
// decoding step's GEMV of a few hundred kB (itself about 20 µs) pays once
// per projection. The pool's workers instead spin for spinFor after each
// job, so that ops issued back to back reach them at once, and only then
// sleep on a channel. The caller spins the same way for the last range.
//
// A pool serves one split at a time; a split issued while another is in
// flight (from inside a range, or from a second goroutine) runs on fresh
// goroutines instead (see Backend.parallel).
type pool struct {
	workers int                 // goroutines besides the caller
	busy    atomic.Bool         // a split is in flight
	job     atomic.Pointer[job] // the latest split; workers wait for a new one
	pending atomic.Int32        // ranges of the current split not yet done
	quit    atomic.Bool         // set by stop: workers return
	start   atomic.Bool         // the workers are running
	wake    []chan struct{}     // one per worker: sent to when it may be asleep
	done    chan struct{}       // sent to when the last range finishes
}

// job is one split, never changed once published. A worker that has a range
// in it holds the next split back until that range is done, so a worker
// that skips splits (it had no range in them) never skips its own.
type job struct {
	seq  uint64 // 1, 2, ... in the order of the splits
	fn   func(worker, lo, hi int)
	n, w int
}

// spinFor is how long an idle worker, or a caller waiting for the last
// range, polls before it sleeps. It is longer than the gaps between the
// parallel ops of a decoding step and short beside anything a user would
// see as idle CPU.
const spinFor = 100 * time.Microsecond

func newPool(threads int) *pool {
	p := &pool{workers: threads - 1, done: make(chan struct{}, 1)}
	p.wake = make([]chan struct{}, p.workers)
	for i := range p.wake {
		p.wake[i] = make(chan struct{}, 1)
	}
	return p
}

// run splits [0, n) into w contiguous ranges, runs range i on worker i (the
// caller is worker 0), and returns when all are done. It reports false,
// running nothing, when the pool is serving another split.
func (p *pool) run(n, w int, fn func(worker, lo, hi int)) bool {
	if w-1 > p.workers || !p.busy.CompareAndSwap(false, true) {
		return false
	}
	var seq uint64
	if last := p.job.Load(); last != nil {
		seq = last.seq
	}
	if !p.start.Load() {
		p.start.Store(true)
		for i := 1; i <= p.workers; i++ {
			go p.loop(i, seq)
		}
	}
	p.pending.Store(int32(w - 1))
	p.job.Store(&job{seq: seq + 1, fn: fn, n: n, w: w})
	for i := 1; i < w; i++ {
		select {
		case p.wake[i-1] <- struct{}{}:
		default: // a wake-up is already queued
		}
	}
	defer p.finish(seq + 1) // also when the caller's range panics
	fn(0, 0, n/w)
	return true
}

// finish waits for the workers' ranges of split seq, then frees the pool.
func (p *pool) finish(seq uint64) {
	if !spin(func() bool { return p.pending.Load() == 0 }) {
		for p.pending.Load() != 0 {
			<-p.done
		}
	}
	p.job.Store(&job{seq: seq}) // let the closure, and what it holds, go
	p.busy.Store(false)
}

// loop is worker i: it waits for a split after the one it has seen, runs its
// range if the split has one for it, and reports it done.
func (p *pool) loop(i int, seen uint64) {
	fresh := func() bool {
		j := p.job.Load()
		return (j != nil && j.seq != seen) || p.quit.Load()
	}
	for {
		if !spin(fresh) {
			for !fresh() {
				<-p.wake[i-1] // may be a stale wake-up: the loop checks again
			}
		}
		if p.quit.Load() {
			return
		}
		j := p.job.Load()
		seen = j.seq
		if i >= j.w {
			continue // this split has fewer ranges than there are workers
		}
		j.fn(i, i*j.n/j.w, (i+1)*j.n/j.w)
		if p.pending.Add(-1) == 0 {
			select {
			case p.done <- struct{}{}:
			default:
			}
		}
	}
}

// stop makes the workers return. It runs when the backend that owns the pool
// is collected.
func (p *pool) stop() {
	p.quit.Store(true)
	for _, c := range p.wake {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// spin polls ready for up to spinFor, yielding the thread now and then, and
// reports whether it became true.
func spin(ready func() bool) bool {
	var t0 time.Time
	for i := 0; ; i++ {
		if ready() {
			return true
		}
		if i%256 == 255 {
			if t0.IsZero() {
				t0 = time.Now()
			} else if time.Since(t0) > spinFor {
				return false
			}
			runtime.Gosched()
		}
	}
}
