// Package commtest checks an engine.Communicator across the ranks of a real
// job and measures its all-reduce bandwidth. Every rank runs the same calls;
// each rank knows what every other rank contributed (a value is a function
// of its rank and index), so each computes the expected results by plain
// summation and compares. The Gloo tests, `train collectives` (Run: the
// checks, then the bandwidth of each size ParseSizes read) and the GPU
// bundle's NCCL step run it. Local (local.go) is a job whose ranks are
// goroutines of one process, for the tests of data-parallel code.
package commtest

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/turnwise/turnwise/engine"
)

// value is what rank r holds at index i: a multiple of 1/4 in [-1.5r-1.5,
// 1.5r+1.5], so that sums over up to 40 ranks are exact in f32 and bf16 and
// every order of addition gives the same bits.
func value(r, i int) float32 { return float32((r+1)*(i%13-6)) / 4 }

// values returns rank r's values at indices off … off+n−1.
func values(r, off, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = value(r, off+i)
	}
	return v
}

// Check runs every collective of c with n elements per rank (f32 and bf16
// where they sum, f32, bf16 and i32 where they move bytes) and returns an
// error naming the first that gives a wrong result, or that failed.
func Check(b engine.Backend, c engine.Communicator, n int) error {
	w, me := c.Size(), c.Rank()
	for _, dt := range []engine.DType{engine.F32, engine.BF16} {
		// AllReduce.
		x := engine.FromF32(b, dt, values(me, 0, n), n)
		if err := c.AllReduce(x); err != nil {
			return err
		}
		want := make([]float32, n)
		for r := range w {
			for i := range want {
				want[i] += value(r, i)
			}
		}
		if err := same(fmt.Sprintf("AllReduce %v", dt), engine.ToF32(b, x), want); err != nil {
			return err
		}
		b.FreeBuffer(x.Buffer())

		// ReduceScatter.
		in := engine.FromF32(b, dt, values(me, 0, w*n), w*n)
		out := engine.MustAlloc(b, dt, n)
		if err := c.ReduceScatter(out, in); err != nil {
			return err
		}
		for i := range want {
			want[i] = 0
			for r := range w {
				want[i] += value(r, me*n+i)
			}
		}
		if err := same(fmt.Sprintf("ReduceScatter %v", dt), engine.ToF32(b, out), want); err != nil {
			return err
		}
		b.FreeBuffer(in.Buffer())
		b.FreeBuffer(out.Buffer())
	}
	for _, dt := range []engine.DType{engine.F32, engine.BF16, engine.I32} {
		// AllGather.
		in := engine.FromF32(b, dt, values(me, 0, n), n)
		out := engine.MustAlloc(b, dt, w*n)
		if err := c.AllGather(out, in); err != nil {
			return err
		}
		var want []float32
		for r := range w {
			want = append(want, values(r, 0, n)...)
		}
		if dt == engine.I32 { // EncodeF32 truncates toward zero
			for i, v := range want {
				want[i] = float32(int32(v))
			}
		}
		if err := same(fmt.Sprintf("AllGather %v", dt), engine.ToF32(b, out), want); err != nil {
			return err
		}
		b.FreeBuffer(in.Buffer())
		b.FreeBuffer(out.Buffer())

		// Broadcast, from the last rank and from rank 0.
		for _, root := range []int{w - 1, 0} {
			x := engine.FromF32(b, dt, values(me, 0, n), n)
			if err := c.Broadcast(x, root); err != nil {
				return err
			}
			want := values(root, 0, n)
			if dt == engine.I32 {
				for i, v := range want {
					want[i] = float32(int32(v))
				}
			}
			if err := same(fmt.Sprintf("Broadcast %v from rank %d", dt, root), engine.ToF32(b, x), want); err != nil {
				return err
			}
			b.FreeBuffer(x.Buffer())
		}
	}
	if err := c.Barrier(); err != nil {
		return err
	}
	return checkRandom(b, c, n)
}

// checkRandom all-reduces random f32 values (whose sums round, so the order
// of additions shows): the sum must be within 1e-5 of the float64 sum, and
// every rank must hold the same bits.
func checkRandom(b engine.Backend, c engine.Communicator, n int) error {
	w, me := c.Size(), c.Rank()
	rnd := func(r int) []float32 {
		g := rand.New(rand.NewPCG(uint64(r)+1, 7))
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(g.NormFloat64())
		}
		return v
	}
	x := engine.FromF32(b, engine.F32, rnd(me), n)
	defer b.FreeBuffer(x.Buffer())
	if err := c.AllReduce(x); err != nil {
		return err
	}
	got := engine.ToF32(b, x)
	want := make([]float64, n)
	for r := range w {
		for i, v := range rnd(r) {
			want[i] += float64(v)
		}
	}
	for i := range got {
		if math.Abs(float64(got[i])-want[i]) > 1e-5*(1+math.Abs(want[i]))*float64(w) {
			return fmt.Errorf("AllReduce f32 of random values: element %d is %g, want %g", i, got[i], want[i])
		}
	}
	all := engine.MustAlloc(b, engine.F32, w*n)
	defer b.FreeBuffer(all.Buffer())
	if err := c.AllGather(all, x); err != nil {
		return err
	}
	a := engine.ToF32(b, all)
	for r := range w {
		for i := range n {
			if math.Float32bits(a[r*n+i]) != math.Float32bits(got[i]) {
				return fmt.Errorf("AllReduce f32 of random values: rank %d holds %g at %d, rank %d holds %g", r, a[r*n+i], i, me, got[i])
			}
		}
	}
	return nil
}

// same compares exactly: the values of Check sum without rounding.
func same(what string, got, want []float32) error {
	if len(got) != len(want) {
		return fmt.Errorf("%s: %d elements, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Errorf("%s: element %d of %d is %g, want %g", what, i, len(got), got[i], want[i])
		}
	}
	return nil
}

// Bandwidth is an all-reduce's measured speed, as nccl-tests reports it.
type Bandwidth struct {
	Bytes   int           // per rank
	Ranks   int           // world size
	Time    time.Duration // median of the timed repetitions
	AlgGBps float64       // Bytes / Time, in GB/s (1e9 bytes)
	BusGBps float64       // AlgGBps · 2(W−1)/W: what each link carried
}

// MeasureAllReduce all-reduces an f32 tensor of nbytes (rounded down to
// whole elements) reps times after one untimed warm-up, each timed from a
// barrier to the backend's Sync, and returns the median. Every rank calls it
// with the same arguments.
func MeasureAllReduce(b engine.Backend, c engine.Communicator, nbytes, reps int) (Bandwidth, error) {
	n := max(nbytes/4, 1)
	x := engine.MustAlloc(b, engine.F32, n)
	defer b.FreeBuffer(x.Buffer())
	b.Fill(x, 1)
	var times []time.Duration
	for i := range reps + 1 {
		if err := c.Barrier(); err != nil {
			return Bandwidth{}, err
		}
		t0 := time.Now()
		if err := c.AllReduce(x); err != nil {
			return Bandwidth{}, err
		}
		if err := b.Sync(); err != nil {
			return Bandwidth{}, err
		}
		if i > 0 {
			times = append(times, time.Since(t0))
		}
		b.Fill(x, 1) // keep the values finite
	}
	if len(times) == 0 {
		return Bandwidth{}, errors.New("commtest: no repetitions")
	}
	slices.Sort(times)
	bw := Bandwidth{Bytes: 4 * n, Ranks: c.Size(), Time: times[len(times)/2]}
	bw.AlgGBps = float64(bw.Bytes) / bw.Time.Seconds() / 1e9
	bw.BusGBps = bw.AlgGBps * 2 * float64(bw.Ranks-1) / float64(bw.Ranks)
	return bw, nil
}

// ParseSizes reads a comma-separated list of sizes in MiB (blank entries
// skipped), as `train collectives --sizes` takes them.
func ParseSizes(s string) ([]float64, error) {
	var mibs []float64
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("--sizes: %q is not a positive number of MiB", f)
		}
		mibs = append(mibs, v)
	}
	return mibs, nil
}

// Run checks c on b with n elements per rank (Check), says so on w, then
// times an all-reduce of each size in mibs (MiB, the median of reps) and,
// when print is set (rank 0), writes each one's bandwidth on w. It ends
// with a barrier, so that no rank leaves (and the store's server stops)
// before every rank is done.
func Run(b engine.Backend, c engine.Communicator, n int, mibs []float64, reps int, print bool, w io.Writer) error {
	if err := Check(b, c, n); err != nil {
		return err
	}
	fmt.Fprintf(w, "collectives: AllReduce, ReduceScatter (f32, bf16), AllGather, Broadcast (f32, bf16, i32) and Barrier match plain sums over %d ranks (%d elements per rank)\n", c.Size(), n)
	for _, mib := range mibs {
		bw, err := MeasureAllReduce(b, c, int(mib*(1<<20)), reps)
		if err != nil {
			return err
		}
		if print {
			fmt.Fprintf(w, "all-reduce f32 %8.2f MiB over %d ranks: %10.3f ms  algbw %8.3f GB/s  busbw %8.3f GB/s\n",
				float64(bw.Bytes)/(1<<20), bw.Ranks, float64(bw.Time)/float64(time.Millisecond), bw.AlgGBps, bw.BusGBps)
		}
	}
	return c.Barrier()
}
