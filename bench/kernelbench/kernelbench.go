// Package kernelbench measures the engine's op benchmarks (bench/opbench) on
// a target: each op timed on the backend's own clock (CUDA events on a GPU),
// its inputs rotated through more memory than the last-level cache holds,
// after a warm-up, as the median of several repetitions; the ceilings of the
// device measured in the same run (a large vendor GEMM, a device-to-device
// copy); and our GEMMs beside the vendor's at the same shapes.
package kernelbench

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/turnwise/turnwise/bench"
	"github.com/turnwise/turnwise/bench/opbench"
	"github.com/turnwise/turnwise/bench/target"
	"github.com/turnwise/turnwise/engine"
)

// Options control a measurement.
type Options struct {
	Shapes []opbench.Config // the configurations whose cases run
	DType  engine.DType     // activation and weight dtype
	Reps   int              // repetitions; the median is reported
	// MinTime is how long one repetition lasts at least: the calls per
	// repetition are chosen from a first estimate to fill it (0: one call).
	MinTime time.Duration
	// Keep selects cases by name (nil: all).
	Keep func(name string) bool
	// NoVendor leaves out the vendor's GEMMs.
	NoVendor bool
	// Log receives one line per measurement (nil: silent).
	Log io.Writer
}

// Rotation: inputs are rotated through at least rotateFactor × the cache,
// in at most maxCopies independent sets (tiny ops are launch-bound anyway).
const (
	rotateFactor = 2
	maxCopies    = 256
)

// Holds (on a device whose timer is a target.Holder): a run of calls that
// the host queued in half the time the device took or more may have left
// the device waiting for the host, which would count the host's launch
// overhead as the kernel's time. The runs after it are cut to heldCalls
// calls, so that they fit the device's queue of launches, each behind a
// hold of half as long again as the host takes to queue them (between
// minHold and maxHold); the timed calls then run back to back. Kernel.Held
// says a case was measured so.
const (
	heldCalls = 256
	minHold   = 100 * time.Microsecond
	maxHold   = 20 * time.Millisecond
)

// Copies returns how many independent input sets of an op that touches
// bytes must be rotated through to exceed rotateFactor × cache bytes.
func Copies(bytes, cache int64) int {
	if cache <= 0 || bytes <= 0 {
		return 1
	}
	n := (rotateFactor*cache + bytes - 1) / bytes
	return int(min(max(n, 1), maxCopies))
}

// Measure times case c on backend b. Setup failures (out of memory) and
// failing ops are recorded in the result's Error, not returned: one broken
// case must not hide the others' figures. All memory the case allocated is
// freed before it returns.
func Measure(t *target.Target, b engine.Backend, impl string, c opbench.Case, o Options) (k bench.Kernel) {
	k = bench.Kernel{Name: c.Name, Impl: impl, Bound: c.Bound, FLOPs: c.FLOPs, Bytes: c.Bytes}
	tr := target.Track(b)
	defer tr.FreeAll()
	defer func() {
		if r := recover(); r != nil {
			k.Error = fmt.Sprint(r)
		}
	}()
	k.Copies = Copies(c.Bytes, t.CacheBytes)
	k.RotationBytes = int64(k.Copies) * c.Bytes
	ops := make([]func(), k.Copies)
	for i := range ops {
		ops[i] = c.Setup(tr)
	}
	timer, err := t.NewTimer(b)
	if err != nil {
		k.Error = err.Error()
		return k
	}
	defer timer.Close()
	next := 0
	holder, _ := timer.(target.Holder)
	var hold time.Duration // the hold before each run of calls; 0: none
	timed := func(calls int) (float64, error) {
		var total time.Duration
		for done := 0; done < calls; {
			c := calls - done
			if hold > 0 {
				c = min(c, heldCalls)
				if err := holder.Hold(hold); err != nil {
					return 0, err
				}
				k.Held = true
			}
			t0 := time.Now()
			timer.Start()
			for range c {
				ops[next]()
				next = (next + 1) % len(ops)
			}
			timer.Stop()
			queued := time.Since(t0)
			d, err := timer.Elapsed()
			if err != nil {
				return 0, err
			}
			total += d
			done += c
			// Where the host took half the device's time or more to queue
			// the calls, the device may have waited for it between them:
			// the next runs are held for half as long again as the host
			// takes to queue heldCalls calls, and hold no more than that.
			if holder != nil && 2*queued >= d {
				hold = min(max(queued*3/2*heldCalls/time.Duration(c), minHold), maxHold)
			} else {
				hold = 0
			}
		}
		return total.Seconds() / float64(calls), nil
	}
	// Warm-up: every input set once (first-touch, caches of the libraries),
	// then an estimate of the time per call.
	if _, err := timed(len(ops)); err != nil {
		k.Error = err.Error()
		return k
	}
	est, err := timed(min(len(ops), 8))
	if err != nil {
		k.Error = err.Error()
		return k
	}
	iters := 1
	if o.MinTime > 0 && est > 0 {
		iters = int(min(max(math.Ceil(o.MinTime.Seconds()/est), 1), 100000))
	}
	runs := make([]float64, o.Reps)
	for r := range runs {
		if runs[r], err = timed(iters); err != nil {
			k.Error = err.Error()
			return k
		}
		if !(runs[r] > 0) {
			k.Error = fmt.Sprintf("repetition %d measured %v s per call: the timer cannot resolve this op", r, runs[r])
			return k
		}
	}
	k.SetRuns(runs, iters)
	return k
}

// Ceilings measures the device's ceilings: the vendor's bf16 GEMM at a large
// square size (on the CPU, OpenBLAS through the backend), and a
// device-to-device copy of copyBytes. A ceiling that cannot be measured is
// left nil and a note says why.
func Ceilings(t *target.Target, gemmSize, copyBytes int, o Options) (c bench.Ceilings, notes []string) {
	gemmB, impl := t.Vendor, t.VendorName
	dt := engine.BF16
	if t.Backend.Name() == "cpu" {
		gemmB, impl, dt = t.Backend, "openblas", o.DType
	}
	if gemmB == nil {
		notes = append(notes, "no GEMM ceiling: "+t.VendorNote)
	} else {
		k := Measure(t, gemmB, impl, opbench.SquareGemm(gemmSize, dt), o)
		k.Name = "ceiling/" + k.Name
		logKernel(o.Log, &k)
		if k.Error == "" {
			c.GEMM = &k
		} else {
			notes = append(notes, "the GEMM ceiling failed: "+k.Error)
		}
	}
	k := Measure(t, t.Backend, bench.Ours, opbench.CopyCase(copyBytes), o)
	k.Name = "ceiling/" + k.Name
	logKernel(o.Log, &k)
	if k.Error == "" {
		c.Copy = &k
	} else {
		notes = append(notes, "the copy ceiling failed: "+k.Error)
	}
	return c, notes
}

// Run measures every case of o's shapes on t: ours (the GEMMs on t.Own,
// whose GEMM is our kernel, the rest on t.Backend), and each GEMM again
// with the vendor's GEMM where t has one. Each kernel's percentage of the
// ceilings c is set.
func Run(t *target.Target, c bench.Ceilings, o Options) []bench.Kernel {
	var out []bench.Kernel
	add := func(k bench.Kernel) {
		k.SetCeiling(c)
		logKernel(o.Log, &k)
		out = append(out, k)
	}
	for _, cfg := range o.Shapes {
		for _, cs := range opbench.Cases(cfg, o.DType) {
			if o.Keep != nil && !o.Keep(cs.Name) {
				continue
			}
			gemm := strings.HasPrefix(cs.Name, "gemm/")
			ours := t.Backend
			if gemm {
				ours = t.Own
			}
			add(Measure(t, ours, bench.Ours, cs, o))
			if t.Vendor != nil && !o.NoVendor && gemm {
				add(Measure(t, t.Vendor, t.VendorName, cs, o))
			}
		}
	}
	return out
}

func logKernel(w io.Writer, k *bench.Kernel) {
	if w == nil {
		return
	}
	if k.Error != "" {
		fmt.Fprintf(w, "%-64s %-9s error: %s\n", k.Name, k.Impl, k.Error)
		return
	}
	pct := ""
	if k.PctCeiling > 0 {
		pct = fmt.Sprintf("%5.1f%% of ceiling", k.PctCeiling)
	}
	fmt.Fprintf(w, "%-64s %-9s %12.3f µs %16s  ×%d copies %s\n", k.Name, k.Impl, k.Median*1e6, k.Achieved(), k.Copies, pct)
}
