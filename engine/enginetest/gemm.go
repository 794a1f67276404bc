package enginetest

import (
	"fmt"
	"math"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/ref"
)

type gemmCase struct {
	m, n, k        int
	transA, transB bool
	batch          int  // 0: plain 2-D
	broadcastB     bool // B has no batch dimension
	alpha, beta    float32
	nanC           bool // C holds NaN before (with beta 0: never read)
}

var gemmCases = []gemmCase{
	{m: 1, n: 1, k: 1, alpha: 1},
	{m: 7, n: 5, k: 3, alpha: 1},
	{m: 33, n: 17, k: 65, transB: true, alpha: 1},
	{m: 19, n: 64, k: 31, transA: true, alpha: 0.5, beta: 1},
	{m: 64, n: 48, k: 96, transA: true, transB: true, alpha: 1, beta: -0.5},
	{m: 5, n: 9, k: 130, batch: 3, alpha: 1},
	{m: 6, n: 11, k: 40, batch: 4, broadcastB: true, transB: true, alpha: 2, beta: 1},
	{m: 256, n: 288, k: 768, transB: true, alpha: 1}, // a 24.4M-config MLP shape
	{m: 4, n: 3, k: 0, alpha: 1, beta: 0.5},          // empty inner dimension
	// One row or one column (a decoding step at batch 1: the CPU's GEMV),
	// in each layout.
	{m: 1, n: 37, k: 45, transB: true, alpha: 1, nanC: true},
	{m: 1, n: 29, k: 18, transA: true, alpha: 0.5, beta: 1},
	{m: 23, n: 1, k: 31, alpha: 1, beta: -0.5},
	{m: 17, n: 1, k: 40, transA: true, transB: true, alpha: 2, nanC: true},
	{m: 1, n: 9, k: 12, batch: 3, broadcastB: true, transB: true, alpha: 1},
	// One row against a long Bᵀ (Llama's down projection: the CPU takes
	// B's rows in fours from k = 4096 on), rows in fours and a remainder,
	// k with a tail.
	{m: 1, n: 10, k: 4099, transB: true, alpha: 0.5, beta: 1},
	// A few rows against Bᵀ (a decoding step at batch 2 to 16: the CPU
	// reads B's rows once for all of them): rows in fours and a remainder,
	// k in steps of 16 with and without a tail, and shorter than one.
	{m: 4, n: 70, k: 83, transB: true, alpha: 0.5, beta: 1},
	{m: 7, n: 33, k: 128, transB: true, alpha: 1, nanC: true},
	{m: 16, n: 20, k: 7, transB: true, alpha: 1},
	{m: 3, n: 5, k: 40, batch: 2, broadcastB: true, transB: true, alpha: 1, beta: -1},
	// A few columns against a long A (a value head over many tokens: the
	// CUDA backend's few-row kernel takes B's rows), k with and without a
	// tail.
	{m: 70, n: 3, k: 85, transB: true, alpha: 1, beta: 0.5},
	{m: 130, n: 8, k: 264, transB: true, alpha: 1, nanC: true},
}

func testGemm(t *testing.T, b engine.Backend) {
	for _, dt := range FloatDTypes {
		outs := []engine.DType{engine.F32}
		if dt != engine.F32 {
			outs = append(outs, dt)
		}
		for _, cdt := range outs {
			for i, c := range gemmCases {
				t.Run(fmt.Sprintf("%v_to_%v/%d_%dx%dx%d", dt, cdt, i, c.m, c.n, c.k), func(t *testing.T) {
					runGemmCase(t, b, dt, cdt, c, uint64(i))
				})
			}
		}
	}
	for _, dt := range FloatDTypes {
		t.Run(fmt.Sprintf("backward/%v", dt), func(t *testing.T) { testGemmBackward(t, b, dt) })
	}
}

func shapeOf(batch, r, c int) []int {
	if batch == 0 {
		return []int{r, c}
	}
	return []int{batch, r, c}
}

func runGemmCase(t *testing.T, b engine.Backend, dt, cdt engine.DType, c gemmCase, seed uint64) {
	r := Rand(seed)
	ar, ac := c.m, c.k
	if c.transA {
		ar, ac = c.k, c.m
	}
	br, bc := c.k, c.n
	if c.transB {
		br, bc = c.n, c.k
	}
	nb := max(c.batch, 1)
	bBatch := c.batch
	if c.broadcastB {
		bBatch = 0
	}
	av := Values(r, dt, nb*ar*ac, 1)
	bv := Values(r, dt, max(bBatch, 1)*br*bc, 1)
	cv := Values(r, cdt, nb*c.m*c.n, 1)
	cRef := F64(cv)
	if c.nanC {
		for i := range cv {
			cv[i] = float32(math.NaN())
			cRef[i] = 0
		}
	}
	A := engine.FromF32(b, dt, av, shapeOf(c.batch, ar, ac)...)
	B := engine.FromF32(b, dt, bv, shapeOf(bBatch, br, bc)...)
	C := engine.FromF32(b, cdt, cv, shapeOf(c.batch, c.m, c.n)...)
	b.Gemm(C, A, B, engine.GemmParams{TransA: c.transA, TransB: c.transB, Alpha: c.alpha, Beta: c.beta})
	var want []float64
	a64, b64, c64 := F64(av), F64(bv), cRef
	for i := 0; i < nb; i++ {
		bo := i * br * bc
		if c.broadcastB {
			bo = 0
		}
		want = append(want, ref.Gemm(c.transA, c.transB, c.m, c.n, c.k, float64(c.alpha),
			a64[i*ar*ac:(i+1)*ar*ac], b64[bo:bo+br*bc], float64(c.beta), c64[i*c.m*c.n:(i+1)*c.m*c.n])...)
	}
	Close(t, "C", engine.ToF32(b, C), want, Tol(cdt))
}

// testGemmBackward checks the two GEMMs a linear layer's backward is made of
// — y = x·Wᵀ gives dx = dy·W and dW += dyᵀ·x — against finite differences.
func testGemmBackward(t *testing.T, b engine.Backend, dt engine.DType) {
	const n, in, out = 5, 7, 3
	r := Rand(11)
	xv, wv, gv := Values(r, dt, n*in, 1), Values(r, dt, out*in, 1), Values(r, dt, n*out, 1)
	x, w, g := engine.FromF32(b, dt, xv, n, in), engine.FromF32(b, dt, wv, out, in), engine.FromF32(b, dt, gv, n, out)
	dx := engine.MustAlloc(b, engine.F32, n, in)
	dw := engine.FromF32(b, engine.F32, make([]float32, out*in), out, in)
	if dt != engine.F32 {
		dx = engine.MustAlloc(b, dt, n, in)
		dw = engine.FromF32(b, dt, make([]float32, out*in), out, in)
	}
	b.Gemm(dx, g, w, engine.GemmParams{Alpha: 1})
	b.Gemm(dw, g, x, engine.GemmParams{TransA: true, Alpha: 1, Beta: 1})
	x64, w64, g64 := F64(xv), F64(wv), F64(gv)
	loss := func() float64 { return Dot(g64, ref.Gemm(false, true, n, out, in, 1, x64, w64, 0, nil)) }
	GradCheck(t, "dx", r, x64, engine.ToF32(b, dx), loss, 64, GradTol(dt))
	GradCheck(t, "dW", r, w64, engine.ToF32(b, dw), loss, 64, GradTol(dt))
}
