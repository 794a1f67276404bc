// gemm.cu — C = alpha·op(A)·op(B) + beta·C: tensor-core tiles (mma.sync) for bf16
// operands, SIMT tiles for f32 operands, and one pass over the wide operand
// for a few rows against many (decoding).
//
// Contract: engine.Backend.Gemm (engine/backend.go); the launcher's
// arguments are listed in kernels.h. engine/cuda turns the tensors into
// extents and element strides: for every batch entry z < batch,
//   A_z = a + z·stride_a   [m, k], or stored [k, m] when transa (op(A) = Aᵀ)
//   B_z = b + z·stride_b   [k, n], or stored [n, k] when transb (op(B) = Bᵀ)
//   C_z = c + z·stride_c   [m, n]
// (stride 0: the operand is shared by every entry), dense row-major: a stored
// row of A is k wide (m when transa), of B n wide (k when transb), of C n
// wide. What the kernels add to the contract:
//   dtypes: abdt f32 with cdt f32; abdt bf16 with cdt f32 or bf16. Any other
//   combination (f16 included) is cudaErrorInvalidValue.
//   C = round_cdt(alpha·acc + beta·C_old), acc = Σ_k op(A)·op(B) in f32; one
//   rounding per element. k == 0 gives beta·C_old (0 when beta == 0).
//   m, n or batch == 0 launches nothing and succeeds; negative extents, or
//   extents past what the grid can address (m, n, k ≥ 2³¹, more than 2³¹−1
//   output tiles), are cudaErrorInvalidValue.
//   Deterministic: every element of C is summed by one thread (or one warp's
//   mma) in a fixed order, or, when the GEMM is split along k (below), its
//   fixed k-ranges are so summed and the range sums added in a fixed order,
//   or, for a few rows (below), by one block in a fixed order; no atomics.
//   Which kernel runs, and whether and how a GEMM is split, depends on its
//   dtypes, layouts and extents alone (and on TW_GEMM_SKINNY=off), never on
//   the device or the block tile, so neither do its bits. (A split GEMM's
//   bits are not the unsplit sum's, nor the few-row kernel's: the orders
//   differ.)
//   Split-K (bf16 operands; splitk_plan): a GEMM of few output tiles and a
//   long k leaves most SMs idle — the LoRA GEMMs (2048×16 outputs over
//   k = 4096), their weight gradients (16×4096 over the tokens), the
//   classifier's input gradient (256×4096 over k = 128256). With T the 64×64
//   output tiles of all batch entries, ⌈m/64⌉·⌈n/64⌉·batch,
//     S = min(⌊kWaveTiles / T⌋, kMaxSplit, ⌊k / kMinSplitK⌋) = min(⌊512 / T⌋, 8, ⌊k / 512⌋)
//   k-ranges; S < 2: not split. Otherwise k_chunk = ⌈k / S⌉ rounded up to a
//   multiple of the k-step (32), S becomes ⌈k / k_chunk⌉, and range z is
//   [z·k_chunk, min(k, (z+1)·k_chunk)). Grid z (blockIdx.z) sums its range
//   as the unsplit kernel sums all of k, into its own f32 slice P_z of the
//   workspace [S, batch, m, n], unscaled; a second kernel (SplitKReduceOp)
//   then forms
//     C = round_cdt(alpha·acc + beta·C_old),  acc = (…(P_0 + P_1) + …) + P_{S−1}
//   in f32, C_old read only when beta ≠ 0. The workspace is the caller's:
//   tw_gemm_workspace bytes, S·batch·m·n·4 (0 when not split; S·T ≤
//   kWaveTiles bounds it by 8 MiB); a split GEMM without one is
//   cudaErrorInvalidValue.
//   Tuning knob: the environment variable TW_GEMM_TILE (64, 128, 128k64 or
//   256) forces the bf16 block tile (tests use it to cover each, the GPU
//   bundle's gemm-sweep step to measure each; see "Grid" below).
//   Few rows (skinny_side; gemm_skinny_kernel): A as stored and B
//   transposed — both operands' rows run along k, as in the model's x·Wᵀ
//   (one row of A or one column of B runs along k either way) — with m ≤ 8
//   (m ≤ n) or n ≤ 8, bf16 → f32 or bf16: a decoding
//   step's projections (one row per sequence against the weights), a value
//   head (a few columns against many tokens). Tiles of 64 or 128 rows would
//   multiply mostly padding, and every output element would still need the
//   whole of k, so such a GEMM is one pass over the wide operand W (B when A
//   has the few rows X, A otherwise) at the memory's speed: no tensor cores,
//   no split, no workspace. A block of 128 threads takes R rows of W
//   (blockIdx.x) and every row of X; thread t sums the 16-byte chunks t,
//   t + 128, t + 256, … of the rows (8 elements each, the last one
//   zero-filled past k) in ascending order with one fmaf per element,
//   in element order, into f32; each warp adds its lanes' sums by a
//   butterfly (xor 16, 8, 4, 2, 1) and the block the four warps' sums in
//   warp order; then C = round_cdt(alpha·acc + beta·C_old) as below. The
//   order depends on k alone: R, the chunks each thread has in flight (U)
//   and whether the rows allow 16-byte loads (else element loads) change
//   which instructions run, not the bits. The kernel is compiled for X of
//   1, 2, 4 and 8 rows (fewer run with the rest skipped).
//   Tuning knobs: TW_GEMM_SKINNY=RxU chooses R×U among 1x4, 2x2, 2x4 and
//   4x2 for one row of X, R ∈ {1, 2} for more (skinny_config); by default
//   R = 2 where W has at least 16 rows per SM, else 1, and U = 4 (2 beside
//   4 or 8 rows of X); TW_GEMM_SKINNY=off gives these shapes to the tiled
//   kernel.
//
// bf16 kernel (gemm_bf16_kernel): tensor cores through mma.sync.m16n8k16,
// bf16 operands, f32 accumulators, fragments loaded by ldmatrix (sm80.cuh).
//   Block tile BM×BN, k-tiles BK deep (TcConfig). The two the kernel
//   chooses between (see "Grid" for the two more TW_GEMM_TILE can name):
//     128×128, BK 32, 4 warps as 2 (m) × 2 (n), warp tile 64×64 = 4 × 8
//              accumulator tiles of 16×8;
//      64×64,  BK 32, 4 warps as 2 × 2, warp tile 32×32 = 2 × 4.
//   (Until 2026-11-29 the 128×128 tile had 8 warps of 64×32, wmma fragments
//   and 3 stages: 32 mma per warp between barriers where there are 64 now,
//   and 0.375 ldmatrix.x4 per mma where there are 0.25; it ran at
//   0.39–0.45× cuBLASLt on an H200 at every Llama-3.1-8B projection. The
//   new tile is unmeasured; the kernel suite's gemm cases measure it.)
//   Shared memory: each operand's tile is kept in the layout it has in global
//   memory (so the copy is a straight, coalesced 16-byte-chunk copy), and
//   ldmatrix absorbs the transpose:
//     A, not transposed: sA [BM][BK+8]  → ldmatrix.x4        (A fragments)
//     A, transposed:     sA [BK][BM+8]  → ldmatrix.x4.trans
//     B, not transposed: sB [BK][BN+8]  → ldmatrix.x4.trans  (two n8 tiles' b)
//     B, transposed:     sB [BN][BK+8]  → ldmatrix.x4
//   The +8 bf16 (16 bytes) of padding per row shifts consecutive rows by 4
//   banks (row strides of 80, 144 or 272 bytes), so the eight 16-byte rows
//   that one ldmatrix phase reads fall in distinct banks. After the
//   k-tile's barrier a warp loads the fragments of its first two k-steps
//   (FM + FN/2 ldmatrix.x4 each), then issues its copies of a later k-tile
//   (below), which wait out the loads' latency, then per k-step its FM·FN
//   mma, each followed by the loads of the k-step two on (BK 64); every
//   accumulator sums its k-steps in ascending order. The copies' stores are
//   free of conflicts too (TileCopier permutes the rows of BK-wide tiles);
//   engine/cuda's TestSharedMemoryBanks counts both under the emulator.
//   Pipeline: STAGES buffers of (sA, sB) (4; 3 at BK 64), filled with
//   cp.async (16 bytes, L2 only): while the warps multiply stage kt, the
//   copies of k-tiles kt+1 … kt+STAGES−1 are in flight. Each iteration
//   commits one group (empty past the last k-tile), so wait_group STAGES−2
//   means k-tile kt has landed. One
//   __syncthreads per k-tile, after that wait: it makes every thread's copies
//   of k-tile kt visible to all warps, and the copy issued next, in iteration
//   kt, overwrites the stage read in iteration kt−1, which every warp has
//   finished once it passed the barrier.
//   The asynchronous copies and the fragment loads are the primitives of
//   sm80.cuh: inline PTX under nvcc (sm_80 and later), under the emulator
//   its model of the same instructions (copies land only at the wait that
//   covers them, the destination reads NaN until then; ldmatrix's rows
//   checked to be 16-byte aligned in shared memory), so the emulator runs
//   this kernel's GPU code path and a wrong wait count or a missing barrier
//   fails its tests. Smem, by
//   transposes: 68–80 KiB (128×128) or 36–40 KiB (64×64); both opt in to
//   more than 48 KiB where they need it, and two 128×128 blocks fit an
//   A100's SM.
//   Copies (TileCopier): thread t copies the 16-byte chunks of one column of
//   a tile, THREADS / (chunks per row) rows apart; a warp reads whole 64- to
//   256-byte row pieces. Each thread keeps one pointer and bumps it by a
//   k-tile per copy.
//   Edges: a 16-byte chunk that lies outside the matrix, or past the end of
//   the block's k-range, is zero-filled (cp.async with source size 0).
//   Chunks are all-in or all-out when the stored row width is a multiple of
//   8 and the base 16-byte aligned (every Llama shape; a k-range ends at a
//   multiple of 32 or at k); otherwise that operand is copied element by
//   element with bounds checks (correct for any shape, slower). Zeros in
//   K's tail make the extra products vanish; rows and columns past M and N
//   are computed and dropped by the epilogue.
//   Epilogue: after the main loop the pipeline buffers are reused as one
//   16×20 f32 scratch tile per warp. Each 16×16 piece of the accumulators
//   (two 16×8 tiles) is stored there from mma's layout, and then lane l
//   owns row l/2, columns 8·(l%2)…+7 of it: it reads C (only if beta ≠ 0), forms
//   alpha·acc + beta·C in f32, rounds once and writes 8 consecutive elements
//   (16- or 32-byte vector stores when the row width allows). A split GEMM's
//   blocks write acc itself instead, to their slice of the workspace.
//
// f32 kernel (gemm_f32_kernel): SIMT, block tile 64×64, BK = 16, 256 threads
// as 16×16, each computing a 4×4 micro-tile (rows 4·ty…, columns 4·tx…).
//   Shared memory, double-buffered: sA [2][BK][64+4] holds op(A) k-major and
//   sB [2][BK][64+4] op(B) k-major, so a thread reads its 4 A values and its
//   4 B values of one k as two float4 (the +4 keeps rows 16-byte aligned).
//   Each thread copies one 4-wide run of A and one of B per k-tile: a float4
//   global load when the row width is a multiple of 4 (element loads with
//   bounds checks otherwise), stored as is when the stored layout is already
//   k-major (A transposed, B not), scattered as 4 scalars otherwise.
//   The next k-tile is loaded into registers before the current one is
//   multiplied, and stored to the other buffer after it: one barrier per
//   k-tile. Epilogue as above, 4 elements per thread and row.
//
// Grid: one block per output tile, batch entry and k-range: blockIdx.x the
// tile, blockIdx.y the batch entry (launches are split into chunks of at most
// 65535 entries), blockIdx.z the k-range of a split GEMM (0 otherwise).
// Tiles are ordered in bands of 8 tile rows, column by column within
// a band, so the blocks resident at one time share few A and B panels in L2.
// The bf16 kernel uses the 128×128 tile when that gives at least one block per
// SM, the 64×64 tile otherwise (small M·N: more blocks to fill the GPU).
// Two more are built for TW_GEMM_TILE to try on a GPU, unmeasured as yet:
// 128k64 (128 × 128 in k-tiles 64 deep, 3 stages, 102–108 KiB: each warp
// issues 128 mma between barriers, and two blocks still fit an H100's SM,
// one an A100's) and 256 (128 × 256, 8 warps of 64 × 64, 4 stages, 100–120
// KiB, one block per SM: a quarter less copying per product than 128 × 128).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <climits>
#include <type_traits>

#include "common.cuh"
#include "kernels.h"
#include "pack.cuh"
#include "sm80.cuh"
#include "vec.cuh"

using bf16 = __nv_bfloat16;

// What one launch needs besides the pointers, passed by value.
struct GemmParams {
	int m, n, k;
	int64_t stride_a, stride_b, stride_c; // elements between batch entries
	float alpha, beta;
	int vec;       // kVec* bits: 16-byte vector access allowed on that operand
	int k_chunk;   // split-K: the k-range of grid z is [z·k_chunk, (z+1)·k_chunk) ∩ [0, k); k when unsplit
	float *ws;     // split-K: partial sums [gridDim.z, batch, m, n]; NULL when unsplit
	int64_t batch; // entries in the whole GEMM (the workspace's second extent)
};
enum { kVecA = 1, kVecB = 2, kVecC = 4 };

static constexpr int kGroupM = 8; // tile rows per band of the block order

// The output tile (tm, tn) of block `pid` in a tiles_m × tiles_n grid: bands
// of kGroupM tile rows, walked column by column.
__device__ __forceinline__ void tile_of(int pid, int tiles_m, int tiles_n, int *tm, int *tn) {
	const int band = pid / (kGroupM * tiles_n), first = band * kGroupM;
	const int rows = min(tiles_m - first, kGroupM), in_band = pid - band * kGroupM * tiles_n;
	*tm = first + in_band % rows;
	*tn = in_band / rows;
}

// ---- Runs of C ------------------------------------------------------------------
// W consecutive elements of one row of C, the first n (≥ 1) of them inside
// the matrix. vec: C's rows allow 16-byte access here (the run is then
// aligned to its pack), used when the whole run is inside.

template <int W, class T> __device__ __forceinline__ void load_run(const T *p, int n, bool vec, float (&v)[W]) {
	if (vec && n >= W) {
		load_pack<W>(v, p);
	} else {
TW_UNROLL
		for (int e = 0; e < W; e++) v[e] = e < n ? to_float(p[e]) : 0.0f;
	}
}

template <int W, class T> __device__ __forceinline__ void store_run(T *p, int n, bool vec, const float (&v)[W]) {
	if (vec && n >= W) {
		store_pack<W>(p, v);
	} else {
TW_UNROLL
		for (int e = 0; e < W; e++)
			if (e < n) p[e] = from_float<T>(v[e]);
	}
}

// p[e] = round(alpha·acc[e] + beta·p[e]) for the run at p; C is read only
// when beta ≠ 0.
template <int W, class T>
__device__ __forceinline__ void epilogue_run(T *p, int n, bool vec, float (&acc)[W], float alpha, float beta) {
	if (beta != 0.0f) {
		float old[W];
		load_run<W>(p, n, vec, old);
TW_UNROLL
		for (int e = 0; e < W; e++) acc[e] = alpha * acc[e] + beta * old[e];
	} else {
TW_UNROLL
		for (int e = 0; e < W; e++) acc[e] *= alpha;
	}
	store_run<W>(p, n, vec, acc);
}

// ---- bf16: tensor cores ---------------------------------------------------------

static constexpr int kPad = 8; // bf16 elements of padding per shared-memory row
static constexpr int kBK = 32; // the k-ranges of a split GEMM are multiples of it (splitk_plan)

// A block tile configuration: BM×BN, k-tiles BK deep, warps WARPS_M ×
// WARPS_N, each owning a WM×WN warp tile of FM × FN accumulator tiles of
// mma.m16n8k16 (16×8), STAGES k-tiles in the copy pipeline.
template <int BM_, int BN_, int BK_, int WARPS_M_, int WARPS_N_, int STAGES_, int MIN_BLOCKS_> struct TcConfig {
	static constexpr int BM = BM_, BN = BN_, BK = BK_, STAGES = STAGES_;
	static constexpr int WARPS_M = WARPS_M_, WARPS_N = WARPS_N_, THREADS = 32 * WARPS_M * WARPS_N;
	static constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N; // warp tile
	static constexpr int FM = WM / 16, FN = WN / 8;            // its accumulator tiles
	static constexpr int MIN_BLOCKS = MIN_BLOCKS_;             // per SM, for __launch_bounds__
	static_assert(WM % 16 == 0 && WN % 16 == 0, "warp tiles are whole 16×16 tiles (B is loaded 16 columns at a time)");
	static_assert(BK % 32 == 0 && STAGES >= 2, "k-tiles of whole pairs of k-steps; a pipeline of two stages or more");
};
// The block tiles (TW_GEMM_TILE names them; see "Grid" at the top).
using Tc64 = TcConfig<64, 64, 32, 2, 2, 4, 4>;       // "64"
using Tc128 = TcConfig<128, 128, 32, 2, 2, 4, 2>;    // "128"
using Tc128K64 = TcConfig<128, 128, 64, 2, 2, 3, 2>; // "128k64": half the barriers per product
using Tc256 = TcConfig<128, 256, 32, 2, 4, 4, 1>;    // "256": 8 warps of 64 × 64

// A ROWS×COLS tile of bf16 in shared memory, rows padded to LD elements.
template <int ROWS_, int COLS_> struct SmemTile {
	static constexpr int ROWS = ROWS_, COLS = COLS_, LD = COLS_ + kPad, ELEMS = ROWS_ * LD;
};

// Operand tiles of configuration C, in their global layout (see the top).
template <class C, bool TA> using TileA = SmemTile<TA ? C::BK : C::BM, TA ? C::BM : C::BK>;
template <class C, bool TB> using TileB = SmemTile<TB ? C::BN : C::BK, TB ? C::BK : C::BN>;

template <class C, bool TA, bool TB> constexpr size_t tc_smem_bytes() {
	return (size_t)C::STAGES * (TileA<C, TA>::ELEMS + TileB<C, TB>::ELEMS) * sizeof(bf16);
}

static constexpr int kScratchLd = 20; // f32 row stride of a warp's epilogue scratch [16][20]

// Copies one operand's k-tiles, one after the other, from global into shared
// memory (layout T). The operand is stored as a row-major rows×cols matrix;
// k runs down its rows (KROWS: A transposed, B not) or along them. The tile
// is copied in 16-byte chunks of 8 elements: this thread's chunks lie in one
// column of the tile, kRowStep rows apart, so it keeps one pointer and
// advances it by one k-tile per call. Chunks outside the matrix are zero-
// filled. vec: ld and cols are multiples of 8 and the matrix 16-byte
// aligned, so that a chunk is wholly inside or wholly outside; otherwise
// element-wise copies with bounds checks.
template <class T, int THREADS, int BK, bool KROWS> struct TileCopier {
	static constexpr int kChunksPerRow = T::COLS / 8, kRowStep = THREADS / kChunksPerRow;
	static constexpr int kIters = T::ROWS / kRowStep; // chunks per thread
	static_assert(THREADS % kChunksPerRow == 0 && T::ROWS % kRowStep == 0, "threads tile the tile evenly");
	static_assert(kChunksPerRow != 4 || kRowStep % 8 == 0, "the rows' permutation (see the constructor) stays within a pass");

	const bf16 *base;  // the matrix (a valid address for chunks that are not read)
	const bf16 *g;     // this thread's first chunk in the next k-tile
	int row, col;      // its position in the matrix
	int rows, cols;    // the extents read: elements at or past them read as zero
	int ld;            // the row stride (the stored row width)
	int s_off;         // its offset in a shared tile
	bool vec;

	// m is stored with rows ld wide; rows_ and cols_ bound what is read (a
	// k-range of a split GEMM ends before the row does).
	__device__ __forceinline__ TileCopier(const bf16 *m, int ld_, int rows_, int cols_, int r0, int c0, bool vec_)
		: base(m), rows(rows_), cols(cols_), ld(ld_), vec(vec_) {
		const int n = threadIdx.x / kChunksPerRow, cc = threadIdx.x % kChunksPerRow * 8;
		// The row: n, except in tiles of 4 chunks a row (BK wide, 80-byte
		// stride), where the 8 lanes of a quarter warp — one phase of the
		// shared-memory stores — would take rows n and n + 1, whose chunks
		// land 5 bank groups apart, so that the first row's chunk 3 and the
		// second's chunk 0 meet (twice the wavefronts). Rows are permuted
		// within each 8 so that a quarter warp takes rows r and r + 4 (4
		// groups apart: all 8 distinct); kRowStep is a multiple of 8.
		const int r = kChunksPerRow == 4 ? (n & ~7) | (n & 6) >> 1 | (n & 1) << 2 : n;
		row = r0 + r;
		col = c0 + cc;
		g = m + (int64_t)row * ld + col;
		s_off = r * T::LD + cc;
	}

	// Copies the next k-tile into s, then advances by BK along k.
	__device__ __forceinline__ void copy_next(bf16 *s) {
		const int64_t step = (int64_t)kRowStep * ld; // elements between this thread's chunks
		if (vec) {
TW_UNROLL
			for (int it = 0; it < kIters; it++) {
				const bool in = row + it * kRowStep < rows && col < cols;
				cp_async16(s + s_off + it * kRowStep * T::LD, in ? g + it * step : base, in ? 16 : 0);
			}
		} else {
TW_UNROLL
			for (int it = 0; it < kIters; it++) {
				const bf16 *src = g + it * step;
				uint4 raw = make_uint4(0, 0, 0, 0); // 8 bf16, as raw bits
				uint16_t *e8 = reinterpret_cast<uint16_t *>(&raw);
				if (row + it * kRowStep < rows) {
TW_UNROLL
					for (int e = 0; e < 8; e++)
						if (col + e < cols) e8[e] = reinterpret_cast<const uint16_t *>(src)[e];
				}
				*reinterpret_cast<uint4 *>(s + s_off + it * kRowStep * T::LD) = raw;
			}
		}
		if (KROWS) {
			row += BK;
			g += (int64_t)BK * ld;
		} else {
			col += BK;
			g += BK;
		}
	}
};

template <class C, bool TA, bool TB, class TC>
__global__ void __launch_bounds__(C::THREADS, C::MIN_BLOCKS)
	gemm_bf16_kernel(TC *__restrict__ c, const bf16 *__restrict__ a, const bf16 *__restrict__ b, const GemmParams p) {
	using TA_ = TileA<C, TA>;
	using TB_ = TileB<C, TB>;
	static_assert(C::WARPS_M * C::WARPS_N * 16 * kScratchLd * sizeof(float) <= tc_smem_bytes<C, TA, TB>(),
	              "the epilogue scratch fits in the pipeline buffers");

	extern __shared__ __align__(128) unsigned char smem[];
	bf16 *sA = reinterpret_cast<bf16 *>(smem); // [STAGES][TA_::ROWS][TA_::LD]
	bf16 *sB = sA + C::STAGES * TA_::ELEMS;    // [STAGES][TB_::ROWS][TB_::LD]

	const int M = p.m, N = p.n, K = p.k;
	int tm, tn;
	tile_of(blockIdx.x, ceil_div(M, C::BM), ceil_div(N, C::BN), &tm, &tn);
	const int m0 = tm * C::BM, n0 = tn * C::BN;
	a += blockIdx.y * p.stride_a; // A [M, K] or [K, M]
	b += blockIdx.y * p.stride_b; // B [K, N] or [N, K]
	c += blockIdx.y * p.stride_c; // C [M, N]
	// This block's k-range [k0, k1): all of k unless the GEMM is split.
	const int k0 = blockIdx.z * p.k_chunk, k1 = K - k0 <= p.k_chunk ? K : k0 + p.k_chunk;

	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	const int wm = warp / C::WARPS_N * C::WM, wn = warp % C::WARPS_N * C::WN; // warp tile origin in the block tile

	// The copiers start at k-tile k0 and read k below k1: A at (m0, k0) of
	// [M, K] or (k0, m0) of [K, M]; B at (k0, n0) of [K, N] or (n0, k0) of
	// [N, K].
	TileCopier<TA_, C::THREADS, C::BK, TA> copy_a(a, TA ? M : K, TA ? k1 : M, TA ? M : k1, TA ? k0 : m0, TA ? m0 : k0,
	                                              p.vec & kVecA);
	TileCopier<TB_, C::THREADS, C::BK, !TB> copy_b(b, TB ? K : N, TB ? N : k1, TB ? k1 : N, TB ? n0 : k0, TB ? k0 : n0,
	                                               p.vec & kVecB);

	// The row this lane points ldmatrix at (elements from a stage's start),
	// for the warp's first A fragment (rows wm…wm+15, k 0…15) and its first
	// pair of B tiles (columns wn…wn+15, k 0…15); lane l serves row l % 8
	// of matrix l / 8 (sm80.cuh). An x4 load gives a whole A fragment
	// (a[0…3]) or the b[0], b[1] of two adjacent n8 tiles; the layout in
	// shared memory decides whether it is transposed:
	//   A [BM][LD] (k along rows): lane l → row l % 16, k 8·(l / 16).
	//   A [BK][LD] (transposed): matrix i = k 8·(i / 2)…, m 8·(i % 2)…; .trans.
	//   B [BK][LD] (n along rows): matrix i = k 8·(i % 2)…, n 8·(i / 2)…; .trans.
	//   B [BN][LD] (transposed): matrix i = n 8·(i / 2)…, k 8·(i % 2)….
	const int mi = lane / 8, mr = lane % 8;
	const int a_lane = TA ? (8 * (mi / 2) + mr) * TA_::LD + wm + 8 * (mi % 2) : (wm + lane % 16) * TA_::LD + 8 * (lane / 16);
	const int b_lane = TB ? (wn + 8 * (mi / 2) + mr) * TB_::LD + 8 * (mi % 2) : (8 * (mi % 2) + mr) * TB_::LD + wn + 8 * (mi / 2);
	// Offsets of A fragment i and B pair jp at k-step kk from the first.
	auto a_at = [](int i, int kk) { return TA ? kk * TA_::LD + 16 * i : 16 * i * TA_::LD + kk; };
	auto b_at = [](int jp, int kk) { return TB ? 16 * jp * TB_::LD + kk : kk * TB_::LD + 16 * jp; };

	// acc[i][j]: rows wm+16i…+15, columns wn+8j…+7 of the block tile, in
	// mma.m16n8k16's accumulator layout.
	float acc[C::FM][C::FN][4] = {};

	// Prologue: k-tiles 0 … STAGES−2 in flight, one commit group each.
	constexpr int kStages = C::STAGES;
	const int ktiles = ceil_div(k1 - k0, C::BK);
TW_UNROLL
	for (int s = 0; s < kStages - 1; s++) {
		if (s < ktiles) {
			copy_a.copy_next(sA + s * TA_::ELEMS);
			copy_b.copy_next(sB + s * TB_::ELEMS);
		}
		cp_async_commit();
	}
	int read = 0, write = kStages - 1; // stages of k-tile kt and of k-tile kt + kStages − 1
	for (int kt = 0; kt < ktiles; kt++) {
		cp_async_wait<kStages - 2>(); // k-tile kt has landed (this thread's copies)
		__syncthreads();              // ... everyone's; and stage `write`, read in iteration kt − 1, is free

		// The fragments of the k-tile's first two k-steps, then the copies of
		// k-tile kt + STAGES − 1 (which wait out the fragments' latency),
		// then the products, each k-step's followed by the loads of the
		// k-step two on (into the registers it has just read): a k-step's
		// loads are in flight while the one before it multiplies.
		const bf16 *tA = sA + read * TA_::ELEMS + a_lane, *tB = sB + read * TB_::ELEMS + b_lane;
		constexpr int KS = C::BK / 16; // k-steps of 16 in a k-tile
		uint32_t fa[2][C::FM][4];      // per k-step (two in flight), the A fragment of each 16 rows of the warp tile
		uint32_t fb[2][C::FN / 2][4];  // per k-step, b[0], b[1] of each pair of n8 tiles
		auto load = [&](int s) {
TW_UNROLL
			for (int i = 0; i < C::FM; i++) ldmatrix<4, TA>(fa[s % 2][i], tA + a_at(i, 16 * s));
TW_UNROLL
			for (int jp = 0; jp < C::FN / 2; jp++) ldmatrix<4, !TB>(fb[s % 2][jp], tB + b_at(jp, 16 * s));
		};
		load(0);
		load(1);
		if (kt + kStages - 1 < ktiles) {
			copy_a.copy_next(sA + write * TA_::ELEMS);
			copy_b.copy_next(sB + write * TB_::ELEMS);
		}
		cp_async_commit();
TW_UNROLL
		for (int s = 0; s < KS; s++) {
TW_UNROLL
			for (int i = 0; i < C::FM; i++)
TW_UNROLL
				for (int j = 0; j < C::FN; j++)
					mma_bf16_m16n8k16(acc[i][j], fa[s % 2][i], fb[s % 2][j / 2] + 2 * (j % 2), acc[i][j]);
			if (s + 2 < KS) load(s + 2);
		}
		read = read == kStages - 1 ? 0 : read + 1;
		write = write == kStages - 1 ? 0 : write + 1;
	}
	cp_async_wait<0>();
	__syncthreads(); // all warps are done with the stages: reuse them as scratch

	// Each 16×16 piece of the warp tile (accumulator tiles j = 2jp, 2jp+1)
	// goes through the warp's scratch: lane (g, t) holds rows g and g + 8,
	// columns 2t, 2t+1 of each; then lane l owns row l/2, columns
	// 8·(l%2)…+7, a run of C.
	float *scratch = reinterpret_cast<float *>(smem) + warp * 16 * kScratchLd; // [16][kScratchLd]
	const int g = lane / 4, t = lane % 4;
	const int r = lane / 2, c8 = lane % 2 * 8; // this lane's run
TW_UNROLL
	for (int i = 0; i < C::FM; i++)
TW_UNROLL
		for (int jp = 0; jp < C::FN / 2; jp++) {
			const int fm = m0 + wm + i * 16, fn = n0 + wn + jp * 16; // the piece's origin in C
			if (fm >= M || fn >= N) continue;                       // warp-uniform
TW_UNROLL
			for (int h = 0; h < 2; h++) {
				const float *d = acc[i][2 * jp + h];
				scratch[g * kScratchLd + 8 * h + 2 * t] = d[0];
				scratch[g * kScratchLd + 8 * h + 2 * t + 1] = d[1];
				scratch[(g + 8) * kScratchLd + 8 * h + 2 * t] = d[2];
				scratch[(g + 8) * kScratchLd + 8 * h + 2 * t + 1] = d[3];
			}
			__syncwarp();
			const int gm = fm + r, gn = fn + c8;
			if (gm < M && gn < N) {
				float v[8];
TW_UNROLL
				for (int e = 0; e < 8; e++) v[e] = scratch[r * kScratchLd + c8 + e];
				if (p.ws) { // split: this k-range's partial sums, unscaled, into its slice
					float *w = p.ws + ((int64_t)blockIdx.z * p.batch + blockIdx.y) * ((int64_t)M * N) + (int64_t)gm * N + gn;
					store_run<8>(w, N - gn, N % 4 == 0, v); // N % 4 == 0: the run is 16-byte aligned
				} else {
					epilogue_run<8>(c + (int64_t)gm * N + gn, N - gn, p.vec & kVecC, v, p.alpha, p.beta);
				}
			}
			__syncwarp();
		}
}

// ---- f32: SIMT ------------------------------------------------------------------

static constexpr int kF32BM = 64, kF32BN = 64, kF32BK = 16, kF32Threads = 256, kF32Pad = 4;

// The 4 consecutive elements at (gr, gc..gc+3) of the row-major rows×cols
// matrix g, 0 outside it. vec: cols % 4 == 0 and g 16-byte aligned.
__device__ __forceinline__ float4 load4(const float *g, int rows, int cols, int gr, int gc, bool vec) {
	float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
	if (gr < rows && gc < cols) {
		const float *src = g + (int64_t)gr * cols + gc;
		if (vec) {
			v = *reinterpret_cast<const float4 *>(src);
		} else {
			v.x = src[0];
			if (gc + 1 < cols) v.y = src[1];
			if (gc + 2 < cols) v.z = src[2];
			if (gc + 3 < cols) v.w = src[3];
		}
	}
	return v;
}

// One thread's share of a k-tile of an operand: 4 consecutive stored
// elements. KMAJOR: the stored rows are k (A transposed, B not), so the run is
// a row piece of the k-major shared tile; otherwise it is a column piece,
// scattered.
template <bool KMAJOR> struct F32Chunk {
	// Position of this thread's run in the stored tile: KMAJOR tiles are
	// kF32BK rows × 64, the others 64 rows × kF32BK.
	static constexpr int kRunsPerRow = (KMAJOR ? 64 : kF32BK) / 4;
	__device__ static int row() { return threadIdx.x / kRunsPerRow; }
	__device__ static int col() { return threadIdx.x % kRunsPerRow * 4; }
	// Writes the run into the k-major shared tile s [kF32BK][64 + kF32Pad].
	__device__ static void store(float (*s)[64 + kF32Pad], float4 v) {
		if (KMAJOR) {
			*reinterpret_cast<float4 *>(&s[row()][col()]) = v;
		} else {
			s[col() + 0][row()] = v.x;
			s[col() + 1][row()] = v.y;
			s[col() + 2][row()] = v.z;
			s[col() + 3][row()] = v.w;
		}
	}
};

template <bool TA, bool TB>
__global__ void __launch_bounds__(kF32Threads)
	gemm_f32_kernel(float *__restrict__ c, const float *__restrict__ a, const float *__restrict__ b, const GemmParams p) {
	static_assert(kF32BM == 64 && kF32BN == 64 && kF32BK * 64 == 4 * kF32Threads, "one 4-run per thread and operand");
	__shared__ __align__(16) float sA[2][kF32BK][kF32BM + kF32Pad]; // op(A) tile, k-major: [k][m]
	__shared__ __align__(16) float sB[2][kF32BK][kF32BN + kF32Pad]; // op(B) tile, k-major: [k][n]
	using ChunkA = F32Chunk<TA>;
	using ChunkB = F32Chunk<!TB>;

	const int M = p.m, N = p.n, K = p.k;
	int tm, tn;
	tile_of(blockIdx.x, ceil_div(M, kF32BM), ceil_div(N, kF32BN), &tm, &tn);
	const int m0 = tm * kF32BM, n0 = tn * kF32BN;
	a += blockIdx.y * p.stride_a; // A [M, K] or [K, M]
	b += blockIdx.y * p.stride_b; // B [K, N] or [N, K]
	c += blockIdx.y * p.stride_c; // C [M, N]
	const int tx = threadIdx.x % 16, ty = threadIdx.x / 16; // micro-tile: rows 4·ty…, columns 4·tx…

	// This thread's runs of k-tile kt, straight from global memory.
	auto fetch_a = [&](int kt) {
		const int k0 = kt * kF32BK;
		return TA ? load4(a, K, M, k0 + ChunkA::row(), m0 + ChunkA::col(), p.vec & kVecA)
		          : load4(a, M, K, m0 + ChunkA::row(), k0 + ChunkA::col(), p.vec & kVecA);
	};
	auto fetch_b = [&](int kt) {
		const int k0 = kt * kF32BK;
		return TB ? load4(b, N, K, n0 + ChunkB::row(), k0 + ChunkB::col(), p.vec & kVecB)
		          : load4(b, K, N, k0 + ChunkB::row(), n0 + ChunkB::col(), p.vec & kVecB);
	};

	float acc[4][4] = {};
	const int ktiles = ceil_div(K, kF32BK);
	float4 ra = make_float4(0.0f, 0.0f, 0.0f, 0.0f), rb = ra; // the next k-tile's runs
	if (ktiles > 0) {
		ChunkA::store(sA[0], fetch_a(0));
		ChunkB::store(sB[0], fetch_b(0));
	}
	__syncthreads();
	for (int kt = 0; kt < ktiles; kt++) {
		const int s = kt % 2;
		const bool more = kt + 1 < ktiles;
		if (more) {
			ra = fetch_a(kt + 1);
			rb = fetch_b(kt + 1);
		}
TW_UNROLL
		for (int k = 0; k < kF32BK; k++) {
			const float4 av = *reinterpret_cast<const float4 *>(&sA[s][k][4 * ty]);
			const float4 bv = *reinterpret_cast<const float4 *>(&sB[s][k][4 * tx]);
			const float ar[4] = {av.x, av.y, av.z, av.w}, br[4] = {bv.x, bv.y, bv.z, bv.w};
TW_UNROLL
			for (int i = 0; i < 4; i++)
TW_UNROLL
				for (int j = 0; j < 4; j++) acc[i][j] = fmaf(ar[i], br[j], acc[i][j]);
		}
		if (more) { // the other buffer was last read in iteration kt−1, before the barrier
			ChunkA::store(sA[s ^ 1], ra);
			ChunkB::store(sB[s ^ 1], rb);
		}
		__syncthreads();
	}

	const int gn = n0 + 4 * tx;
	if (gn < N) {
TW_UNROLL
		for (int i = 0; i < 4; i++) {
			const int gm = m0 + 4 * ty + i;
			if (gm < M) epilogue_run<4>(c + (int64_t)gm * N + gn, N - gn, p.vec & kVecC, acc[i], p.alpha, p.beta);
		}
	}
}

// ---- Split-K ------------------------------------------------------------------

static constexpr int kMaxSplit = 8;        // k-ranges at most
static constexpr int kMinSplitK = 512;     // elements of k per range at least
static constexpr int64_t kWaveTiles = 512; // 64×64 tiles that keep an H100-class GPU busy (132 SMs, 4 each)

// The number S of k-ranges a GEMM of these dtypes and extents is split into
// (1: not split) and, through k_chunk, their length: from the dtypes and
// extents alone (never the device or the block tile). Only bf16 operands
// split. S = min(kWaveTiles / tiles, kMaxSplit, k / kMinSplitK) with tiles
// the 64×64 output tiles of all batch entries; below 2 the GEMM is not split
// (k_chunk = k). Otherwise k_chunk = ⌈k / S⌉ rounded up to a multiple of kBK,
// and S becomes ⌈k / k_chunk⌉ (≥ 2; the last range may be shorter).
// Extents tw_gemm refuses are not split.
static int splitk_plan(tw_dtype cdt, tw_dtype abdt, int64_t m, int64_t n, int64_t k, int64_t batch, int *k_chunk) {
	*k_chunk = k > 0 && k <= INT_MAX ? (int)k : 0;
	if (abdt != TW_BF16 || (cdt != TW_F32 && cdt != TW_BF16)) return 1;
	if (m <= 0 || n <= 0 || k <= 0 || batch <= 0 || m > INT_MAX || n > INT_MAX || k > INT_MAX) return 1;
	const int64_t tiles = ceil_div<int64_t>(m, 64) * ceil_div<int64_t>(n, 64); // < 2⁶²
	if (batch > kWaveTiles / 2 / tiles) return 1; // tiles · batch > kWaveTiles / 2: S < 2
	int64_t s = kWaveTiles / (tiles * batch);
	if (s > kMaxSplit) s = kMaxSplit;
	if (s > k / kMinSplitK) s = k / kMinSplitK;
	if (s < 2) return 1;
	const int64_t chunk = ceil_div<int64_t>(ceil_div<int64_t>(k, s), kBK) * kBK;
	*k_chunk = (int)chunk;
	return (int)ceil_div<int64_t>(k, chunk);
}

// The second pass of a split GEMM, over elements i of C (dense) and of each
// workspace slice: C[i] = round(alpha·acc + beta·C_old[i]) with
// acc = (…((P_0[i] + P_1[i]) + P_2[i]) …) + P_{S−1}[i] in f32, P_z the slice
// at ws + z·slice, the same expression as the unsplit epilogue's
// (epilogue_run); C is read only when beta ≠ 0. An op of vec.cuh's
// flat_kernel: every element is one thread's.
template <class TC> struct SplitKReduceOp {
	TC *c;
	const float *ws;
	int64_t slice; // elements between slices
	int splits;
	float alpha, beta;
	template <int N> struct Regs {
		float acc[N];
		Pack<TC, N> old;
	};
	template <int N> __device__ __forceinline__ void load(Regs<N> &r, int64_t i) const {
		Pack<float, N> p = ld<N>(ws + i);
		for (int e = 0; e < N; e++) r.acc[e] = p.v[e];
		for (int z = 1; z < splits; z++) {
			p = ld<N>(ws + z * slice + i);
			for (int e = 0; e < N; e++) r.acc[e] += p.v[e];
		}
		if (beta != 0.0f) r.old = ld<N>(c + i);
	}
	template <int N> __device__ __forceinline__ void store(const Regs<N> &r, int64_t i) const {
		Pack<TC, N> out;
		for (int e = 0; e < N; e++)
			out.v[e] = from_float<TC>(beta != 0.0f ? alpha * r.acc[e] + beta * to_float(r.old.v[e]) : r.acc[e] * alpha);
		st<N>(c + i, out);
	}
};

// Sums the splits slices of the workspace ws [splits, batch, m, n] into C:
// one pass over all of C when its entries are dense (stride_c = m·n, as the
// engine's are), one per entry otherwise.
template <class TC>
static cudaError_t reduce_splits(TC *c, const float *ws, int splits, int64_t m, int64_t n, int64_t batch,
                                 int64_t stride_c, float alpha, float beta, cudaStream_t stream) {
	constexpr int V = 16 / sizeof(TC); // 16 bytes of C (of the narrower array)
	const int64_t mn = m * n, slice = batch * mn;
	const bool dense = batch == 1 || stride_c == mn;
	for (int64_t z = 0; z < (dense ? 1 : batch); z++) {
		const SplitKReduceOp<TC> op{c + z * stride_c, ws + z * mn, slice, splits, alpha, beta};
		const cudaError_t e = launch_flat<V, 2, TC>(
			op, dense ? slice : mn, op.c, [&](int64_t h) { return slice % 4 == 0 && aligned16<float>(op.ws, h); },
			stream);
		if (e != cudaSuccess) return e;
	}
	return cudaSuccess;
}

// ---- Launcher -------------------------------------------------------------------

static constexpr int64_t kMaxGridY = 65535;

// Launches kernel over tiles × batch × splits blocks (gridDim.z: the
// k-ranges of a split GEMM, 1 otherwise), in chunks of at most kMaxGridY
// batch entries; a split GEMM's workspace is addressed from each chunk's
// first entry.
template <class TC, class TAB>
static cudaError_t launch_batched(void (*kernel)(TC *, const TAB *, const TAB *, GemmParams), int tiles, int threads,
                                  size_t smem, TC *c, const TAB *a, const TAB *b, int64_t batch, int splits,
                                  const GemmParams &p, cudaStream_t stream) {
	for (int64_t z = 0; z < batch; z += kMaxGridY) {
		const unsigned nz = (unsigned)(batch - z < kMaxGridY ? batch - z : kMaxGridY);
		GemmParams q = p;
		if (q.ws) q.ws += z * (int64_t)p.m * p.n;
		LAUNCH(dim3(tiles, nz, (unsigned)splits), threads, smem, stream, kernel)
		(c + z * p.stride_c, a + z * p.stride_a, b + z * p.stride_b, q);
		const cudaError_t e = cudaGetLastError();
		if (e != cudaSuccess) return e;
	}
	return cudaSuccess;
}

template <class C, bool TA, bool TB, class TC>
static cudaError_t launch_bf16(TC *c, const bf16 *a, const bf16 *b, int64_t batch, int splits, const GemmParams &p,
                               cudaStream_t stream) {
	constexpr size_t smem = tc_smem_bytes<C, TA, TB>();
	void (*kernel)(TC *, const bf16 *, const bf16 *, GemmParams) = gemm_bf16_kernel<C, TA, TB, TC>;
	if (smem > 48 * 1024) {
		const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
		if (e != cudaSuccess) return e;
	}
	const int tiles = (int)(ceil_div<int64_t>(p.m, C::BM) * ceil_div<int64_t>(p.n, C::BN));
	return launch_batched(kernel, tiles, C::THREADS, smem, c, a, b, batch, splits, p, stream);
}

// The bf16 GEMM with block tile C, then, when split, the sum of its k-ranges.
template <class C, class TC>
static cudaError_t gemm_bf16(int transa, int transb, TC *c, const bf16 *a, const bf16 *b, int64_t batch, int splits,
                             const GemmParams &p, cudaStream_t stream) {
	cudaError_t e;
	if (transa)
		e = transb ? launch_bf16<C, true, true>(c, a, b, batch, splits, p, stream)
		           : launch_bf16<C, true, false>(c, a, b, batch, splits, p, stream);
	else
		e = transb ? launch_bf16<C, false, true>(c, a, b, batch, splits, p, stream)
		           : launch_bf16<C, false, false>(c, a, b, batch, splits, p, stream);
	if (e != cudaSuccess || splits == 1) return e;
	return reduce_splits(c, p.ws, splits, p.m, p.n, batch, p.stride_c, p.alpha, p.beta, stream);
}

template <bool TA, bool TB>
static cudaError_t launch_f32(float *c, const float *a, const float *b, int64_t batch, const GemmParams &p,
                              cudaStream_t stream) {
	const int tiles = (int)(ceil_div<int64_t>(p.m, kF32BM) * ceil_div<int64_t>(p.n, kF32BN));
	return launch_batched(gemm_f32_kernel<TA, TB>, tiles, kF32Threads, 0, c, a, b, batch, 1, p, stream);
}

// Whether rows of `width` elements of `size` bytes at base p (and every batch
// entry, stride elements apart) allow 16-byte vector access.
static bool vec_ok(const void *p, int64_t width, int64_t stride, size_t size) {
	const int64_t per = 16 / (int64_t)size;
	return (uintptr_t)p % 16 == 0 && width % per == 0 && stride % per == 0;
}

// ---- Few rows: one pass over the wide operand ------------------------------------

static constexpr int kSkinnyMax = 8;                        // rows of the skinny operand at most
static constexpr int kSkinnyThreads = 128;                  // a block's threads: they fix the order of summation
static constexpr int kSkinnyWarps = kSkinnyThreads / 32;

// What a launch of the few-row kernel needs besides the pointers: X [s, k]
// (the skinny operand), W [wide, k], C element (j, i) of X's row j and W's
// row i at j·c_s + i·c_w.
struct SkinnyParams {
	int s, wide, k;
	int64_t stride_x, stride_w, stride_c; // elements between batch entries
	int64_t c_s, c_w;
	float alpha, beta;
	int vec; // every row of X and W allows 16-byte loads
};

// Chunk q of a row of k elements at p: its 16 bytes (E elements) from q·E,
// as stored, those past k zero; one 16-byte load when vec (then none is past
// k). Chunks stay raw words until their products: held as unpacked 16-bit
// values, nvcc moved each load's halves apart as soon as it was issued, which
// waited for it, so a thread had one or two loads in flight instead of U·R.
// The element-wise loads are out of line: inlined at each of a kernel's U·R
// (+ U·S) loads, they made most of its code.
template <int E, class T> __device__ __noinline__ uint4 load_chunk_elems(const T *p, int64_t at, int k) {
	T v[E];
	for (int e = 0; e < E; e++) v[e] = at + e < k ? p[at + e] : from_float<T>(0.0f);
	uint4 c;
	memcpy(&c, v, sizeof(c));
	return c;
}
template <int E, class T> __device__ __forceinline__ uint4 load_chunk(const T *p, int64_t q, int k, bool vec) {
	const int64_t at = q * E;
	if (vec) return *reinterpret_cast<const uint4 *>(p + at);
	return load_chunk_elems<E>(p, at, k);
}

// Element e of a chunk of T, widened to f32 (a bf16 is the top half of an
// f32's bits; the lower-addressed one the low half of its word).
template <class T> __device__ __forceinline__ float chunk_at(const uint4 &c, int e) {
	const uint32_t w[4] = {c.x, c.y, c.z, c.w};
	if constexpr (sizeof(T) == 4)
		return __uint_as_float(w[e]);
	else
		return __uint_as_float(e % 2 ? w[e / 2] & 0xffff0000u : w[e / 2] << 16);
}

// C(j, i) = alpha·Σ_k X[j, k]·W[i, k] (+ beta·C_old) for the R rows of W
// from blockIdx.x·R and every row j < s ≤ S of X, batch entry blockIdx.y.
// Thread t of the block sums chunks t, t + 128, t + 256, … of the rows in
// ascending order, one fmaf per element in element order; the warps' sums
// are butterflies (xor 16, 8, 4, 2, 1), the block's their sum in warp
// order. U chunks are loaded before any is multiplied (U·R 16-byte loads of
// W in flight per thread, and X's U·S with them when that is at most 8);
// neither U nor R changes what is summed or in which order.
template <int S, int R, int U, class T, class TC>
__global__ void __launch_bounds__(kSkinnyThreads)
    gemm_skinny_kernel(TC *c, const T *x, const T *w, SkinnyParams p) {
	constexpr int E = 16 / (int)sizeof(T);
	constexpr bool kHoistX = S * U <= 8; // X's chunks loaded with W's
	__shared__ float part[kSkinnyWarps][R * S];
	const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, row0 = blockIdx.x * R;
	const int64_t chunks = ceil_div<int64_t>(p.k, E);
	const bool vec = p.vec != 0;
	x += (int64_t)blockIdx.y * p.stride_x;
	w += (int64_t)blockIdx.y * p.stride_w;
	c += (int64_t)blockIdx.y * p.stride_c;

	float acc[R][S];
TW_UNROLL
	for (int r = 0; r < R; r++)
TW_UNROLL
		for (int j = 0; j < S; j++) acc[r][j] = 0.0f;
	for (int64_t q0 = tid; q0 < chunks; q0 += (int64_t)U * kSkinnyThreads) {
		uint4 wv[U][R], xv[kHoistX ? U : 1][kHoistX ? S : 1];
TW_UNROLL
		for (int u = 0; u < U; u++) {
			const int64_t q = q0 + (int64_t)u * kSkinnyThreads;
TW_UNROLL
			for (int r = 0; r < R; r++)
				wv[u][r] = q < chunks && row0 + r < p.wide ? load_chunk<E>(w + (int64_t)(row0 + r) * p.k, q, p.k, vec)
				                                           : make_uint4(0, 0, 0, 0);
			if constexpr (kHoistX)
TW_UNROLL
				for (int j = 0; j < S; j++)
					xv[u][j] = q < chunks && j < p.s ? load_chunk<E>(x + (int64_t)j * p.k, q, p.k, vec) : make_uint4(0, 0, 0, 0);
		}
TW_UNROLL
		for (int u = 0; u < U; u++) {
			const int64_t q = q0 + (int64_t)u * kSkinnyThreads;
			if (q >= chunks) break;
TW_UNROLL
			for (int j = 0; j < S; j++) {
				if (j >= p.s) break;
				uint4 xc;
				if constexpr (kHoistX)
					xc = xv[u][j];
				else
					xc = load_chunk<E>(x + (int64_t)j * p.k, q, p.k, vec);
TW_UNROLL
				for (int r = 0; r < R; r++) {
					if (row0 + r >= p.wide) break;
TW_UNROLL
					for (int e = 0; e < E; e++)
						acc[r][j] = fmaf(chunk_at<T>(wv[u][r], e), chunk_at<T>(xc, e), acc[r][j]);
				}
			}
		}
	}

TW_UNROLL
	for (int r = 0; r < R; r++)
TW_UNROLL
		for (int j = 0; j < S; j++) {
			const float v = warp_sum(acc[r][j]);
			if (lane == 0) part[warp][r * S + j] = v;
		}
	__syncthreads();
	if (tid < R * S) {
		const int r = tid / S, j = tid % S, i = row0 + r;
		if (i < p.wide && j < p.s) {
			float v = part[0][tid];
TW_UNROLL
			for (int q = 1; q < kSkinnyWarps; q++) v += part[q][tid];
			TC *o = c + (int64_t)j * p.c_s + (int64_t)i * p.c_w;
			v = p.beta != 0.0f ? p.alpha * v + p.beta * to_float(*o) : p.alpha * v;
			*o = from_float<TC>(v);
		}
	}
}

// Which operand of an op(A)·op(B) the few-row kernel takes as X: 'a' (A's
// m ≤ kSkinnyMax rows against B's n, m ≤ n), 'b' (B's n ≤ kSkinnyMax rows
// against A's m), or 0 when it does not run: transposed A, untransposed B
// (rows of X and W must both run along k; one row of A stored transposed,
// [k, 1], lies as [1, k] does, and so does one column of B stored as it
// is), operands other than bf16 (f32 ones, for tests and small models, keep
// the SIMT tiles: every instantiation of the kernel is code in every binary
// that links the library), or TW_GEMM_SKINNY=off.
static int skinny_side(tw_dtype cdt, tw_dtype abdt, int transa, int transb, int64_t m, int64_t n) {
	if ((transa && m != 1) || (!transb && n != 1)) return 0;
	if (abdt != TW_BF16 || (cdt != TW_F32 && cdt != TW_BF16)) return 0;
	if (const char *s = getenv("TW_GEMM_SKINNY"); s && strcmp(s, "off") == 0) return 0;
	if (m <= kSkinnyMax && m <= n) return 'a';
	return n <= kSkinnyMax ? 'b' : 0;
}

// The few-row kernel's R (rows of W per block) and U (chunks per thread in
// flight) for wide rows of W: by default R = 2 where W's rows give every SM
// 16 blocks at R = 1, else 1, and U = 4; TW_GEMM_SKINNY=RxU chooses among
// 1x4, 2x2, 2x4 and 4x2. Only one row of X (a decoding step at batch 1) has
// all four compiled: more rows take R = 1 or 2 (2 for R ≥ 2) and U = 4 for
// 2 rows, 2 for 4 and 8, whose accumulators need the registers. (Each
// instantiation is code in every binary that links the library: the GPU
// bundle has room for these.)
static void skinny_config(int64_t wide, int *r, int *u) {
	*r = wide >= 16 * (int64_t)sm_count() ? 2 : 1;
	*u = 4;
	const char *e = getenv("TW_GEMM_SKINNY");
	int pr = 0, pu = 0;
	if (e && sscanf(e, "%dx%d", &pr, &pu) == 2) {
		const int ru = pr * 10 + pu;
		if (ru == 14 || ru == 22 || ru == 24 || ru == 42) {
			*r = pr;
			*u = pu;
		}
	}
}

extern "C" void tw_gemm_skinny_config(int64_t wide, int *r, int *u) { skinny_config(wide, r, u); }

template <int S, int R, int U, class T, class TC>
static cudaError_t launch_skinny(TC *c, const T *x, const T *w, int64_t batch, const SkinnyParams &p,
                                 cudaStream_t stream) {
	const unsigned blocks = (unsigned)ceil_div<int64_t>(p.wide, R);
	for (int64_t z = 0; z < batch; z += kMaxGridY) {
		const unsigned nz = (unsigned)(batch - z < kMaxGridY ? batch - z : kMaxGridY);
		LAUNCH(dim3(blocks, nz), kSkinnyThreads, 0, stream, gemm_skinny_kernel<S, R, U, T, TC>)
		(c + z * p.stride_c, x + z * p.stride_x, w + z * p.stride_w, p);
		const cudaError_t e = cudaGetLastError();
		if (e != cudaSuccess) return e;
	}
	return cudaSuccess;
}

template <int S, class T, class TC>
static cudaError_t skinny_rs(int r, int u, TC *c, const T *x, const T *w, int64_t batch, const SkinnyParams &p,
                             cudaStream_t stream) {
	if constexpr (S == 1) {
		switch (r * 10 + u) {
		case 22: return launch_skinny<S, 2, 2>(c, x, w, batch, p, stream);
		case 24: return launch_skinny<S, 2, 4>(c, x, w, batch, p, stream);
		case 42: return launch_skinny<S, 4, 2>(c, x, w, batch, p, stream);
		default: return launch_skinny<S, 1, 4>(c, x, w, batch, p, stream);
		}
	} else {
		constexpr int U = S <= 2 ? 4 : 2;
		return r >= 2 ? launch_skinny<S, 2, U>(c, x, w, batch, p, stream)
		              : launch_skinny<S, 1, U>(c, x, w, batch, p, stream);
	}
}

// The few-row GEMM of tw_gemm's arguments, X the operand side names.
template <class T, class TC>
static cudaError_t gemm_skinny(int side, TC *c, const T *a, const T *b, int64_t m, int64_t n, int64_t k, int64_t batch,
                               int64_t stride_a, int64_t stride_b, int64_t stride_c, float alpha, float beta,
                               cudaStream_t stream) {
	const bool xa = side == 'a';
	const T *x = xa ? a : b, *w = xa ? b : a;
	SkinnyParams p{(int)(xa ? m : n), (int)(xa ? n : m), (int)k, xa ? stride_a : stride_b, xa ? stride_b : stride_a,
	               stride_c, xa ? n : 1, xa ? 1 : n, alpha, beta, 0};
	p.vec = vec_ok(x, k, p.stride_x, sizeof(T)) && vec_ok(w, k, p.stride_w, sizeof(T));
	int r, u;
	skinny_config(p.wide, &r, &u);
	if (p.s <= 1) return skinny_rs<1>(r, u, c, x, w, batch, p, stream);
	if (p.s <= 2) return skinny_rs<2>(r, u, c, x, w, batch, p, stream);
	if (p.s <= 4) return skinny_rs<4>(r, u, c, x, w, batch, p, stream);
	return skinny_rs<8>(r, u, c, x, w, batch, p, stream);
}

// The bf16 block tiles (the TcConfigs above), and the names TW_GEMM_TILE
// gives them.
enum Tile { kTile64, kTile128, kTile128K64, kTile256 };
static const char *const kTileNames[] = {"64", "128", "128k64", "256"};

// The bf16 block tile: 128 × 128 unless that leaves SMs without a block,
// then 64 × 64; the environment variable TW_GEMM_TILE (64, 128, 128k64 or
// 256) overrides. What it chooses changes no bits: every tile sums each
// element's k-steps in the same order.
static cudaError_t bf16_tile(int64_t m, int64_t n, int64_t batch, Tile *tile) {
	if (const char *s = getenv("TW_GEMM_TILE")) {
		for (int t = kTile64; t <= kTile256; t++)
			if (strcmp(s, kTileNames[t]) == 0) {
				*tile = (Tile)t;
				return cudaSuccess;
			}
	}
	int dev = 0, sms = 0;
	cudaError_t e = cudaGetDevice(&dev);
	if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
	if (e != cudaSuccess) return e;
	const int64_t blocks128 = ceil_div<int64_t>(m, 128) * ceil_div<int64_t>(n, 128) * batch;
	*tile = blocks128 >= sms ? kTile128 : kTile64;
	return cudaSuccess;
}

extern "C" const char *tw_gemm_tile(int64_t m, int64_t n, int64_t batch) {
	Tile t;
	return bf16_tile(m, n, batch, &t) == cudaSuccess ? kTileNames[t] : nullptr;
}

// The bf16 GEMM with the block tile chosen.
template <class TC>
static cudaError_t gemm_bf16_tile(Tile tile, int transa, int transb, TC *c, const bf16 *a, const bf16 *b, int64_t batch,
                                  int splits, const GemmParams &p, cudaStream_t stream) {
	switch (tile) {
	case kTile64: return gemm_bf16<Tc64>(transa, transb, c, a, b, batch, splits, p, stream);
	case kTile128K64: return gemm_bf16<Tc128K64>(transa, transb, c, a, b, batch, splits, p, stream);
	case kTile256: return gemm_bf16<Tc256>(transa, transb, c, a, b, batch, splits, p, stream);
	default: return gemm_bf16<Tc128>(transa, transb, c, a, b, batch, splits, p, stream);
	}
}

extern "C" size_t tw_gemm_workspace(tw_dtype cdt, tw_dtype abdt, int transa, int transb, int64_t m, int64_t n,
                                    int64_t k, int64_t batch) {
	if (skinny_side(cdt, abdt, transa, transb, m, n)) return 0;
	int chunk;
	const int splits = splitk_plan(cdt, abdt, m, n, k, batch, &chunk);
	return splits > 1 ? (size_t)splits * (size_t)batch * (size_t)m * (size_t)n * sizeof(float) : 0;
}

extern "C" cudaError_t tw_gemm(void *c, tw_dtype cdt, const void *a, const void *b, tw_dtype abdt, int transa,
                               int transb, int64_t m, int64_t n, int64_t k, int64_t batch, int64_t stride_a,
                               int64_t stride_b, int64_t stride_c, float alpha, float beta, void *workspace,
                               cudaStream_t stream) {
	if (m < 0 || n < 0 || k < 0 || batch < 0) return cudaErrorInvalidValue;
	if (m == 0 || n == 0 || batch == 0) return cudaSuccess;
	const bool bf16_ops = abdt == TW_BF16 && (cdt == TW_F32 || cdt == TW_BF16);
	if (!bf16_ops && !(abdt == TW_F32 && cdt == TW_F32)) return cudaErrorInvalidValue;
	// Extents and tile counts must fit the kernels' int arithmetic.
	if (m > INT_MAX || n > INT_MAX || k > INT_MAX || ceil_div<int64_t>(m, 64) * ceil_div<int64_t>(n, 64) > INT_MAX)
		return cudaErrorInvalidValue;

	// A few rows against many: before the tiled kernels' operand checks.
	if (const int side = skinny_side(cdt, abdt, transa, transb, m, n)) {
		const bf16 *ab = (const bf16 *)a, *bb = (const bf16 *)b;
		if (cdt == TW_F32)
			return gemm_skinny(side, (float *)c, ab, bb, m, n, k, batch, stride_a, stride_b, stride_c, alpha, beta,
			                   stream);
		return gemm_skinny(side, (bf16 *)c, ab, bb, m, n, k, batch, stride_a, stride_b, stride_c, alpha, beta, stream);
	}

	const size_t ab_size = abdt == TW_F32 ? 4 : 2, c_size = cdt == TW_F32 ? 4 : 2;
	GemmParams p{(int)m, (int)n, (int)k, stride_a, stride_b, stride_c, alpha, beta, 0, (int)k, nullptr, batch};
	if (vec_ok(a, transa ? m : k, stride_a, ab_size)) p.vec |= kVecA;
	if (vec_ok(b, transb ? k : n, stride_b, ab_size)) p.vec |= kVecB;
	if (vec_ok(c, n, stride_c, c_size)) p.vec |= kVecC;

	if (!bf16_ops) {
		float *cf = (float *)c;
		const float *af = (const float *)a, *bf = (const float *)b;
		if (transa)
			return transb ? launch_f32<true, true>(cf, af, bf, batch, p, stream)
			              : launch_f32<true, false>(cf, af, bf, batch, p, stream);
		return transb ? launch_f32<false, true>(cf, af, bf, batch, p, stream)
		              : launch_f32<false, false>(cf, af, bf, batch, p, stream);
	}

	Tile tile;
	const cudaError_t e = bf16_tile(m, n, batch, &tile);
	if (e != cudaSuccess) return e;
	const int splits = splitk_plan(cdt, abdt, m, n, k, batch, &p.k_chunk);
	if (splits > 1) {
		if (!workspace) return cudaErrorInvalidValue;
		p.ws = (float *)workspace;
	}
	const bf16 *ab = (const bf16 *)a, *bb = (const bf16 *)b;
	if (cdt == TW_F32) return gemm_bf16_tile(tile, transa, transb, (float *)c, ab, bb, batch, splits, p, stream);
	return gemm_bf16_tile(tile, transa, transb, (bf16 *)c, ab, bb, batch, splits, p, stream);
}
