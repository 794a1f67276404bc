package enginetest

import (
	"fmt"
	"math"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/ref"
)

func testAdamW(t *testing.T, b engine.Backend) {
	p := engine.AdamWParams{LR: 1e-2, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, GradScale: 0.5}
	for _, dt := range FloatDTypes {
		for _, n := range []int{1, 7, 40000} {
			t.Run(fmt.Sprintf("%v/n=%d", dt, n), func(t *testing.T) {
				r := Rand(uint64(n) + 41)
				pv := Values(r, engine.F32, n, 1)
				param := engine.FromF32(b, dt, pv, n)
				var master *engine.Tensor
				p64 := F64(pv)
				if dt != engine.F32 {
					master = engine.FromF32(b, engine.F32, pv, n)
				} else {
					p64 = F64(engine.ToF32(b, param))
				}
				m, v := engine.MustAlloc(b, engine.F32, n), engine.MustAlloc(b, engine.F32, n)
				m64, v64 := make([]float64, n), make([]float64, n)
				grad := engine.MustAlloc(b, dt, n)
				for step := 1; step <= 5; step++ {
					gv := Values(r, dt, n, 1)
					engine.SetF32(b, grad, gv)
					p.Step = step
					b.AdamW(param, grad, m, v, master, p)
					ref.AdamW(p64, F64(gv), m64, v64, float64(p.LR), float64(p.Beta1), float64(p.Beta2),
						float64(p.Eps), float64(p.WeightDecay), float64(p.GradScale), step)
				}
				Close(t, "m", engine.ToF32(b, m), m64, 1e-6)
				Close(t, "v", engine.ToF32(b, v), v64, 1e-6)
				if master != nil {
					Close(t, "master", engine.ToF32(b, master), p64, 1e-6)
					Close(t, "param", engine.ToF32(b, param), p64, Tol(dt))
				} else {
					Close(t, "param", engine.ToF32(b, param), p64, 1e-6)
				}
			})
		}
	}
}

// adamwSpan describes one parameter of a multi-tensor AdamW case.
type adamwSpan struct {
	dt      engine.DType
	n       int
	gap     int  // flat elements left unused before the span (and before its master)
	master  bool // give an f32 parameter a master copy too (non-f32 ones always have one)
	byteOff int  // byte offset of the parameter in its own buffer: a multiple of its element size, not of 16 (no vector path)
}

type adamwMultiCase struct {
	name  string
	gdt   engine.DType // dtype of the flat gradient
	align int          // round every span's offsets up to a multiple of this (1: none)
	spans []adamwSpan
}

// manySmall is a long table of tiny parameters of alternating dtypes.
func manySmall(n int) []adamwSpan {
	s := make([]adamwSpan, n)
	for i := range s {
		s[i] = adamwSpan{dt: FloatDTypes[i%2], n: 1 + i%7, gap: i % 3}
	}
	return s
}

var adamwMultiCases = []adamwMultiCase{
	{"tiny", engine.F32, 1, []adamwSpan{{dt: engine.F32, n: 1}, {dt: engine.BF16, n: 3, gap: 1}}},
	{"mixed_odd", engine.F32, 1, []adamwSpan{
		{dt: engine.F32, n: 7}, {dt: engine.BF16, n: 15, gap: 1, byteOff: 2}, {dt: engine.F16, n: 1, gap: 3},
		{dt: engine.F32, n: 4099, master: true}, {dt: engine.BF16, n: 33333, gap: 2}, {dt: engine.F32, n: 65537, gap: 60, byteOff: 4},
	}},
	{"bf16_grad", engine.BF16, 1, []adamwSpan{{dt: engine.BF16, n: 1000}, {dt: engine.F32, n: 17, gap: 5}}},
	{"aligned", engine.F32, 64, []adamwSpan{{dt: engine.F32, n: 8192}, {dt: engine.BF16, n: 4100}, {dt: engine.F16, n: 12}, {dt: engine.F32, n: 9000}}},
	{"many_small", engine.F32, 1, manySmall(300)},
}

// gapValue fills the flat elements no span owns: the gradient's must not be
// read and the moments' must not be written.
const gapValue = 7

// testAdamWMulti steps each case's table three times (the gradient scale
// changing as clipping would change it) and checks the weights, moments and
// masters against the float64 reference, bit for bit against the same
// updates made one parameter at a time by AdamW, and that the gaps between
// spans stay untouched.
func testAdamWMulti(t *testing.T, b engine.Backend) {
	for ci, c := range adamwMultiCases {
		t.Run(c.name, func(t *testing.T) {
			r := Rand(uint64(ci) + 53)
			round := func(x int) int { return (x + c.align - 1) / c.align * c.align }
			// The layout: flat offsets and master offsets with the gaps.
			off, moff := make([]int, len(c.spans)), make([]int, len(c.spans))
			end, mend := 0, 0
			for i, s := range c.spans {
				off[i], end = round(end+s.gap), round(end+s.gap)+s.n
				moff[i] = -1
				if s.master || s.dt != engine.F32 {
					moff[i], mend = round(mend+s.gap), round(mend+s.gap)+s.n
				}
			}
			// Two copies of every parameter: one for AdamWMulti, one stepped by AdamW.
			params, single := make([]*engine.Tensor, len(c.spans)), make([]*engine.Tensor, len(c.spans))
			p64 := make([][]float64, len(c.spans))
			for i, s := range c.spans {
				pv := Values(r, s.dt, s.n, 1)
				params[i], single[i] = view(b, s.dt, s.byteOff, pv), view(b, s.dt, s.byteOff, pv)
				p64[i] = F64(pv)
			}
			gap := filled(end, gapValue) // moments: 0 in the spans, gapValue between them
			for i, s := range c.spans {
				clear(gap[off[i] : off[i]+s.n])
			}
			grad := engine.MustAlloc(b, c.gdt, end)
			m, v := engine.FromF32(b, engine.F32, gap, end), engine.FromF32(b, engine.F32, gap, end)
			m1, v1 := engine.FromF32(b, engine.F32, gap, end), engine.FromF32(b, engine.F32, gap, end)
			var master, master1 *engine.Tensor
			if mend > 0 {
				master, master1 = engine.FromF32(b, engine.F32, filled(mend, gapValue), mend), engine.FromF32(b, engine.F32, filled(mend, gapValue), mend)
			}
			spans := make([]engine.AdamWSpan, len(c.spans))
			for i := range c.spans {
				spans[i] = engine.AdamWSpan{W: params[i], Off: off[i], MasterOff: moff[i]}
				if moff[i] >= 0 {
					b.Cast(slice(master, moff[i], c.spans[i].n), params[i])
					b.Cast(slice(master1, moff[i], c.spans[i].n), single[i])
				}
			}
			table := engine.NewParamTable(spans)
			defer table.Free(b)
			m64, v64 := make([]float64, end), make([]float64, end)
			p := engine.AdamWParams{LR: 1e-2, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1}
			for step, scale := range []float32{0.5, 0.173, 1} {
				gv := Values(r, c.gdt, end, 1)
				nan := filled(end, float32(math.NaN()))
				for i, s := range c.spans { // NaN in the gaps: reading one would show
					copy(nan[off[i]:off[i]+s.n], gv[off[i]:off[i]+s.n])
				}
				engine.SetF32(b, grad, nan)
				p.Step, p.GradScale = step+1, scale
				b.AdamWMulti(table, grad, m, v, master, p)
				for i, s := range c.spans {
					var mi *engine.Tensor
					if moff[i] >= 0 {
						mi = slice(master1, moff[i], s.n)
					}
					b.AdamW(single[i], slice(grad, off[i], s.n), slice(m1, off[i], s.n), slice(v1, off[i], s.n), mi, p)
				}
				ref.AdamWMulti(p64, off, F64(nan), m64, v64, float64(p.LR), float64(p.Beta1), float64(p.Beta2),
					float64(p.Eps), float64(p.WeightDecay), float64(p.GradScale), p.Step)
			}
			mv, vv := engine.ToF32(b, m), engine.ToF32(b, v)
			var mw []float32
			if master != nil {
				mw = engine.ToF32(b, master)
			}
			var gotM, gotV []float32 // the moments of every span, compared as one tensor
			var wantM, wantV []float64
			for i, s := range c.spans {
				name := fmt.Sprintf("span %d (%v[%d])", i, s.dt, s.n)
				o := off[i]
				gotM, gotV = append(gotM, mv[o:o+s.n]...), append(gotV, vv[o:o+s.n]...)
				wantM, wantV = append(wantM, m64[o:o+s.n]...), append(wantV, v64[o:o+s.n]...)
				if moff[i] >= 0 {
					Close(t, name+" master", mw[moff[i]:moff[i]+s.n], p64[i], 1e-6)
				}
				tol := Tol(s.dt)
				if s.dt == engine.F32 {
					tol = 1e-6
				}
				Close(t, name+" param", engine.ToF32(b, params[i]), p64[i], tol)
				sameBits(t, name+" param vs AdamW", b, params[i], single[i])
			}
			Close(t, "m", gotM, wantM, 1e-6)
			Close(t, "v", gotV, wantV, 1e-6)
			sameBits(t, "m vs AdamW", b, m, m1)
			sameBits(t, "v vs AdamW", b, v, v1)
			if master != nil {
				sameBits(t, "master vs AdamW", b, master, master1)
			}
			// The gaps of m and v still hold gapValue.
			for i := 0; i <= len(c.spans); i++ {
				lo, hi := 0, end
				if i > 0 {
					lo = off[i-1] + c.spans[i-1].n
				}
				if i < len(c.spans) {
					hi = off[i]
				}
				for k := lo; k < hi; k++ {
					if mv[k] != gapValue || vv[k] != gapValue {
						t.Fatalf("gap element %d: m %v, v %v, want %v", k, mv[k], vv[k], gapValue)
					}
				}
			}
		})
	}
}

// view returns a tensor of len(vals) elements of dt at byte offset off of a
// fresh buffer, holding vals.
func view(b engine.Backend, dt engine.DType, off int, vals []float32) *engine.Tensor {
	buf, err := b.NewBuffer(off + len(vals)*dt.Size())
	if err != nil {
		panic(err)
	}
	x := engine.NewTensor(buf, off, dt, len(vals))
	engine.SetF32(b, x, vals)
	return x
}

// slice returns elements [off, off+n) of the 1-D tensor t as a tensor.
func slice(t *engine.Tensor, off, n int) *engine.Tensor {
	return engine.NewTensor(t.Buffer(), t.Offset()+off*t.DType().Size(), t.DType(), n)
}

// sameBits fails t when a and b hold different bytes.
func sameBits(t *testing.T, what string, be engine.Backend, a, b *engine.Tensor) {
	t.Helper()
	x, y := make([]byte, a.Bytes()), make([]byte, b.Bytes())
	be.Download(x, a)
	be.Download(y, b)
	for i := range x {
		if x[i] != y[i] {
			t.Errorf("%s: byte %d of %d differs (%#x vs %#x)", what, i, len(x), x[i], y[i])
			return
		}
	}
}
