// attention.cu — grouped-query flash attention, causal or not, over packed
// variable-length sequences: the forward, with flash-decoding
// (attention_backward.cu has the backward).
//
// Contract: engine.Backend.Attention (engine/backend.go); the launchers'
// arguments are listed in kernels.h; the shapes, the alignment and the
// causality rule both directions share are attention.cuh's. What the forward
// adds to them:
//   Workspace of the forward: tw_attention_workspace gives
//   split·nq·h·(dh+2)·4 bytes when the launch decodes with its keys split
//   in split > 1 chunks (see Decoding below), else 0; 16-byte aligned.
//   Configuration (tw_attention_config; 0 is the default), forward; the
//   tile fields tune bf16, and f32 (the plain path) runs its one tiling
//   whatever they say (dec_split applies to both):
//   fwd_rows 64 or 128 (default 128 for bf16, 64 for f32), fwd_keys 32, 64
//   or 128 (default for bf16 128 at head widths over 64, else 64; 32 for
//   f32), fwd_stages 1, 2 or 3 (default 2), dec_keys 64 or 128 (default 64
//   for bf16, 32 for f32), dec_split 1 … 1024 (default: chosen per launch,
//   dec_auto_split), dec_key_warps 1 or 4 (default 1; 4, compiled for bf16
//   at head widths over 64 with 64 or 128 keys, not yet measured on a GPU:
//   see Decoding). The bf16 defaults are the sweep's fastest on an H200
//   (2026-11-27, Llama-3.1-8B heads at 2k and 8k tokens: 128 rows and 128
//   keys ran 1.11-1.16× the 128 × 64 of before; 2 and 3 stages within
//   0.5%). fwd_warp_rows 16 or 32 (default 16): query rows per warp (see
//   "Why 16 rows per warp" below; 32 is FlashAttention-2's layout, not yet
//   measured on a GPU). fwd_k_ring 1, 4 or 8 (default 8): K fragments in
//   flight in S = Q·Kᵀ at 16 rows per warp (see "Fragment loads" below; 1
//   and 4 compiled for the default tile only, bf16 at head widths over 64
//   with 128 keys, so that a sweep measures what the ring is worth; not
//   yet measured on a GPU). Rows and stages are run-time parameters of the
//   kernel; the key tile, the rows per warp and the ring are template parameters,
//   compiled for 32, 64 and 128 keys with bf16 at head widths over 64 (32
//   rows per warp: 32 and 64 keys), for 64 keys with bf16 up to 64, for 32
//   keys with f32 (16 rows per warp only): another key tile, or a
//   combination whose shared memory exceeds the device's
//   (128 rows, 128 keys, 3 stages: 224 KiB, over an A100's 163), is
//   cudaErrorInvalidValue. The backward's fields are attention_backward.cu's.
//   tw_attention_configs lists what a sweep tries, both directions'.
//   Shapes outside attention.cuh's rules, or a dtype other than f32 and
//   bf16 (q, k, v and out share it), give cudaErrorInvalidValue. seqs is
//   trusted, not checked (a launcher does not read device memory). Extents
//   with nothing to compute (nq·h = 0 or nseq = 0) launch nothing and
//   succeed.
//   Numerics: softmax in f32, out rounded once. The forward is
//   deterministic: no float atomics; every element is summed by one thread
//   (or one warp's mma sequence) in a fixed order — a split decode's chunks
//   are combined in chunk order — so reruns give the same bits. (The split,
//   and with it the low bits, can differ between devices of different SM
//   counts when dec_split is left to its default.)
//
// Design
//
// Rows are attention.cuh's: one key/value tile in shared memory serves every
// head of a group, and a decoding step (qLen = 1) still fills h/g rows of a
// tile rather than one.
//
// Blocks. Warp w of a block owns the 16M rows 16Mw … 16Mw+16M−1 of the
// block's rows, M = fwd_warp_rows/16 fragments of 16 (FwdMath): 4 or 8
// warps of 16 rows, or 2 or 4 of 32, for 64 or 128 rows (R below). Work
// items are (sequence, key/value head, tile of R of the sequence's
// qLen·h/g query rows); the launcher sizes the grid by attention.cuh's
// tiles_bound, ceil(rows/R) + nseq tiles per key/value head, and each block
// finds its (sequence, tile) by find_tile (QueryTiles); blocks past the end
// do nothing. Within a sequence
// the blocks take the query tiles last first, the costliest (most keys)
// being scheduled first.
//
// Forward (attn_fwd_kernel: FlashAttention-2's forward, Dao 2023), per item
// of R query rows: Q is loaded once; then, for each tile of N keys up to the
// last key a row of the item sees, S = Q·Kᵀ, the online softmax and
// O += P·V, with S, P and O in registers, never in shared memory.
//   Loads: Q, then the K and V tiles, by cp.async (16-byte chunks, cached
//   in L2 only) into shared memory; rows past the end and columns past dh
//   are zero-filled by the copy itself. S stages (fwd_stages) of K and V
//   tiles: while the warps work on tile i, tiles i+1 … i+S−1 are in flight.
//   One __syncthreads per tile, after the wait that lands tile i (covering
//   every thread's copies) and before the copy that refills the stage tile
//   i−1 used (every warp is done with it once past the barrier); with S = 1
//   a second barrier follows the tile.
//   Layout: a stored row is D elements (D·size bytes, no padding), its
//   16-byte chunks swizzled by attention.cuh's swz_chunk (swz below: the
//   byte offset), so the 8 rows one ldmatrix phase reads fall in 8 distinct
//   groups of 4 banks: conflict-free, and every chunk 16-byte aligned, as
//   cp.async and ldmatrix require.
//   bf16, per warp of 16 rows (FwdMath<bf16>), on mma.sync m16n8k16 (bf16
//   operands, f32 accumulators; fragment layouts in sm80.cuh). Q's A
//   fragments are loaded once by ldmatrix.x4 and stay in registers (D/16 ×
//   4). S: each ldmatrix.x4 of K gives the B fragments of two 8-key groups
//   (K stored [key][dim] is Bᵀ: no transpose). The online softmax runs on
//   S's accumulator fragments: lane (g, t) holds rows g and g+8, keys
//   8n+2t, 8n+2t+1, so a row's maximum is the max over its quad of lanes
//   (__shfl_xor_sync 1 and 2), taken on the unscaled scores x and then
//   scaled to base 2, m = max·sl2 (sl2 = |scale|·log2 e; a negative scale
//   negates Q instead, so that sl2 keeps the order), and p = 2^(x·sl2 − m),
//   one FMA and an ex2.approx on a GPU (FlashAttention-2's way). The
//   maximum's own term is 2^ε, ε the rounding error of m (|ε| ≤ ulp(m)/2:
//   l ≥ 2^−|ε| ≈ 1 for any score short of 2^30 in base 2). Each
//   lane keeps its share of a row's sum l, added up over the quad at the
//   end; the output accumulator (rows g, g+8, columns 8j+2t, +1: D/2 floats
//   per lane) is rescaled in registers by 2^(m_old − m_new). P, packed to
//   bf16 in registers (cvt.rn.bf16x2; two adjacent 8-key accumulator tiles
//   are exactly an A fragment), is the A operand of P·V, whose B fragments
//   are V's by ldmatrix.x4.trans. P is rounded to bf16 as an operand, as in
//   FlashAttention; l sums the unrounded p.
//   f32 (FwdMath<float>, the plain path): the same kernel and softmax, with
//   SIMT products that compute each lane's fragment elements from shared
//   memory in f32 (Q stays there; P goes through a per-warp scratch [16][N]
//   f32, as a row of P is spread over a quad), so f32 results are f32-exact
//   up to the summation order.
//   Masking: a tile is masked only where it reaches past the keys every row
//   of the warp sees (`full`: the causal diagonal, and the end of the
//   keys); a warp skips both products of a tile none of its rows sees (the
//   later rows of a 128-row tile near the diagonal). A row that has seen no
//   key yet subtracts 0 rather than −inf (no NaN; only decoding chunks and
//   the rows past the end have such rows).
//   End: out = O·(1/l) (the fast reciprocal: l ≈ 1 or more) rounded once to the
//   dtype, bf16x2 or float2 stores; lse = (m + log2 l)·ln 2 per (query row,
//   head), natural log, f32 — the backward's input.
//   Why 16 rows per warp: Q's fragments and O in registers take D/2 + D/4 =
//   96 registers per lane at D = 128 and 16 rows (192 at 32 rows, which
//   with S's N/2 would not fit 255 without spilling); 128-row blocks are
//   then 8 warps sharing each K/V tile (half the L2 traffic per query of
//   64-row blocks). The cost: each K/V element read from shared memory
//   feeds 16 rows (16 flop/byte of ldmatrix traffic) — on an H100 about
//   4 TFLOP/s per SM at 128 B/clock, above the forward's target but not
//   by much (unmeasured).
//   32 rows per warp (fwd_warp_rows = 32, FlashAttention-2's layout): each
//   K/V fragment feeds 32 rows (twice the flop per byte of shared-memory
//   traffic, less Q's re-reads: 26 flop/byte at 64 keys), and a 128-row
//   block is 4 warps, two blocks per SM, so one block's barrier wait is
//   covered by the other's work. Q cannot stay in registers beside O
//   (D floats per lane) and S (N/2): its fragments are re-read from shared
//   memory by ldmatrix for each key tile, and key tiles stop at 64.
//   Fragment loads (fwd_k_ring, KR): in S = Q·Kᵀ at 16 rows per warp, the
//   D/16 · N/16 ldmatrix.x4 of K (each feeding two mma) are issued from a
//   ring of KR fragments, KR − 1 loads ahead of their products, as
//   FlashAttention-2 loads the next k-step's fragments before the current
//   one's products. Written plainly (KR = 1), ptxas put each load right
//   before its two mma, which then waited out its latency: in the default
//   tile's machine code (nvcc 11.8, sm_90) 60 of the kernel's 136 ldmatrix
//   had their first reader as the very next instruction; with KR = 8, none
//   is read sooner than 7 instructions later and 117 of them 16 or more
//   later, for one more register (237) and no spill. P·V needs no ring:
//   ptxas interleaves its loads with the softmax's exponentials by itself.
//   (The backward's dQ product had the same schedule: attention_backward.cu,
//   "dQ units".)
// Decoding (flash-decoding): when nq ≤ 2·nseq (one or two new queries per
// sequence, as the launcher can tell without reading seqs) the same kernel
// runs with 64-row tiles (4 warps that all load; for Llama's 4 heads per
// group a one-token step is 4 rows, computed by one warp), N = dec_keys,
// 3 stages (2 for 128 keys), and each item's key tiles are split into
// `split` chunks (dec_split) taken by different blocks, so that a batch of
// long caches fills the GPU. A chunk's block writes its rows' unnormalised
// (m, l, O) to the workspace; attn_fwd_combine_kernel then merges each
// row's chunks in chunk order (deterministic). One launch serves sequences
// of different lengths: chunk c of an item of T tiles is tiles
// [c·T/split, (c+1)·T/split), empty when T < split (its block writes
// m = −inf, which the combine leaves out). split = 1 writes the results
// directly, as the forward does.
//   With dec_key_warps = 4 (KW) a decoding block holds 16 rows (a one-token
// step of up to 16 heads per group in one tile) and its 4 warps all
// compute: warp w takes keys [w·N/4, (w+1)·N/4) of every tile (a multiple of
// 8 rows into the tile, where the swizzle repeats), keeping its own (m, l,
// O) of the 16 rows; at the end the warps write them over the stages and
// warp 0 merges them in warp order, as the combine merges chunks. Where a
// 64-row tile computes 4 rows with one warp while three wait, every warp
// works on a quarter of the keys.
//
// Forward budget at D = 128, bf16. Shared memory: Q R·256 bytes (32 KiB at
// 128 rows) plus S·N·512 bytes of K/V stages: 160 KiB at the defaults (128
// rows, 128 keys, 2 stages), 224 KiB at the largest (128, 128, 3: H100
// only); decoding 112 KiB (64 keys, 3 stages) or 144 KiB (128 keys, 2).
// Registers (ptxas -v of nvcc 11.8, sm_90 / sm_80; __launch_bounds__(256)
// allows 255): 186 / 178 at N = 32, 202 / 211 at N = 64, 237 / 245 at
// N = 128, none spilled; so one 8-warp block or two 4-warp blocks per SM
// (D = 64: 154 / 133; f32 at D = 128: 207 / 205; no spills; f32 at D = 64
// spills 20 / 16 bytes, the plain path). At 32 rows per warp
// (__launch_bounds__(128)): 246 / 252 at N = 32, no spill; 255 at N = 64
// with 52 / 40 bytes spilled, the row sums among them (S's k-loop is
// unrolled by 2 there, as fully unrolled ptxas hoists its loads and spills
// more); the 4 warps of a decoding key split (KW = 4): 189 / 172 at
// N = 128, 169 / 166 at N = 64. The default's loop (N = 128) issues about
// 940 instructions per warp and tile on its common path (no mask, no
// rescale) for 256 mma.sync and 128 ldmatrix: the copies and the stage
// bookkeeping about 170, the softmax about 380 (sm_90 code).
#include <algorithm>

#include "common.cuh"
#include "attention.cuh"
#include "sm80.cuh"

// The kernels stay outside the anonymous namespace: their block-scope
// declaration of the dynamic shared memory must name the global smem.

// ---- Forward and decoding ----------------------------------------------------------
//
// The design is in the file's opening comment ("Forward"); the names here are
// the ones it uses: rows (query rows per block, 16 per warp), N (keys per
// tile), S (stages: key/value tiles in shared memory), C (16-byte chunks per
// stored row).

namespace {

constexpr int kFwdMaxWarps = 8; // warps of the largest forward block (128 rows)
constexpr float kLn2 = 0.6931471805599453f;

// Parameters of one forward launch (passed by value).
struct FwdArgs {
	void *out;            // [nq, h, dh] T (final results)
	float *lse;           // [nq, h]
	const void *q, *k, *v;
	const int32_t *seqs;  // [nseq, 4]
	float *part_o;        // split > 1: [split][nq·h][dh] f32, unnormalised outputs of each key chunk
	float *part_ml;       // split > 1: [split][nq·h][2] f32, (m, l) of each key chunk
	int64_t nqh;          // nq·h
	int nseq, h, g, dh;
	FastDiv rep;          // h/g, the rows per query (attention.cuh)
	int rows;             // query rows per block: 16·warps
	int stages;           // key/value tiles in shared memory, 1 … 3
	int split;            // key chunks per item (1: no partials)
	int noncausal;
	int negq;             // scale < 0: Q is negated in shared memory (see the launcher)
	float sl2;            // |scale|·log2 e, > 0 but for a zero scale
};

// Byte offset of chunk c (16 bytes) of row r in a tile of C chunks per row,
// swizzled (attention.cuh's swz_chunk). As the XOR term depends on r mod 8
// only, and C is a power of two,
//   swz(r + 8m, 2k + b) = (swz(r, b) ^ 32k) + 128·m·C   (b = 0, 1; 2k < C),
// which is how the fragment loads below address a tile: one per-lane
// offset, an XOR with a constant and an immediate.
template <int C> __device__ __forceinline__ int swz(int r, int c) { return (r * C + swz_chunk<C>(r, c)) * 16; }

// cp.async.wait_group n for n known only at run time (0 … 2).
__device__ __forceinline__ void cp_async_wait_upto(int n) {
	if (n <= 0) cp_async_wait<0>();
	else if (n == 1) cp_async_wait<1>();
	else cp_async_wait<2>();
}

// The two products of a warp's 16·M rows (M row fragments of 16: rows
// 16f … 16f+15 of the warp's, f < M), on fragments in the layout of
// mma.m16n8k16's accumulators (sm80.cuh): lane (g, t) = (lane/4, lane%4)
// holds s[f][n] = S[16f+g][8n+2t], S[16f+g][8n+2t+1], S[16f+g+8][8n+2t],
// S[16f+g+8][8n+2t+1] of the 16M×N scores and o[f][j] likewise of the 16M×D
// output.
//   bf16 (tensor cores): with M = 1, Q's fragments are loaded once
//   (ldmatrix) and kept in registers; with M = 2 (FlashAttention-2's 32 rows
//   per warp), registers cannot hold them beside O and S, and they are
//   re-read from shared memory for each key tile — the price of each K and V
//   fragment then serving 32 rows. K fragments by ldmatrix, V fragments by
//   ldmatrix.trans; P is packed to bf16 in registers as the A operand of P·V.
//   f32 (SIMT, the plain path, M = 1 only): each lane computes its own
//   fragment elements from shared memory in f32; P goes through the warp's
//   scratch (a row of P is spread over a quad of lanes).
template <class T, int D, int N, int M, int KR> struct FwdMath;

template <int D, int N, int M, int KR> struct FwdMath<bf16, D, N, M, KR> {
	static_assert(M == 1 || M == 2, "FwdMath: 1 or 2 row fragments per warp");
	static_assert(KR >= 1, "FwdMath: a ring of at least one K fragment");
	static constexpr int C = D / 8;          // chunks per row
	uint32_t qf[M == 1 ? D / 16 : 1][4];      // M = 1: Q's A fragments, one per 16 columns
	const unsigned char *qs;                  // M = 2: the block's Q tile …
	uint32_t qo[M];                           // … and the lane's ldmatrix offset in it per fragment

	// Q rows 16M·w … 16M·w + 16M − 1 of the block's tile Qs.
	__device__ __forceinline__ void load_q(const unsigned char *Qs, int warp, int lane) {
		TW_UNROLL
		for (int f = 0; f < M; f++) qo[f] = swz<C>(16 * (M * warp + f) + lane % 16, lane / 16);
		qs = Qs;
		if constexpr (M == 1) {
			TW_UNROLL
			for (int kk = 0; kk < D / 16; kk++) ldmatrix_x4(qf[kk], Qs + (qo[0] ^ (uint32_t)(32 * kk)));
		}
	}

	// s = Q·Kᵀ for the tile's N keys.
	__device__ __forceinline__ void scores(float (&s)[M][N / 8][4], const unsigned char *Ks, int lane) const {
		// Matrices of a load: keys 16np+0…7 at columns 16kk+0…7 and +8…15,
		// then keys 16np+8…15 likewise: the b of key groups 2np and 2np+1.
		// The lane's row: key 8·(lane/16) + lane%8, chunk 2kk + lane/8%2.
		const uint32_t ko = swz<C>(8 * (lane / 16) + lane % 8, lane / 8 % 2);
		TW_UNROLL
		for (int f = 0; f < M; f++)
			TW_UNROLL
			for (int n = 0; n < N / 8; n++) s[f][n][0] = s[f][n][1] = s[f][n][2] = s[f][n][3] = 0.0f;
		// Unrolled whole at M = 1, K's fragments in a ring of KR, each
		// loaded KR − 1 loads ahead of its two products (KR = 1: just
		// before them, where they wait out its latency); by 2 at M = 2,
		// where ptxas would hoist the fragment loads of the whole unroll and
		// spill.
		if constexpr (M == 1) {
			constexpr int NP = N / 16, T = D / 16 * NP, L = KR - 1 < T ? KR - 1 : T - 1;
			uint32_t b[L + 1][4];
			auto load = [&](int i) { ldmatrix_x4(b[i % (L + 1)], Ks + (ko ^ (uint32_t)(32 * (i / NP))) + 16 * (i % NP) * C * 16); };
			TW_UNROLL
			for (int i = 0; i < L; i++) load(i);
			TW_UNROLL
			for (int i = 0; i < T; i++) {
				if (i + L < T) load(i + L);
				const int kk = i / NP, np = i % NP;
				mma_bf16_m16n8k16(s[0][2 * np], qf[kk], b[i % (L + 1)], s[0][2 * np]);
				mma_bf16_m16n8k16(s[0][2 * np + 1], qf[kk], b[i % (L + 1)] + 2, s[0][2 * np + 1]);
			}
		} else {
			auto step = [&](int kk) {
				const uint32_t kx = ko ^ (uint32_t)(32 * kk);
				uint32_t a[M][4];
				TW_UNROLL
				for (int f = 0; f < M; f++) ldmatrix_x4(a[f], qs + (qo[f] ^ (uint32_t)(32 * kk)));
				TW_UNROLL
				for (int np = 0; np < N / 16; np++) {
					uint32_t b[4];
					ldmatrix_x4(b, Ks + kx + 16 * np * C * 16);
					TW_UNROLL
					for (int f = 0; f < M; f++) {
						mma_bf16_m16n8k16(s[f][2 * np], a[f], b, s[f][2 * np]);
						mma_bf16_m16n8k16(s[f][2 * np + 1], a[f], b + 2, s[f][2 * np + 1]);
					}
				}
			};
			TW_UNROLL_BY(2)
			for (int kk = 0; kk < D / 16; kk++) step(kk);
		}
	}

	// o += P·V, P = s (probabilities), rounded to bf16 in registers.
	__device__ __forceinline__ void pv(float (&o)[M][D / 8][4], const float (&p)[M][N / 8][4], const unsigned char *Vs,
	                                   float *, int lane) const {
		// Matrices of a load: keys 16kk+0…7 and +8…15 at columns 16dp+0…7,
		// then the same keys at 16dp+8…15, transposed: the b of column
		// groups 2dp and 2dp+1. The lane's row: key 8·(lane/8%2) + lane%8,
		// chunk 2dp + lane/16.
		const uint32_t vo = swz<C>(8 * (lane / 8 % 2) + lane % 8, lane / 16);
		// P packed whole first: its f32 registers are free before the
		// products start (half of S's count, beside O's, with M = 2).
		uint32_t a[N / 16][M][4];
		TW_UNROLL
		for (int kk = 0; kk < N / 16; kk++)
			TW_UNROLL
			for (int f = 0; f < M; f++) {
				a[kk][f][0] = pack_bf16x2(p[f][2 * kk][0], p[f][2 * kk][1]);
				a[kk][f][1] = pack_bf16x2(p[f][2 * kk][2], p[f][2 * kk][3]);
				a[kk][f][2] = pack_bf16x2(p[f][2 * kk + 1][0], p[f][2 * kk + 1][1]);
				a[kk][f][3] = pack_bf16x2(p[f][2 * kk + 1][2], p[f][2 * kk + 1][3]);
			}
		TW_UNROLL
		for (int kk = 0; kk < N / 16; kk++) {
			TW_UNROLL
			for (int dp = 0; dp < D / 16; dp++) {
				uint32_t b[4];
				ldmatrix_x4_trans(b, Vs + (vo ^ (uint32_t)(32 * dp)) + 16 * kk * C * 16);
				TW_UNROLL
				for (int f = 0; f < M; f++) {
					mma_bf16_m16n8k16(o[f][2 * dp], a[kk][f], b, o[f][2 * dp]);
					mma_bf16_m16n8k16(o[f][2 * dp + 1], a[kk][f], b + 2, o[f][2 * dp + 1]);
				}
			}
		}
	}
};

template <int D, int N, int KR> struct FwdMath<float, D, N, 1, KR> {
	static constexpr int C = D / 4;
	const unsigned char *q; // the warp's rows stay in shared memory

	__device__ __forceinline__ void load_q(const unsigned char *Qs, int warp, int) { q = Qs + (size_t)16 * warp * C * 16; }

	__device__ __forceinline__ void scores(float (&sf)[1][N / 8][4], const unsigned char *Ks, int lane) const {
		float(&s)[N / 8][4] = sf[0];
		const int g = lane / 4, t = lane % 4;
		TW_UNROLL
		for (int n = 0; n < N / 8; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
		TW_UNROLL_BY(2)
		for (int c = 0; c < C; c++) {
			const float4 q0 = *(const float4 *)(q + swz<C>(g, c)), q1 = *(const float4 *)(q + swz<C>(g + 8, c));
			TW_UNROLL
			for (int n = 0; n < N / 8; n++) {
				const float4 k0 = *(const float4 *)(Ks + swz<C>(8 * n + 2 * t, c));
				const float4 k1 = *(const float4 *)(Ks + swz<C>(8 * n + 2 * t + 1, c));
				auto dot = [](float acc, float4 x, float4 y) {
					return fmaf(x.w, y.w, fmaf(x.z, y.z, fmaf(x.y, y.y, fmaf(x.x, y.x, acc))));
				};
				s[n][0] = dot(s[n][0], q0, k0);
				s[n][1] = dot(s[n][1], q0, k1);
				s[n][2] = dot(s[n][2], q1, k0);
				s[n][3] = dot(s[n][3], q1, k1);
			}
		}
	}

	// scratch: the warp's [16][N] f32.
	__device__ __forceinline__ void pv(float (&of)[1][D / 8][4], const float (&pf)[1][N / 8][4], const unsigned char *Vs,
	                                   float *scratch, int lane) const {
		float(&o)[D / 8][4] = of[0];
		const float(&p)[N / 8][4] = pf[0];
		const int g = lane / 4, t = lane % 4;
		TW_UNROLL
		for (int n = 0; n < N / 8; n++) {
			*(float2 *)&scratch[g * N + 8 * n + 2 * t] = make_float2(p[n][0], p[n][1]);
			*(float2 *)&scratch[(g + 8) * N + 8 * n + 2 * t] = make_float2(p[n][2], p[n][3]);
		}
		__syncwarp();
		TW_UNROLL_BY(4)
		for (int key = 0; key < N; key++) {
			const float p0 = scratch[g * N + key], p1 = scratch[(g + 8) * N + key];
			TW_UNROLL
			for (int j = 0; j < D / 8; j++) {
				// columns 8j+2t, 8j+2t+1: chunk 2j + t/2, floats 2(t%2), +1
				const float2 x = *(const float2 *)(Vs + swz<C>(key, 2 * j + t / 2) + 8 * (t % 2));
				o[j][0] = fmaf(p0, x.x, o[j][0]);
				o[j][1] = fmaf(p0, x.y, o[j][1]);
				o[j][2] = fmaf(p1, x.x, o[j][2]);
				o[j][3] = fmaf(p1, x.y, o[j][3]);
			}
		}
		__syncwarp(); // scratch is rewritten by the next tile
	}
};

// Shared memory of a forward block: Q [rows][C] chunks, then S stages of
// (K [N][C], V [N][C]), then (f32) the warps' P scratch [16][N] f32 each.
// With KW > 1 warps splitting each key tile, the stages are reused at the
// end for the warps' partial results: (m, l) [KW][16][2], then O
// [KW][16][kMergeLd], f32, rows padded by 8 floats so that a half warp's
// float2 stores and loads (4 rows × 8 floats) fall on 32 distinct banks
// (unpadded, the 4 rows shared 8: 4.00× the wavefronts, by the emulator's
// count).
template <class T, int D, int N, int KW = 1> struct FwdSmem {
	static constexpr int kRowBytes = D * (int)sizeof(T);
	static constexpr int kTile = N * kRowBytes; // one K or V tile
	static constexpr bool kScratch = std::is_same<T, float>::value;
	static constexpr int kMergeLd = D + 8;
	static constexpr size_t kMerge = KW > 1 ? (size_t)KW * 16 * (2 + kMergeLd) * sizeof(float) : 0;
	__host__ __device__ static size_t kv(int rows) { return (size_t)rows * kRowBytes; }
	__host__ __device__ static size_t scratch(int rows, int stages) { return kv(rows) + (size_t)stages * 2 * kTile; }
	__host__ __device__ static size_t bytes(int rows, int stages) {
		const size_t b = scratch(rows, stages) + (kScratch ? (size_t)(rows / 16) * 16 * N * sizeof(float) : 0);
		return b > kv(rows) + kMerge ? b : kv(rows) + kMerge;
	}
};

} // namespace

// One block per (tile of a.rows query rows of a sequence, key/value head,
// key chunk); grid (ceil(nq·rep/rows) + nseq)·g·split, block rows/(16M)
// warps of 16M rows each (M row fragments per warp, see FwdMath), or with
// KW > 1 (decoding, rows = 16) KW warps that share the rows and take N/KW
// keys of each tile each (see Decoding); KR K fragments in flight in S's
// product at 16 rows per warp (FwdMath::scores).
// split == 1: out and lse; otherwise the chunk's partial results.
template <class T, int D, int N, int M, int KW, int KR>
__global__ void __launch_bounds__(32 * kFwdMaxWarps / M) attn_fwd_kernel(FwdArgs a) {
	typedef FwdSmem<T, D, N, KW> L;
	constexpr int NW = N / KW; // keys of a tile per warp
	static_assert(KW == 1 || (M == 1 && NW % 16 == 0), "attn_fwd_kernel: a key split needs 16-row warps and 16-key parts");
	constexpr int C = D * (int)sizeof(T) / 16, E = 16 / (int)sizeof(T); // chunks per row, elements per chunk
	constexpr int R = 2 * M; // rows per lane: 16f + 8h + g for f < M, h < 2 (index 2f + h)
	extern __shared__ __align__(128) unsigned char smem[];
	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g8 = lane / 4, t4 = lane % 4;
	const int nthr = blockDim.x, rows = a.rows, S = a.stages;
	const int rep = a.rep.d, chunk = blockIdx.x % a.split, kvh = blockIdx.x / a.split % a.g;
	int s, tile;
	if (!find_tile(a.seqs, a.nseq, blockIdx.x / a.split / a.g, QueryTiles{rep, rows}, &s, &tile))
		return; // the whole block
	const int qs = a.seqs[4 * s], ql = a.seqs[4 * s + 1], ks = a.seqs[4 * s + 2], kl = a.seqs[4 * s + 3];
	const int off = key_offset(ql, kl, a.noncausal), nrows = ql * rep;
	const QRows qrow(qs, kvh, a.rep, a.h);
	const int r0 = (ceil_div(nrows, rows) - 1 - tile) * rows; // the costliest tile first
	const int r1 = min(r0 + rows, nrows);
	const int kEnd = min(a.rep.div(r1 - 1) + off + 1, kl); // keys some row of the tile sees
	const int ntiles = ceil_div(kEnd, N);
	const int t0 = (int)((int64_t)ntiles * chunk / a.split), t1 = (int)((int64_t)ntiles * (chunk + 1) / a.split);
	const T *q = (const T *)a.q, *k = (const T *)a.k, *v = (const T *)a.v;
	unsigned char *Qs = smem, *KV = smem + L::kv(rows);

	// The copies. Each thread takes chunk column cc of rows cr, cr + RS, …
	// of every tile it loads (RS = nthr/C: blocks are 64 threads or more and
	// a row is at most 32 chunks, both powers of two), so a key tile's source
	// moves by a fixed stride per row and per tile: an add per chunk, not
	// the index arithmetic of each (some 25 instructions); at the full head
	// width, a pair of chunks (see load_kv). The plan is worked out where it
	// is used rather than held in registers through the products.
	const int RS = nthr / C, RP = 2 * nthr / C;
	const bool pairs = kPairs<C> && a.dh == D && RP % 8 == 0;
	constexpr int PS = C / 2, PX = 16 * PS; // a pair's chunk step, and its offset's XOR
	// Q: the tile's rows (zero past r1 and in the columns past dh); a row past
	// r1 reads the tile's last row (a valid address) and copies 0 bytes.
	if (pairs) {
		const int cc = threadIdx.x % (C / 2);
		for (int r = pair_row<C>(threadIdx.x / (C / 2)), so = swz<C>(r, cc); r < rows; r += RP, so += 16 * RP * C) {
			const T *src = q + qrow(min(r0 + r, r1 - 1)) * a.dh + cc * E;
			const int b = r0 + r < r1 ? 16 : 0;
			cp_async16(Qs + so, src, b);
			cp_async16(Qs + (so ^ PX), src + PS * E, b);
		}
	} else {
		for (int r = threadIdx.x / C, cc = threadIdx.x % C; r < rows; r += RS) {
			const bool ok = cc * E < a.dh && r0 + r < r1;
			cp_async16(Qs + swz<C>(r, cc), ok ? q + qrow(r0 + r) * a.dh + cc * E : q, ok ? 16 : 0);
		}
	}
	cp_async_commit();
	// Key tile it into stage st: keys past kEnd and columns past dh are zero.
	// At the full width (dh = D: Llama's 128, a ViT's 64) each thread copies
	// a pair of chunks (cc, cc + PS; kPairs and pair_row in attention.cuh,
	// which also say why these pairs and rows keep the loads whole sectors
	// and the stores free of bank conflicts) of rows cr, cr + RP, …,
	// RP = 2·nthr/C a multiple of 8 rows, where the swizzle repeats: row
	// r + RP's chunks lie 16·RP·C bytes after row r's, and chunk cc + PS at
	// the offset of cc XOR PX — per pair of rows of K and V an add for the
	// offset and one per pointer, the sources at immediate offsets.
	// Otherwise one chunk column per thread, offsets by swz. Either way a
	// second loop, which only a sequence's last tile runs, zero-fills the rows
	// past kEnd (and the columns past dh) without a test in the first.
	auto load_kv = [&](int st, int it) {
		unsigned char *Kd = KV + (size_t)st * 2 * L::kTile, *Vd = Kd + L::kTile;
		const int nk = min(kEnd - it * N, N); // rows of the tile that are keys
		const int64_t kstep = (int64_t)a.g * a.dh; // elements from one key to the next
		if (pairs) {
			const int cc = threadIdx.x % (C / 2), cr = pair_row<C>(threadIdx.x / (C / 2));
			const int64_t o = ((int64_t)(ks + it * N + cr) * a.g + kvh) * a.dh + cc * E;
			const T *kp = k + o, *vp = v + o;
			int r = cr, so = swz<C>(cr, cc);
			for (; r < nk; r += RP, so += 16 * RP * C, kp += RP * kstep, vp += RP * kstep) {
				cp_async16(Kd + so, kp, 16);
				cp_async16(Kd + (so ^ PX), kp + PS * E, 16);
				cp_async16(Vd + so, vp, 16);
				cp_async16(Vd + (so ^ PX), vp + PS * E, 16);
			}
			for (; r < N; r += RP, so += 16 * RP * C) {
				cp_async16(Kd + so, k, 0);
				cp_async16(Kd + (so ^ PX), k, 0);
				cp_async16(Vd + so, v, 0);
				cp_async16(Vd + (so ^ PX), v, 0);
			}
			return;
		}
		const int cc = threadIdx.x % C, cr = threadIdx.x / C;
		const int n = cc * E < a.dh ? nk : 0;
		const int64_t o = ((int64_t)(ks + it * N + cr) * a.g + kvh) * a.dh + cc * E;
		const T *kp = k + o, *vp = v + o;
		int r = cr;
		for (; r < n; r += RS, kp += RS * kstep, vp += RS * kstep) {
			const int so = swz<C>(r, cc);
			cp_async16(Kd + so, kp, 16);
			cp_async16(Vd + so, vp, 16);
		}
		for (; r < N; r += RS) {
			const int so = swz<C>(r, cc);
			cp_async16(Kd + so, k, 0);
			cp_async16(Vd + so, v, 0);
		}
	};
	for (int st = 0; st < S - 1; st++) {
		if (t0 + st < t1) load_kv(st, t0 + st);
		cp_async_commit();
	}

	// The warp's rows start at rw; the lane's are ρ_i = rw + 8i + g (i < R),
	// and last(i) is the last key row i sees (rows past r1 see every loaded
	// key: computed, never stored), worked out where a tile is masked rather
	// than held in registers. Keys below full are seen by every row of the
	// warp; beyond wlast by none.
	const int kw = KW > 1 ? warp : 0;                  // the warp's part of each key tile
	const int rw = r0 + (KW > 1 ? 0 : 16 * M * warp); // its first row
	auto last = [&](int i) {
		const int rho = rw + 8 * i + g8;
		return rho < r1 ? min(a.rep.div(rho) + off, kl - 1) : kEnd - 1;
	};
	const int full = min(a.rep.div(rw) + off + 1, kl);
	const int wlast = rw < r1 ? min(a.rep.div(min(rw + 16 * M - 1, r1 - 1)) + off, kl - 1) : -1;
	float m[R], l[R]; // running maxima (scaled, base 2) of the lane's rows, and its share of their sums
	float o[M][D / 8][4];
	TW_UNROLL
	for (int i = 0; i < R; i++) m[i] = -INFINITY, l[i] = 0.0f;
	TW_UNROLL
	for (int f = 0; f < M; f++)
		TW_UNROLL
		for (int j = 0; j < D / 8; j++) o[f][j][0] = o[f][j][1] = o[f][j][2] = o[f][j][3] = 0.0f;
	float *scratch = L::kScratch ? (float *)(smem + L::scratch(rows, S)) + warp * 16 * N : nullptr;

	cp_async_wait_upto(S - 1); // Q (the oldest group) has landed
	__syncthreads();
	if (a.negq) { // sign bits flipped: softmax(scale·q·k) = softmax(|scale|·(−q)·k)
		constexpr uint32_t sign = sizeof(T) == 2 ? 0x80008000u : 0x80000000u;
		for (int x = threadIdx.x; x < rows * C * 4; x += nthr) ((uint32_t *)Qs)[x] ^= sign;
		__syncthreads();
	}
	FwdMath<T, D, NW, M, KR> mm;
	mm.load_q(Qs, KW > 1 ? 0 : warp, lane);

	// Tile it is in stage cur = (it − t0) mod S, counted rather than divided
	// (S is a run-time value); the tile S − 1 ahead goes into the stage
	// before it, (cur − 1) mod S.
	for (int it = t0, cur = 0; it < t1; it++, cur = cur + 1 == S ? 0 : cur + 1) {
		if (S == 1) {
			load_kv(0, it);
			cp_async_commit();
		}
		cp_async_wait_upto(S == 1 ? 0 : S - 2); // tile it has landed (this thread's copies) …
		__syncthreads();                        // … and everyone's; the stage before cur is free
		if (S > 1) {
			if (it + S - 1 < t1) load_kv(cur == 0 ? S - 1 : cur - 1, it + S - 1);
			cp_async_commit();
		}
		const int j0 = it * N + NW * kw; // the warp's first key of the tile
		if (j0 <= wlast) { // warp-uniform: some row of the warp sees a key of its part of the tile
			// The part's rows are a multiple of 8 rows into the tile, where
			// the swizzle repeats: an offset of whole rows.
			const unsigned char *Ks = KV + (size_t)cur * 2 * L::kTile + (size_t)NW * kw * L::kRowBytes;
			const unsigned char *Vs = Ks + L::kTile;
			float sc[M][NW / 8][4];
			mm.scores(sc, Ks, lane);
			// Keys a row does not see: −inf (only on tiles that reach past
			// `full`: the diagonal, and the end of the sequence). The scores
			// stay unscaled: the maxima are taken on them (sl2 ≥ 0 keeps
			// their order, see negq) and scaled once per row, and each
			// p = 2^(x·sl2 − m) is one FMA and an ex2.
			if (j0 + NW > full) { // warp-uniform
				TW_UNROLL
				for (int f = 0; f < M; f++) {
					const int last0 = last(2 * f), last1 = last(2 * f + 1);
					TW_UNROLL
					for (int n = 0; n < NW / 8; n++)
						TW_UNROLL
						for (int e = 0; e < 2; e++) {
							const int key = j0 + 8 * n + 2 * t4 + e;
							if (key > last0) sc[f][n][e] = -INFINITY;
							if (key > last1) sc[f][n][2 + e] = -INFINITY;
						}
				}
			}
			// Row maxima: the lane's keys by a tree (a short dependency chain
			// before the exponentials), then over the quad that holds the row.
			float c[R]; // the rescale factors 2^(m_old − m_new)
			TW_UNROLL
			for (int f = 0; f < M; f++) {
				float t0max[NW / 8], t1max[NW / 8];
				TW_UNROLL
				for (int n = 0; n < NW / 8; n++) {
					t0max[n] = fmaxf(sc[f][n][0], sc[f][n][1]);
					t1max[n] = fmaxf(sc[f][n][2], sc[f][n][3]);
				}
				TW_UNROLL
				for (int w = 1; w < NW / 8; w *= 2)
					TW_UNROLL
					for (int n = 0; n + w < NW / 8; n += 2 * w) {
						t0max[n] = fmaxf(t0max[n], t0max[n + w]);
						t1max[n] = fmaxf(t1max[n], t1max[n + w]);
					}
				float mx0 = t0max[0], mx1 = t1max[0];
				mx0 = fmaxf(mx0, __shfl_xor_sync(kFull, mx0, 1));
				mx1 = fmaxf(mx1, __shfl_xor_sync(kFull, mx1, 1));
				mx0 = fmaxf(mx0, __shfl_xor_sync(kFull, mx0, 2));
				mx1 = fmaxf(mx1, __shfl_xor_sync(kFull, mx1, 2));
				mx0 = fmaxf(m[2 * f], mx0 * a.sl2); // −inf stays −inf
				mx1 = fmaxf(m[2 * f + 1], mx1 * a.sl2);
				// A row that has seen no key yet (m = −inf) subtracts 0: p = 0, no NaN.
				const float b0 = mx0 == -INFINITY ? 0.0f : mx0, b1 = mx1 == -INFINITY ? 0.0f : mx1;
				c[2 * f] = fast_exp2(m[2 * f] - b0); // 0 on a row's first keys
				c[2 * f + 1] = fast_exp2(m[2 * f + 1] - b1);
				m[2 * f] = mx0;
				m[2 * f + 1] = mx1;
				float sum0 = 0.0f, sum1 = 0.0f;
				TW_UNROLL
				for (int n = 0; n < NW / 8; n++)
					TW_UNROLL
					for (int e = 0; e < 2; e++) {
						sc[f][n][e] = fast_exp2(fmaf(sc[f][n][e], a.sl2, -b0));
						sc[f][n][2 + e] = fast_exp2(fmaf(sc[f][n][2 + e], a.sl2, -b1));
						sum0 += sc[f][n][e];
						sum1 += sc[f][n][2 + e];
					}
				l[2 * f] = l[2 * f] * c[2 * f] + sum0;
				l[2 * f + 1] = l[2 * f + 1] * c[2 * f + 1] + sum1;
			}
			// Once the maxima settle every factor is 1: skip the rescale then.
			bool rescale = false;
			TW_UNROLL
			for (int r = 0; r < R; r++) rescale |= c[r] != 1.0f;
			if (__any_sync(kFull, rescale)) {
				TW_UNROLL
				for (int f = 0; f < M; f++)
					TW_UNROLL
					for (int j = 0; j < D / 8; j++) {
						o[f][j][0] *= c[2 * f];
						o[f][j][1] *= c[2 * f];
						o[f][j][2] *= c[2 * f + 1];
						o[f][j][3] *= c[2 * f + 1];
					}
			}
			mm.pv(o, sc, Vs, scratch, lane);
		}
		if (S == 1) __syncthreads(); // the next tile's copies overwrite the only stage
	}
	cp_async_wait<0>(); // nothing is left in flight (the trailing groups are empty)

	// The quad's shares of the row sums.
	TW_UNROLL
	for (int r = 0; r < R; r++) {
		l[r] += __shfl_xor_sync(kFull, l[r], 1);
		l[r] += __shfl_xor_sync(kFull, l[r], 2);
	}
	if constexpr (KW > 1) {
		// The warps' parts of the keys, merged in warp order (deterministic):
		// m = max m_w, l = Σ 2^(m_w − m)·l_w, O = Σ 2^(m_w − m)·O_w, by warp 0
		// through the stages' memory. A part a row saw no key of has
		// m_w = −inf, l_w = 0, O_w = 0: weight 0.
		__syncthreads(); // every warp is done with the stages
		float *ml = (float *)KV, *po = ml + KW * 16 * 2;
		TW_UNROLL
		for (int r = 0; r < 2; r++) {
			const int row = 8 * r + g8;
			if (t4 == 0) st_shared((float2 *)&ml[2 * (kw * 16 + row)], make_float2(m[r], l[r]));
			TW_UNROLL
			for (int j = 0; j < D / 8; j++)
				st_shared((float2 *)&po[(kw * 16 + row) * L::kMergeLd + 8 * j + 2 * t4],
				          make_float2(o[0][j][2 * r], o[0][j][2 * r + 1]));
		}
		__syncthreads();
		if (warp != 0) return;
		TW_UNROLL
		for (int r = 0; r < 2; r++) {
			const int row = 8 * r + g8;
			float mx = -INFINITY;
			for (int w = 0; w < KW; w++) mx = fmaxf(mx, ld_shared(&ml[2 * (w * 16 + row)]));
			const float b = mx == -INFINITY ? 0.0f : mx;
			float lsum = 0.0f;
			TW_UNROLL
			for (int j = 0; j < D / 8; j++) o[0][j][2 * r] = o[0][j][2 * r + 1] = 0.0f;
			for (int w = 0; w < KW; w++) {
				const float2 mlw = ld_shared((const float2 *)&ml[2 * (w * 16 + row)]);
				const float wt = fast_exp2(mlw.x - b);
				lsum = fmaf(wt, mlw.y, lsum);
				TW_UNROLL
				for (int j = 0; j < D / 8; j++) {
					const float2 x = ld_shared((const float2 *)&po[(w * 16 + row) * L::kMergeLd + 8 * j + 2 * t4]);
					o[0][j][2 * r] = fmaf(wt, x.x, o[0][j][2 * r]);
					o[0][j][2 * r + 1] = fmaf(wt, x.y, o[0][j][2 * r + 1]);
				}
			}
			m[r] = mx;
			l[r] = lsum;
		}
	}
	TW_UNROLL
	for (int r = 0; r < R; r++) {
		const float lr = l[r];
		const int f = r / 2, h2 = r % 2, rho = rw + 8 * r + g8;
		if (rho >= r1) continue;
		const int64_t ri = qrow(rho); // the row's index in [nq·h]
		if (a.split == 1) {
			const float inv = __fdividef(1.0f, lr); // l ≈ 1 or more (the maximum's term is 2^ε)
			T *dst = (T *)a.out + ri * a.dh;
			TW_UNROLL
			for (int j = 0; j < D / 8; j++) {
				const int col = 8 * j + 2 * t4;
				if (8 * j >= a.dh) break;
				const float x = o[f][j][2 * h2] * inv, y = o[f][j][2 * h2 + 1] * inv;
				if constexpr (std::is_same<T, float>::value) *(float2 *)&dst[col] = make_float2(x, y);
				else *(__nv_bfloat162 *)&dst[col] = __floats2bfloat162_rn(x, y);
			}
			if (t4 == 0) a.lse[ri] = (m[r] + log2f(lr)) * kLn2;
		} else {
			const int64_t pi = chunk * a.nqh + ri;
			float *dst = a.part_o + pi * a.dh;
			TW_UNROLL
			for (int j = 0; j < D / 8; j++) {
				if (8 * j >= a.dh) break;
				*(float2 *)&dst[8 * j + 2 * t4] = make_float2(o[f][j][2 * h2], o[f][j][2 * h2 + 1]);
			}
			if (t4 == 0) *(float2 *)&a.part_ml[2 * pi] = make_float2(m[r], lr);
		}
	}
}

// Combines the key chunks of a split forward, in chunk order: for each row
// of its tile, m = max m_c, l = Σ 2^(m_c−m)·l_c, out = Σ 2^(m_c−m)·o_c / l,
// lse = (m + log2 l)·ln 2; chunks the row saw no key of (m_c = −inf, which
// includes empty chunks) are left out. Grid (ceil(nq·rep/rows) + nseq)·g,
// 128 threads: warp w takes the tile's rows w, w+4, …, lane the columns
// lane, lane+32, … of each.
template <class T> __global__ void __launch_bounds__(128) attn_fwd_combine_kernel(FwdArgs a) {
	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, rep = a.rep.d, kvh = blockIdx.x % a.g;
	int s, tile;
	if (!find_tile(a.seqs, a.nseq, blockIdx.x / a.g, QueryTiles{rep, a.rows}, &s, &tile)) return;
	const int qs = a.seqs[4 * s], nrows = a.seqs[4 * s + 1] * rep;
	const int r0 = (ceil_div(nrows, a.rows) - 1 - tile) * a.rows, r1 = min(r0 + a.rows, nrows);
	const QRows qrow(qs, kvh, a.rep, a.h);
	for (int rho = r0 + warp; rho < r1; rho += 4) {
		const int64_t ri = qrow(rho);
		float m = -INFINITY;
		for (int c = 0; c < a.split; c++) m = fmaxf(m, a.part_ml[2 * (c * a.nqh + ri)]);
		float l = 0.0f, acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
		for (int c = 0; c < a.split; c++) {
			const int64_t pi = c * a.nqh + ri;
			const float mc = a.part_ml[2 * pi];
			if (mc == -INFINITY) continue;
			const float w = fast_exp2(mc - m);
			l = fmaf(w, a.part_ml[2 * pi + 1], l);
			TW_UNROLL
			for (int e = 0; e < 4; e++)
				if (lane + 32 * e < a.dh) acc[e] = fmaf(w, a.part_o[pi * a.dh + lane + 32 * e], acc[e]);
		}
		const float inv = __fdividef(1.0f, l); // l ≈ 1 or more: the chunk holding the maximum has its term
		TW_UNROLL
		for (int e = 0; e < 4; e++)
			if (lane + 32 * e < a.dh) ((T *)a.out)[ri * a.dh + lane + 32 * e] = from_float<T>(acc[e] * inv);
		if (lane == 0) a.lse[ri] = (m + log2f(l)) * kLn2;
	}
}

// ---- Forward launchers --------------------------------------------------------------

namespace {

constexpr int kMaxSplit = 1024; // dec_split's ceiling (bounds the grid and the workspace)

// fwd_config_ok reports whether the forward's fields of cfg are 0 (the
// default) or in their value sets: fwd_rows 64, 128; fwd_keys 32, 64, 128;
// fwd_stages 1, 2, 3; fwd_warp_rows 16, 32; fwd_k_ring 1, 4, 8;
// dec_split 1 … kMaxSplit; dec_keys 64, 128; dec_key_warps 1, 4. Whether a
// key tile is compiled for the launch's dtype and head width is
// fwd_dispatch's question (and whether its shared memory fits, the
// device's).
bool fwd_config_ok(const tw_attention_config *cfg) {
	if (cfg == nullptr) return true;
	auto in = [](int v, std::initializer_list<int> set) {
		if (v == 0) return true;
		for (int x : set)
			if (v == x) return true;
		return false;
	};
	return in(cfg->fwd_rows, {64, 128}) && in(cfg->fwd_keys, {32, 64, 128}) && in(cfg->fwd_stages, {1, 2, 3}) &&
	       in(cfg->fwd_warp_rows, {16, 32}) && in(cfg->fwd_k_ring, {1, 4, 8}) && in(cfg->dec_key_warps, {1, 4}) &&
	       cfg->dec_split >= 0 && cfg->dec_split <= kMaxSplit && in(cfg->dec_keys, {64, 128});
}

// What a forward launch runs.
struct FwdPlan {
	bool decode;                  // the flash-decoding shape
	int rows, keys, stages, split; // FwdArgs' fields; keys: N
	int frags;                    // M: 16-row fragments per warp (fwd_warp_rows / 16)
	int kwarps;                   // KW: warps that split each key tile (decoding; 1: none)
	int kring;                    // KR: K fragments in flight in S's product (fwd_k_ring)
};

constexpr int kFwdKRing = 8; // fwd_k_ring's default: S's loads 7 ahead of their products

// The default key split of a decoding launch: as many chunks as fit in two
// whole waves of blocks (about two resident per SM: the decode tiles take
// ~110 KiB of shared memory; a split that spills into a third wave leaves
// it mostly idle: on an H200, 16 sequences × 8 KV heads ran 1.19× faster
// split 4 ways, 2 waves, than 5, the old "at least two waves"), but chunks
// of at least 256 keys on average. It depends on the device's SM count and
// the shape, not on the dtype, so that tw_attention_workspace (which has no
// dtype) agrees with tw_attention.
int dec_auto_split(int64_t nk, int64_t g, int64_t nseq) {
	const int64_t items = nseq * g, want = 2 * 2 * (int64_t)sm_count() / items;
	const int64_t cap = std::max<int64_t>(1, nk / nseq / 256);
	return (int)std::max<int64_t>(1, std::min<int64_t>({want, cap, kMaxSplit}));
}

// The plan of a forward launch of nq query rows over nseq sequences at head
// width dh; f32: the plain path's one tiling, whatever cfg says (its tile
// fields tune bf16), with cfg's dec_split.
FwdPlan fwd_plan(int64_t nq, int64_t nk, int64_t g, int64_t nseq, int64_t dh, bool f32,
                 const tw_attention_config *cfg) {
	const tw_attention_config c = cfg ? *cfg : tw_attention_config{};
	FwdPlan p;
	p.decode = nseq > 0 && nq <= 2 * nseq;
	if (!p.decode) {
		p.rows = f32 ? 64 : c.fwd_rows ? c.fwd_rows : 128;
		p.keys = f32 ? 32 : c.fwd_keys ? c.fwd_keys : dh > 64 ? 128 : 64;
		p.stages = f32 || !c.fwd_stages ? 2 : c.fwd_stages;
		p.frags = f32 || !c.fwd_warp_rows ? 1 : c.fwd_warp_rows / 16;
		p.kwarps = 1;
		p.kring = f32 || !c.fwd_k_ring ? kFwdKRing : c.fwd_k_ring;
		p.split = 1;
	} else {
		p.kwarps = f32 || !c.dec_key_warps ? 1 : c.dec_key_warps;
		p.rows = p.kwarps > 1 ? 16 : 64;
		p.keys = f32 ? 32 : c.dec_keys ? c.dec_keys : 64;
		p.stages = p.keys <= 64 ? 3 : 2; // two tiles in flight, or one of 128 keys
		p.frags = 1;
		p.kring = kFwdKRing;
		p.split = c.dec_split ? c.dec_split : dec_auto_split(nk, g, nseq);
	}
	return p;
}

// Calls f(T*, D, N, M, KW, KR) (each an IntC) for the compiled
// instantiation that fits dt, dh, the key tile, the row fragments per warp,
// the warps splitting a key tile and the K fragment ring: bf16 with D = 128
// (dh 72 … 128) and N = 32, 64 or 128 at M = 1, N = 32 or 64 at M = 2 (at
// 128 keys S and O would not fit the registers beside each other), N = 64
// or 128 at KW = 4; bf16 with D = 32 or 64 and N = 64, M = 1; f32 with
// N = 32, M = 1; each with the default ring (kFwdKRing), and the forward's
// default tile (bf16, D = 128, N = 128, M = 1) also with rings of 1 and 4,
// for the sweep. Anything else is cudaErrorInvalidValue.
template <class F> cudaError_t fwd_dispatch(tw_dtype dt, int64_t dh, int keys, int frags, int kwarps, int kring, F f) {
	using One = IntC<1>;
	using Ring = IntC<kFwdKRing>;
	if (kring != kFwdKRing && !(dt == TW_BF16 && dh > 64 && keys == 128 && frags == 1 && kwarps == 1))
		return cudaErrorInvalidValue;
	if (dt == TW_F32) {
		if (keys != 32 || frags != 1 || kwarps != 1) return cudaErrorInvalidValue;
		if (dh <= 32) return f((float *)nullptr, IntC<32>(), IntC<32>(), One(), One(), Ring());
		if (dh <= 64) return f((float *)nullptr, IntC<64>(), IntC<32>(), One(), One(), Ring());
		return f((float *)nullptr, IntC<128>(), IntC<32>(), One(), One(), Ring());
	}
	if (dt != TW_BF16) return cudaErrorInvalidValue;
	if (dh <= 64) {
		if (keys != 64 || frags != 1 || kwarps != 1) return cudaErrorInvalidValue;
		if (dh <= 32) return f((bf16 *)nullptr, IntC<32>(), IntC<64>(), One(), One(), Ring());
		return f((bf16 *)nullptr, IntC<64>(), IntC<64>(), One(), One(), Ring());
	}
	if (kwarps == 4 && frags == 1) {
		switch (keys) {
		case 64: return f((bf16 *)nullptr, IntC<128>(), IntC<64>(), One(), IntC<4>(), Ring());
		case 128: return f((bf16 *)nullptr, IntC<128>(), IntC<128>(), One(), IntC<4>(), Ring());
		}
		return cudaErrorInvalidValue;
	}
	if (kwarps != 1) return cudaErrorInvalidValue;
	if (frags == 2) {
		switch (keys) {
		case 32: return f((bf16 *)nullptr, IntC<128>(), IntC<32>(), IntC<2>(), One(), Ring());
		case 64: return f((bf16 *)nullptr, IntC<128>(), IntC<64>(), IntC<2>(), One(), Ring());
		}
		return cudaErrorInvalidValue;
	}
	switch (keys) {
	case 32: return f((bf16 *)nullptr, IntC<128>(), IntC<32>(), One(), One(), Ring());
	case 64: return f((bf16 *)nullptr, IntC<128>(), IntC<64>(), One(), One(), Ring());
	case 128:
		switch (kring) {
		case 1: return f((bf16 *)nullptr, IntC<128>(), IntC<128>(), One(), One(), IntC<1>());
		case 4: return f((bf16 *)nullptr, IntC<128>(), IntC<128>(), One(), One(), IntC<4>());
		case kFwdKRing: return f((bf16 *)nullptr, IntC<128>(), IntC<128>(), One(), One(), Ring());
		}
	}
	return cudaErrorInvalidValue;
}

} // namespace

extern "C" const char *tw_attention_check(const tw_attention_config *cfg, tw_dtype dt, int64_t dh) {
	if (!fwd_config_ok(cfg)) return "a forward or decoding field has a value the kernels do not take";
	if (dh <= 0) return "the head width is not positive";
	const size_t optin = smem_optin();
	for (const bool decode : {false, true}) {
		// A launch's plan: four sequences of 1024 queries each, or of one.
		const int64_t nseq = 4, nq = decode ? nseq : 1024 * nseq;
		const FwdPlan p = fwd_plan(nq, 1024 * nseq, 1, nseq, dh, dt == TW_F32, cfg);
		size_t bytes = 0;
		const cudaError_t e = fwd_dispatch(dt, dh, p.keys, p.frags, p.kwarps, p.kring, [&](auto *t, auto dw, auto nw, auto, auto kww, auto) {
			typedef std::remove_pointer_t<decltype(t)> T;
			bytes = FwdSmem<T, decltype(dw)::value, decltype(nw)::value, decltype(kww)::value>::bytes(p.rows, p.stages);
			return cudaSuccess;
		});
		if (e != cudaSuccess)
			return decode ? "decoding's tiles are not compiled for this dtype and head width"
			              : "the forward's tiles are not compiled for this dtype and head width";
		if (optin > 0 && bytes > optin)
			return decode ? "decoding's tiles need more shared memory than this device has"
			              : "the forward's tiles need more shared memory than this device has";
	}
	return nullptr;
}

extern "C" size_t tw_attention_workspace(int64_t nq, int64_t nk, int64_t h, int64_t g, int64_t dh, int64_t nseq,
                                         const tw_attention_config *cfg) {
	if (nq <= 0 || nk < 0 || h <= 0 || g < 1 || dh <= 0 || nseq <= 0 || !fwd_config_ok(cfg)) return 0;
	const FwdPlan p = fwd_plan(nq, nk, g, nseq, dh, false, cfg); // the split does not depend on the dtype
	return p.split > 1 ? (size_t)p.split * (size_t)(nq * h) * (size_t)(dh + 2) * sizeof(float) : 0;
}

extern "C" cudaError_t tw_attention(void *out, float *lse, const void *q, const void *k, const void *v,
                                    const int32_t *seqs, int64_t nseq, tw_dtype dt, int64_t nq, int64_t nk, int64_t h,
                                    int64_t g, int64_t dh, float scale, int noncausal, const tw_attention_config *cfg,
                                    void *workspace, cudaStream_t stream) {
	if (nseq < 0 || nq < 0 || nk < 0 || h < 0 || g < 0 || dh < 0) return cudaErrorInvalidValue;
	if (!fwd_config_ok(cfg)) return cudaErrorInvalidValue;
	if (nq == 0 || h == 0 || nseq == 0) return cudaSuccess;
	if (!shapes_ok(nq, nk, h, g, dh, {out, q, k, v})) return cudaErrorInvalidValue;
	const FwdPlan p = fwd_plan(nq, nk, g, nseq, dh, dt == TW_F32, cfg);
	const int64_t items = tiles_bound(nq * (h / g), p.rows, nseq) * g;
	if (items * p.split > INT32_MAX) return cudaErrorInvalidValue;
	FwdArgs a{};
	a.out = out, a.lse = lse, a.q = q, a.k = k, a.v = v, a.seqs = seqs;
	a.nqh = nq * h, a.nseq = (int)nseq, a.h = (int)h, a.g = (int)g, a.dh = (int)dh, a.rep = FastDiv::of((int)(h / g));
	a.rows = p.rows, a.stages = p.stages, a.split = p.split, a.noncausal = noncausal;
	// The kernel takes its row maxima on the unscaled scores, which a
	// positive factor keeps in order: a negative scale is applied as |scale|
	// to −q.
	a.sl2 = scale_log2e(fabsf(scale)), a.negq = scale < 0;
	if (p.split > 1) {
		if (workspace == nullptr || (uintptr_t)workspace % 16 != 0) return cudaErrorInvalidValue;
		a.part_o = (float *)workspace;
		a.part_ml = a.part_o + (size_t)p.split * (size_t)a.nqh * (size_t)dh;
	}
	return fwd_dispatch(dt, dh, p.keys, p.frags, p.kwarps, p.kring, [&](auto *t, auto dw, auto nw, auto mw, auto kww, auto krw) {
		typedef std::remove_pointer_t<decltype(t)> T;
		constexpr int D = decltype(dw)::value, N = decltype(nw)::value, M = decltype(mw)::value;
		constexpr int KW = decltype(kww)::value, KR = decltype(krw)::value;
		const size_t bytes = FwdSmem<T, D, N, KW>::bytes(p.rows, p.stages);
		cudaError_t e = allow_smem(attn_fwd_kernel<T, D, N, M, KW, KR>, bytes);
		if (e != cudaSuccess) return e;
		const unsigned threads = KW > 1 ? 32 * KW : 32 * (p.rows / (16 * M));
		LAUNCH((unsigned)(items * p.split), threads, bytes, stream, attn_fwd_kernel<T, D, N, M, KW, KR>)(a);
		if ((e = cudaGetLastError()) != cudaSuccess || p.split == 1) return e;
		LAUNCH((unsigned)items, 128, 0, stream, attn_fwd_combine_kernel<T>)(a);
		return cudaGetLastError();
	});
}

// The forward's configurations (fwd_rows × fwd_keys × fwd_stages), then
// decoding's (dec_keys × dec_split), then the backward's (every entry of
// kBwdConfigs128, whose default depends on the device, bwd_split 1, 2, 4
// beside the default's choice, and dQ by atomics), each varying one
// direction's fields from the defaults; the forward's defaults at head
// width 128 first, spelled out (the other fields' 0 is their default), and
// no entry twice.
extern "C" int tw_attention_configs(tw_attention_config *out, int max) {
	int n = 0;
	auto add = [&](const tw_attention_config &c) {
		if (out != nullptr && n < max) out[n] = c;
		n++;
	};
	auto fwd = [&](int rows, int keys, int stages, int warp_rows) {
		tw_attention_config c{};
		c.fwd_rows = rows, c.fwd_keys = keys, c.fwd_stages = stages, c.fwd_warp_rows = warp_rows;
		add(c);
	};
	fwd(128, 128, 2, 0); // the defaults: measured first
	for (int rows : {64, 128})
		for (int keys : {32, 64, 128})
			for (int stages : {1, 2, 3})
				if (!(rows == 128 && keys == 128 && stages == 2)) fwd(rows, keys, stages, 0);
	// 32 rows per warp (FlashAttention-2's): 4-warp blocks of 128 rows, two
	// per SM, at the key tiles it is compiled for.
	for (int keys : {32, 64})
		for (int stages : {2, 3}) fwd(128, keys, stages, 32);
	fwd(64, 64, 2, 32);
	// S's K fragments loaded just before their products (the order before
	// 2026-11-29), or 3 ahead, at the default tile.
	for (int ring : {1, 4}) {
		tw_attention_config c{};
		c.fwd_rows = 128, c.fwd_keys = 128, c.fwd_stages = 2, c.fwd_k_ring = ring;
		add(c);
	}
	for (int dkeys : {64, 128})
		for (int dsplit : {0, 1, 4, 16})
			if (!(dkeys == 64 && dsplit == 0)) {
				tw_attention_config c{};
				c.dec_split = dsplit, c.dec_keys = dkeys;
				add(c);
			}
	// The key tiles split over the block's 4 warps (16-row tiles).
	for (int dkeys : {64, 128})
		for (int dsplit : {0, 2, 4}) {
			tw_attention_config c{};
			c.dec_split = dsplit, c.dec_keys = dkeys, c.dec_key_warps = 4;
			add(c);
		}
	for (const BwdConfig &b : kBwdConfigs128) {
		tw_attention_config c{};
		c.bwd_rows = b.rows, c.bwd_keys = b.keys, c.bwd_stages = b.stages;
		c.bwd_warp_keys = b.warp_keys == 16 ? 0 : b.warp_keys; // 16 is the default
		c.bwd_dq_cols = b.dq_cols == 32 ? 0 : b.dq_cols;       // and 32
		add(c);
	}
	for (int split : {1, 2, 4}) {
		tw_attention_config c{};
		c.bwd_split = split;
		add(c);
	}
	// dQ by atomics: what the ordered sum's waits cost; and with
	// FlashAttention-2's warp layout, at the default tile and at
	// FlashAttention-2's own for head width 128 (128 keys, 8 warps, 64-row
	// query tiles, the next one's Q and dO loaded during the current one's).
	tw_attention_config c{};
	c.bwd_dq_atomic = 1;
	add(c);
	c.bwd_rows = 128, c.bwd_keys = 128, c.bwd_stages = 1, c.bwd_warp_keys = 32;
	add(c);
	c.bwd_rows = 64, c.bwd_stages = 2;
	add(c);
	return n;
}
