// attention.cu — grouped-query flash attention, causal or not, over packed
// variable-length sequences: the forward (attention_backward.cu has the
// backward).
//
// Contract: engine.Backend.Attention (engine/backend.go); the launchers'
// arguments are listed in kernels.h. What the kernels add to it:
//   dt is f32 or bf16 (q, k, v and out share it); dh is a
//   multiple of 8 up to 128; h is a multiple of g ≥ 1. Anything else gives
//   cudaErrorInvalidValue. seqs is trusted, not checked (a launcher does not
//   read device memory). Extents with nothing to compute (nq·h = 0 or
//   nseq = 0) launch nothing and succeed.
//   Alignment, tighter than kernels.h's conventions: q, k, v and out are
//   16-byte aligned (whole allocations are, and so are views
//   of whole rows, dh being a multiple of 8), for 16-byte vector loads and
//   stores; otherwise cudaErrorInvalidValue.
//   Causality: query t of a sequence sees keys 0 … t+off, off = kLen − qLen
//   (causal) or kLen (noncausal ≠ 0: every key), and never key kLen or
//   beyond; every kernel below bounds its keys by that one rule.
//   Numerics: softmax in f32, out rounded once.
//
// Design
//
// Rows. The h/g query heads that share key/value head g are handled together:
// for sequence b the block's "rows" are the pairs (t, j) of a query t and one
// of those heads j, numbered ρ = t·(h/g) + j — consecutive in memory for one
// t, since the heads of a group are adjacent in q. One key/value tile in
// shared memory then serves every head of the group, and a decoding step
// (qLen = 1) still fills h/g rows of a tile rather than one.
//
// Blocks. 4 warps (128 threads); a block owns kRows = 64 rows, warp w the 16
// rows 16w … 16w+15 of them. Work items are (sequence, key/value head, tile of
// 64 rows): the forward and the dQ kernel tile each sequence's qLen·h/g query
// rows, the dK/dV kernel its kLen keys. The grid cannot depend on seqs (it is
// device data), so the launcher sizes it from a bound — a sequence of n rows
// has ceil(n/64) ≤ n/64 + 1 tiles, and the sequences' rows do not overlap, so
// ceil(rows/64) + nseq tiles per key/value head — and each block finds its
// (sequence, tile) by a warp-wide prefix sum over the tile counts of seqs
// (find_tile); blocks past the end do nothing. Within a sequence the forward
// and dQ kernels take their query tiles last first, the costliest (most keys)
// being scheduled first.
//
// Two warp-level products carry all the arithmetic, each on shared-memory
// tiles of 16 rows:
//   warp_nt:        C[16][N] = A[16][D]·B[N][D]ᵀ     (scores Q·Kᵀ, dO·Vᵀ, K·Qᵀ, V·dOᵀ)
//   WarpAcc::mma:   acc[16][D] += A[16][N]·B[N][D]   (P·V, dS·K, Pᵀ·dO, dSᵀ·Q)
// with D the head width rounded up to 32, 64 or 128 (template; the padding
// columns of every tile are zero) and N the width of the inner tile. For bf16
// they run on tensor cores (wmma 16×16×16, bf16 operands, f32 accumulation;
// the probabilities P and dS are rounded to bf16 as operands, as in
// FlashAttention). For f32 they are SIMT: lane (rg, cg) = (lane/8, lane%8)
// holds rows rg+4i, and columns cg+8j of C or the 4-column groups cg+8m of
// acc, reading 16-byte vectors from shared memory rows padded by 16 bytes
// (conflict-free). Scores are scaled in f32 after the product (s·scale·log2 e,
// softmax in base 2 with exp2f), never by rounding scale·q.
//
// Forward (attn_fwd_kernel), per item: the 64 query rows are loaded to shared
// memory once; then for each key tile of N keys (N = 64 for bf16, 32 for f32)
// up to the last key any row of the item sees: K and V tiles are loaded
// (coalesced 16-byte loads, rows past the end zero), each warp computes its
// 16×N scores, and lane pair (2r, 2r+1) keeps row r's online softmax — the
// running maximum m and sum l, each lane taking every other key, combined by
// one shuffle — writing P = exp2(s − m') and the factor c = exp2(m − m') by
// which the output accumulator is rescaled before acc += P·V (on tensor
// cores the rescale goes through shared memory, as a wmma fragment's layout
// is unspecified, and is skipped when every factor of the warp is 1). At the
// end out = acc·(1/l) (1/l by the fast reciprocal: l ≥ 1) and
// lse = (m + log2 l)·ln 2. Shared memory holds Q [64][D], K and V [N][D] in
// the input dtype and, per warp, the scores [16][N] f32 (reused to stage the
// accumulator) and P [16][N]: never a T×T buffer. Tiles are loaded
// synchronously (no cp.async double buffering); two resident blocks per SM
// overlap one's loads with the other's arithmetic.
//
// Shared memory per block at D = 128: 93.2 KiB (bf16) / 108.2 KiB (f32), so
// two bf16 blocks fit on an H100 SM and the kernel fits an A100.
// Accumulators live in registers (f32): per lane D/2 floats;
// __launch_bounds__(128, 2) lets ptxas use up to
// 255 registers, which still allows the two blocks per SM, without spilling.
#include <initializer_list>
#include <mma.h>
#include <type_traits>

#include "common.cuh"
#include "kernels.h"
#include "pack.cuh"

// Loop unrolling hints, spelled for nvcc or for g++ (the emulator build).
#define ATTN_PRAGMA(x) _Pragma(#x)
#ifdef __CUDACC__
#define UNROLL ATTN_PRAGMA(unroll)
#define UNROLL_BY(n) ATTN_PRAGMA(unroll n)
#else
#define UNROLL ATTN_PRAGMA(GCC unroll 16)
#define UNROLL_BY(n) ATTN_PRAGMA(GCC unroll n)
#endif

namespace {

typedef __nv_bfloat16 bf16;

constexpr int kWarps = 4;                // warps per block
constexpr int kThreads = 32 * kWarps;    // threads per block
constexpr int kStrip = 16;               // rows a warp owns
constexpr int kRows = kStrip * kWarps;   // rows a block owns: query rows, or keys (dK/dV)
constexpr unsigned kFull = 0xffffffffu;  // all lanes of a warp
constexpr float kLn2 = 0.6931471805599453f;

// Row stride, in elements, of a shared-memory tile of w columns of T: 16
// bytes of padding keep rows 16-byte aligned for vector access and wmma
// (ldm a multiple of 8 bf16 or 4 floats) and put consecutive rows in
// different banks.
template <class T> __host__ __device__ constexpr int padded(int w) { return w + 16 / (int)sizeof(T); }
__host__ __device__ constexpr int cmax(int a, int b) { return a > b ? a : b; }

// Inner tile width: keys per step of the forward (chosen so that shared
// memory fits, see above).
template <class T> struct Inner {
	static constexpr int fwd = std::is_same<T, float>::value ? 32 : 64;
};

// ---- Warp-level products --------------------------------------------------

// C[16][N] (row stride N+4) = A[16][D]·B[N][D]ᵀ, A and B of row stride
// padded<float>(D): SIMT, lane (rg, cg) computing C[rg+4i][cg+8j].
template <int D, int N> __device__ __forceinline__ void warp_nt(float *C, const float *A, const float *B) {
	constexpr int LA = padded<float>(D), LC = padded<float>(N), NJ = N / 8;
	const int lane = threadIdx.x % 32, rg = lane / 8, cg = lane % 8;
	float acc[4][NJ];
	UNROLL
	for (int i = 0; i < 4; i++)
		UNROLL
		for (int j = 0; j < NJ; j++) acc[i][j] = 0.0f;
	UNROLL_BY(2)
	for (int d = 0; d < D; d += 4) {
		float4 a[4], b[NJ];
		UNROLL
		for (int i = 0; i < 4; i++) a[i] = *(const float4 *)&A[(rg + 4 * i) * LA + d];
		UNROLL
		for (int j = 0; j < NJ; j++) b[j] = *(const float4 *)&B[(cg + 8 * j) * LA + d];
		UNROLL
		for (int i = 0; i < 4; i++)
			UNROLL
			for (int j = 0; j < NJ; j++) {
				float s = acc[i][j];
				s = fmaf(a[i].x, b[j].x, s);
				s = fmaf(a[i].y, b[j].y, s);
				s = fmaf(a[i].z, b[j].z, s);
				acc[i][j] = fmaf(a[i].w, b[j].w, s);
			}
	}
	UNROLL
	for (int i = 0; i < 4; i++)
		UNROLL
		for (int j = 0; j < NJ; j++) C[(rg + 4 * i) * LC + cg + 8 * j] = acc[i][j];
}

// The same product on tensor cores: bf16 A and B (row stride padded<bf16>(D)),
// f32 C. Bᵀ is B read as a column-major matrix_b.
template <int D, int N> __device__ __forceinline__ void warp_nt(float *C, const bf16 *A, const bf16 *B) {
	using namespace nvcuda;
	constexpr int LA = padded<bf16>(D), LC = padded<float>(N);
	wmma::fragment<wmma::accumulator, 16, 16, 16, float> c[N / 16];
	UNROLL
	for (int n = 0; n < N / 16; n++) wmma::fill_fragment(c[n], 0.0f);
	UNROLL
	for (int kk = 0; kk < D / 16; kk++) {
		wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> a;
		wmma::load_matrix_sync(a, A + 16 * kk, LA);
		UNROLL
		for (int n = 0; n < N / 16; n++) {
			wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> b;
			wmma::load_matrix_sync(b, B + 16 * n * LA + 16 * kk, LA);
			wmma::mma_sync(c[n], a, b, c[n]);
		}
	}
	UNROLL
	for (int n = 0; n < N / 16; n++) wmma::store_matrix_sync(C + 16 * n, c[n], LC, wmma::mem_row_major);
}

// A warp's f32 accumulator of 16 rows × D columns, SIMT: lane (rg, cg) holds
// rows rg+4i, columns 4(cg+8m) … 4(cg+8m)+3.
template <int D> struct SimtAcc {
	static constexpr int M = D / 32;
	float v[4][M][4];

	__device__ __forceinline__ void zero() {
		UNROLL
		for (int i = 0; i < 4; i++)
			UNROLL
			for (int m = 0; m < M; m++)
				UNROLL
				for (int e = 0; e < 4; e++) v[i][m][e] = 0.0f;
	}

	// acc += A[16][N]·B[N][D]; A of row stride N+4, B of row stride D+4.
	template <int N> __device__ __forceinline__ void mma(const float *A, const float *B) {
		constexpr int LA = padded<float>(N), LB = padded<float>(D);
		const int lane = threadIdx.x % 32, rg = lane / 8, cg = lane % 8;
		UNROLL_BY(2)
		for (int k = 0; k < N; k += 4) {
			float4 a[4];
			UNROLL
			for (int i = 0; i < 4; i++) a[i] = *(const float4 *)&A[(rg + 4 * i) * LA + k];
			UNROLL
			for (int kk = 0; kk < 4; kk++) {
				float4 b[M];
				UNROLL
				for (int m = 0; m < M; m++) b[m] = *(const float4 *)&B[(k + kk) * LB + 4 * (cg + 8 * m)];
				UNROLL
				for (int i = 0; i < 4; i++) {
					const float x = kk == 0 ? a[i].x : kk == 1 ? a[i].y : kk == 2 ? a[i].z : a[i].w;
					UNROLL
					for (int m = 0; m < M; m++) {
						v[i][m][0] = fmaf(x, b[m].x, v[i][m][0]);
						v[i][m][1] = fmaf(x, b[m].y, v[i][m][1]);
						v[i][m][2] = fmaf(x, b[m].z, v[i][m][2]);
						v[i][m][3] = fmaf(x, b[m].w, v[i][m][3]);
					}
				}
			}
		}
	}

	// Row r is multiplied by c[r] (c: 16 floats the warp wrote before a
	// __syncwarp); stage is unused.
	__device__ __forceinline__ void rescale(const float *c, float *) {
		const int rg = threadIdx.x % 32 / 8;
		UNROLL
		for (int i = 0; i < 4; i++) {
			const float f = c[rg + 4 * i];
			UNROLL
			for (int m = 0; m < M; m++)
				UNROLL
				for (int e = 0; e < 4; e++) v[i][m][e] *= f;
		}
	}

	// C[16][D] (row stride D+4) = acc.
	__device__ __forceinline__ void store(float *C) const {
		constexpr int LC = padded<float>(D);
		const int lane = threadIdx.x % 32, rg = lane / 8, cg = lane % 8;
		UNROLL
		for (int i = 0; i < 4; i++)
			UNROLL
			for (int m = 0; m < M; m++)
				*(float4 *)&C[(rg + 4 * i) * LC + 4 * (cg + 8 * m)] =
				    make_float4(v[i][m][0], v[i][m][1], v[i][m][2], v[i][m][3]);
	}
};

// The same accumulator on tensor cores: D/16 wmma accumulator fragments.
template <int D> struct WmmaAcc {
	nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> f[D / 16];

	__device__ __forceinline__ void zero() {
		UNROLL
		for (int n = 0; n < D / 16; n++) nvcuda::wmma::fill_fragment(f[n], 0.0f);
	}

	// acc += A[16][N]·B[N][D]; bf16 A of row stride N+8, B of row stride D+8.
	template <int N> __device__ __forceinline__ void mma(const bf16 *A, const bf16 *B) {
		using namespace nvcuda;
		constexpr int LA = padded<bf16>(N), LB = padded<bf16>(D);
		UNROLL_BY(1) // unrolled, the B fragments of every step stay live: 255 registers and spills at D = 128
		for (int kk = 0; kk < N / 16; kk++) {
			wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> a;
			wmma::load_matrix_sync(a, A + 16 * kk, LA);
			UNROLL
			for (int n = 0; n < D / 16; n++) {
				wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> b;
				wmma::load_matrix_sync(b, B + 16 * kk * LB + 16 * n, LB);
				wmma::mma_sync(f[n], a, b, f[n]);
			}
		}
	}

	// Row r is multiplied by c[r]. A fragment's element-to-row mapping is
	// unspecified, so the tile goes through stage ([16][D+4] f32 of the warp's
	// own) and back, unless every factor is 1 (the common case once the
	// running maxima settle).
	__device__ __forceinline__ void rescale(const float *c, float *stage) {
		constexpr int LS = padded<float>(D);
		const int lane = threadIdx.x % 32;
		if (__all_sync(kFull, c[lane % 16] == 1.0f)) return;
		store(stage);
		__syncwarp();
		for (int x = lane; x < 16 * D; x += 32) stage[x / D * LS + x % D] *= c[x / D];
		__syncwarp();
		UNROLL
		for (int n = 0; n < D / 16; n++)
			nvcuda::wmma::load_matrix_sync(f[n], stage + 16 * n, LS, nvcuda::wmma::mem_row_major);
	}

	// C[16][D] (row stride D+4) = acc.
	__device__ __forceinline__ void store(float *C) const {
		UNROLL
		for (int n = 0; n < D / 16; n++)
			nvcuda::wmma::store_matrix_sync(C + 16 * n, f[n], padded<float>(D), nvcuda::wmma::mem_row_major);
	}
};

template <class T, int D> struct AccOf { typedef SimtAcc<D> type; };
template <int D> struct AccOf<bf16, D> { typedef WmmaAcc<D> type; };

// ---- Tiles between global and shared memory ---------------------------------

// Copies ROWS rows of dh elements into dst [ROWS][padded<T>(D)] (block-wide,
// in packs of 8 elements — one or two 16-byte accesses — consecutive threads
// on consecutive packs): row r comes from src + off(r), or is zero when
// off(r) < 0; columns dh … D−1 are zero.
template <class T, int D, int ROWS, class Off>
__device__ __forceinline__ void load_rows(T *dst, const T *__restrict__ src, int dh, Off off) {
	typedef Pack<T, 8> P;
	constexpr int LT = padded<T>(D), C8 = D / 8; // packs per row
	for (int c = threadIdx.x; c < ROWS * C8; c += kThreads) {
		const int r = c / C8, x = c % C8 * 8;
		const int64_t o = off(r);
		P pk = {};
		if (o >= 0 && x < dh) pk = *reinterpret_cast<const P *>(src + o + x);
		*reinterpret_cast<P *>(dst + r * LT + x) = pk;
	}
}

// Stores the warp's 16 staged rows (stage [16][D+4] f32), each multiplied by
// mul·rowmul[r] (rowmul may be null), rounded to T: row r to dst + off(r)
// (skipped when off(r) < 0), its first dh columns, in packs of 8 elements.
template <class T, int D, class Off>
__device__ __forceinline__ void store_rows(T *__restrict__ dst, const float *stage, const float *rowmul, float mul,
                                           int dh, Off off) {
	constexpr int LS = padded<float>(D), C8 = D / 8;
	for (int c = threadIdx.x % 32; c < kStrip * C8; c += 32) {
		const int r = c / C8, x = c % C8 * 8;
		const int64_t o = off(r);
		if (o < 0 || x >= dh) continue;
		const float f = rowmul ? mul * rowmul[r] : mul;
		float val[8];
		UNROLL
		for (int e = 0; e < 8; e++) val[e] = stage[r * LS + x + e] * f;
		store_pack<8>(dst + o + x, val);
	}
}

// ---- Finding a block's work ---------------------------------------------------

// The tiles of kRows rows of sequence s: its qLen·rep query rows (keys =
// false) or its kLen keys (keys = true).
__device__ __forceinline__ int tiles_of(const int32_t *s, bool keys, int rep) {
	return keys ? ceil_div(s[3], kRows) : ceil_div(s[1] * rep, kRows);
}

// Numbering the tiles of all sequences in order, finds the sequence *seq and
// its tile *tile (0-based) that tile number id is; false when id is past the
// last. Called by whole warps (every lane gets the answer): each round, the
// lanes take 32 sequences and an inclusive prefix sum of their tile counts.
__device__ __forceinline__ bool find_tile(const int32_t *__restrict__ seqs, int nseq, bool keys, int rep, int id,
                                          int *seq, int *tile) {
	const int lane = threadIdx.x % 32;
	int before = 0; // tiles of the sequences of earlier rounds
	for (int base = 0; base < nseq; base += 32) {
		const int s = base + lane;
		const int n = s < nseq ? tiles_of(seqs + 4 * s, keys, rep) : 0;
		int incl = n;
		UNROLL
		for (int o = 1; o < 32; o *= 2) {
			const int x = __shfl_up_sync(kFull, incl, o);
			if (lane >= o) incl += x;
		}
		const int total = __shfl_sync(kFull, incl, 31);
		if (id < before + total) {
			const int owner = __ffs(__ballot_sync(kFull, before + incl > id)) - 1;
			const int first = __shfl_sync(kFull, before + incl - n, owner); // its first tile's number
			*seq = base + owner;
			*tile = id - first;
			return true;
		}
		before += total;
	}
	return false;
}

// Element offset of query row ρ of the group of key/value head g in q (and
// out, dout, dq), for the sequence starting at row qs; rep = h/g.
__device__ __forceinline__ int64_t qrow_offset(int qs, int rho, int rep, int h, int g, int dh) {
	return ((int64_t)(qs + rho / rep) * h + g * rep + rho % rep) * dh;
}
// Index of the same row in lse and D ([nq, h]).
__device__ __forceinline__ int64_t qrow_index(int qs, int rho, int rep, int h, int g) {
	return (int64_t)(qs + rho / rep) * h + g * rep + rho % rep;
}

} // namespace

// The kernels stay outside the anonymous namespace: their block-scope
// declaration of the dynamic shared memory must name the global smem.

// ---- Forward --------------------------------------------------------------------

// Shared-memory layout of the forward (byte offsets; every region 32-byte
// aligned, as wmma requires).
template <class T, int D, int N> struct FwdSmem {
	static constexpr int LT = padded<T>(D), LP = padded<T>(N);
	static constexpr int W = kStrip * cmax(padded<float>(N), padded<float>(D)); // floats of a warp's scratch
	static constexpr size_t q = 0;                                      // [kRows][LT] T: the item's query rows
	static constexpr size_t k = q + sizeof(T) * kRows * LT;              // [N][LT] T: a key tile
	static constexpr size_t v = k + sizeof(T) * N * LT;                  // [N][LT] T: its values
	static constexpr size_t w = v + sizeof(T) * N * LT;                  // [warps][W] f32: scores, staging
	static constexpr size_t p = w + sizeof(float) * kWarps * W;          // [kRows][LP] T: probabilities
	static constexpr size_t f = p + sizeof(T) * kRows * LP;              // [kRows] f32: per-row factors
	static constexpr size_t bytes = f + sizeof(float) * kRows;
	static_assert(k % 32 == 0 && v % 32 == 0 && w % 32 == 0 && p % 32 == 0 && f % 32 == 0, "wmma alignment");
};

// One block per (sequence, key/value head g, tile of 64 query rows); grid
// (ceil(nq·rep/64) + nseq)·g, block kThreads. sl2 = scale·log2 e.
template <class T, int D, int N>
__global__ void __launch_bounds__(kThreads, 2)
    attn_fwd_kernel(T *__restrict__ out, float *__restrict__ lse, const T *__restrict__ q, const T *__restrict__ k,
                    const T *__restrict__ v, const int32_t *__restrict__ seqs, int nseq, int h, int g, int dh,
                    float sl2, int noncausal) {
	typedef FwdSmem<T, D, N> L;
	constexpr int LT = L::LT, LS = padded<float>(N);
	extern __shared__ __align__(128) unsigned char smem[]; // wmma needs 32-byte aligned tiles
	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	T *Qs = (T *)(smem + L::q);                            // [kRows][LT]
	T *Ks = (T *)(smem + L::k);                            // [N][LT]
	T *Vs = (T *)(smem + L::v);                            // [N][LT]
	float *Sw = (float *)(smem + L::w) + warp * L::W;      // [16][N+4] scores; [16][D+4] staging
	T *Pw = (T *)(smem + L::p) + warp * kStrip * L::LP;    // [16][LP] probabilities
	float *fw = (float *)(smem + L::f) + warp * kStrip;    // [16] per-row factors

	const int rep = h / g, kvh = blockIdx.x % g;
	int s, tile;
	if (find_tile(seqs, nseq, false, rep, blockIdx.x / g, &s, &tile)) {
		const int qs = seqs[4 * s], ql = seqs[4 * s + 1], ks = seqs[4 * s + 2], kl = seqs[4 * s + 3];
		const int off = noncausal ? kl : kl - ql, rows = ql * rep;
		const int r0 = (ceil_div(rows, kRows) - 1 - tile) * kRows; // last tile first
		const int r1 = min(r0 + kRows, rows);
		const int kEnd = min((r1 - 1) / rep + off + 1, kl); // keys any row of the tile sees
		auto qrow = [=](int r) -> int64_t { return r0 + r < r1 ? qrow_offset(qs, r0 + r, rep, h, kvh, dh) : -1; };
		load_rows<T, D, kRows>(Qs, q, dh, qrow);

		// Lane pair (2r, 2r+1) keeps the softmax of the warp's row r, each
		// lane taking the keys of its parity.
		const int r = lane / 2, half = lane % 2, rho = r0 + warp * kStrip + r;
		const bool valid = rho < r1;
		const int last = min((valid ? rho : r1 - 1) / rep + off, kl - 1); // the last key the row sees
		float m = -INFINITY, l = 0.0f; // running maximum (base 2, scaled) and sum
		typename AccOf<T, D>::type o;  // Σ P·V, rescaled as m moves
		o.zero();
		for (int j0 = 0; j0 < kEnd; j0 += N) {
			__syncthreads(); // the previous tile is no longer read
			auto krow = [=](int j) -> int64_t {
				return j0 + j < kEnd ? ((int64_t)(ks + j0 + j) * g + kvh) * dh : -1;
			};
			load_rows<T, D, N>(Ks, k, dh, krow);
			load_rows<T, D, N>(Vs, v, dh, krow);
			__syncthreads();
			warp_nt<D, N>(Sw, Qs + warp * kStrip * LT, Ks);
			__syncwarp();
			float sc[N / 2];
			float mx = m;
			UNROLL
			for (int i = 0; i < N / 2; i++) {
				const int j = 2 * i + half;
				// Rounded (__fmul_rn): exp2(sc − mx) below must be exactly 1 for
				// the maximum, which an FMA of the product into the
				// subtraction would not give.
				sc[i] = j0 + j <= last ? __fmul_rn(Sw[r * LS + j], sl2) : -INFINITY;
				mx = fmaxf(mx, sc[i]);
			}
			mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, 1)); // finite: every row sees key 0
			float sum = 0.0f;
			UNROLL
			for (int i = 0; i < N / 2; i++) {
				const float p = exp2f(sc[i] - mx);
				sum += p;
				Pw[r * L::LP + 2 * i + half] = from_float<T>(p);
			}
			sum += __shfl_xor_sync(kFull, sum, 1);
			const float c = exp2f(m - mx); // 0 on the first tile
			l = l * c + sum;
			m = mx;
			if (half == 0) fw[r] = c;
			__syncwarp();
			o.rescale(fw, Sw);
			o.template mma<N>(Pw, Vs);
		}
		__syncwarp(); // fw and Sw are free again
		if (half == 0) {
			fw[r] = __fdividef(1.0f, l); // l ≥ 1: no slow path (and no spills) for 1/l
			if (valid) lse[qrow_index(qs, rho, rep, h, kvh)] = (m + log2f(l)) * kLn2;
		}
		o.store(Sw);
		__syncwarp();
		store_rows<T, D>(out, Sw, fw, 1.0f, dh, [=](int rr) { return qrow(warp * kStrip + rr); });
	}
}

// ---- Launchers --------------------------------------------------------------------

namespace {

// Calls f(T*, integral_constant<int, D>) for the storage type T that dt names
// (f32, bf16) and the padded head width D ∈ {32, 64, 128} that fits dh; returns
// cudaErrorInvalidValue for any other dtype.
template <class F> cudaError_t dispatch(tw_dtype dt, int64_t dh, F f) {
	auto width = [&](auto *t) -> cudaError_t {
		if (dh <= 32) return f(t, std::integral_constant<int, 32>());
		if (dh <= 64) return f(t, std::integral_constant<int, 64>());
		return f(t, std::integral_constant<int, 128>());
	};
	switch (dt) {
	case TW_F32: return width((float *)nullptr);
	case TW_BF16: return width((bf16 *)nullptr);
	default: return cudaErrorInvalidValue;
	}
}

// The checks both directions share: shape limits, head width, alignment.
bool shapes_ok(int64_t nq, int64_t nk, int64_t h, int64_t g, int64_t dh, std::initializer_list<const void *> ptrs) {
	if (dh % 8 != 0 || dh > 128 || g < 1 || h % g != 0) return false;
	if (nq * h > INT32_MAX || nk * g > INT32_MAX) return false; // row numbers are 32-bit in the kernels
	for (const void *p : ptrs)
		if (!pack_aligned<bf16, 8>(p)) return false; // 16 bytes: the packs of both dtypes
	return true;
}

// Grid for items of 64 rows out of `rows` rows split among nseq sequences,
// times g key/value heads; 0 if it would not fit a grid.
unsigned grid_of(int64_t rows, int64_t nseq, int64_t g) {
	const int64_t n = (ceil_div<int64_t>(rows, kRows) + nseq) * g;
	return n > INT32_MAX ? 0 : (unsigned)n;
}

// Lets kernel use bytes of dynamic shared memory (over 48 KiB needs the
// opt-in; set on every call, as the setting is per device).
template <class K> cudaError_t allow_smem(K kernel, size_t bytes) {
	return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
}

} // namespace

// config_ok reports whether cfg asks only for what these kernels are built
// with, each field 0 (the default) or: fwd_rows 64; fwd_keys 64 (bf16) or 32
// (f32); fwd_stages 1; dec_split 1; dec_keys as fwd_keys (decoding runs the
// forward kernel). The bwd_ fields are the backward's
// (attention_backward.cu).
template <class T> bool config_ok(const tw_attention_config *cfg) {
	if (cfg == nullptr) return true;
	auto is = [](int v, int want) { return v == 0 || v == want; };
	return is(cfg->fwd_rows, kRows) && is(cfg->fwd_keys, Inner<T>::fwd) && is(cfg->fwd_stages, 1) &&
	       is(cfg->dec_split, 1) && is(cfg->dec_keys, Inner<T>::fwd);
}

extern "C" cudaError_t tw_attention(void *out, float *lse, const void *q, const void *k, const void *v,
                                    const int32_t *seqs, int64_t nseq, tw_dtype dt, int64_t nq, int64_t nk, int64_t h,
                                    int64_t g, int64_t dh, float scale, int noncausal, const tw_attention_config *cfg,
                                    cudaStream_t stream) {
	if (nseq < 0 || nq < 0 || nk < 0 || h < 0 || g < 0 || dh < 0) return cudaErrorInvalidValue;
	if (!(dt == TW_BF16 ? config_ok<bf16>(cfg) : config_ok<float>(cfg))) return cudaErrorInvalidValue;
	if (nq == 0 || h == 0 || nseq == 0) return cudaSuccess;
	if (!shapes_ok(nq, nk, h, g, dh, {out, q, k, v})) return cudaErrorInvalidValue;
	const unsigned grid = grid_of(nq * (h / g), nseq, g);
	if (grid == 0) return cudaErrorInvalidValue;
	const float sl2 = (float)((double)scale * 1.4426950408889634);
	return dispatch(dt, dh, [&](auto *t, auto width) {
		typedef std::remove_pointer_t<decltype(t)> T;
		constexpr int D = decltype(width)::value, N = Inner<T>::fwd;
		const size_t bytes = FwdSmem<T, D, N>::bytes;
		cudaError_t e = allow_smem(attn_fwd_kernel<T, D, N>, bytes);
		if (e != cudaSuccess) return e;
		LAUNCH(grid, kThreads, bytes, stream, attn_fwd_kernel<T, D, N>)(
		    (T *)out, lse, (const T *)q, (const T *)k, (const T *)v, seqs, (int)nseq, (int)h, (int)g, (int)dh, sl2,
		    noncausal);
		return cudaGetLastError();
	});
}
