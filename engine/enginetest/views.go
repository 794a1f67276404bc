package enginetest

import (
	"fmt"
	"math"
	"testing"

	"github.com/turnwise/turnwise/engine"
)

// viewAt returns a tensor of shape holding vals that starts skip elements
// into a fresh buffer: at skip·size bytes, so 16-byte vector access needs a
// misaligned head (or, when operands' skips differ, scalar access).
func viewAt(b engine.Backend, dt engine.DType, vals []float32, skip int, shape ...int) *engine.Tensor {
	n := len(vals)
	all := engine.FromF32(b, dt, append(make([]float32, skip), vals...), skip+n)
	return all.Rows(skip, skip+n).Reshape(shape...)
}

// elementCase is a shape for the element-wise ops' tests, stored skip
// elements into its buffer (viewAt).
type elementCase struct {
	name  string
	shape []int
	skip  int // elements of the buffer before the tensor
}

// elementCases are one element, odd lengths, CLIP's MLP [50, 3072] and
// views that start one or three elements into their buffer (unaligned: a
// GPU's vector path after a misaligned head).
var elementCases = []elementCase{
	{"N=1", []int{1}, 0},
	{"N=37", []int{37}, 0},
	{"16x172", []int{16, 172}, 0},
	{"50x3072", []int{50, 3072}, 0},
	{"3x5x7_offset1", []int{3, 5, 7}, 1},
	{"5x37_offset3", []int{5, 37}, 3},
}

// identical fails unless got and want are identical bit for bit.
func identical(t testing.TB, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s[%d] = %v (%#x), want %v (%#x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// viewSkips are the element offsets of the operands (out or dst first) in
// the view tests: all aligned, one shared misalignment (a vector path after
// a scalar head), and misalignments that differ (no common vector path).
var viewSkips = [][3]int{{0, 0, 0}, {1, 1, 1}, {3, 3, 3}, {7, 7, 7}, {1, 2, 3}, {0, 5, 0}}

// testElementwiseViews checks Add, Fill and Cast on views at element offsets
// that are not 16-byte aligned, with lengths around the 16-byte packs
// (1, 9, 67, 1031): the head before the first aligned pack, the packs, the
// tail after them, and the path without packs must all give the bits of
// one rounding in f32.
func testElementwiseViews(t *testing.T, b engine.Backend) {
	for _, dt := range FloatDTypes {
		for _, n := range []int{1, 9, 67, 1031} {
			for _, sk := range viewSkips {
				t.Run(fmt.Sprintf("%v/n=%d/skips=%d,%d,%d", dt, n, sk[0], sk[1], sk[2]), func(t *testing.T) {
					r := Rand(uint64(n*100 + sk[0]*10 + sk[1]))
					xv, yv := Values(r, dt, n, 2), Values(r, dt, n, 2)
					x, y := viewAt(b, dt, xv, sk[1], n), viewAt(b, dt, yv, sk[2], n)
					out := viewAt(b, dt, filled(n, 9), sk[0], n)
					b.Add(out, x, y)
					want := make([]float32, n)
					for i := range want {
						want[i] = dt.Round(xv[i] + yv[i])
					}
					identical(t, "Add", engine.ToF32(b, out), want)
					b.Add(x, x, y) // in place, at the input's offset
					identical(t, "Add in place", engine.ToF32(b, x), want)
					b.Fill(out, -1.75)
					identical(t, "Fill", engine.ToF32(b, out), filled(n, -1.75))
					for _, to := range []engine.DType{engine.F32, engine.BF16, engine.F16} {
						dst := viewAt(b, to, filled(n, 9), sk[0], n)
						b.Cast(dst, y)
						cw := make([]float32, n)
						for i, v := range yv {
							cw[i] = to.Round(v)
						}
						identical(t, fmt.Sprintf("Cast to %v", to), engine.ToF32(b, dst), cw)
					}
				})
			}
		}
	}
}
