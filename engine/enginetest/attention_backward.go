package enginetest

import (
	"fmt"
	"math"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/ref"
)

// AttnBwdCase is an attention shape whose backward is checked whole: every
// element of dq, dk and dv against the float64 gradient
// (ref.AttentionBackward), where testAttention samples finite differences.
type AttnBwdCase struct {
	Name      string
	H, G, Dh  int
	NQ, NK    int      // rows of q and k; 0: the end of the furthest sequence
	Seqs      [][4]int // (qStart, qLen, kStart, kLen)
	Scale     float64  // 0: 1/sqrt(Dh)
	NonCausal bool
}

// AttnBwdCases are sized for flash-style kernels: sequences over several
// blocks of 64 and 128 keys and several tiles of query rows (of all the
// heads of a group), lengths that are multiples of neither, every GQA ratio
// from 1 to 4, head widths from 8 to 128 (72: padded columns), prefill and
// decoding over a cache, uncovered rows, a sequence without queries, T=1.
var AttnBwdCases = []AttnBwdCase{
	{Name: "causal T=300 H4/G1 dh64", H: 4, G: 1, Dh: 64, Seqs: packed(300)},
	{Name: "causal packed 200,57,1 H8/G2 dh128", H: 8, G: 2, Dh: 128, Seqs: packed(200, 57, 1)},
	{Name: "causal packed 90,41 H6/G2 dh128", H: 6, G: 2, Dh: 128, Seqs: packed(90, 41)},
	{Name: "non-causal packed 130,20 H2/G2 dh72", H: 2, G: 2, Dh: 72, Seqs: packed(130, 20), NonCausal: true},
	{Name: "prefill and decode over caches H4/G2 dh32", H: 4, G: 2, Dh: 32, Scale: 0.3,
		Seqs: [][4]int{{0, 70, 0, 250}, {70, 1, 250, 33}}},
	{Name: "uncovered rows H4/G1 dh16", H: 4, G: 1, Dh: 16, NQ: 300, NK: 420,
		Seqs: [][4]int{{10, 100, 12, 180}, {150, 0, 200, 70}, {120, 20, 300, 20}}},
	{Name: "T=1 H2/G1 dh8", H: 2, G: 1, Dh: 8, Seqs: packed(1)},
	{Name: "non-causal queries over more keys H4/G2 dh64", H: 4, G: 2, Dh: 64, NonCausal: true,
		Seqs: [][4]int{{0, 5, 0, 140}, {5, 70, 140, 100}}},
}

func testAttentionBackward(t *testing.T, b engine.Backend) {
	for ci, c := range AttnBwdCases {
		for _, dt := range FloatDTypes {
			t.Run(fmt.Sprintf("%s/%v", c.Name, dt), func(t *testing.T) {
				AttentionBackwardCheck(t, b, c, dt, uint64(500+ci))
			})
		}
	}
}

// AttnBwdTol is the normwise relative error (RelErr) allowed in each
// gradient. Measured on these cases (CPU backend and emulated kernels
// alike): f32 under 1e-6; bf16, which rounds P and dS as tensor-core
// operands and the result, under 5e-3.
func AttnBwdTol(dt engine.DType) float64 {
	if dt == engine.F32 {
		return 2e-5
	}
	return 1.5e-2
}

// AttentionBackwardCheck runs the forward and the backward of case c in dt
// on b, from inputs drawn with seed, checks dq, dk and dv against the
// float64 gradient within AttnBwdTol, and returns them.
func AttentionBackwardCheck(t testing.TB, b engine.Backend, c AttnBwdCase, dt engine.DType, seed uint64) (dq, dk, dv []float32) {
	t.Helper()
	r := Rand(seed)
	h, g, dh := c.H, c.G, c.Dh
	nq, nk := c.NQ, c.NK
	flat := make([]int32, 0, 4*len(c.Seqs))
	for _, s := range c.Seqs {
		nq, nk = max(nq, s[0]+s[1]), max(nk, s[2]+s[3])
		flat = append(flat, int32(s[0]), int32(s[1]), int32(s[2]), int32(s[3]))
	}
	scale := c.Scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(dh))
	}
	qv, kv, vv := Values(r, dt, nq*h*dh, 1), Values(r, dt, nk*g*dh, 1), Values(r, dt, nk*g*dh, 1)
	gv := Values(r, dt, nq*h*dh, 1)
	q := engine.FromF32(b, dt, qv, nq, h, dh)
	k := engine.FromF32(b, dt, kv, nk, g, dh)
	v := engine.FromF32(b, dt, vv, nk, g, dh)
	gOut := engine.FromF32(b, dt, gv, nq, h, dh)
	seqs := engine.FromI32(b, flat, len(c.Seqs), 4)
	p := engine.AttentionParams{Scale: float32(scale), NonCausal: c.NonCausal}
	out := engine.FromF32(b, dt, filled(nq*h*dh, 0), nq, h, dh)
	lse := engine.FromF32(b, engine.F32, filled(nq*h, 0), nq, h)
	b.Attention(out, lse, q, k, v, seqs, p)
	dqT := engine.FromF32(b, dt, filled(nq*h*dh, 7), nq, h, dh)
	dkT := engine.FromF32(b, dt, filled(nk*g*dh, 7), nk, g, dh)
	dvT := engine.FromF32(b, dt, filled(nk*g*dh, 7), nk, g, dh)
	b.AttentionBackward(dqT, dkT, dvT, gOut, out, lse, q, k, v, seqs, p)
	dq, dk, dv = engine.ToF32(b, dqT), engine.ToF32(b, dkT), engine.ToF32(b, dvT)
	wq, wk, wv := ref.AttentionBackward(F64(gv), F64(qv), F64(kv), F64(vv), c.Seqs, nq, nk, h, g, dh, scale, c.NonCausal)
	tol := AttnBwdTol(dt)
	Close(t, "dq", dq, wq, tol)
	Close(t, "dk", dk, wk, tol)
	Close(t, "dv", dv, wv, tol)
	return dq, dk, dv
}
