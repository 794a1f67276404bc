package kernelbench

import (
	"testing"
	"time"

	"github.com/turnwise/turnwise/bench"
	"github.com/turnwise/turnwise/bench/opbench"
	"github.com/turnwise/turnwise/bench/target"
	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
)

func TestCopies(t *testing.T) {
	const l2 = 50 << 20
	for _, c := range []struct {
		bytes, cache int64
		want         int
	}{
		{1 << 30, l2, 1},   // one set is already 20× the cache
		{60 << 20, l2, 2},  // 120 MiB ≥ 100 MiB
		{10 << 20, l2, 10}, // 100 MiB
		{1 << 10, l2, maxCopies},
		{1 << 20, 0, 1}, // no cache to defeat
	} {
		if got := Copies(c.bytes, c.cache); got != c.want {
			t.Errorf("Copies(%d, %d) = %d, want %d", c.bytes, c.cache, got, c.want)
		}
	}
}

// fakeDevice is a device for Measure's timing logic: each call of its op
// spends host time (hostPerCall, spinning) and adds devPerCall of device
// time; its timer measures the calls between Start and Stop at devPerCall
// each, unless a run that was not held took the host longer than the
// device, when the device has waited for the host (the host's time).
type fakeDevice struct {
	hostPerCall, devPerCall time.Duration
	calls                   int // queued since Start
	queued                  time.Time
	held                    bool // a hold is queued before the next Start
	holds                   []time.Duration
	runs                    []int // calls per timed run, and whether held
	heldRuns                []bool
}

// op stands for a call whose launch costs the host hostPerCall: it keeps
// the host busy that long (Measure reads the host's clock around a run).
func (f *fakeDevice) op() {
	for t0 := time.Now(); time.Since(t0) < f.hostPerCall; {
	}
	f.calls++
}

func (f *fakeDevice) Start() { f.calls, f.queued = 0, time.Now() }
func (f *fakeDevice) Stop()  {}
func (f *fakeDevice) Elapsed() (time.Duration, error) {
	f.runs, f.heldRuns = append(f.runs, f.calls), append(f.heldRuns, f.held)
	d := time.Duration(f.calls) * f.devPerCall
	if host := time.Since(f.queued); !f.held && host > d {
		d = host // unheld, the device ran at the host's pace
	}
	f.held = false
	return d, nil
}
func (f *fakeDevice) Close() error { return nil }
func (f *fakeDevice) Hold(d time.Duration) error {
	f.held, f.holds = true, append(f.holds, d)
	return nil
}

// TestMeasureHolds: a case whose calls the host queues more slowly than the
// device runs them is measured in runs of at most heldCalls calls behind
// holds, and its time is the device's; a case the host queues ahead of the
// device is measured without holds.
func TestMeasureHolds(t *testing.T) {
	for _, c := range []struct {
		name      string
		host, dev time.Duration
		wantHeld  bool
	}{
		{"host-bound", 20 * time.Microsecond, 2 * time.Microsecond, true},
		// A second a call (on the fake's clock: nothing waits for it), so
		// that no stall of the host could make it look host-bound.
		{"device-bound", 0, time.Second, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeDevice{hostPerCall: c.host, devPerCall: c.dev}
			tg := &target.Target{NewTimer: func(engine.Backend) (target.Timer, error) { return f, nil }}
			cs := opbench.Case{Name: c.name, Bound: bench.Memory, Bytes: 1 << 20,
				Setup: func(engine.Backend) func() { return f.op }}
			k := Measure(tg, cpu.New(cpu.Options{}), bench.Ours, cs, Options{Reps: 3, MinTime: 20 * time.Millisecond})
			if k.Error != "" {
				t.Fatal(k.Error)
			}
			if k.Held != c.wantHeld {
				t.Errorf("Held = %v, want %v (holds %v)", k.Held, c.wantHeld, f.holds)
			}
			if got := time.Duration(k.Median * float64(time.Second)); got != c.dev {
				t.Errorf("median %v per call, want the device's %v", got, c.dev)
			}
			if !c.wantHeld {
				return
			}
			// The warm-up and estimate ran unheld; every run after them is
			// held and no longer than heldCalls.
			for i, n := range f.runs[2:] {
				if !f.heldRuns[i+2] || n > heldCalls {
					t.Errorf("run %d: %d calls, held %v; want at most %d, held", i+2, n, f.heldRuns[i+2], heldCalls)
				}
			}
			for _, h := range f.holds {
				if h < minHold || h > maxHold {
					t.Errorf("hold %v outside [%v, %v]", h, minHold, maxHold)
				}
			}
		})
	}
}
