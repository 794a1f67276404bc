// attention.cuh — what the attention forward (attention.cu) and backward
// (attention_backward.cu) share: the rules both kernels follow and the
// helpers that encode them, each written here once. Include after
// common.cuh; nothing else includes it.
//
// Contract (both directions; each file adds its own):
//   Shapes: dt is f32 or bf16; dh is a multiple of 8 up to 128; h is a
//   multiple of g ≥ 1; nq·h and nk·g fit 32 bits (row numbers are 32-bit in
//   the kernels); every dt tensor is 16-byte aligned (whole allocations are,
//   and so are views of whole rows, dh being a multiple of 8), for cp.async
//   and 16-byte vector accesses. shapes_ok checks all but the dtype.
//   Rows: the h/g query heads that share key/value head g are handled
//   together: for a sequence the "rows" are the pairs (t, j) of a query t
//   and one head j of the group, ρ = t·(h/g) + j, consecutive in memory for
//   one t (the heads of a group are adjacent in q); QRows maps ρ to
//   the row of [nq·h] (lse, the backward's D; times dh, the element offset
//   in q, out, dout, dq). One key/value tile in shared memory then serves
//   every head of the group.
//   Causality: query t of a sequence sees keys 0 … t+off, off = kLen − qLen
//   (causal) or kLen (noncausal: every key), and never key kLen or beyond
//   (key_offset); every kernel bounds its keys by that one rule.
//   Grids: a grid cannot depend on seqs (device data), so a launcher sizes
//   it by tiles_bound and each block finds its (sequence, tile) with
//   find_tile, a warp-wide prefix sum over the sequences' tile counts
//   (QueryTiles, KeyTiles); blocks past the last tile do nothing.
//   Shared-memory tiles: a stored row is C 16-byte chunks, unpadded, chunk
//   c of row r at chunk swz_chunk<C>(r, c) of the row (see there).
#pragma once

#include <initializer_list>
#include <stdint.h>
#include <type_traits>

#include "common.cuh"
#include "kernels.h"
#include "pack.cuh"

namespace {

typedef __nv_bfloat16 bf16;

constexpr unsigned kFull = 0xffffffffu;     // all lanes of a warp
constexpr double kLog2e = 1.4426950408889634; // log2 e (the softmax runs in base 2)
template <int V> using IntC = std::integral_constant<int, V>;

// ---- Device side ----------------------------------------------------------------

// The swizzled position of chunk c (16 bytes) of row r in a tile of C chunks
// per row (C a power of two), chosen so that the 8 rows one ldmatrix phase
// (or a cp.async store) touches — 8 consecutive rows, one chunk column —
// fall in 8 distinct 16-byte bank groups: with C ≥ 8 (rows of 128 bytes or
// more) c is XORed with r mod 8; narrower rows share a 128-byte line (8/C
// rows each), and the XOR uses the line number instead, mod C. It permutes
// chunks within their row, so every chunk stays 16-byte aligned (cp.async,
// ldmatrix).
template <int C> __host__ __device__ __forceinline__ int swz_chunk(int r, int c) {
	static_assert(C > 0 && (C & (C - 1)) == 0, "swz_chunk: C a power of two");
	if constexpr (C >= 8) return c ^ (r & 7);
	else return c ^ (int)(((unsigned)r / (8 / C)) & (C - 1));
}

// Pairs of chunks. At the full head width the copies of a tile give each
// thread two chunks of a row, so that one offset and one pointer serve both
// (kPairs<C>: rows of 4 chunks or more). The C/2 threads of a row take
// pairs (i, i + C/2), i < C/2: in global memory a row's first halves are
// then read by consecutive lanes, whole 32-byte sectors per instruction;
// the second chunk's swizzled offset is the first's XOR 16·C/2 (swz_chunk
// XORs the chunk index, and i + C/2 = i XOR C/2). The n-th group of C/2
// threads copies row pair_row<C>(n), permuted within each 8 rows so that
// the 8 lanes of a quarter warp — what one phase of the shared-memory
// stores takes — hit 8 distinct bank groups: with C ≥ 16 they are one row; with C = 8, rows r
// and r + 4 (swizzles that differ in bit 2); with C = 4 (two rows a
// 128-byte line), rows r, r + 1, r + 4 and r + 5. A loop over rows must
// step by a multiple of 8. (Pairs of adjacent chunks, as this once was,
// read half of every sector per instruction at C ≤ 8 and stored two of a
// quarter warp's chunks in each of four bank groups at C = 16; the
// emulator's bank model, TestSharedMemoryBanks, counts both.)
template <int C> constexpr bool kPairs = C >= 4;
template <int C> __host__ __device__ __forceinline__ int pair_row(int n) {
	if constexpr (C == 8) return (n & ~7) | (n & 6) >> 1 | (n & 1) << 2;
	else if constexpr (C == 4) return (n & ~7) | (n & 1) | (n & 2) << 1 | (n & 4) >> 1;
	else return n;
}

// The key offset of the causality rule (see the top): query t sees keys
// 0 … min(t + off, kLen − 1).
__device__ __forceinline__ int key_offset(int qlen, int klen, bool noncausal) { return noncausal ? klen : klen - qlen; }

// n / d for a divisor d fixed for a whole launch (the rows' rep = h/g), by
// a multiply-high, an add and a shift where an integer division takes about
// twenty instructions (Granlund and Montgomery, "Division by invariant
// integers using multiplication", 1994): with s = ⌈log2 d⌉ and
// m = ⌊2^32·(2^s − d)/d⌋ + 1, n/d = (umulhi(n, m) + n) >> s. Exact for n in
// [0, 2^31) and d in [1, 2^31) (then umulhi(n, m) + n < 2^32); made on the
// host by the launcher, which knows d.
struct FastDiv {
	int d;      // the divisor
	uint32_t m; // the multiplier
	int s;      // the shift
	static FastDiv of(int d) {
		int s = 0;
		while ((1ll << s) < d) s++;
		return FastDiv{d, (uint32_t)(((uint64_t)1 << 32) * (((uint64_t)1 << s) - (uint64_t)d) / (uint64_t)d + 1), s};
	}
	__device__ __forceinline__ int div(int n) const { return (int)((__umulhi((uint32_t)n, m) + (uint32_t)n) >> s); }
};

// The rows of one sequence's query/key-value group (see the top): row ρ of
// the sequence that starts at query qs, in the group of key/value head kvh,
// is row first + ⌊ρ/rep⌋·h + ρ mod rep of [nq·h], first = qs·h + kvh·rep.
struct QRows {
	int64_t first;
	FastDiv rep;
	int h;
	__device__ __forceinline__ QRows(int qs, int kvh, FastDiv rep, int h)
	    : first((int64_t)qs * h + kvh * rep.d), rep(rep), h(h) {}
	__device__ __forceinline__ int64_t operator()(int rho) const {
		const int t = rep.div(rho);
		return first + (int64_t)t * h + (rho - t * rep.d);
	}
};

// Tile counts of a sequence, given its row (qStart, qLen, kStart, kLen) of
// seqs: QueryTiles, tiles of `rows` of its qLen·rep rows; KeyTiles, tiles of
// `keys` of its kLen keys.
struct QueryTiles {
	int rep, rows;
	__device__ __forceinline__ int operator()(const int32_t *s) const { return ceil_div(s[1] * rep, rows); }
};
struct KeyTiles {
	int keys;
	__device__ __forceinline__ int operator()(const int32_t *s) const { return ceil_div(s[3], keys); }
};
struct NoTiles { // find_tile without a second count
	__device__ __forceinline__ int operator()(const int32_t *) const { return 0; }
};

// Numbering the tiles of all sequences in order (count(s) of them for
// sequence s), finds the sequence *seq and its tile *tile (0-based) that
// tile number id is; false when id is past the last. With a second count
// `also`, *also_before gets its sum over the sequences before *seq. Called
// by whole warps (every lane gets the answer): each round, the lanes take 32
// sequences and inclusive prefix sums of their counts.
template <class Count, class Also = NoTiles>
__device__ __forceinline__ bool find_tile(const int32_t *__restrict__ seqs, int nseq, int id, Count count, int *seq,
                                          int *tile, Also also = Also(), int *also_before = nullptr) {
	constexpr bool kAlso = !std::is_same<Also, NoTiles>::value;
	const int lane = threadIdx.x % 32;
	int before = 0, abefore = 0; // over the sequences of earlier rounds
	for (int base = 0; base < nseq; base += 32) {
		const int s = base + lane;
		const int n = s < nseq ? count(seqs + 4 * s) : 0;
		const int na = kAlso && s < nseq ? also(seqs + 4 * s) : 0;
		int incl = n, ain = na;
		TW_UNROLL
		for (int o = 1; o < 32; o *= 2) {
			const int x = __shfl_up_sync(kFull, incl, o);
			if constexpr (kAlso) {
				const int y = __shfl_up_sync(kFull, ain, o);
				if (lane >= o) ain += y;
			}
			if (lane >= o) incl += x;
		}
		const int total = __shfl_sync(kFull, incl, 31);
		int atotal = 0;
		if constexpr (kAlso) atotal = __shfl_sync(kFull, ain, 31);
		if (id < before + total) {
			const int owner = __ffs(__ballot_sync(kFull, before + incl > id)) - 1;
			*seq = base + owner;
			*tile = id - __shfl_sync(kFull, before + incl - n, owner);
			if constexpr (kAlso) *also_before = __shfl_sync(kFull, abefore + ain - na, owner);
			return true;
		}
		before += total;
		abefore += atotal;
	}
	return false;
}

// ---- Host side ------------------------------------------------------------------

// A tile configuration of the backward (attention_backward.cu): query rows
// per tile (bwd_rows), keys per block (bwd_keys), stages (bwd_stages), keys
// per warp (bwd_warp_keys), columns of a warp's dQ unit (bwd_dq_cols).
struct BwdConfig {
	int rows, keys, stages;
	int warp_keys = 16;
	int dq_cols = 32;
	constexpr bool operator==(const BwdConfig &o) const {
		return rows == o.rows && keys == o.keys && stages == o.stages && warp_keys == o.warp_keys &&
		       dq_cols == o.dq_cols;
	}
};

// The backward's configurations compiled for bf16 at head width 128 (dh in
// (64, 128]), the small devices' default first: rows and keys 64 or 128,
// stages 1 or 2 (128, 128, 2 fits only an H100's or H200's 227 KiB of
// shared memory), 16 keys per warp; and FlashAttention-2's warp layout (32
// keys per warp) at 64 rows with two stages (64 keys: two blocks per SM on
// an H100 or H200; 128 keys) and at 128 rows and keys with one; all with
// dQ units of 32 columns, and the H100's default (128, 128, 1) with units of
// 64 too. The backward's dispatch and the sweep's list
// (tw_attention_configs) both read it.
constexpr BwdConfig kBwdConfigs128[] = {{64, 128, 2},    {64, 64, 1},      {64, 64, 2},       {64, 128, 1},
                                        {128, 64, 1},    {128, 64, 2},     {128, 128, 1},     {128, 128, 2},
                                        {64, 64, 2, 32}, {64, 128, 2, 32}, {128, 128, 1, 32}, {128, 128, 1, 16, 64}};

// A bound on the tiles of `tile` rows that sequences of n rows in all, nseq
// of them, can have: a sequence of m rows has ceil(m/tile) ≤ m/tile + 1
// tiles, and the sequences' rows do not overlap.
inline int64_t tiles_bound(int64_t n, int64_t tile, int64_t nseq) { return ceil_div<int64_t>(n, tile) + nseq; }

// scale·log2 e, rounded once: the factor that turns a product q·k into the
// exponent of 2 of the softmax (which runs in base 2).
inline float scale_log2e(float scale) { return (float)((double)scale * kLog2e); }

// The contract's shape rules (see the top), ptrs being the dt tensors; the
// dtype is the launchers' dispatch's question.
inline bool shapes_ok(int64_t nq, int64_t nk, int64_t h, int64_t g, int64_t dh,
                      std::initializer_list<const void *> ptrs) {
	if (dh % 8 != 0 || dh > 128 || g < 1 || h % g != 0) return false;
	if (nq * h > INT32_MAX || nk * g > INT32_MAX) return false; // row numbers are 32-bit in the kernels
	for (const void *p : ptrs)
		if (!pack_aligned<bf16, 8>(p)) return false; // 16 bytes
	return true;
}

// Lets kernel use bytes of dynamic shared memory (over 48 KiB needs the
// opt-in; set on every call, as the setting is per device).
template <class K> cudaError_t allow_smem(K kernel, size_t bytes) {
	return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
}

} // namespace
