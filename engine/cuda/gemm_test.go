//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"math"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/enginetest"
	"github.com/turnwise/turnwise/engine/ref"
)

// gemmPathCase exercises a path of kernels/gemm.cu that the conformance
// suite's gemm cases do not reach on their own.
type gemmPathCase struct {
	name           string
	m, n, k        int
	transA, transB bool
	batch          int  // 0: plain 2-D
	broadcastA     bool // A has no batch dimension (stride 0)
	offset         int  // elements by which A, B and C start past an aligned address
	alpha, beta    float32
	nanC           bool // C starts as NaN; beta must be 0
}

var gemmPathCases = []gemmPathCase{
	// Rows allow 16-byte copies, extents are not multiples of either tile.
	{name: "vec_nn", m: 130, n: 136, k: 72, alpha: 1, beta: 0.5},
	{name: "vec_nt", m: 130, n: 136, k: 72, transB: true, alpha: 1, beta: 0.5},
	{name: "vec_tn", m: 136, n: 130, k: 72, transA: true, alpha: 1, beta: 0.5},
	{name: "vec_tt", m: 136, n: 136, k: 72, transA: true, transB: true, alpha: 1, beta: 0.5},
	{name: "broadcastA", m: 40, n: 24, k: 48, batch: 3, broadcastA: true, transB: true, alpha: 1},
	// Base pointers one element past a 16-byte boundary: element-wise copies
	// and C accesses.
	{name: "misaligned", m: 33, n: 40, k: 56, transA: true, offset: 1, alpha: -1, beta: 2},
	{name: "nanC", m: 17, n: 24, k: 40, alpha: 1, nanC: true},
	{name: "nanC_k0", m: 5, n: 8, k: 0, alpha: 1, nanC: true},
}

// TestGemmPaths runs gemmPathCases for every dtype combination, and for bf16
// operands with each of the two block tiles (TW_GEMM_TILE).
func TestGemmPaths(t *testing.T) {
	b := newBackend(t)
	for _, dt := range enginetest.FloatDTypes {
		tiles := []string{""}
		if dt == engine.BF16 {
			tiles = []string{"64", "128"}
		}
		outs := []engine.DType{engine.F32}
		if dt != engine.F32 {
			outs = append(outs, dt)
		}
		for _, tile := range tiles {
			for _, cdt := range outs {
				for i, c := range gemmPathCases {
					name := fmt.Sprintf("%v_to_%v/%s", dt, cdt, c.name)
					if tile != "" {
						name = fmt.Sprintf("%v_to_%v/tile%s/%s", dt, cdt, tile, c.name)
					}
					t.Run(name, func(t *testing.T) {
						if tile != "" {
							t.Setenv("TW_GEMM_TILE", tile)
						}
						runGemmPath(t, b, dt, cdt, c, uint64(100+i))
					})
				}
			}
		}
	}
}

func runGemmPath(t *testing.T, b engine.Backend, dt, cdt engine.DType, c gemmPathCase, seed uint64) {
	r := enginetest.Rand(seed)
	ar, ac := c.m, c.k
	if c.transA {
		ar, ac = c.k, c.m
	}
	br, bc := c.k, c.n
	if c.transB {
		br, bc = c.n, c.k
	}
	nb := max(c.batch, 1)
	aBatch := c.batch
	if c.broadcastA {
		aBatch = 0
	}
	av := enginetest.Values(r, dt, max(aBatch, 1)*ar*ac, 1)
	bv := enginetest.Values(r, dt, nb*br*bc, 1)
	cv := enginetest.Values(r, cdt, nb*c.m*c.n, 1)
	if c.nanC {
		for i := range cv {
			cv[i] = float32(math.NaN())
		}
	}
	A := at(b, dt, c.offset*dt.Size(), av).Reshape(shapeOf(aBatch, ar, ac)...)
	B := at(b, dt, c.offset*dt.Size(), bv).Reshape(shapeOf(c.batch, br, bc)...)
	C := at(b, cdt, c.offset*cdt.Size(), cv).Reshape(shapeOf(c.batch, c.m, c.n)...)
	b.Gemm(C, A, B, engine.GemmParams{TransA: c.transA, TransB: c.transB, Alpha: c.alpha, Beta: c.beta})

	var want []float64
	a64, b64, c64 := enginetest.F64(av), enginetest.F64(bv), enginetest.F64(cv)
	for i := 0; i < nb; i++ {
		ao := i * ar * ac
		if c.broadcastA {
			ao = 0
		}
		want = append(want, ref.Gemm(c.transA, c.transB, c.m, c.n, c.k, float64(c.alpha),
			a64[ao:ao+ar*ac], b64[i*br*bc:(i+1)*br*bc], float64(c.beta), c64[i*c.m*c.n:(i+1)*c.m*c.n])...)
	}
	enginetest.Close(t, "C", engine.ToF32(b, C), want, enginetest.Tol(cdt))
}

func shapeOf(batch, r, c int) []int {
	if batch == 0 {
		return []int{r, c}
	}
	return []int{batch, r, c}
}
