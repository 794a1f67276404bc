package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// GateLine is one kernel's verdict.
type GateLine struct {
	Name      string
	Base, Cur float64 // median seconds per call in the baseline and now
	Slowdown  float64 // Cur/Base − 1 (negative: faster)
	Noise     float64 // the larger Spread of the two measurements
	Threshold float64 // the slowdown allowed: max(MaxSlowdown, Noise)
	Raised    bool    // Threshold was raised above MaxSlowdown to the noise
	Failed    bool
	Err       string // the kernel failed to run now
}

// GateReport is the comparison of a run with a baseline.
type GateReport struct {
	MaxSlowdown float64
	// NoiseFloor is the median over the compared kernels of their Noise: how
	// much repeated measurements of unchanged code differ on this machine.
	NoiseFloor float64
	Lines      []GateLine
	Missing    []string // in the baseline, not measured now
	Added      []string // measured now, not in the baseline
	Warnings   []string // the two runs differ in device, backend, shapes or dtype
}

// Gate compares our kernels in cur with the same kernels in base. A kernel
// fails when its median got slower by more than maxSlowdown (a fraction:
// 0.05 is 5%) — or, when the two measurements' own noise is larger than
// that, by more than the noise: a gate tighter than the noise would fail
// unchanged code, so it is never set below it, and the report says for which
// kernels it was raised.
func Gate(base, cur *Result, maxSlowdown float64) GateReport {
	g := GateReport{MaxSlowdown: maxSlowdown}
	for _, f := range []struct{ what, a, b string }{
		{"device", base.Meta.Device, cur.Meta.Device},
		{"backend", base.Meta.Backend, cur.Meta.Backend},
		{"shapes", base.Meta.Shapes, cur.Meta.Shapes},
		{"dtype", base.Meta.DType, cur.Meta.DType},
	} {
		if f.a != f.b {
			g.Warnings = append(g.Warnings, fmt.Sprintf("the baseline's %s is %q, this run's %q: the comparison may mean little", f.what, f.a, f.b))
		}
	}
	now := map[string]*Kernel{}
	for i := range cur.Kernels {
		if k := &cur.Kernels[i]; k.Impl == Ours {
			now[k.Name] = k
		}
	}
	var noises []float64
	for i := range base.Kernels {
		b := &base.Kernels[i]
		if b.Impl != Ours || b.Error != "" {
			continue
		}
		c, ok := now[b.Name]
		if !ok {
			g.Missing = append(g.Missing, b.Name)
			continue
		}
		delete(now, b.Name)
		l := GateLine{Name: b.Name, Base: b.Median, Cur: c.Median}
		if c.Error != "" {
			l.Failed, l.Err = true, c.Error
			g.Lines = append(g.Lines, l)
			continue
		}
		l.Slowdown = c.Median/b.Median - 1
		l.Noise = max(Spread(b.Runs), Spread(c.Runs))
		l.Threshold = maxSlowdown
		if l.Noise > maxSlowdown {
			l.Threshold, l.Raised = l.Noise, true
		}
		l.Failed = l.Slowdown > l.Threshold
		noises = append(noises, l.Noise)
		g.Lines = append(g.Lines, l)
	}
	for name := range now {
		g.Added = append(g.Added, name)
	}
	sort.Strings(g.Added)
	g.NoiseFloor = Median(noises)
	return g
}

// Failed returns the names of the kernels that failed the gate.
func (g GateReport) Failed() []string {
	var names []string
	for _, l := range g.Lines {
		if l.Failed {
			names = append(names, l.Name)
		}
	}
	return names
}

// Write prints the gate's verdict: the noise floor, every kernel compared
// (slowest first), and what could not be compared.
func (g GateReport) Write(w io.Writer) {
	fmt.Fprintf(w, "regression gate: a kernel fails when its median is more than %s slower than the baseline's\n", pct(g.MaxSlowdown))
	fmt.Fprintf(w, "noise floor: %s (median over %d kernels of the spread, (max−min)/median, of their repeated runs; see bench.Spread)\n",
		pct(g.NoiseFloor), len(g.Lines))
	raised := 0
	for _, l := range g.Lines {
		if l.Raised {
			raised++
		}
	}
	if raised > 0 {
		fmt.Fprintf(w, "%d kernels are noisier than %s: each is gated at its own noise instead (marked ↑)\n", raised, pct(g.MaxSlowdown))
	}
	for _, s := range g.Warnings {
		fmt.Fprintln(w, "warning:", s)
	}
	lines := slices.Clone(g.Lines)
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].Slowdown > lines[j].Slowdown })
	const row = "%-6s %-64s %12s %12s %9s %8s\n"
	fmt.Fprintf(w, "\n"+row, "", "kernel", "baseline", "now", "change", "allowed")
	for _, l := range lines {
		verdict := "ok"
		if l.Failed {
			verdict = "SLOWER"
		}
		if l.Err != "" {
			fmt.Fprintf(w, row, "FAILED", l.Name, seconds(l.Base), "error", "", "")
			fmt.Fprintf(w, "       %s\n", l.Err)
			continue
		}
		allowed := pct(l.Threshold)
		if l.Raised {
			allowed += "↑"
		}
		fmt.Fprintf(w, row, verdict, l.Name, seconds(l.Base), seconds(l.Cur), signedPct(l.Slowdown), allowed)
	}
	if len(g.Missing) > 0 {
		fmt.Fprintf(w, "\nin the baseline but not measured now (not gated): %s\n", strings.Join(g.Missing, ", "))
	}
	if len(g.Added) > 0 {
		fmt.Fprintf(w, "\nnew since the baseline (not gated): %s\n", strings.Join(g.Added, ", "))
	}
	if f := g.Failed(); len(f) > 0 {
		fmt.Fprintf(w, "\n%d of %d kernels got slower: %s\n", len(f), len(g.Lines), strings.Join(f, ", "))
	} else {
		fmt.Fprintf(w, "\nall %d kernels within the allowed slowdown\n", len(g.Lines))
	}
}

// Combine adds the runs of a second measurement of the same kernel to k and
// derives its figures again from all of them.
func (k *Kernel) Combine(again *Kernel) {
	if again.Error != "" {
		return
	}
	if k.Error != "" {
		*k = *again
		return
	}
	k.SetRuns(append(slices.Clone(k.Runs), again.Runs...), k.Iters)
}

func pct(f float64) string       { return fmt.Sprintf("%.1f%%", 100*f) }
func signedPct(f float64) string { return fmt.Sprintf("%+.1f%%", 100*f) }

// seconds prints a duration given in seconds with a unit that suits it.
func seconds(s float64) string {
	switch {
	case s >= 1:
		return fmt.Sprintf("%.3f s", s)
	case s >= 1e-3:
		return fmt.Sprintf("%.3f ms", s*1e3)
	default:
		return fmt.Sprintf("%.2f µs", s*1e6)
	}
}

// ParseFraction reads an allowed slowdown written as a percentage ("5%") or
// a fraction ("0.05").
func ParseFraction(s string) (float64, error) {
	t := strings.TrimSpace(s)
	div := 1.0
	if strings.HasSuffix(t, "%") {
		t, div = strings.TrimSuffix(t, "%"), 100
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q is not a non-negative percentage (5%%) or fraction (0.05)", s)
	}
	return f / div, nil
}
