package enginetest

import (
	"fmt"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/ref"
)

// randTargets returns n targets in [0, v), every ignoreEvery-th one −1
// (ignored) when ignoreEvery > 0.
func randTargets(r interface{ IntN(int) int }, n, v int, ignoreEvery int) []int32 {
	tg := make([]int32, n)
	for i := range tg {
		tg[i] = int32(r.IntN(v))
		if ignoreEvery > 0 && i%ignoreEvery == ignoreEvery-1 {
			tg[i] = -1
		}
	}
	return tg
}

// testLogSoftmax checks LogSoftmaxGather against ref.LogSoftmaxGather and
// LogSoftmaxGatherBackward against finite differences, out of place and in
// place.
func testLogSoftmax(t *testing.T, b engine.Backend) {
	cases := []struct{ n, v int }{{1, 1}, {3, 13}, {7, 512}, {2, 32000}, {1, 128256}}
	for _, dt := range FloatDTypes {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%v/N=%d_V=%d", dt, c.n, c.v), func(t *testing.T) {
				r := Rand(uint64(c.n*c.v) + 17)
				lv := Values(r, dt, c.n*c.v, 8)
				tg := randTargets(r, c.n, c.v, 3)
				logits := engine.FromF32(b, dt, lv, c.n, c.v)
				targets := engine.FromI32(b, tg, c.n)
				logp, lse := engine.MustAlloc(b, engine.F32, c.n), engine.MustAlloc(b, engine.F32, c.n)
				b.LogSoftmaxGather(logp, lse, logits, targets)
				wantP, wantL := ref.LogSoftmaxGather(F64(lv), tg, c.n, c.v)
				// Inputs are exact in either dtype and all arithmetic is f32,
				// so f32 tolerances apply to bf16 logits too.
				Close(t, "logp", engine.ToF32(b, logp), wantP, TolF32)
				Close(t, "lse", engine.ToF32(b, lse), wantL, TolF32)

				gv := Values(r, engine.F32, c.n, 1)
				dl := engine.MustAlloc(b, dt, c.n, c.v)
				b.LogSoftmaxGatherBackward(dl, engine.FromF32(b, engine.F32, gv, c.n), logits, lse, targets)
				l64, g64 := F64(lv), F64(gv)
				loss := func() float64 {
					p, _ := ref.LogSoftmaxGather(l64, tg, c.n, c.v)
					return Dot(g64, p)
				}
				GradCheck(t, "dLogits", r, l64, engine.ToF32(b, dl), loss, 64, GradTol(dt))

				// In place: dLogits aliasing logits gives the same values.
				b.LogSoftmaxGatherBackward(logits, engine.FromF32(b, engine.F32, gv, c.n), logits, lse, targets)
				Close(t, "in place", engine.ToF32(b, logits), F64(engine.ToF32(b, dl)), 0)
			})
		}
	}
}

// testTokenLogProbs checks the chunked classifier + log-softmax composition
// and the backward of a masked cross-entropy built from it.
func testTokenLogProbs(t *testing.T, b engine.Backend) {
	cases := []struct{ n, d, v, chunk int }{{1, 4, 3, 1}, {9, 16, 37, 4}, {13, 32, 500, 13}, {6, 8, 1000, 100}}
	for _, dt := range FloatDTypes {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%v/N=%d_D=%d_V=%d_chunk=%d", dt, c.n, c.d, c.v, c.chunk), func(t *testing.T) {
				r := Rand(uint64(c.n*c.v) + 23)
				hv, wv := Values(r, dt, c.n*c.d, 1), Values(r, dt, c.v*c.d, 1)
				tg := randTargets(r, c.n, c.v, 4)
				h, w := engine.FromF32(b, dt, hv, c.n, c.d), engine.FromF32(b, dt, wv, c.v, c.d)
				targets := engine.FromI32(b, tg, c.n)
				logp, lse := engine.MustAlloc(b, engine.F32, c.n), engine.MustAlloc(b, engine.F32, c.n)
				pool := engine.NewPool(b)
				if err := engine.TokenLogProbs(b, pool, logp, lse, h, w, targets, c.chunk); err != nil {
					t.Fatal(err)
				}
				h64, w64 := F64(hv), F64(wv)
				// Logits are materialised in the activation dtype, as in HF.
				logitsOf := func(round func(float64) float64) []float64 {
					l := ref.Gemm(false, true, c.n, c.v, c.d, 1, h64, w64, 0, nil)
					for i := range l {
						l[i] = round(l[i])
					}
					return l
				}
				wantP, _ := ref.LogSoftmaxGather(logitsOf(rounder(dt)), tg, c.n, c.v)
				Close(t, "logp", engine.ToF32(b, logp), wantP, Tol(dt))

				// Masked mean cross-entropy over two segments (alternate
				// positions): its gradient with respect to logp is −1/count on
				// the positions with a target of each segment, 0 elsewhere.
				wts, counts := make([]float32, c.n), [2]float32{}
				for i := range tg {
					if tg[i] >= 0 {
						counts[i%2]++
					}
				}
				for i := range wts {
					if tg[i] >= 0 {
						wts[i] = -1 / counts[i%2]
					}
				}
				dLogp := engine.FromF32(b, engine.F32, wts, c.n)
				dh := engine.MustAlloc(b, dt, c.n, c.d)
				dw := engine.MustAlloc(b, dt, c.v, c.d)
				if err := engine.TokenLogProbsBackward(b, pool, dh, dw, dLogp, h, w, lse, targets, c.chunk); err != nil {
					t.Fatal(err)
				}
				loss := func() float64 {
					p, _ := ref.LogSoftmaxGather(logitsOf(ref.Identity), tg, c.n, c.v)
					return Dot(F64(wts), p)
				}
				GradCheck(t, "dh", r, h64, engine.ToF32(b, dh), loss, 48, GradTol(dt))
				GradCheck(t, "dw", r, w64, engine.ToF32(b, dw), loss, 48, GradTol(dt))
				// The fused pass gives the same log-probs and gradients.
				lp2, lse2 := engine.MustAlloc(b, engine.F32, c.n), engine.MustAlloc(b, engine.F32, c.n)
				dh2, dw2 := engine.MustAlloc(b, dt, c.n, c.d), engine.MustAlloc(b, dt, c.v, c.d)
				if err := engine.TokenLogProbsFused(b, pool, lp2, lse2, dh2, dw2, dLogp, h, w, targets, c.chunk); err != nil {
					t.Fatal(err)
				}
				Close(t, "fused logp", engine.ToF32(b, lp2), F64(engine.ToF32(b, logp)), 0)
				Close(t, "fused dh", engine.ToF32(b, dh2), F64(engine.ToF32(b, dh)), 0)
				Close(t, "fused dw", engine.ToF32(b, dw2), F64(engine.ToF32(b, dw)), 0)
				if st := pool.Stats(); st.NewBuffers != 1 {
					t.Errorf("logits chunk buffers allocated: %d, want 1 (reused across chunks and calls)", st.NewBuffers)
				}
			})
		}
	}
}
