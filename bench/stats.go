package bench

import (
	"math"
	"slices"
	"strings"
)

// Median returns the median of xs (the mean of the middle two for an even
// count, as Python's statistics.median), or 0 for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Spread is the noise of repeated runs: their range over their median,
// (max − min) / median, leaving out the single fastest and slowest run when
// there are five or more (one run caught by a context switch should not
// decide the noise of them all). Two medians of the same code measured again
// differ by less than this in all but unlucky cases, so it is the floor
// below which a difference between runs means nothing.
func Spread(runs []float64) float64 {
	m := Median(runs)
	if m <= 0 {
		return 0
	}
	s := slices.Clone(runs)
	slices.Sort(s)
	if len(s) >= 5 {
		s = s[1 : len(s)-1]
	}
	return (s[len(s)-1] - s[0]) / m
}

// SetRuns records the seconds per call of each repetition and derives the
// median and the achieved TFLOP/s and GB/s from them.
func (k *Kernel) SetRuns(runs []float64, iters int) {
	k.Runs, k.Iters = runs, iters
	k.Median = Median(runs)
	k.TFLOPs, k.GBs = 0, 0
	if k.Median > 0 {
		k.TFLOPs = k.FLOPs / k.Median / 1e12
		k.GBs = float64(k.Bytes) / k.Median / 1e9
	}
}

// SetCeiling sets k's percentage of the ceiling that bounds it: TFLOP/s of
// the GEMM ceiling for compute-bound kernels, GB/s of the copy for
// memory-bound ones. It is left 0 when that ceiling was not measured.
func (k *Kernel) SetCeiling(c Ceilings) {
	k.PctCeiling = 0
	switch {
	case k.Bound == Compute && c.GEMM != nil && c.GEMM.TFLOPs > 0:
		k.PctCeiling = 100 * k.TFLOPs / c.GEMM.TFLOPs
	case k.Bound == Memory && c.Copy != nil && c.Copy.GBs > 0:
		k.PctCeiling = 100 * k.GBs / c.Copy.GBs
	}
}

// SetRuns records the seconds per step of each repetition and derives the
// median, tokens per second and achieved model TFLOP/s; with peakTFLOPs > 0
// (the device's peak, named by peakName) also the model FLOPs utilization.
func (s *Step) SetRuns(runs []float64, peakTFLOPs float64, peakName string) {
	s.Runs = runs
	s.Median = Median(runs)
	s.TokensPerS, s.TFLOPs, s.MFU, s.MFUPeak = 0, 0, 0, ""
	if s.Median > 0 {
		s.TokensPerS = float64(s.Tokens) / s.Median
		s.TFLOPs = s.FLOPsPerToken * s.TokensPerS / 1e12
	}
	if peakTFLOPs > 0 && s.TFLOPs > 0 {
		s.MFU, s.MFUPeak = s.TFLOPs/peakTFLOPs, peakName
	}
}

// SetRuns records the seconds of each repetition of a phase that handles
// tokens tokens and derives the median and tokens per second.
func (g *Generation) SetRuns(runs []float64, tokens int) {
	g.Runs = runs
	g.Median = Median(runs)
	g.TokensPerS = 0
	if g.Median > 0 {
		g.TokensPerS = float64(tokens) / g.Median
	}
}

// specPeaks are the dense bf16 tensor-core peaks of the GPUs the project
// measures on (vendor data sheets, TFLOP/s without sparsity), matched by a
// substring of the device name; the first match wins.
var specPeaks = []struct {
	match  string
	tflops float64
	name   string
}{
	{"H100 PCIe", 756, "H100 PCIe bf16 dense peak (756 TFLOP/s)"},
	{"H100", 989.4, "H100 SXM bf16 dense peak (989 TFLOP/s)"},
	{"H200", 989.4, "H200 bf16 dense peak (989 TFLOP/s)"},
	{"A100", 312, "A100 bf16 dense peak (312 TFLOP/s)"},
}

// SpecPeak returns the data-sheet bf16 peak of a GPU named device, and a
// phrase naming it, or ok false for a device it does not know.
func SpecPeak(device string) (tflops float64, name string, ok bool) {
	for _, p := range specPeaks {
		if strings.Contains(device, p.match) {
			return p.tflops, p.name, true
		}
	}
	return 0, "", false
}

// finite reports whether x is a usable positive figure.
func finite(x float64) bool { return x > 0 && !math.IsInf(x, 0) && !math.IsNaN(x) }
