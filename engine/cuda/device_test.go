//go:build cudaemu && !cuda

package cuda

// Tests of the host layer (device.go, backend.go, buffer.go, timer.go) under
// the emulator, which models what host code can get wrong on a GPU: contexts
// per OS thread, streams that belong to a context, a failed call's error left
// for the next launch, faults that surface at the next synchronisation, and
// what is left alive.

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnwise/turnwise/engine"
)

func newOn(t *testing.T, device int) *Backend {
	t.Helper()
	b, err := New(Options{Device: device})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestTwoBackendsTwoGoroutines uses backends on emulated devices 0 and 1
// from two goroutines at once, while other goroutines leave random contexts
// current on whatever threads they run on, and context switches are slow
// enough for Go's scheduler to move a goroutine that is not locked to its
// thread between its bind and its launch. Every op must still run, in its
// own backend's context, and compute the right values.
func TestTwoBackendsTwoGoroutines(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	emuSetSwitchDelay(200)
	defer emuSetSwitchDelay(0)
	backends := []*Backend{newOn(t, 0), newOn(t, 1)}

	var stop atomic.Bool
	var scramblers sync.WaitGroup
	for i := range 6 {
		scramblers.Add(1)
		go func() {
			defer scramblers.Done()
			r := rand.New(rand.NewPCG(uint64(i), 1))
			for !stop.Load() {
				runtime.LockOSThread()
				emuSetCurrent(r.IntN(3) - 1) // none, device 0's or device 1's
				runtime.UnlockOSThread()
				runtime.Gosched()
			}
		}()
	}

	const iters, n = 200, 257
	errs := make([]string, len(backends))
	var workers sync.WaitGroup
	for w, b := range backends {
		workers.Add(1)
		go func() {
			defer workers.Done()
			errs[w] = catch(func() {
				x := engine.MustAlloc(b, engine.F32, n)
				y := engine.MustAlloc(b, engine.F32, n)
				for it := range iters {
					// y = 2·(v + w) + 1 with v = it+w, elementwise; then its
					// sum of squares, through a workspace.
					v := float32(it + w)
					b.Fill(x, v)
					b.Fill(y, float32(w))
					b.Add(y, y, x)
					b.Add(y, y, y)
					b.Copy(x, y)
					b.Fill(y, 1)
					b.Add(y, y, x)
					got := engine.ToF32(b, y)
					want := 2*(v+float32(w)) + 1
					for i, g := range got {
						if g != want {
							panic(fmt.Sprintf("backend %d, iteration %d: y[%d] = %v, want %v", w, it, i, g, want))
						}
					}
					ss := engine.MustAlloc(b, engine.F32, 1)
					b.Fill(ss, 0)
					b.SumSquares(ss, y)
					if got, want := engine.ToF32(b, ss)[0], float32(n)*want*want; got != want {
						panic(fmt.Sprintf("backend %d, iteration %d: sum of squares %v, want %v", w, it, got, want))
					}
					b.FreeBuffer(ss.Buffer())
					runtime.Gosched()
				}
			})
		}()
	}
	workers.Wait()
	stop.Store(true)
	scramblers.Wait()
	for w, e := range errs {
		if e != "" {
			t.Errorf("backend on device %d: %s", w, e)
		}
	}
}

// TestSyncEachNamesTheOp makes a kernel fault on the device (as far as the
// emulator goes: its context reports the fault at the next synchronisation).
// With TW_CUDA_SYNC=1 the op that launched it fails, naming itself; without,
// the fault surfaces later, at Sync.
func TestSyncEachNamesTheOp(t *testing.T) {
	t.Run("TW_CUDA_SYNC=1", func(t *testing.T) {
		t.Setenv("TW_CUDA_SYNC", "1")
		b := newOn(t, 0)
		x := engine.MustAlloc(b, engine.F32, 64)
		b.Fill(x, 1)
		emuInjectFault(emuFaultKernel)
		msg := catch(func() { b.Add(x, x, x) })
		for _, want := range []string{"Add", "unspecified launch failure", "TW_CUDA_SYNC=1"} {
			if !strings.Contains(msg, want) {
				t.Errorf("panic %q does not mention %q", msg, want)
			}
		}
		if err := b.Sync(); err != nil {
			t.Errorf("Sync after the reported fault: %v", err)
		}
	})
	t.Run("unset", func(t *testing.T) {
		t.Setenv("TW_CUDA_SYNC", "")
		b := newOn(t, 0)
		x := engine.MustAlloc(b, engine.F32, 64)
		emuInjectFault(emuFaultKernel)
		if msg := catch(func() { b.Add(x, x, x) }); msg != "" {
			t.Fatalf("Add failed at launch without TW_CUDA_SYNC: %s", msg)
		}
		if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "unspecified launch failure") {
			t.Errorf("Sync = %v, want the kernel's fault", err)
		}
	})
}

// TestFailedAttributeDoesNotLeak fails the cudaFuncSetAttribute call that
// RMSNormBackward makes before a launch with over 48 KiB of shared memory.
// CUDA leaves that error as the thread's last error; the next op on the same
// thread, which reads the last error after its own launch, must not report
// it.
func TestFailedAttributeDoesNotLeak(t *testing.T) {
	runtime.LockOSThread() // the failing op and the next one on one thread
	defer runtime.UnlockOSThread()
	b := newOn(t, 0)
	const n, d = 2, 12800 // the dw partial needs 50 KiB of shared memory
	x := engine.FromF32(b, engine.F32, make([]float32, n*d), n, d)
	w, dw := engine.MustAlloc(b, engine.F32, d), engine.MustAlloc(b, engine.F32, d)
	dx, rstd := engine.MustAlloc(b, engine.F32, n, d), engine.MustAlloc(b, engine.F32, n)
	b.Fill(w, 1)
	b.Fill(dw, 0)
	b.Fill(dx, 0)
	b.RMSNorm(dx, rstd, x, w, 1e-5)
	emuInjectFault(emuFaultFuncAttribute)
	msg := catch(func() { b.RMSNormBackward(dx, dw, x, x, w, rstd) })
	if !strings.Contains(msg, "RMSNormBackward") || !strings.Contains(msg, "invalid device function") {
		t.Fatalf("RMSNormBackward with a failing attribute call: panic %q, want it named with the error", msg)
	}
	y := engine.MustAlloc(b, engine.F32, 8)
	if msg := catch(func() { b.Fill(y, 3) }); msg != "" {
		t.Fatalf("the next op reported the earlier error: %s", msg)
	}
	for i, v := range engine.ToF32(b, y) {
		if v != 3 {
			t.Fatalf("y[%d] = %v after Fill(3)", i, v)
		}
	}
}

// TestCloseReleases checks that Close gives back everything New and the ops
// took: the stream, the workspace, timers' events and the reference to the
// primary context.
func TestCloseReleases(t *testing.T) {
	before, refs := readEmuCounters(), emuPrimaryRefs(1)
	b, err := New(Options{Device: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := emuPrimaryRefs(1); got != refs+1 {
		t.Errorf("New holds %d references to the primary context, want %d", got, refs+1)
	}
	x := engine.FromF32(b, engine.F32, []float32{1, 2, 3, 4}, 1, 4)
	ss := engine.MustAlloc(b, engine.F32, 1)
	b.Fill(ss, 0)
	b.SumSquares(ss, engine.MustAlloc(b, engine.F32, 1<<20)) // uses the workspace
	ids, u := engine.MustAlloc(b, engine.I32, 1), engine.FromF32(b, engine.F32, []float32{0.5}, 1)
	b.Sample(ids, x, u, engine.SampleParams{Temperature: 1, TopP: 1})
	tm, err := b.NewTimer()
	if err != nil {
		t.Fatal(err)
	}
	tm.Start()
	if b.wsSize == 0 {
		t.Fatal("the ops above did not use the workspace; the test checks nothing about it")
	}
	for _, buf := range []*engine.Tensor{x, ss, ids, u} {
		b.FreeBuffer(buf.Buffer())
	}
	// The 1 MiB input of SumSquares is not freed: Close does not free buffers.
	leak := 1 << 22
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	after := readEmuCounters()
	if after.streams != before.streams || after.events != before.events {
		t.Errorf("after Close: %d streams and %d events alive, want %d and %d", after.streams, after.events,
			before.streams, before.events)
	}
	if after.allocations != before.allocations+1 || after.bytes != before.bytes+leak {
		t.Errorf("after Close: %d allocations of %d bytes alive, want %d of %d (the one buffer not freed)",
			after.allocations, after.bytes, before.allocations+1, before.bytes+leak)
	}
	if got := emuPrimaryRefs(1); got != refs {
		t.Errorf("after Close: %d references to the primary context, want %d", got, refs)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if msg := catch(func() { b.Sync() }); !strings.Contains(msg, "after Close") {
		t.Errorf("Sync after Close: panic %q, want one saying the backend is closed", msg)
	}
}

// TestWorkspaceGrowth: a workspace asked for in growing sizes is reallocated
// a logarithmic number of times; a steady loop of ops that use it allocates
// nothing after its first iteration (freeing would wait for the device).
func TestWorkspaceGrowth(t *testing.T) {
	b := newOn(t, 0)
	b.enter()
	start := readEmuCounters().mallocs
	const steps = 1000
	for i := 1; i <= steps; i++ {
		b.workspace(i * 1000)
	}
	grown := readEmuCounters().mallocs - start
	b.exit()
	if grown > 11 { // 1000·2^10 > 10^6
		t.Errorf("a workspace grown in %d steps to 1 MB was allocated %d times, want ≤ 11", steps, grown)
	}
	if b.wsSize < steps*1000 {
		t.Errorf("workspace of %d bytes, want ≥ %d", b.wsSize, steps*1000)
	}

	b2 := newOn(t, 0)
	const n, d, v = 6, 12800, 3000
	x := engine.MustAlloc(b2, engine.F32, n, d)
	w, dw := engine.MustAlloc(b2, engine.F32, d), engine.MustAlloc(b2, engine.F32, d)
	dx, rstd := engine.MustAlloc(b2, engine.F32, n, d), engine.MustAlloc(b2, engine.F32, n)
	logits, ids, u := engine.MustAlloc(b2, engine.F32, n, v), engine.MustAlloc(b2, engine.I32, n), engine.MustAlloc(b2, engine.F32, n)
	ss := engine.MustAlloc(b2, engine.F32, 1)
	for _, t := range []*engine.Tensor{x, w, dw, dx, logits, u, ss} {
		b2.Fill(t, 0.5)
	}
	b2.RMSNorm(dx, rstd, x, w, 1e-5)
	var first int
	for it := range 5 {
		b2.SumSquares(ss, x)
		b2.Sample(ids, logits, u, engine.SampleParams{Temperature: 1, TopP: 0.9})
		b2.RMSNormBackward(dx, dw, x, x, w, rstd)
		if it == 0 {
			first = readEmuCounters().mallocs
		}
	}
	if extra := readEmuCounters().mallocs - first; extra != 0 {
		t.Errorf("a steady loop allocated %d times after its first iteration, want 0", extra)
	}
}

// TestTimer times work on the stream with events (the host clock under the
// emulator) and checks the timer's errors and release.
func TestTimer(t *testing.T) {
	b := newOn(t, 0)
	tm, err := b.NewTimer()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tm.Elapsed(); err == nil {
		t.Error("Elapsed before Start and Stop: no error")
	}
	x := engine.MustAlloc(b, engine.F32, 64, 64)
	t0 := time.Now()
	tm.Start()
	for range 3 {
		b.Gemm(x, x, x, engine.GemmParams{Alpha: 1})
	}
	tm.Stop()
	d, err := tm.Elapsed()
	wall := time.Since(t0)
	if err != nil {
		t.Fatal(err)
	}
	if d <= 0 || d > wall {
		t.Errorf("Elapsed = %v, want in (0, %v] (the wall time around it)", d, wall)
	}
	events := readEmuCounters().events
	if err := tm.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readEmuCounters().events; got != events-2 {
		t.Errorf("Close left %d events, want %d", got, events-2)
	}
	if msg := catch(tm.Start); !strings.Contains(msg, "closed timer") {
		t.Errorf("Start after Close: panic %q", msg)
	}
}

// BenchmarkEnterExit measures what the context discipline adds to every op:
// locking the goroutine to its thread, a context query through cgo (the
// emulator's, a thread-local read as the driver's is), and unlocking.
func BenchmarkEnterExit(bb *testing.B) {
	b, err := New(Options{})
	if err != nil {
		bb.Fatal(err)
	}
	defer b.Close()
	for bb.Loop() {
		b.enter()
		b.exit()
	}
}
