// Package enginetest is the conformance suite every engine.Backend must pass.
// Each op family has a table of cases (shapes that include 1, odd and
// non-power-of-two sizes); for each case the suite checks
//
//	(a) the backend's forward against the float64 reference in engine/ref,
//	(b) the backend's backward against central finite differences of that
//	    reference, on a sample of coordinates of every input,
//
// in f32 and in bf16. The CPU backend runs it in its tests; the CUDA backend
// and the kernel emulator run the same suite.
//
// Run is the whole suite; each op family's tests are in the file of the
// family's name (elementwise.go, gemm.go, embedding.go, rmsnorm.go,
// layernorm.go, bias.go, rope.go, attention.go, swiglu.go, gelu.go,
// dropout.go, logsoftmax.go, sumsquares.go, adamw.go, sample.go).
// RunShapes runs the ops at a model's real shapes against a second backend, or against the
// backend's own f32 kernels, with float64 spot checks (shapes.go: the modes,
// tolerances and costs; shapeops.go: the ops; shaperef.go: the float64 rows).
// enginetest.go holds Run, the tolerances and the helpers the families
// share (Rand, Values, Close, GradCheck, …).
//
// Errors are measured relative to the largest reference magnitude of the
// tensor compared: err = max_i |got_i − want_i| / max_i |want_i|. This is
// scale-free and is not fooled by cancellation in single elements.
package enginetest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/turnwise/turnwise/engine"
)

// Tolerances of forward results, relative as described in the package doc.
//
// f32: the reference is float64 and the backend accumulates in f32 over at
// most a few thousand terms, so errors stay near 1e-6; 1e-5 is the bound.
//
// bf16: inputs are rounded to bf16 before the reference sees them, so the
// reference and the backend start from identical values; the backend then
// rounds its output (and, as HF does, some intermediates) to bf16, whose unit
// roundoff is 2⁻⁸ ≈ 3.9e-3. Two such roundings give ≤ 7.8e-3 relative to an
// element; relative to the tensor's largest magnitude it can only be smaller.
// 1e-2 bounds it with a margin for f32 accumulation.
const (
	TolF32  = 1e-5
	TolBF16 = 1e-2
)

// Tol returns the forward tolerance for dtype dt.
func Tol(dt engine.DType) float64 {
	if dt == engine.F32 {
		return TolF32
	}
	return TolBF16
}

// GradTol returns the tolerance of a backward result against finite
// differences. The finite differences are taken on the float64 reference
// (step 1e-4·scale, error O(h²) ≈ 1e-8), so the bound is the backend's own
// f32 rounding (f32) or its bf16 rounding of the gradient and of the forward
// values it reuses (bf16: 2⁻⁸ per rounding, a few roundings, 3e-2).
func GradTol(dt engine.DType) float64 {
	if dt == engine.F32 {
		return 1e-4
	}
	return 3e-2
}

// Run runs every op family's conformance tests on b.
func Run(t *testing.T, b engine.Backend) {
	suites := []struct {
		name string
		run  func(t *testing.T, b engine.Backend)
	}{
		{"elementwise", testElementwise},
		{"cast", testCast},
		{"scatter_rows", testScatterRows},
		{"gemm", testGemm},
		{"embedding", testEmbedding},
		{"rmsnorm", testRMSNorm},
		{"layernorm", testLayerNorm},
		{"bias", testBias},
		{"rope", testRoPE},
		{"attention", testAttention},
		{"attention_backward", testAttentionBackward},
		{"swiglu", testSwiGLU},
		{"gelu", testGELU},
		{"dropout", testDropout},
		{"logsoftmax", testLogSoftmax},
		{"tokenlogprobs", testTokenLogProbs},
		{"sumsquares", testSumSquares},
		{"adamw", testAdamW},
		{"adamw_multi", testAdamWMulti},
		{"sample", testSample},
	}
	for _, s := range suites {
		t.Run(s.name, func(t *testing.T) { s.run(t, b) })
	}
}

// Rand returns a seeded generator so every run sees the same inputs.
func Rand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x7475726e77697365)) }

// Values returns n values uniform in [−scale, scale), rounded to dt so that
// the reference and the backend see identical inputs.
func Values(r *rand.Rand, dt engine.DType, n int, scale float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = dt.Round(float32((2*r.Float64() - 1) * scale))
	}
	return out
}

// F64 widens values to float64.
func F64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// RelErr returns max|got−want| / max|want| (absolute error when want is all
// zero). A NaN anywhere in got gives +Inf.
func RelErr(got []float32, want []float64) float64 {
	if len(got) != len(want) {
		panic(fmt.Sprintf("enginetest: RelErr of %d values against %d", len(got), len(want)))
	}
	return diffStatsOf(got, want).relErr()
}

// diffStats are the parts of RelErr, which parts of a tensor can compute
// separately and merge, and where the worst element is.
type diffStats struct {
	maxDiff, maxRef float64
	nonFinite       bool    // got holds a NaN or an infinity, or a difference is NaN
	at              int     // index of the worst element: the first non-finite one, else the largest difference
	got, want       float64 // the values there
}

func diffStatsOf[W float32 | float64](got []float32, want []W) diffStats {
	s := diffStats{maxDiff: -1}
	for i := range got {
		g, w := float64(got[i]), float64(want[i])
		d := math.Abs(g - w)
		if !(d <= s.maxDiff) { // a new worst, or a NaN (then d or w is one) or an infinite g (then d is one)
			if math.IsNaN(d) || math.IsInf(g, 0) {
				return diffStats{nonFinite: true, at: i, got: g, want: w}
			}
			s.maxDiff, s.at, s.got, s.want = d, i, g, w
		}
		if a := math.Abs(w); a > s.maxRef {
			s.maxRef = a
		}
	}
	s.maxDiff = math.Max(s.maxDiff, 0)
	return s
}

// merge returns the statistics of both parts (indices are the callers': a
// part's at must already be offset into the whole).
func (s diffStats) merge(o diffStats) diffStats {
	switch {
	case s.nonFinite:
		return s
	case o.nonFinite:
		return o
	}
	m := s
	if o.maxDiff > s.maxDiff {
		m = o
	}
	m.maxRef = math.Max(s.maxRef, o.maxRef)
	return m
}

func (s diffStats) relErr() float64 {
	switch {
	case s.nonFinite:
		return math.Inf(1)
	case s.maxRef == 0:
		return s.maxDiff
	}
	return s.maxDiff / s.maxRef
}

// Close fails t when RelErr(got, want) exceeds tol.
func Close(t testing.TB, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	if e := RelErr(got, want); !(e <= tol) {
		i := worst(got, want)
		t.Errorf("%s: relative error %.3g > %.3g (worst at %d: got %v, want %v)", what, e, tol, i, got[i], want[i])
	}
}

func worst(got []float32, want []float64) int {
	w, best := 0, -1.0
	for i := range got {
		d := math.Abs(float64(got[i]) - want[i])
		if math.IsNaN(d) {
			return i
		}
		if d > best {
			w, best = i, d
		}
	}
	return w
}

// GradCheck compares an analytic gradient of a scalar loss with respect to x
// against central finite differences of loss on a sample of coordinates.
// loss evaluates the float64 reference with x's current values; x is
// perturbed and restored in place. At most samples coordinates are checked
// (all of them when x is smaller). The error is relative to the largest
// magnitude among the sampled finite-difference values, or to gradFloor when
// that is smaller: where the true gradient all but vanishes (RMSNorm of
// width 1, say), f32 cancellation leaves an absolute error near 1e-6 that
// means nothing. Under -short, at most shortSamples of those coordinates,
// spread over them, are checked.
func GradCheck(t testing.TB, what string, r *rand.Rand, x []float64, analytic []float32, loss func() float64, samples int, tol float64) {
	t.Helper()
	if len(x) != len(analytic) {
		panic(fmt.Sprintf("enginetest: GradCheck %s: %d inputs, %d gradient values", what, len(x), len(analytic)))
	}
	idx := make([]int, 0, samples)
	if len(x) <= samples {
		for i := range x {
			idx = append(idx, i)
		}
	} else {
		for _, i := range r.Perm(len(x))[:samples] {
			idx = append(idx, i)
		}
	}
	if testing.Short() && len(idx) > shortSamples {
		for j := range shortSamples {
			idx[j] = idx[j*len(idx)/shortSamples]
		}
		idx = idx[:shortSamples]
	}
	var scale float64
	for _, v := range x {
		scale = math.Max(scale, math.Abs(v))
	}
	h := 1e-4 * math.Max(scale, 1e-3)
	got := make([]float32, len(idx))
	want := make([]float64, len(idx))
	for j, i := range idx {
		orig := x[i]
		x[i] = orig + h
		lp := loss()
		x[i] = orig - h
		lm := loss()
		x[i] = orig
		want[j] = (lp - lm) / (2 * h)
		got[j] = analytic[i]
	}
	var maxRef float64
	for _, w := range want {
		maxRef = math.Max(maxRef, math.Abs(w))
	}
	if maxRef < gradFloor {
		want = append(want, gradFloor) // only raises the denominator
		got = append(got, gradFloor)
	}
	Close(t, what+" vs finite differences", got, want, tol)
}

// shortSamples is how many coordinates GradCheck checks under -short: the
// passes that run the suite for what concurrency breaks (the race
// detector's, the emulator's with its threads reversed) run it short, and
// the plain passes check the whole sample. The finite differences evaluate
// the float64 reference twice per coordinate: two thirds of the CPU suite's
// time at the full sample.
const shortSamples = 4

// gradFloor is the smallest gradient magnitude GradCheck measures relative
// errors against.
const gradFloor = 1e-3

// Dot returns Σ a·b, the loss Σ g·y that turns a cotangent g into a scalar.
func Dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// FloatDTypes are the activation dtypes every float op is tested in.
var FloatDTypes = []engine.DType{engine.F32, engine.BF16}

// rounder returns the float64 rounding function of dtype dt, used where the
// contract rounds an intermediate to the activation dtype.
func rounder(dt engine.DType) func(float64) float64 {
	return func(x float64) float64 { return float64(dt.Round(float32(x))) }
}
