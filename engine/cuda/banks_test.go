//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/engine/enginetest"
)

// bankVals returns k deterministic values in [−0.5, 0.5).
func bankVals(k, seed int) []float32 {
	v := make([]float32, k)
	for i := range v {
		v[i] = float32((i*7+seed)%13)/13 - 0.5
	}
	return v
}

// The parts of attention runBankAttention runs.
const (
	bankForward  = 1 << iota // the forward of a causal sequence of 192 tokens and a non-causal one of 70
	bankBackward             // their backward too
	bankDecode               // decoding of 3 sequences against caches of 300, 65 and 1 keys
	bankAll      = bankForward | bankBackward | bankDecode
)

// bankParts returns the parts of attention whose kernels cfg changes (all
// for the defaults).
func bankParts(cfg AttentionConfig) int {
	parts := 0
	fwd, bwd, dec := configParts(cfg)
	if fwd {
		parts |= bankForward
	}
	if bwd {
		parts |= bankForward | bankBackward
	}
	if dec {
		parts |= bankDecode
	}
	if parts == 0 {
		return bankAll
	}
	return parts
}

// runBankAttention runs the parts of attention (bankForward, bankBackward,
// bankDecode) on b in dtype dt at head width dh, 4 query heads over 2
// key/value heads.
func runBankAttention(b *Backend, dt engine.DType, dh, parts int) {
	const h, g = 4, 2
	run := func(seqs []int32, nq, nk int, p engine.AttentionParams, backward bool) {
		q := engine.FromF32(b, dt, bankVals(nq*h*dh, 1), nq, h, dh)
		k := engine.FromF32(b, dt, bankVals(nk*g*dh, 2), nk, g, dh)
		v := engine.FromF32(b, dt, bankVals(nk*g*dh, 3), nk, g, dh)
		dout := engine.FromF32(b, dt, bankVals(nq*h*dh, 4), nq, h, dh)
		out, dq := engine.MustAlloc(b, dt, nq, h, dh), engine.MustAlloc(b, dt, nq, h, dh)
		dk, dv := engine.MustAlloc(b, dt, nk, g, dh), engine.MustAlloc(b, dt, nk, g, dh)
		lse := engine.MustAlloc(b, engine.F32, nq, h)
		s := engine.FromI32(b, seqs, len(seqs)/4, 4)
		b.Attention(out, lse, q, k, v, s, p)
		if backward {
			b.AttentionBackward(dq, dk, dv, dout, out, lse, q, k, v, s, p)
		}
		for _, x := range []*engine.Tensor{q, k, v, dout, out, dq, dk, dv, lse, s} {
			b.FreeBuffer(x.Buffer())
		}
	}
	scale := float32(0.088)
	if parts&(bankForward|bankBackward) != 0 {
		run([]int32{0, 192, 0, 192}, 192, 192, engine.AttentionParams{Scale: scale}, parts&bankBackward != 0)
		run([]int32{0, 70, 0, 70}, 70, 70, engine.AttentionParams{Scale: scale, NonCausal: true}, parts&bankBackward != 0)
	}
	if parts&bankDecode != 0 {
		run([]int32{0, 1, 0, 300, 1, 1, 300, 65, 2, 1, 365, 1}, 3, 366, engine.AttentionParams{Scale: scale}, false)
	}
}

// runBankGemm runs on b the bf16 GEMM C = op(A)·op(B) at 192×256×320 in
// each of the four transpositions.
func runBankGemm(b *Backend) {
	const m, n, k = 192, 256, 320
	for _, p := range []engine.GemmParams{{}, {TransA: true}, {TransB: true}, {TransA: true, TransB: true}} {
		p.Alpha = 1
		as, bs := []int{m, k}, []int{k, n}
		if p.TransA {
			as = []int{k, m}
		}
		if p.TransB {
			bs = []int{n, k}
		}
		a := engine.FromF32(b, engine.BF16, bankVals(m*k, 5), as...)
		bm := engine.FromF32(b, engine.BF16, bankVals(k*n, 6), bs...)
		c := engine.MustAlloc(b, engine.BF16, m, n)
		b.Gemm(c, a, bm, p)
		for _, x := range []*engine.Tensor{a, bm, c} {
			b.FreeBuffer(x.Buffer())
		}
	}
}

// checkBanks runs f on the emulator and fails t for every call site whose
// instructions took more shared-memory wavefronts or global-memory sectors
// than the fewest they could, for every load or store of global memory
// through the pack helpers that moves fewer than 8 bytes a lane, and for
// each op of ops (a prefix: "ldmatrix" is any of them) not seen at all.
func checkBanks(t *testing.T, b *Backend, ops []string, f func()) {
	t.Helper()
	sites, _ := countBanks(func() {
		f()
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
	})
	for _, op := range ops {
		if !slices.ContainsFunc(sites, func(s bankSite) bool { return strings.HasPrefix(s.Op, op) }) {
			t.Errorf("no %s counted: the kernels do not make it where the emulator sees it (the pack helpers, sm80.cuh)", op)
		}
	}
	var bad []string
	for _, s := range sites {
		at := fmt.Sprintf("%s at %s:%d (%s): %d instructions", s.Op, s.File, s.Line, s.Kernel, s.Requests)
		if s.Wavefronts != s.Ideal {
			bad = append(bad, fmt.Sprintf("%s took %d wavefronts, at best %d (%.2f×)",
				at, s.Wavefronts, s.Ideal, float64(s.Wavefronts)/float64(s.Ideal)))
		}
		if s.Sectors != s.SectorsIdeal {
			bad = append(bad, fmt.Sprintf("%s touched %d sectors of global memory, at best %d (%.2f×)",
				at, s.Sectors, s.SectorsIdeal, float64(s.Sectors)/float64(s.SectorsIdeal)))
		}
		if (s.Op == "ld.global" || s.Op == "st.global") && s.LaneBytes < 8 {
			bad = append(bad, fmt.Sprintf("%s moved %d bytes a lane", at, s.LaneBytes))
		}
	}
	if len(bad) > 0 {
		t.Errorf("wasted accesses:\n%s", strings.Join(bad, "\n"))
	}
}

// TestSharedMemoryBanks: every ldmatrix, cp.async and ld_shared /
// st_shared access (the backward's Pᵀ and dSᵀ, decoding's merge) of the
// attention kernels — in each configuration a
// sweep tries (bf16 at head width 128, the kernels the configuration
// changes) and the defaults of bf16 at 32 and 64 and of f32 at 32, 64 and
// 128 — and of our bf16 GEMM with either block tile and all four
// transpositions takes the fewest shared-memory wavefronts it can (no bank
// conflicts), and every cp.async reads whole 32-byte sectors of global
// memory, by the emulator's model (kernels/emu/include/tw_emu_banks.h). A
// swizzle, a padding or a copy plan that stops spreading a phase over the
// banks or splits sectors between instructions fails it; the results do
// not show that, and no GPU is there to. Counts do not depend on the order
// of threads: the reversed pass (-short) leaves it out.
func TestSharedMemoryBanks(t *testing.T) {
	if _, ok := countBanks(func() {}); !ok {
		t.Skip("bank conflicts are counted by the emulator (-tags cudaemu); on a GPU the profiler counts them")
	}
	if testing.Short() {
		t.Skip("-short: the bank counts do not depend on the order of threads; the full pass counts them")
	}
	for _, cfg := range AttentionConfigs() {
		if bwdSmem128[[4]int{cfg.BwdRows, cfg.BwdKeys, cfg.BwdStages, cfg.BwdWarpKeys}] > sharedMemoryOptin() {
			continue
		}
		t.Run("attention/"+cfg.String(), func(t *testing.T) {
			b := attnBwdBackend(t, cfg)
			parts, ops := bankParts(cfg), []string{"ldmatrix", "cp.async"}
			if parts&bankBackward != 0 {
				ops = append(ops, "st.shared") // the backward's Pᵀ and dSᵀ
			}
			checkBanks(t, b, ops, func() { runBankAttention(b, engine.BF16, 128, parts) })
		})
	}
	// The configurations are bf16's at width 128; the other widths and f32
	// run their defaults.
	t.Run("attention/other-widths", func(t *testing.T) {
		b := attnBwdBackend(t, AttentionConfig{})
		checkBanks(t, b, []string{"ldmatrix", "cp.async", "st.shared"}, func() {
			for _, dh := range []int{32, 64} {
				runBankAttention(b, engine.BF16, dh, bankAll)
			}
			for _, dh := range []int{32, 64, 128} {
				runBankAttention(b, engine.F32, dh, bankAll)
			}
		})
	})
	for _, tile := range gemmTiles {
		t.Run("gemm/tile="+tile, func(t *testing.T) {
			t.Setenv("TW_GEMM_TILE", tile)
			b := attnBwdBackend(t, AttentionConfig{})
			checkBanks(t, b, []string{"ldmatrix", "cp.async"}, func() { runBankGemm(b) })
		})
	}
}

// bankShapes has Llama-3.1-8B's head width and ratios at widths the
// emulator runs in a second, every extent a multiple of 16 elements.
var bankShapes = enginetest.ModelShapes{
	Name: "aligned", Dim: 512, FFN: 1792, Vocab: 2048, Heads: 4, KVHeads: 1, HeadDim: 128,
	Layers: 2, LoRARank: 16, SeqLens: []int{64}, LogitRows: 8, Decode: 2, Prefill: 8,
}

// TestGlobalAccesses: at extents aligned to 16 bytes, the kernels of each
// memory-bound op — those of the conformance suite but the GEMM and
// attention (which TestSharedMemoryBanks covers), checked against the CPU
// backend as enginetest.RunShapes does, and the flat ones (fill, cast both
// ways, add, dropout, the sum of squares; a copy is the runtime's) — in f32
// and bf16, load
// and store global memory through the pack helpers (kernels/pack.cuh,
// vec.cuh) in accesses of 8 bytes or more per lane (16 for the rows of
// activations; 8 where a lane moves an f32 pair, a u64 key or four bf16)
// that touch whole 32-byte sectors, by the emulator's count. A kernel that
// falls back to scalar 2-byte accesses, or whose lanes split sectors
// between instructions, fails it. (Accesses made without the helpers — an
// index, a row's scalar, the draw's weights (kernels/sample.cu says why) —
// are not counted.) Sampling runs greedy, with a temperature, top-p and
// top-k with top-p, its ids checked against the CPU backend's.
func TestGlobalAccesses(t *testing.T) {
	if _, ok := countBanks(func() {}); !ok {
		t.Skip("global accesses are counted by the emulator (-tags cudaemu); on a GPU the profiler counts them")
	}
	if testing.Short() {
		t.Skip("-short: the counts do not depend on the order of threads; the full pass counts them")
	}
	b := attnBwdBackend(t, AttentionConfig{})
	ref := cpu.New(cpu.Options{})
	both := []string{"ld.global", "st.global"}
	for _, op := range []string{"rmsnorm", "rope", "swiglu", "layernorm", "bias", "gelu", "logsoftmax", "embedding", "adamw_lora"} {
		t.Run(op, func(t *testing.T) {
			checkBanks(t, b, both, func() {
				enginetest.RunShapes(t, b, enginetest.ShapesConfig{Ref: ref, Ops: []string{op}}, bankShapes)
			})
		})
	}
	const rows, cols = 64, 512
	for _, dt := range []engine.DType{engine.F32, engine.BF16} {
		other := map[engine.DType]engine.DType{engine.F32: engine.BF16, engine.BF16: engine.F32}[dt]
		x := engine.FromF32(b, dt, bankVals(rows*cols, 1), rows, cols)
		y := engine.FromF32(b, dt, bankVals(rows*cols, 2), rows, cols)
		out, cast := engine.MustAlloc(b, dt, rows, cols), engine.MustAlloc(b, other, rows, cols)
		sum := engine.MustAlloc(b, engine.F32, 1)
		for _, c := range []struct {
			name string
			want []string
			run  func()
		}{
			{"fill", []string{"st.global"}, func() { b.Fill(out, 0.5) }},
			{"cast", both, func() { b.Cast(cast, x); b.Cast(out, cast) }},
			{"add", both, func() { b.Add(out, x, y) }},
			{"dropout", both, func() { b.Dropout(out, x, engine.DropoutParams{P: 0.25, Seed: 7}) }},
			{"sum_squares", []string{"ld.global"}, func() { b.SumSquares(sum, x) }},
		} {
			t.Run(c.name+"/"+dt.String(), func(t *testing.T) { checkBanks(t, b, c.want, c.run) })
		}
		for _, x := range []*engine.Tensor{x, y, out, cast, sum} {
			b.FreeBuffer(x.Buffer())
		}
	}
	// Sampling: two chunks of a vocabulary of 8192 (kernels/sample.cu).
	const srows, vocab = 3, 8192
	lv, uv := bankVals(srows*vocab, 3), []float32{0.1, 0.5, 0.9}
	for _, dt := range []engine.DType{engine.F32, engine.BF16} {
		for _, sp := range []engine.SampleParams{{}, {Temperature: 1}, {Temperature: 0.8, TopP: 0.9}, {Temperature: 1, TopK: 50, TopP: 0.9}} {
			t.Run(fmt.Sprintf("sample/%v/T=%g_k=%d_p=%g", dt, sp.Temperature, sp.TopK, sp.TopP), func(t *testing.T) {
				var got []int32
				want := both
				if sp.Temperature == 0 { // the chunks' winners are scalars
					want = []string{"ld.global"}
				}
				checkBanks(t, b, want, func() { got = draw(b, dt, lv, uv, srows, vocab, sp) })
				if cpu := draw(ref, dt, lv, uv, srows, vocab, sp); !slices.Equal(got, cpu) {
					t.Errorf("drew %v, CPU %v", got, cpu)
				}
			})
		}
	}
}
