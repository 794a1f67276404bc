//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"math"
	"slices"
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
	// Few output tiles over a long k: bf16 operands split it (split-K; the
	// k-ranges in the comments), the last k-range shorter than the others
	// but for splitk_lora and splitk_nanC; in batches; element-wise copies
	// (splitk_misaligned).
	{name: "splitk_lora", m: 64, n: 16, k: 2048, transB: true, alpha: 1},                              // 4 × 512
	{name: "splitk_nn", m: 20, n: 24, k: 2056, alpha: 1, beta: 0.5},                                   // 3 × 544 + 424
	{name: "splitk_tt", m: 24, n: 20, k: 1544, transA: true, transB: true, alpha: -1, beta: 2},        // 2 × 544 + 456
	{name: "splitk_batch", m: 16, n: 32, k: 1032, batch: 3, broadcastA: true, transB: true, alpha: 1}, // 544 + 488
	{name: "splitk_misaligned", m: 9, n: 13, k: 1030, transA: true, offset: 1, alpha: 1, beta: 1},     // 544 + 486
	{name: "splitk_nanC", m: 16, n: 16, k: 1024, alpha: 1, nanC: true},                                // 2 × 512
	{name: "nanC_k0", m: 5, n: 8, k: 0, alpha: 1, nanC: true},
}

// gemmTiles are the bf16 block tiles TW_GEMM_TILE chooses among
// (kernels/gemm.cu's TcConfigs).
var gemmTiles = []string{"64", "128", "128k64", "256"}

// TestGemmPaths runs gemmPathCases for every dtype combination, and for bf16
// operands with each block tile (TW_GEMM_TILE), each twice: the result must
// be close to the float64 reference and the same bits again, and with bf16
// operands the same bits with every tile (each sums an element's k-steps in
// the same order). It runs our GEMM, also where cuBLASLt would be the
// default.
func TestGemmPaths(t *testing.T) {
	b := ownGEMM(t)
	for _, dt := range enginetest.FloatDTypes {
		tiles := []string{""}
		if dt == engine.BF16 {
			tiles = gemmTiles
		}
		first := map[string][]float32{} // a case's result with the first tile
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
						got := runGemmPath(t, b, dt, cdt, c, uint64(100+i))
						key := fmt.Sprintf("%v/%s", cdt, c.name)
						if f, ok := first[key]; !ok {
							first[key] = got
						} else {
							sameBits(t, fmt.Sprintf("C with tile %s against tile %s", tile, tiles[0]), got, f)
						}
					})
				}
			}
		}
	}
}

// runGemmPath runs case c once, checks it against the float64 reference and
// a second run's bits, and returns its result.
func runGemmPath(t *testing.T, b engine.Backend, dt, cdt engine.DType, c gemmPathCase, seed uint64) []float32 {
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
	run := func() []float32 {
		C := at(b, cdt, c.offset*cdt.Size(), cv).Reshape(shapeOf(c.batch, c.m, c.n)...)
		b.Gemm(C, A, B, engine.GemmParams{TransA: c.transA, TransB: c.transB, Alpha: c.alpha, Beta: c.beta})
		return engine.ToF32(b, C)
	}
	got := run()

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
	enginetest.Close(t, "C", got, want, enginetest.Tol(cdt))
	sameBits(t, "C computed again", run(), got) // a fixed order of summation, split or not
	return got
}

func shapeOf(batch, r, c int) []int {
	if batch == 0 {
		return []int{r, c}
	}
	return []int{batch, r, c}
}

// ownGEMM opens a backend on device 0 that runs our GEMM kernel (where
// cuBLASLt would be the default, on a GPU, too).
func ownGEMM(t *testing.T) *Backend {
	t.Helper()
	b, err := New(Options{GEMM: "own"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// splitRanges returns the k-ranges [lo, hi) that kernels/gemm.cu sums a
// bf16 GEMM of these extents in, by the rule its opening comment states
// (one range, all of k, when it does not split).
func splitRanges(m, n, k, batch int) [][2]int {
	ceil := func(a, b int) int { return (a + b - 1) / b }
	s := min(512/(ceil(m, 64)*ceil(n, 64)*batch), 8, k/512)
	if s < 2 {
		return [][2]int{{0, k}}
	}
	chunk := ceil(ceil(k, s), 32) * 32
	var r [][2]int
	for lo := 0; lo < k; lo += chunk {
		r = append(r, [2]int{lo, min(lo+chunk, k)})
	}
	return r
}

// TestGemmWorkspace checks which GEMMs our kernel splits along k, and into
// how many ranges, by the workspace it asks for: the shapes it is for (the
// LoRA GEMMs and the classifier's input gradient of Llama-3.1-8B at 2048
// tokens, rank 16, a decoding step), and shapes it leaves alone. The same
// rule gives splitRanges, which TestGemmSplitKExact relies on.
func TestGemmWorkspace(t *testing.T) {
	const nt = "nt" // A as stored, B transposed: the model's x·Wᵀ
	for _, c := range []struct {
		name           string
		ab, c          engine.DType
		layout         string // "nn", "nt", "tn" or "tt": whether A and B are transposed
		m, n, k, batch int
		splits         int // 1: not split
	}{
		{"lora_a_qkv: [t_q; t_k; t_v] = [A_q; A_k; A_v]·xᵀ", engine.BF16, engine.BF16, nt, 48, 2048, 4096, 1, 8},
		{"lora_a: x·Aᵀ", engine.BF16, engine.BF16, nt, 2048, 16, 4096, 1, 8},
		{"lora_dt: s·Bᵀ·dyᵀ of gate", engine.BF16, engine.BF16, "tt", 16, 2048, 14336, 1, 8},
		{"lora_gA_qkv: dt·x over the tokens", engine.BF16, engine.F32, "nn", 48, 4096, 2048, 1, 4},
		{"lora_gB: s·dyᵀ·tᵀ over the tokens", engine.BF16, engine.F32, "tt", 4096, 16, 2048, 1, 4},
		{"classifier_dx of a 256-token chunk", engine.BF16, engine.BF16, "nn", 256, 4096, 128256, 1, 2},
		{"decode q_proj, 4 slots (the few-row kernel)", engine.BF16, engine.BF16, nt, 4, 4096, 4096, 1, 1},
		{"decode q_proj, 4 slots, A transposed", engine.BF16, engine.BF16, "tt", 4, 4096, 4096, 1, 8},
		{"value head, 8 columns (the few-row kernel)", engine.BF16, engine.F32, nt, 2048, 8, 4096, 1, 1},
		{"value head, one column of B as stored (the few-row kernel)", engine.BF16, engine.F32, "nn", 2048, 1, 4096, 1, 1},
		{"decode lora_b: y += tᵀ·Bᵀ, one row of t stored [r, 1] (the few-row kernel)", engine.BF16, engine.BF16, "tt", 1, 4096, 1024, 1, 1},
		{"two columns of B as stored", engine.BF16, engine.F32, "nn", 2048, 2, 4096, 1, 8},
		{"decode gate_up, 16 slots", engine.BF16, engine.BF16, nt, 16, 28672, 4096, 1, 1},
		{"batched, 3 × 1 tile", engine.BF16, engine.BF16, nt, 16, 32, 1032, 3, 2},
		{"q_proj: tiles enough", engine.BF16, engine.BF16, nt, 2048, 4096, 4096, 1, 1},
		{"lora_b: k = r", engine.BF16, engine.BF16, nt, 2048, 4096, 16, 1, 1},
		{"k = 1023: too short", engine.BF16, engine.BF16, nt, 20, 24, 1023, 1, 1},
		{"257 tiles", engine.BF16, engine.BF16, nt, 64, 64, 4096, 257, 1},
		{"f32 operands", engine.F32, engine.F32, nt, 20, 24, 4096, 1, 1},
		{"f16 operands (refused)", engine.F16, engine.F16, nt, 20, 24, 4096, 1, 1},
		{"k = 0", engine.BF16, engine.BF16, nt, 20, 24, 0, 1, 1},
		{"k ≥ 2³¹ (refused)", engine.BF16, engine.BF16, nt, 20, 24, 1 << 31, 1, 1},
	} {
		want := 0
		if c.splits > 1 {
			want = c.splits * c.batch * c.m * c.n * 4
		}
		transA, transB := c.layout[0] == 't', c.layout[1] == 't'
		if got := gemmWorkspace(c.c, c.ab, transA, transB, c.m, c.n, c.k, c.batch); got != want {
			t.Errorf("%s (%d×%d×%d, batch %d): workspace %d bytes, want %d (%d k-ranges)", c.name, c.m, c.n, c.k, c.batch, got, want, c.splits)
		}
		if c.ab == engine.BF16 && c.k > 0 && c.k < 1<<31 && skinnySide(c.m, c.n, transA, transB) == 0 {
			if got := len(splitRanges(c.m, c.n, c.k, c.batch)); got != c.splits {
				t.Errorf("%s: splitRanges gives %d ranges, want %d", c.name, got, c.splits)
			}
		}
	}
	// TW_GEMM_SKINNY=off leaves the few-row shapes to the tiled kernel,
	// which splits them.
	t.Setenv("TW_GEMM_SKINNY", "off")
	if got, want := gemmWorkspace(engine.BF16, engine.BF16, false, true, 4, 4096, 4096, 1), 8*4*4096*4; got != want {
		t.Errorf("decode q_proj, 4 slots, TW_GEMM_SKINNY=off: workspace %d bytes, want %d (8 k-ranges)", got, want)
	}
}

// skinnySide is kernels/gemm.cu's rule for the few-row kernel at bf16
// operands: 'a' when it takes A's m rows as X, 'b' when B's n, 0 when the
// tiled kernel runs.
func skinnySide(m, n int, transA, transB bool) int {
	switch {
	case transA && m != 1 || !transB && n != 1:
		return 0
	case m <= 8 && m <= n:
		return 'a'
	case n <= 8:
		return 'b'
	}
	return 0
}

// TestGemmSkinny runs the few-row kernel (kernels/gemm.cu, "Few rows") at
// decoding's shapes and a value head's, both sides, with one row of A
// stored transposed and one column of B as stored, for both dtypes of C it
// writes: close to the float64 reference, in one launch, and the same bits
// with every block shape and loads-in-flight that TW_GEMM_SKINNY chooses
// (1x4, 2x2, 2x4, 4x2) and with its operands one element off
// 16-byte alignment (element loads instead of vector ones) — what it sums,
// and in which order, depends on the extents alone. TW_GEMM_SKINNY=off
// gives the shapes to the tiled kernel: also close to the reference, and
// for the long-k shapes in two launches (split along k), which shows that
// the default ran the other kernel.
func TestGemmSkinny(t *testing.T) {
	b := ownGEMM(t)
	cases := []struct {
		name           string
		m, n, k        int
		transA, transB bool
		batch          int
		broadcastA     bool
		alpha          float32
		beta           float32
		split          bool // the tiled kernel splits it along k
	}{
		{name: "one_row", m: 1, n: 300, k: 1032, transB: true, alpha: 1, split: true},
		{name: "one_row_of_At", m: 1, n: 70, k: 2056, transA: true, transB: true, alpha: 1, beta: 0.5, split: true},
		{name: "one_col_of_B", m: 90, n: 1, k: 2056, alpha: -1, split: true},
		{name: "five_rows_tail", m: 5, n: 130, k: 4100, transB: true, alpha: 0.5, beta: 1, split: true},
		{name: "eight_cols", m: 260, n: 8, k: 2056, transB: true, alpha: 1, beta: -0.5, split: true},
		{name: "three_cols", m: 9, n: 3, k: 40, transB: true, alpha: 2},
		{name: "batch_broadcast", m: 2, n: 40, k: 520, transB: true, batch: 3, broadcastA: true, alpha: 1, beta: 1},
		{name: "k0", m: 3, n: 20, k: 0, transB: true, alpha: 1, beta: 0.5},
	}
	configs := []string{"", "1x4", "2x2", "2x4", "4x2"}
	for _, dts := range [][2]engine.DType{{engine.BF16, engine.BF16}, {engine.BF16, engine.F32}} {
		dt, cdt := dts[0], dts[1]
		for i, c := range cases {
			t.Run(fmt.Sprintf("%v_to_%v/%s", dt, cdt, c.name), func(t *testing.T) {
				if skinnySide(c.m, c.n, c.transA, c.transB) == 0 {
					t.Fatalf("%d×%d is not a few-row shape: the case tests nothing", c.m, c.n)
				}
				r := enginetest.Rand(uint64(300 + i))
				nb := max(c.batch, 1)
				aBatch := c.batch
				if c.broadcastA {
					aBatch = 0
				}
				av := enginetest.Values(r, dt, max(aBatch, 1)*c.m*c.k, 1)
				bv := enginetest.Values(r, dt, nb*c.n*c.k, 1)
				cv := enginetest.Values(r, cdt, nb*c.m*c.n, 1)
				var want []float64
				a64, b64, c64 := enginetest.F64(av), enginetest.F64(bv), enginetest.F64(cv)
				for e := range nb {
					ao := e * c.m * c.k
					if c.broadcastA {
						ao = 0
					}
					want = append(want, ref.Gemm(c.transA, c.transB, c.m, c.n, c.k, float64(c.alpha), a64[ao:ao+c.m*c.k],
						b64[e*c.n*c.k:(e+1)*c.n*c.k], float64(c.beta), c64[e*c.m*c.n:(e+1)*c.m*c.n])...)
				}
				run := func(offset int) ([]float32, int64) {
					ar, ac, br, bc := c.m, c.k, c.k, c.n
					if c.transA {
						ar, ac = c.k, c.m
					}
					if c.transB {
						br, bc = c.n, c.k
					}
					A := at(b, dt, offset*dt.Size(), av).Reshape(shapeOf(aBatch, ar, ac)...)
					B := at(b, dt, offset*dt.Size(), bv).Reshape(shapeOf(c.batch, br, bc)...)
					C := at(b, cdt, offset*cdt.Size(), cv).Reshape(shapeOf(c.batch, c.m, c.n)...)
					_, before := b.Launches()
					b.Gemm(C, A, B, engine.GemmParams{TransA: c.transA, TransB: c.transB, Alpha: c.alpha, Beta: c.beta})
					_, after := b.Launches()
					return engine.ToF32(b, C), after - before
				}
				var first []float32
				for _, cfg := range configs {
					for _, offset := range []int{0, 1} {
						t.Setenv("TW_GEMM_SKINNY", cfg)
						got, launches := run(offset)
						what := fmt.Sprintf("TW_GEMM_SKINNY=%q, offset %d", cfg, offset)
						if launches != 1 {
							t.Errorf("%s: %d launches, want 1", what, launches)
						}
						if first == nil {
							enginetest.Close(t, "C", got, want, enginetest.Tol(cdt))
							first = got
							continue
						}
						sameBits(t, what+": C", got, first)
					}
				}
				t.Setenv("TW_GEMM_SKINNY", "off")
				got, launches := run(0)
				enginetest.Close(t, "C (TW_GEMM_SKINNY=off)", got, want, enginetest.Tol(cdt))
				if c.split && launches != 2 {
					t.Errorf("TW_GEMM_SKINNY=off: %d launches, want 2 (the tiled kernel split along k)", launches)
				}
			})
		}
	}
}

// TestGemmSkinnyConfig checks that TW_GEMM_SKINNY chooses the few-row
// kernel's configuration (TestGemmSkinny's runs under each would otherwise
// all be the default's) and that anything else leaves the default: R = 2
// where W's rows give every SM 16 blocks, U = 4. The default cases' widths
// are on their side of that line on any device (it runs on GPUs too).
func TestGemmSkinnyConfig(t *testing.T) {
	ownGEMM(t) // a current device
	const many, few = 1 << 20, 16
	for _, c := range []struct {
		env         string
		wide        int
		rows, loads int
	}{
		{"", many, 2, 4},
		{"", few, 1, 4},
		{"1x4", many, 1, 4},
		{"2x2", few, 2, 2},
		{"2x4", few, 2, 4},
		{"4x2", many, 4, 2},
		{"4x4", many, 2, 4}, // not compiled
		{"3", few, 1, 4},
		{"off", many, 2, 4}, // the kernel does not run; the rule is skinny_side's
	} {
		t.Setenv("TW_GEMM_SKINNY", c.env)
		if r, u := skinnyConfig(c.wide); r != c.rows || u != c.loads {
			t.Errorf("TW_GEMM_SKINNY=%q, %d rows of W: R = %d, U = %d; want %d, %d", c.env, c.wide, r, u, c.rows, c.loads)
		}
	}
}

// TestGemmSplitKExact checks split GEMMs bit for bit against a reference
// that can be stated exactly: integer inputs whose every partial sum over a
// k-range is exact in f32 in any order (so the kernel's order within a
// range, on tensor cores or the emulator, does not matter), so that the only
// roundings are the kernel's adds of the range sums, in the order
// z = 0, 1, …, and the final alpha·acc + beta·C_old and its rounding to C's
// dtype. The first range holds multiples of 2⁸ (its sum ≈ 2²⁶, where f32's
// step is 8), the others small integers, so that adding the ranges rounds:
// the test checks that the reference differs from one f32 sum over all of k
// in k order, and from the range sums added in reverse order where there are
// more than two (with C in f32). Each case runs with both block tiles and
// twice: the same bits every time.
func TestGemmSplitKExact(t *testing.T) {
	b := ownGEMM(t)
	for i, c := range []struct {
		name           string
		m, n, k, batch int
		transA, transB bool
		broadcastA     bool
		offset         int // elements by which A, B and C start past an aligned address
		cdt            engine.DType
		alpha, beta    float32
	}{
		{name: "lora_a", m: 64, n: 16, k: 2048, transB: true, cdt: engine.BF16, alpha: 1},
		{name: "nn_tail", m: 20, n: 24, k: 2056, cdt: engine.F32, alpha: -2, beta: 0.5},
		{name: "tt_tail", m: 24, n: 20, k: 1544, transA: true, transB: true, cdt: engine.F32, alpha: 1},
		{name: "batch_tail", m: 16, n: 32, k: 1032, batch: 3, broadcastA: true, transB: true, cdt: engine.BF16, alpha: 1, beta: 1},
		{name: "misaligned", m: 9, n: 13, k: 1030, transA: true, offset: 1, cdt: engine.F32, alpha: 1, beta: 1},
		{name: "dw_accumulate", m: 48, n: 40, k: 4096, transA: true, cdt: engine.F32, alpha: 1, beta: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			nb := max(c.batch, 1)
			ranges := splitRanges(c.m, c.n, c.k, nb)
			if len(ranges) < 2 {
				t.Fatalf("%d×%d×%d does not split: the case tests nothing", c.m, c.n, c.k)
			}
			first := ranges[0][1]
			r := enginetest.Rand(uint64(200 + i))
			// op(A) [nbA][m][k] and op(B) [nb][k][n], by k-range.
			value := func(kk int) float32 {
				if kk < first {
					return float32(r.IntN(4) * 256)
				}
				return float32(r.IntN(7) - 3)
			}
			nbA := nb
			if c.broadcastA {
				nbA = 1
			}
			opA := make([]float32, nbA*c.m*c.k)
			for e := range nbA {
				for i := range c.m {
					for kk := range c.k {
						opA[(e*c.m+i)*c.k+kk] = value(kk)
					}
				}
			}
			opB := make([]float32, nb*c.k*c.n)
			for e := range nb {
				for kk := range c.k {
					for j := range c.n {
						opB[(e*c.k+kk)*c.n+j] = value(kk)
					}
				}
			}
			old := make([]float32, nb*c.m*c.n)
			for i := range old {
				old[i] = float32(r.IntN(7) - 3)
			}

			// The reference: each range's sum (exact in f32 for the kernel's
			// ranges, which exact checks), added in order z = 0, 1, … (or
			// reversed); then scaled, C_old added, rounded to C's dtype.
			reference := func(ranges [][2]int, reverse, exact bool) []float32 {
				out := make([]float32, len(old))
				parts := make([]float32, len(ranges))
				for e := range nb {
					ea := e
					if c.broadcastA {
						ea = 0
					}
					for i := range c.m {
						for j := range c.n {
							for z, rg := range ranges {
								p := 0.0
								for kk := rg[0]; kk < rg[1]; kk++ {
									p += float64(opA[(ea*c.m+i)*c.k+kk]) * float64(opB[(e*c.k+kk)*c.n+j])
								}
								if exact && float64(float32(p)) != p {
									t.Fatalf("the sum of range %d is %v, not exact in f32: the test's values are wrong", z, p)
								}
								parts[z] = float32(p)
							}
							if reverse {
								slices.Reverse(parts)
							}
							acc := parts[0]
							for _, p := range parts[1:] {
								acc = float32(acc + p)
							}
							o := (e*c.m+i)*c.n + j
							v := float32(c.alpha * acc)
							if c.beta != 0 {
								v = float32(v + float32(c.beta*old[o]))
							}
							if c.cdt == engine.BF16 {
								v = engine.RoundBF16(v)
							}
							out[o] = v
						}
					}
				}
				return out
			}
			want := reference(ranges, false, true)
			// With C in f32, summing all of k in one f32 accumulator in k
			// order (as an unsplit kernel does, one range of k terms), and
			// adding the range sums in reverse where there are more than two,
			// must give other bits.
			terms := make([][2]int, c.k)
			for kk := range terms {
				terms[kk] = [2]int{kk, kk + 1}
			}
			if c.cdt == engine.F32 && (slices.Equal(want, reference(terms, false, false)) ||
				len(ranges) > 2 && slices.Equal(want, reference(ranges, true, false))) {
				t.Fatal("the reference does not tell the ranges, or the order of their sums, apart: the test's values are wrong")
			}

			// The operands as stored.
			storedA := make([]float32, len(opA))
			for e := range nbA {
				for i := range c.m {
					for kk := range c.k {
						idx := (e*c.m+i)*c.k + kk
						if c.transA {
							idx = (e*c.k+kk)*c.m + i
						}
						storedA[idx] = opA[(e*c.m+i)*c.k+kk]
					}
				}
			}
			storedB := make([]float32, len(opB))
			for e := range nb {
				for kk := range c.k {
					for j := range c.n {
						idx := (e*c.k+kk)*c.n + j
						if c.transB {
							idx = (e*c.n+j)*c.k + kk
						}
						storedB[idx] = opB[(e*c.k+kk)*c.n+j]
					}
				}
			}
			ar, ac, br, bc := c.m, c.k, c.k, c.n
			if c.transA {
				ar, ac = c.k, c.m
			}
			if c.transB {
				br, bc = c.n, c.k
			}
			aBatch := c.batch
			if c.broadcastA {
				aBatch = 0
			}
			A := at(b, engine.BF16, 2*c.offset, storedA).Reshape(shapeOf(aBatch, ar, ac)...)
			B := at(b, engine.BF16, 2*c.offset, storedB).Reshape(shapeOf(c.batch, br, bc)...)
			for _, tile := range gemmTiles {
				t.Setenv("TW_GEMM_TILE", tile)
				for run := range 2 {
					C := at(b, c.cdt, c.cdt.Size()*c.offset, old).Reshape(shapeOf(c.batch, c.m, c.n)...)
					b.Gemm(C, A, B, engine.GemmParams{TransA: c.transA, TransB: c.transB, Alpha: c.alpha, Beta: c.beta})
					sameBits(t, fmt.Sprintf("tile %s, run %d: C", tile, run+1), engine.ToF32(b, C), want)
				}
			}
		})
	}
}

// TestGemmTile checks the block tile our bf16 GEMM takes: 128 × 128 where
// that gives every SM a block, 64 × 64 where it leaves most idle, and
// whatever TW_GEMM_TILE names among the four (an unknown name leaves the
// rule), so that a sweep over TW_GEMM_TILE measures the tile it names.
func TestGemmTile(t *testing.T) {
	ownGEMM(t) // a device to ask
	for _, c := range []struct {
		env         string
		m, n, batch int
		want        string
	}{
		{"", 8192, 8192, 1, "128"}, // 4096 tiles of 128 × 128: more than any GPU's SMs
		{"", 128, 128, 1, "64"},    // one
		{"", 128, 128, 4096, "128"},
		{"64", 8192, 8192, 1, "64"},
		{"128", 64, 64, 1, "128"},
		{"128k64", 64, 64, 1, "128k64"},
		{"256", 64, 64, 1, "256"},
		{"512", 128, 128, 1, "64"},
	} {
		t.Setenv("TW_GEMM_TILE", c.env)
		if got := gemmTile(c.m, c.n, c.batch); got != c.want {
			t.Errorf("TW_GEMM_TILE=%q, %d×%d, batch %d: tile %s, want %s", c.env, c.m, c.n, c.batch, got, c.want)
		}
	}
}
