package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// covered runs one split of n items with grain g on b and checks that every
// item was visited exactly once, by the worker whose range holds it.
func covered(t *testing.T, b *Backend, n, g int) {
	t.Helper()
	seen := make([]int32, n)
	var bad atomic.Int32
	b.parallel(n, g, func(w, lo, hi int) {
		if w < 0 || w >= b.threads {
			bad.Add(1)
		}
		for i := lo; i < hi; i++ {
			atomic.AddInt32(&seen[i], 1)
		}
	})
	if bad.Load() != 0 {
		t.Fatalf("n=%d grain=%d: a range ran on a worker index outside [0, %d)", n, g, b.threads)
	}
	for i, c := range seen {
		if c != 1 {
			t.Fatalf("n=%d grain=%d threads=%d: item %d ran %d times", n, g, b.threads, i, c)
		}
	}
}

func TestParallelCoversEachItemOnce(t *testing.T) {
	for _, threads := range []int{1, 2, 3, 8} {
		b := New(Options{Threads: threads})
		// Splits of every width, back to back (workers still spinning) and
		// after a pause (workers asleep), so that workers skip splits that
		// have no range for them.
		for _, tc := range []struct{ n, grain int }{
			{1, 1}, {2, 1}, {3, 1}, {7, 2}, {8, 1}, {100, 1}, {100, 30}, {5, 1}, {1000, 7}, {2, 2},
		} {
			covered(t, b, tc.n, tc.grain)
			covered(t, b, tc.n, tc.grain)
			time.Sleep(2 * spinFor)
			covered(t, b, tc.n, tc.grain)
		}
	}
}

func TestParallelNestedAndConcurrent(t *testing.T) {
	b := New(Options{Threads: 4})
	// A split inside a range runs on goroutines of its own.
	var inner atomic.Int64
	b.parallel(4, 1, func(_, lo, hi int) {
		for range hi - lo {
			b.parallel(10, 1, func(_, lo, hi int) { inner.Add(int64(hi - lo)) })
		}
	})
	if got := inner.Load(); got != 40 {
		t.Fatalf("nested splits visited %d items, want 40", got)
	}
	// Two goroutines splitting at once: one gets the pool, the other
	// goroutines of its own; both finish with every item seen once.
	var wg sync.WaitGroup
	var total atomic.Int64
	for range 2 {
		wg.Go(func() {
			for range 200 {
				b.parallel(64, 1, func(_, lo, hi int) { total.Add(int64(hi - lo)) })
			}
		})
	}
	wg.Wait()
	if got := total.Load(); got != 2*200*64 {
		t.Fatalf("concurrent splits visited %d items, want %d", got, 2*200*64)
	}
}

func TestPoolFreedAfterCallerPanics(t *testing.T) {
	b := New(Options{Threads: 3})
	var ran atomic.Int32
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the caller's range did not panic")
			}
		}()
		b.parallel(3, 1, func(w, _, _ int) {
			if w == 0 {
				panic("planted")
			}
			time.Sleep(time.Millisecond)
			ran.Add(1)
		})
	}()
	if got := ran.Load(); got != 2 {
		t.Fatalf("%d worker ranges had finished when parallel returned, want 2", got)
	}
	if b.pool.busy.Load() {
		t.Fatal("the pool is still busy after the split's caller panicked")
	}
	covered(t, b, 9, 1)
}

func TestPoolStopsWithItsBackend(t *testing.T) {
	before := runtime.NumGoroutine()
	b := New(Options{Threads: 6})
	b.parallel(6, 1, func(int, int, int) {})
	if got := runtime.NumGoroutine(); got < before+5 {
		t.Fatalf("%d goroutines after the first split, want at least %d", got, before+5)
	}
	b = nil
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if got := runtime.NumGoroutine(); got > before {
		t.Fatalf("%d goroutines after the backend was collected, want %d", got, before)
	}
}

// BenchmarkParallelSplit measures handing a split of almost no work to the
// workers and waiting for it: what every parallel op of a decoding step pays
// on top of its work.
func BenchmarkParallelSplit(b *testing.B) {
	be := New(Options{Threads: runtime.NumCPU()})
	var sink atomic.Int64
	for b.Loop() {
		be.parallel(be.threads, 1, func(_, lo, hi int) { sink.Add(int64(hi - lo)) })
	}
}
