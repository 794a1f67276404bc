// attention_backward.cu — the backward of grouped-query flash attention over
// packed variable-length sequences, causal or not (attention.cu has the
// forward).
//
// Contract: engine.Backend.AttentionBackward (engine/backend.go); the
// launchers' arguments are listed in kernels.h; the shapes, the alignment
// (q, k, v, out, dout, dq, dk, dv: 16 bytes) and the causality rule both
// directions share are attention.cuh's. What the backward adds to them:
//   dt is f32 or bf16 (q, k, v, out, dout and the gradients share it).
//   lse [nq, h] f32 is the forward's natural-log log-sum-exp of each (query
//   row, head)'s scaled scores. seqs is trusted, not checked (a launcher
//   does not read device memory); the sequences' query ranges and key
//   ranges must not overlap. Every gradient empty: nothing is launched.
//   Anything else gives cudaErrorInvalidValue.
//   Configuration (tw_attention_config, 0 = default): bf16 with head width
//   dh in (64, 128]: bwd_rows ∈ {64, 128}, bwd_keys ∈ {64, 128}, bwd_stages
//   ∈ {1, 2} (128, 128, 2 needs 226 KiB of shared memory: an H100 or
//   H200's); default 128, 128, 1 on a device whose shared memory holds
//   128, 128, 2 (an H100 or H200: the sweep's fastest on an H200,
//   2026-11-27, Llama-3.1-8B heads at 2k and 8k tokens, causal or not:
//   1.05-1.07× the 64, 128, 2 of before), else 64, 128, 2 (attention.cuh's
//   kBwdConfigs128, which the sweep's tw_attention_configs lists too);
//   bwd_warp_keys 16 (the default) or 32 (FlashAttention-2's warp layout,
//   below: compiled as 64, 64, 2; 64, 128, 2 and 128, 128, 1); bwd_dq_cols
//   32 (the default) or 64 (compiled for 128, 128, 1 with 16 keys per warp
//   only; "dQ units" below; not yet measured on a GPU).
//   bf16 with dh ≤ 64: 64, 128, 2, 16 only. f32: 64, 64, 1 only, whatever cfg's tile fields say
//   (they tune bf16; bwd_split applies to both). bwd_split: any ≥ 1; 0 picks one
//   from the SM count (split_of). bwd_dq_atomic: 0 (the default: dQ summed in
//   a fixed order) or 1 (float atomics, below; bf16 only, f32 ignores it as
//   it does the tile fields). Other values: cudaErrorInvalidValue.
//   Workspace: tw_attention_backward_workspace(nq, nk, h, g, dh, cfg) bytes
//   (layout below); the same device must be current for both calls, as the
//   default split depends on it.
//   Numerics: P = exp2(s·scale·log2 e − lse·log2 e) in f32 (the SFU's
//   ex2, flushing results below 2^-126 to 0, as the forward's); dS = P∘(dP − D)
//   with D = rowsum(dO∘O) in f32; bf16 products on tensor cores with P and
//   dS rounded to bf16 as operands (dS from the rounded P), f32
//   accumulation; dQ and dK scaled by scale once, at the end. Deterministic
//   by default: no float atomics, and every sum has a fixed order (below), so
//   reruns give the same bits whatever the order in which blocks and threads
//   run. With bwd_dq_atomic = 1 dQ's sums take the order in which blocks
//   reach them (dK and dV keep theirs), as FlashAttention-2's dQ does.
//
// Design (FlashAttention-2's backward, Dao 2023, one kernel for the five
// products):
//
// Rows are attention.cuh's: one K/V tile in shared memory serves all the
// heads of a group, and dK, dV sum over them in the order of ρ, as part of
// the one accumulation.
//
// Blocks. A block owns BC keys (bwd_keys) of one sequence and key/value head,
// BC/16 warps, warp w the 16 keys 16w … 16w+15 (but see the warp layout of
// bwd_warp_keys = 32 below), and the part p (of bwd_split)
// of the query tiles. Query tiles are BR rows (bwd_rows) from ρ = 0 of the
// sequence; the nqt tiles of a sequence are split at fixed boundaries
// p·nqt/split, the same for every key block, and a block takes the tiles of
// its part that see one of its keys (causal: from the tile of ρ =
// (j0 − off)·h/g on) in descending order. K and V stay in shared memory; per
// query tile, Q and dO (and lse, D of its rows) come in by cp.async into
// swizzled shared memory, the next tile's while the current one is computed
// when bwd_stages is 2, and with one stage while the current one's dQ is
// (which reads neither). Per query tile and 64-row slice of it, each warp,
// for its 16 keys (mma m16n8k16, fragments by ldmatrix, accumulators in
// registers):
//   Sᵀ = K·Qᵀ; Pᵀ = exp2(Sᵀ·scale·log2 e − lse·log2 e), masked only on
//     tiles that reach past a row's last key (the causal diagonal, the
//     sequence's last key block); rows past the sequence have lse = +∞, so
//     P = 0 there;
//   dV += Pᵀ·dO, Pᵀ packed to bf16 being the A fragments directly (an
//     accumulator tile's layout is the A operand's), dO's B fragments by
//     ldmatrix .trans;
//   dPᵀ = V·dOᵀ; dSᵀ = Pᵀ∘(dPᵀ − D) with the packed P (so P is held in 16
//     registers, not 32, while dP is computed); dK += dSᵀ·Q as dV; dK, dV
//     (16 keys × D f32 each) stay in registers for the whole block;
//   dSᵀ is also written to shared memory, and after a barrier the block
//   computes dQ_tile = dS·K (A by ldmatrix .trans of dSᵀ, B by .trans of K),
//   warps taking 16-row × DQ-column units, and adds it to dQ.
//
// dQ units (bwd_dq_cols, DQ: 32 by default, or 64). The dQ product runs with
// dK and dV's 128 accumulators live, so a unit's own registers (its
// accumulators and the partial sum it adds to: DQ/2 each) decide whether the
// kernel fits. At 64 columns (as before 2026-11-29) the default tile used
// 253 of 255 registers, and ptxas issued each ldmatrix of the product just
// before the mma that read it (16 of the kernel's loads, in its sm_90 code,
// were read by the very next instruction); giving those loads a ring of two
// spilled. At 32 columns the unit's registers halve, the product is unrolled
// whole with every fragment loaded one load ahead (none is read by the next
// instruction), the default tile takes 251 registers, and every bf16
// configuration compiles without a spill on sm_90 (on sm_80 all but 128 ×
// 128 × 2, which does not fit an A100's shared memory), where 7 of them
// spilled before. The price: dSᵀ's A fragments are loaded once per unit, so
// twice as often (the dQ product's ldmatrix traffic about a fifth more).
// Which wins is the sweep's to say: bwd.dq_cols=64 keeps the old schedule for
// the H100's default tile.
//
// FlashAttention-2's warp layout (bwd_warp_keys = 32, bf16). The warps form
// two halves of BC/32; warp w of a half owns the 32 keys 32w … 32w+31 (two
// m-tiles). Per 64-row slice, half h computes Sᵀ and dPᵀ of its keys for
// the slice's rows 32h … 32h+31 alone (2 × 4 mma tiles each, every Q or dO
// fragment feeding both m-tiles), and writes Pᵀ (to a [BC][BR] buffer
// swizzled as dSᵀ's) and dSᵀ to shared memory. After a barrier, for the
// whole tile, half h owns columns h·D/2 … of dK and dV: dV += Pᵀ·dO and dK
// += dSᵀ·Q with A fragments by ldmatrix of Pᵀ and dSᵀ and each B fragment of
// dO and Q feeding both m-tiles. A warp thus loads about a sixth fewer
// fragments per mma than with 16 keys (per 64-row slice 152 ldmatrix.x4 for
// 320 mma against 184), for Pᵀ's round trip through shared memory and a
// third barrier per tile; dK and dV still sum the rows in ascending order,
// and dQ is computed as above. The sweep measures it beside the 16-key
// layout.
//
// f32 runs the same structure with SIMT products of the same register
// layout (Pᵀ and dSᵀ go through the dSᵀ buffer, as A operands from shared
// memory), which keeps it exact enough for the float64 checks; it is not
// built for speed.
//
// dQ order. The key blocks that see query tile i of a sequence are 0 … J_i
// (a contiguous range). They add their dS·K to the tile in ascending order:
// a per-(sequence, key/value head, query tile) counter counts the adds done;
// key block kb waits (one thread, spinning with __nanosleep) until it reads
// kb, then reads the tile's f32 partial sum, adds its own (partial + own,
// rounded once), and stores it; then a barrier, a fence and an atomic
// increment (thread 0's fence after the barrier publishes the whole
// block's writes: in the PTX memory model the barrier puts them before it in
// causality order). Key block 0 stores without reading, key block J_i
// writes dq itself (scaled, rounded to dt) instead of the partial, so the f32
// workspace needs no zeroing and nothing reads it afterwards (for f32, dq is
// the partial). Every element of dq is thus the same sum in the same order
// on every run.
//   Why it cannot deadlock: each block takes a ticket (an atomic counter) as
//   it starts and works on the item that ticket names; items are numbered
//   (sequence's key tile, key/value head, part) with the key tile most
//   significant, so the block it waits on — the same part of key block kb−1
//   — has a smaller ticket: it has started before, is resident or done, and
//   itself waits only on smaller tickets. The smallest unfinished ticket
//   waits on nothing, so it progresses, by induction all do, whatever order
//   the hardware schedules blocks in and however few are resident. The
//   emulator runs each started block to completion on one OS thread, so
//   there too the blocks waited on are running or done.
//   Why it rarely waits: the part boundaries are the same for every key
//   block and each block walks its tiles from the part's last down, so key
//   block kb reaches tile i at the same step as kb−1, which started first;
//   it waits at most for the rest of that step (ascending query tiles would
//   make block kb wait for kb−1's steps on tiles it does not see).
//   Ordering the tickets key tile first also starts the costliest blocks
//   (the first key tiles of a causal sequence see the most queries) first.
//
// dQ by atomics (bwd_dq_atomic = 1). The prep kernel zeroes the f32
// partial sums; each block adds scale·dS·K to them with one float atomic
// per element (L2 reductions) and neither waits nor counts; a last kernel
// (tw_cast, elementwise.cu) rounds the sums to dq. The adds'
// order then depends on timing, so dq's low bits can differ from run to run;
// what it buys is that no block waits for another: the sweep measures it
// beside the ordered sum, which is how a GPU run tells what the waits cost.
//
// dK/dV split. With split > 1 the parts of a key block that have query
// tiles (and always the last part) sum their dK, dV in ascending part order
// in an f32 workspace, with the same counter scheme (one counter per key
// block and key/value head, the waited-on part having the smaller ticket);
// the last part writes dk (scaled) and dv. With split = 1 the block writes
// them directly. The default split, from the SM count, is the smallest that
// gives about two blocks per SM before causal skipping.
//
// A first kernel (attn_bwd_prep_kernel) computes D = rowsum(dO∘O) per
// (query row, head) into the workspace, zeroes the rows of dq, dk, dv that
// no sequence covers, and zeroes the counters and the ticket.
//
// Shared memory (bf16, D = 128; K, V [BC][D], Q, dO [stages][BR][D],
// dSᵀ [BC][BR] (unpadded, its 16-byte chunks swizzled as K's: the 32-bit
// stores of the C layout and the ldmatrix .trans reads both meet 32
// different banks), lse·log2 e and D [stages][BR] f32, each row's last key
// less the block's first [stages][BR] i8), in KiB:
//   BR, BC, stages = 64, 64, 1: 72.6     64, 64, 2: 105.2 (two blocks per SM)
//                    64, 128, 1: 112.6   64, 128, 2: 145.2
//                    128, 64, 1: 113.2   128, 64, 2: 178.3
//                    128, 128, 1: 161.2   128, 128, 2: 226.3
//   (128, 128, 1 is the default on an H100 or H200); bwd_warp_keys = 32
//   adds Pᵀ [BC][BR]: 64, 64, 2: 113.2 (two blocks per SM on an H100 or
//   H200)   64, 128, 2: 161.2   128, 128, 1: 193.2
// so an A100 (163 KiB) holds all but 128×64×2 and 128×128×2, an H100 or
// H200 (227 KiB) all; bf16 at D = 64, 32: 81.2, 49.2; f32 (64, 64, 1, dSᵀ
// rows padded by 4 instead) at D = 128, 64, 32: 145.6, 81.6, 49.6.
// Registers: per lane the dK and dV accumulators (D/2 floats each), Sᵀ and
// dPᵀ of a 64-row slice (32 each) and P as bf16 A fragments (16).
// __launch_bounds__ allows 255 (BC = 128: 256 threads, one block per SM;
// BC = 64: 128 threads, two). nvcc 11.8's ptxas: every bf16 configuration
// at D = 128 with 16 keys per warp uses 251-255 registers without spilling
// on sm_90, and with 32 the 64-row ones too (128 rows spill 16 bytes, 40
// loaded); on sm_80 most spill 4-8 bytes (12-16 loaded), the 32-key ones
// 12-24 (12-28 loaded); D = 64 about 210, D = 32
// about 185; f32 at D = 128 spills a few dozen bytes (it is not the fast
// path). That needs the k-loops of Sᵀ/dPᵀ unrolled by 2 and dQ's not at
// all (fully unrolled, ptxas hoists every fragment load and spills), and
// dSᵀ's stores addressed from one per-lane pointer (through Tile's at, the
// default configuration spilled 16 bytes on sm_90).
//
// Workspace (each region 256-byte aligned): D [nq·h] f32; the ticket and
// counters (int); dQ's f32 partial sums [nq, h, dh] (bf16 only, but always
// reserved: the workspace size does not know the dtype); dK, dV partial
// sums [2][nk, g, dh] f32 when the split is above 1.
#ifdef TW_EMU
#include <sched.h>
#endif

#include "common.cuh"
#include "attention.cuh"
#include "sm80.cuh"

namespace {

constexpr int kSlice = 64; // query rows per slice of a tile (registers: Sᵀ, dPᵀ of 16 × 64)

// ---- Shared-memory tiles ----------------------------------------------------

// A [rows][D] tile of T in shared memory, unpadded, its 16-byte chunks
// swizzled by row (attention.cuh's swz_chunk), so that ldmatrix (8 rows,
// one chunk each) and the cp.async stores meet 8 different bank groups.
template <class T, int D> struct Tile {
	static constexpr int E = 16 / (int)sizeof(T); // elements per chunk
	static constexpr int C = D / E;               // chunks per row
	// Element offset of (r, c); the E elements of c's chunk are contiguous.
	static __device__ __forceinline__ int at(int r, int c) { return r * D + swz_chunk<C>(r, c / E) * E + c % E; }
};

// Byte offsets of a block's shared memory (every region 16-byte aligned).
template <class T, int D, int BR, int BC, int STAGES, int WK = 16> struct BwdSmem {
	// dSᵀ's row stride (elements): bf16's rows are BR wide, their chunks
	// swizzled (Tile<T, BR>); f32's are padded by 4 (its SIMT reads and
	// writes use plain strides).
	static constexpr int LDS = std::is_same<T, float>::value ? BR + 4 : BR;
	static constexpr size_t k = 0;                                   // [BC][D] T: the block's keys
	static constexpr size_t v = k + sizeof(T) * BC * D;              // [BC][D] T: their values
	static constexpr size_t q = v + sizeof(T) * BC * D;              // [STAGES][BR][D] T: query rows
	static constexpr size_t dO = q + sizeof(T) * STAGES * BR * D;    // [STAGES][BR][D] T: their dout
	static constexpr size_t ds = dO + sizeof(T) * STAGES * BR * D;   // [BC][LDS] T: dSᵀ (f32: also Pᵀ)
	static constexpr size_t pt = ds + sizeof(T) * BC * LDS;          // [BC][BR] T: Pᵀ (WK = 32 only)
	static constexpr size_t lse = pt + (WK == 32 ? sizeof(T) * BC * BR : 0); // [STAGES][BR] f32: lse·log2 e
	static constexpr size_t dd = lse + sizeof(float) * STAGES * BR;  // [STAGES][BR] f32: D
	static constexpr size_t lim = dd + sizeof(float) * STAGES * BR;  // [STAGES][BR] i8: last key seen − j0
	static constexpr size_t info = lim + STAGES * BR;                // [8] i32: the block's item
	static constexpr size_t bytes = info + sizeof(int) * 8;
	static_assert(v % 16 == 0 && q % 16 == 0 && dO % 16 == 0 && ds % 16 == 0 && pt % 16 == 0 && lse % 16 == 0 && info % 4 == 0,
	              "alignment");
	static_assert(BC <= 128, "a row's last key relative to the block fits an i8");
};

// ---- Warp-level products ----------------------------------------------------
// Accumulators are m16n8 tiles in mma's C layout: acc[n][0..3] of a lane
// (g = lane/4, t = lane%4) are C[g][8n+2t], C[g][8n+2t+1], C[g+8][8n+2t],
// C[g+8][8n+2t+1]. The f32 versions compute the same elements with FMAs.

template <class T> constexpr bool is_mma() { return !std::is_same<T, float>::value; }

template <class T> __device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t *a, const uint32_t *b) {
	mma_m16n8k16<std::is_same<T, bf16>::value>(c, a, b, c);
}

// acc[16·M][N] += X[xr … xr+16M−1][0, D) · Y[yr … yr+N−1][0, D)ᵀ (X, Y
// tiles; mma only): acc[m] is the m-th 16 rows, each B fragment serving the
// M of them.
template <class T, int D, int N, int M>
__device__ __forceinline__ void prod_nt_m(float (&acc)[M][N / 8][4], const T *X, int xr, const T *Y, int yr) {
	typedef Tile<T, D> TL;
	const int lane = threadIdx.x % 32;
	TW_UNROLL_BY(2)
	for (int kk = 0; kk < D / 16; kk++) {
		uint32_t a[M][4];
		TW_UNROLL
		for (int m = 0; m < M; m++) ldmatrix_x4(a[m], X + TL::at(xr + 16 * m + lane % 16, 16 * kk + 8 * (lane / 16)));
		TW_UNROLL
		for (int n = 0; n < N / 8; n += 2) {
			uint32_t b[4]; // B fragments of n-tiles n and n+1
			ldmatrix_x4(b, Y + TL::at(yr + 8 * n + lane % 8 + 8 * (lane / 16), 16 * kk + 8 * (lane / 8 % 2)));
			TW_UNROLL
			for (int m = 0; m < M; m++) {
				mma16816<T>(acc[m][n], a[m], b);
				mma16816<T>(acc[m][n + 1], a[m], b + 2);
			}
		}
	}
}

// acc[16][N] += X[xr … xr+15][0, D) · Y[yr … yr+N−1][0, D)ᵀ (X, Y tiles).
template <class T, int D, int N>
__device__ __forceinline__ void prod_nt(float (&acc)[N / 8][4], const T *X, int xr, const T *Y, int yr) {
	if constexpr (is_mma<T>()) {
		prod_nt_m<T, D, N, 1>(reinterpret_cast<float(&)[1][N / 8][4]>(acc), X, xr, Y, yr);
	} else {
		typedef Tile<T, D> TL;
		const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
		TW_UNROLL_BY(2)
		for (int d = 0; d < D; d += 4) {
			const float4 a0 = *(const float4 *)(X + TL::at(xr + g, d));
			const float4 a1 = *(const float4 *)(X + TL::at(xr + g + 8, d));
			TW_UNROLL
			for (int n = 0; n < N / 8; n++)
				TW_UNROLL
				for (int e = 0; e < 2; e++) {
					const float4 b = *(const float4 *)(Y + TL::at(yr + 8 * n + 2 * t + e, d));
					float s0 = acc[n][e], s1 = acc[n][2 + e];
					s0 = fmaf(a0.x, b.x, s0), s1 = fmaf(a1.x, b.x, s1);
					s0 = fmaf(a0.y, b.y, s0), s1 = fmaf(a1.y, b.y, s1);
					s0 = fmaf(a0.z, b.z, s0), s1 = fmaf(a1.z, b.z, s1);
					acc[n][e] = fmaf(a0.w, b.w, s0), acc[n][2 + e] = fmaf(a1.w, b.w, s1);
				}
		}
	}
}

// acc[16·M][NC] += A[16·M][16] · Y[yr … yr+15][c0, c0+NC) for one k-step:
// a[m] the A fragment of rows 16m … 16m+15, each B fragment (ldmatrix .trans
// of the Y tile) serving the M of them.
template <class T, int D, int NC, int M>
__device__ __forceinline__ void mma_kstep_m(float (&acc)[M][NC / 8][4], const uint32_t (&a)[M][4], const T *Y, int yr,
                                            int c0) {
	const int lane = threadIdx.x % 32;
	TW_UNROLL
	for (int n = 0; n < NC / 8; n += 2) {
		uint32_t b[4];
		ldmatrix_x4_trans(b, Y + Tile<T, D>::at(yr + lane % 16, c0 + 8 * n + 8 * (lane / 16)));
		TW_UNROLL
		for (int m = 0; m < M; m++) {
			mma16816<T>(acc[m][n], a[m], b);
			mma16816<T>(acc[m][n + 1], a[m], b + 2);
		}
	}
}

// acc[16][NC] += A[16][16] · Y[yr … yr+15][c0, c0+NC) for one k-step: A as
// an mma A fragment, B fragments by ldmatrix .trans of the Y tile.
template <class T, int D, int NC>
__device__ __forceinline__ void mma_kstep(float (&acc)[NC / 8][4], const uint32_t (&a)[4], const T *Y, int yr, int c0) {
	mma_kstep_m<T, D, NC, 1>(reinterpret_cast<float(&)[1][NC / 8][4]>(acc), reinterpret_cast<const uint32_t(&)[1][4]>(a), Y,
	                         yr, c0);
}

// f32: acc[16][NC] += A[16][K] · Y[yr … yr+K−1][c0, c0+NC), where
// A[r][k] = As[r·lda + k·ldk] (shared memory).
template <int D, int NC, int K>
__device__ __forceinline__ void simt_nn(float (&acc)[NC / 8][4], const float *As, int lda, int ldk, const float *Y,
                                        int yr, int c0) {
	const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
	TW_UNROLL_BY(4)
	for (int k = 0; k < K; k++) {
		const float a0 = As[g * lda + k * ldk], a1 = As[(g + 8) * lda + k * ldk];
		TW_UNROLL
		for (int n = 0; n < NC / 8; n++) {
			const float2 b = *(const float2 *)(Y + Tile<float, D>::at(yr + k, c0 + 8 * n + 2 * t));
			acc[n][0] = fmaf(a0, b.x, acc[n][0]);
			acc[n][1] = fmaf(a0, b.y, acc[n][1]);
			acc[n][2] = fmaf(a1, b.x, acc[n][2]);
			acc[n][3] = fmaf(a1, b.y, acc[n][3]);
		}
	}
}

template <int N> __device__ __forceinline__ void zero(float (&acc)[N][4]) {
	TW_UNROLL
	for (int n = 0; n < N; n++)
		TW_UNROLL
		for (int e = 0; e < 4; e++) acc[n][e] = 0.0f;
}

// Two adjacent elements of T at p (aligned to both), rounded from x, y.
__device__ __forceinline__ void store2(float *p, float x, float y) { *(float2 *)p = make_float2(x, y); }
__device__ __forceinline__ void store2(bf16 *p, float x, float y) { *(uint32_t *)p = pack_bf16x2(x, y); }

template <class T> __device__ __forceinline__ uint32_t pack2(float lo, float hi) {
	if constexpr (std::is_same<T, bf16>::value) return pack_bf16x2(lo, hi);
	else return pack_f16x2(lo, hi);
}

// Element hi (0: bits 0-15, 1: bits 16-31) of a packed pair, as f32.
template <class T> __device__ __forceinline__ float unpack(uint32_t x, int hi) {
	if constexpr (std::is_same<T, bf16>::value) return __uint_as_float(hi ? x & 0xffff0000u : x << 16);
	else return __half2float(__ushort_as_half((unsigned short)(hi ? x >> 16 : x & 0xffffu)));
}

// f32: writes a warp's 16 × 64 accumulator tile x (C layout) to rows 0-15 of
// dst (row stride LDS) for the warp to read back, between two __syncwarp.
template <int LDS> __device__ __forceinline__ void stage_rows(float *dst, const float (&x)[kSlice / 8][4]) {
	const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
	__syncwarp();
	TW_UNROLL
	for (int n = 0; n < kSlice / 8; n++) {
		store2(dst + g * LDS + 8 * n + 2 * t, x[n][0], x[n][1]);
		store2(dst + (g + 8) * LDS + 8 * n + 2 * t, x[n][2], x[n][3]);
	}
	__syncwarp();
}

// ---- Ordering between blocks ----------------------------------------------------

// One thread: waits until *ctr ≥ want, then orders its later accesses (and,
// through a following __syncthreads, its block's) after the writes the
// incrementing block made before its release_one.
__device__ __forceinline__ void acquire_wait(const int *ctr, int want) {
#ifdef TW_EMU
	// The emulator's __nanosleep yields to the block's other threads (all at
	// a barrier here); sched_yield lets the waited-on block's OS thread run
	// when there are more of them than cores.
	while (__atomic_load_n(ctr, __ATOMIC_ACQUIRE) < want) __nanosleep(0), sched_yield();
#else
	while (*(const volatile int *)ctr < want) __nanosleep(64);
	__threadfence();
#endif
}

// One thread, after a __syncthreads that follows the block's writes:
// publishes them and counts one more.
__device__ __forceinline__ void release_one(int *ctr) {
	__threadfence();
	atomicAdd(ctr, 1);
}

// The kernel's arguments. dqacc is dq itself for f32.
template <class T> struct BwdArgs {
	T *dq, *dk, *dv;
	float *dqacc, *dkvacc; // dkvacc: [2][nk, g, dh] (dK, dV partial sums), null when split = 1
	int *ticket, *qctr, *kctr;
	int64_t nqctr, nkctr, nkg; // counters of each kind; nk·g
	const T *dout, *q, *k, *v;
	const float *lse, *Dl;
	const int32_t *seqs;
	int nseq, h, g, dh, split, noncausal;
	FastDiv rep;   // h/g, the rows per query (attention.cuh)
	int dq_atomic; // dQ by float atomics into dqacc (bf16 only; see the top)
	float scale, sl2; // sl2 = scale·log2 e
};

} // namespace

// How a block adds its dS·K to a query tile's dQ (see the top): by float
// atomics; as the last key block, into dq itself; as an earlier one, into
// the f32 partial sum.
enum { kDQAtomic, kDQFinal, kDQPartial };

// The kernels stay outside the anonymous namespace: their block-scope
// declaration of the dynamic shared memory must name the global smem.

// D = rowsum(dO∘O) per (query row, head) of a covered row, into Dl [nq, h];
// zeroes dq on rows no sequence's queries cover and dk, dv on rows no
// sequence's keys cover; zeroes ctr [nctr] and dqz [ndqz] (the f32 dQ
// sums when they are added by atomics; ndqz = 0 otherwise, dqz 16-byte
// aligned). One warp per item: items
// [0, nq·h) are (row, head) of q, items [nq·h, nq·h + nk·g) are (row, head)
// of k. Grid-stride.
template <class T>
__global__ void attn_bwd_prep_kernel(float *__restrict__ Dl, T *__restrict__ dq, T *__restrict__ dk,
                                     T *__restrict__ dv, const T *__restrict__ dout, const T *__restrict__ out,
                                     const int32_t *__restrict__ seqs, int nseq, int64_t nq, int64_t nk, int h, int g,
                                     int dh, int *__restrict__ ctr, int64_t nctr, float *__restrict__ dqz,
                                     int64_t ndqz) {
	const int lane = threadIdx.x % 32;
	const int64_t nthreads = (int64_t)gridDim.x * blockDim.x, first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	for (int64_t i = first; i < nctr; i += nthreads) ctr[i] = 0;
	for (int64_t i = first; i < ndqz / 4; i += nthreads) reinterpret_cast<float4 *>(dqz)[i] = make_float4(0, 0, 0, 0);
	for (int64_t i = ndqz / 4 * 4 + first; i < ndqz; i += nthreads) dqz[i] = 0.0f;
	const int64_t nqi = nq * h, total = nqi + nk * g;
	for (int64_t it = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; it < total; it += nthreads / 32) {
		const bool query = it < nqi;
		const int64_t item = query ? it : it - nqi; // (row, head) index in q or k
		const int row = query ? (int)(item / h) : (int)(item / g); // nq·h, nk·g < 2³¹
		const int at = query ? 0 : 2; // the seqs columns of this side: start, length
		bool covered = false;
		for (int b = 0; b < nseq && !covered; b++)
			covered = row >= seqs[4 * b + at] && row < (int64_t)seqs[4 * b + at] + seqs[4 * b + at + 1];
		const int64_t base = item * dh;
		if (query && covered) {
			float sum = 0.0f;
			for (int d = lane; d < dh; d += 32) sum = fmaf(to_float(dout[base + d]), to_float(out[base + d]), sum);
			sum = warp_sum(sum);
			if (lane == 0) Dl[item] = sum;
		} else if (!covered) {
			const T zero = from_float<T>(0.0f);
			for (int d = lane; d < dh; d += 32) {
				if (query) {
					dq[base + d] = zero;
				} else {
					dk[base + d] = zero;
					dv[base + d] = zero;
				}
			}
		}
	}
}

// One block per item (key tile of BC keys of a sequence, key/value head,
// part of the query tiles), numbered by the block's ticket; grid
// (ceil(nk/BC) + nseq)·g·split blocks of 2·BC threads, those past the last
// item doing nothing.
template <class T, int D, int BR, int BC, int STAGES, int WK, int DQC>
__global__ void __launch_bounds__(2 * BC, BC == 64 ? 2 : 1) attn_bwd_kernel(const BwdArgs<T> a) {
	typedef BwdSmem<T, D, BR, BC, STAGES, WK> L;
	typedef Tile<T, D> TL;  // K, V, Q, dO
	typedef Tile<T, BR> TS; // bf16's dSᵀ and Pᵀ
	constexpr int W = BC / 16, NT = 32 * W, LDS = L::LDS, E = TL::E, C = TL::C;
	// The warp layout (see the top): MK m-tiles of 16 keys and NCOL columns
	// of dK, dV a warp owns.
	constexpr int MK = WK / 16, NCOL = WK == 16 ? D : D / 2;
	static_assert(BR % kSlice == 0 && BR <= NT, "query tile");
	static_assert(WK == 16 || (WK == 32 && is_mma<T>() && BC % 32 == 0 && D % 32 == 0), "warp layout");
	extern __shared__ __align__(128) unsigned char smem[];
	const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, gq = lane / 4, tq = lane % 4;
	T *Ks = (T *)(smem + L::k), *Vs = (T *)(smem + L::v), *Qs = (T *)(smem + L::q), *dOs = (T *)(smem + L::dO);
	T *dSt = (T *)(smem + L::ds), *Pt = (T *)(smem + L::pt);
	float *lse2s = (float *)(smem + L::lse), *Ds = (float *)(smem + L::dd);
	int8_t *lims = (int8_t *)(smem + L::lim);
	int *info = (int *)(smem + L::info);

	if (warp == 0) {
		int ticket = lane == 0 ? atomicAdd(a.ticket, 1) : 0;
		ticket = __shfl_sync(kFull, ticket, 0);
		const int id = ticket / (a.g * a.split);
		int seq = -1, kb = 0, qbase = 0;
		// Items are the key tiles of all sequences in order; qbase, the query
		// tiles of the sequences before, numbers the first of its dQ counters.
		if (!find_tile(a.seqs, a.nseq, id, KeyTiles{BC}, &seq, &kb, QueryTiles{a.h / a.g, BR}, &qbase)) seq = -1;
		if (lane == 0) {
			info[0] = seq, info[1] = kb, info[2] = qbase, info[3] = id;
			info[4] = ticket / a.split % a.g, info[5] = ticket % a.split;
		}
	}
	__syncthreads();
	const int seq = info[0], kb = info[1], qbase = info[2], id = info[3], kvh = info[4], part = info[5];
	if (seq < 0) return; // no barrier follows for this block

	const int32_t *sq = a.seqs + 4 * seq;
	const int qs = sq[0], ql = sq[1], ks = sq[2], kl = sq[3];
	const int rep = a.rep.d, rows = ql * rep, off = key_offset(ql, kl, a.noncausal), split = a.split;
	const int nqt = ceil_div(rows, BR), j0 = kb * BC;
	// Contract violations (overlapping sequences) must not index past the counters.
	if ((int64_t)(qbase + nqt) * a.g > a.nqctr || (int64_t)(id + 1) * a.g > a.nkctr) return;
	const int tlo = a.noncausal ? 0 : max(0, j0 - off) * rep / BR; // the first query tile that sees key j0
	auto range = [&](int p, int *lo, int *hi) {
		*lo = max(tlo, (int)((int64_t)p * nqt / split));
		*hi = (int)((int64_t)(p + 1) * nqt / split);
	};
	int lo, hi;
	range(part, &lo, &hi);
	const bool last_part = part == split - 1;
	if (lo >= hi && !last_part) return; // an empty part takes no part in the dK/dV sum

	const QRows qrow(qs, kvh, a.rep, a.h); // row ρ's index in [nq·h]

	// Keys and values; Q, dO of query tile `tile` into stage buffer `buf`;
	// the per-row scalars of a tile.
	for (int c = tid; c < BC * C; c += NT) {
		const int r = c / C, x = c % C * E;
		const bool ok = j0 + r < kl && x < a.dh;
		const int64_t o = ok ? ((int64_t)(ks + j0 + r) * a.g + kvh) * a.dh + x : 0;
		cp_async16(Ks + TL::at(r, x), a.k + o, ok ? 16 : 0);
		cp_async16(Vs + TL::at(r, x), a.v + o, ok ? 16 : 0);
	}
	// A query tile's copies: each thread takes chunk column qc of rows
	// qr, qr + NT/C, … (NT is a multiple of C), or at the full head width a
	// pair of chunks (kPairs, pair_row: attention.cuh) of every
	// NT/(C/2)-th row (half the rows' index work), so its shared-memory
	// offsets are constants; a row past the
	// sequence's reads its last row (a valid address) and copies 0 bytes of
	// it, as does a column past dh.
	const int qc = tid % C * E, qr = tid / C;
	const bool qcol = qc < a.dh;
	auto load_q = [&](int buf, int tile) {
		T *Qd = Qs + buf * BR * D, *dOd = dOs + buf * BR * D;
		constexpr int CP = C / 2; // pairs per row
		if constexpr (kPairs<C> && BR * CP % NT == 0 && NT / CP % 8 == 0) {
			if (a.dh == D) {
				// From a pair's first chunk to its second, in elements: in global
				// memory an add, in the tile an XOR of the offset (the swizzle
				// XORs chunk indices; D, a power of two, keeps r·D clear of it).
				constexpr int PE = CP * E;
				static_assert((D & (D - 1)) == 0 && PE < D, "load_q: a pair's second chunk by an XOR");
				const int pc = tid % CP * E, pr = pair_row<C>(tid / CP);
				TW_UNROLL
				for (int i = 0; i < BR * CP / NT; i++) {
					const int r = pr + i * (NT / CP), rho = tile * BR + r, at = TL::at(r, pc);
					const int64_t o = qrow(min(rho, rows - 1)) * a.dh + pc;
					const int n = rho < rows ? 16 : 0;
					cp_async16(Qd + at, a.q + o, n);
					cp_async16(Qd + (at ^ PE), a.q + o + PE, n);
					cp_async16(dOd + at, a.dout + o, n);
					cp_async16(dOd + (at ^ PE), a.dout + o + PE, n);
				}
				return;
			}
		}
		static_assert(NT % C == 0, "load_q: whole rows per pass");
		TW_UNROLL
		for (int i = 0; i < BR * C / NT; i++) {
			const int r = qr + i * (NT / C), rho = tile * BR + r;
			const int64_t o = qrow(min(rho, rows - 1)) * a.dh + (qcol ? qc : 0);
			const int n = rho < rows && qcol ? 16 : 0;
			cp_async16(Qd + TL::at(r, qc), a.q + o, n);
			cp_async16(dOd + TL::at(r, qc), a.dout + o, n);
		}
	};
	// A row's scalars; lim is the last key it sees less j0, clamped to
	// [−1, BC − 1] (the same test for the block's keys: −1, every key
	// masked, past the sequence's rows, where P = 0 anyway).
	struct Row {
		float lse2, d;
		int lim;
	};
	auto row_of = [&](int tile) -> Row { // thread tid < BR: row tid of the tile
		const int rho = tile * BR + tid;
		if (rho >= rows) return Row{INFINITY, 0.0f, -1}; // P = 0
		const int64_t i = qrow(rho);
		return Row{a.lse[i] * (float)kLog2e, a.Dl[i], max(-1, min(min(a.rep.div(rho) + off, kl - 1) - j0, BC - 1))};
	};
	auto put_row = [&](int buf, Row r) {
		lse2s[buf * BR + tid] = r.lse2, Ds[buf * BR + tid] = r.d, lims[buf * BR + tid] = (int8_t)r.lim;
	};

	if (lo < hi) load_q(0, hi - 1);
	cp_async_commit();
	if (lo < hi && tid < BR) put_row(0, row_of(hi - 1));
	cp_async_wait<0>();
	__syncthreads();

	float dka[MK][NCOL / 8][4], dva[MK][NCOL / 8][4]; // Σ dSᵀ·Q, Σ Pᵀ·dO for the warp's keys and columns
	TW_UNROLL
	for (int m = 0; m < MK; m++) zero(dka[m]), zero(dva[m]);
	// The warp's first key in the block; with WK = 32 also which half of the
	// warps it is in: the half's rows of a slice (Sᵀ, dPᵀ) and its columns of
	// dK, dV (cw).
	const int kw = WK == 16 ? 16 * warp : 32 * (warp % (BC / 32)), half = WK == 16 ? 0 : warp / (BC / 32);
	const int cw = half * NCOL;
	T *const dsr = dSt + (kw + gq) * BR + 2 * tq; // bf16: the lane's first row of dSᵀ, its word in a chunk
	T *const ptr = Pt + (kw + gq) * BR + 2 * tq;  // WK = 32: the same in Pᵀ
	const int key0 = j0 + kw + gq;    // the lane's keys: key0 + 16m, key0 + 16m + 8
	for (int i = hi - 1, st = 0; i >= lo; i--, st++) {
		const int buf = STAGES == 2 ? st & 1 : 0;
		Row next{};
		if constexpr (STAGES == 2) {
			if (i > lo) {
				load_q(buf ^ 1, i - 1);
				if (tid < BR) next = row_of(i - 1); // stored at the end of the step
			}
			cp_async_commit();
		} // one stage: the tile was loaded during the previous step's dQ (below)
		const T *Qb = Qs + buf * BR * D, *dOb = dOs + buf * BR * D;
		const float *l2 = lse2s + buf * BR, *Db = Ds + buf * BR;
		const int8_t *lm = lims + buf * BR;
		const int r0 = i * BR;

		TW_UNROLL_BY(1)
		for (int c0 = 0; c0 < BR; c0 += kSlice) {
			if constexpr (WK == 16) {
				float s[kSlice / 8][4], dp[kSlice / 8][4];
				zero(s);
				prod_nt<T, D, kSlice>(s, Ks, kw, Qb, c0);
				// Keys past a row's last (the diagonal, the sequence's end) only
				// where the slice's first row's last key is before the block's last.
				const int rs = min(r0 + c0, rows - 1);
				const bool masked = j0 + BC - 1 > min(a.rep.div(rs) + off, kl - 1);
				TW_UNROLL
				for (int n = 0; n < kSlice / 8; n++) {
					const float2 l = *(const float2 *)(l2 + c0 + 8 * n + 2 * tq);
					TW_UNROLL
					for (int e = 0; e < 4; e++) s[n][e] = fast_exp2(fmaf(s[n][e], a.sl2, -(e % 2 ? l.y : l.x)));
				}
				if (masked) { // block-uniform: the tests only where some row stops short of the block's keys
					TW_UNROLL
					for (int n = 0; n < kSlice / 8; n++) {
						const int col = c0 + 8 * n + 2 * tq;
						TW_UNROLL
						for (int e = 0; e < 4; e++)
							if (kw + gq + 8 * (e / 2) > lm[col + e % 2]) s[n][e] = 0.0f;
					}
				}
				// dV += Pᵀ·dO, and dP after it: P is held as bf16 A fragments
				// (the accumulators of n-tiles 2kk, 2kk+1 are k-step kk's) while
				// dP is computed, and dS = P∘(dP − D) uses that rounded P (the
				// operand dV sums): fewer registers live than with P in f32.
				// f32: Pᵀ, then dSᵀ, go through the warp's own rows of the dSᵀ
				// buffer as A operands.
				T *dSw = dSt + kw * LDS + c0; // f32: the warp's 16 rows of dSᵀ, this slice's columns
				uint32_t pa[kSlice / 16][4];
				if constexpr (is_mma<T>()) {
					TW_UNROLL
					for (int kk = 0; kk < kSlice / 16; kk++) {
						TW_UNROLL
						for (int r = 0; r < 4; r++) pa[kk][r] = pack2<T>(s[2 * kk + r / 2][2 * (r % 2)], s[2 * kk + r / 2][2 * (r % 2) + 1]);
						mma_kstep<T, D, D>(dva[0], pa[kk], dOb, c0 + 16 * kk, 0);
					}
				} else {
					stage_rows<LDS>((float *)dSw, s);
					simt_nn<D, D, kSlice>(dva[0], (const float *)dSw, LDS, 1, (const float *)dOb, c0, 0);
					__syncwarp();
				}
				zero(dp);
				prod_nt<T, D, kSlice>(dp, Vs, kw, dOb, c0);
				TW_UNROLL
				for (int n = 0; n < kSlice / 8; n++) {
					const float2 dd = *(const float2 *)(Db + c0 + 8 * n + 2 * tq);
					TW_UNROLL
					for (int e = 0; e < 4; e++) {
						float p;
						if constexpr (is_mma<T>()) p = unpack<T>(pa[n / 2][2 * (n % 2) + e / 2], e % 2);
						else p = s[n][e];
						dp[n][e] = p * (dp[n][e] - (e % 2 ? dd.y : dd.x));
					}
				}
				if constexpr (is_mma<T>()) {
					// dSᵀ as A fragments for dK, and to shared memory for dQ.
					TW_UNROLL
					for (int kk = 0; kk < kSlice / 16; kk++) {
						uint32_t da[4];
						TW_UNROLL
						for (int r = 0; r < 4; r++) {
							da[r] = pack2<T>(dp[2 * kk + r / 2][2 * (r % 2)], dp[2 * kk + r / 2][2 * (r % 2) + 1]);
							// TS::at(kw + gq + 8·(r%2), c0 + 16kk + 8·(r/2) + 2tq): both rows'
							// chunks swizzled by gq (kw is a multiple of 16).
							st_shared_b32(dsr + 8 * (r % 2) * BR + ((c0 / 8 + 2 * kk + r / 2) ^ gq) * E, da[r]);
						}
						mma_kstep<T, D, D>(dka[0], da, Qb, c0 + 16 * kk, 0);
					}
				} else {
					stage_rows<LDS>((float *)dSw, dp);
					simt_nn<D, D, kSlice>(dka[0], (const float *)dSw, LDS, 1, (const float *)Qb, c0, 0);
				}
			} else {
				// WK = 32 (FlashAttention-2's layout): the warp's 32 keys ×
				// its half's 32 rows of the slice; Pᵀ and dSᵀ go to shared
				// memory, where the tile's dV, dK products (below) read them.
				const int rw = c0 + 32 * half; // the warp's first row of the slice
				float s[MK][4][4], dp[MK][4][4];
				TW_UNROLL
				for (int m = 0; m < MK; m++) zero(s[m]), zero(dp[m]);
				prod_nt_m<T, D, 32, MK>(s, Ks, kw, Qb, rw);
				const int rs = min(r0 + c0, rows - 1); // as above
				const bool masked = j0 + BC - 1 > min(a.rep.div(rs) + off, kl - 1);
				// The lane's word of Pᵀ, dSᵀ at keys kw + 16m + gq + 8·h2, rows
				// rw + 8n + 2tq, from its first row (ptr, dsr): TS::at, both
				// rows' chunks swizzled by gq (kw is a multiple of 16).
				auto word = [&](int m, int n, int h2) { return (16 * m + 8 * h2) * BR + ((rw / 8 + n) ^ gq) * E; };
				TW_UNROLL
				for (int n = 0; n < 4; n++) {
					const float2 l = *(const float2 *)(l2 + rw + 8 * n + 2 * tq);
					TW_UNROLL
					for (int m = 0; m < MK; m++)
						TW_UNROLL
						for (int e = 0; e < 4; e++) s[m][n][e] = fast_exp2(fmaf(s[m][n][e], a.sl2, -(e % 2 ? l.y : l.x)));
				}
				if (masked) { // block-uniform, as above
					TW_UNROLL
					for (int n = 0; n < 4; n++) {
						const int col = rw + 8 * n + 2 * tq;
						TW_UNROLL
						for (int m = 0; m < MK; m++)
							TW_UNROLL
							for (int e = 0; e < 4; e++)
								if (kw + 16 * m + gq + 8 * (e / 2) > lm[col + e % 2]) s[m][n][e] = 0.0f;
					}
				}
				uint32_t pp[MK][4][2]; // Pᵀ as bf16 pairs: n-tile, keys gq / gq + 8
				TW_UNROLL
				for (int m = 0; m < MK; m++) {
					TW_UNROLL
					for (int n = 0; n < 4; n++) {
						TW_UNROLL
						for (int h2 = 0; h2 < 2; h2++) {
							pp[m][n][h2] = pack2<T>(s[m][n][2 * h2], s[m][n][2 * h2 + 1]);
							st_shared_b32(ptr + word(m, n, h2), pp[m][n][h2]);
						}
					}
				}
				prod_nt_m<T, D, 32, MK>(dp, Vs, kw, dOb, rw);
				TW_UNROLL
				for (int m = 0; m < MK; m++) {
					TW_UNROLL
					for (int n = 0; n < 4; n++) {
						const float2 dd = *(const float2 *)(Db + rw + 8 * n + 2 * tq);
						TW_UNROLL
						for (int h2 = 0; h2 < 2; h2++) {
							const float x = unpack<T>(pp[m][n][h2], 0) * (dp[m][n][2 * h2] - dd.x);
							const float y = unpack<T>(pp[m][n][h2], 1) * (dp[m][n][2 * h2 + 1] - dd.y);
							st_shared_b32(dsr + word(m, n, h2), pack2<T>(x, y));
						}
					}
				}
			}
		}
		if constexpr (WK == 32) {
			// dV += Pᵀ·dO and dK += dSᵀ·Q over the tile's rows, the warp's 32
			// keys × NCOL columns, once every warp's Pᵀ and dSᵀ are in.
			__syncthreads();
			TW_UNROLL_BY(2)
			for (int kk = 0; kk < BR / 16; kk++) {
				uint32_t af[MK][4];
				TW_UNROLL
				for (int m = 0; m < MK; m++) ldmatrix_x4(af[m], Pt + TS::at(kw + 16 * m + lane % 16, 16 * kk + 8 * (lane / 16)));
				mma_kstep_m<T, D, NCOL, MK>(dva, af, dOb, 16 * kk, cw);
				TW_UNROLL
				for (int m = 0; m < MK; m++) ldmatrix_x4(af[m], dSt + TS::at(kw + 16 * m + lane % 16, 16 * kk + 8 * (lane / 16)));
				mma_kstep_m<T, D, NCOL, MK>(dka, af, Qb, 16 * kk, cw);
			}
		}

		// dQ of the tile += dS·K, after key blocks 0 … kb−1 (see the top), or
		// by atomics in any order.
		const int J = min(a.rep.div(min(r0 + BR, rows) - 1) + off, kl - 1) / BC; // the last key block it sees
		const bool atomic = a.dq_atomic != 0;
		const bool final_add = kb == J && !atomic, ordered = kb > 0 && !atomic; // ordered: adds to a partial
		int *qc = a.qctr + (int64_t)(qbase + i) * a.g + kvh;
		if (tid == 0 && ordered) acquire_wait(qc, kb);
		__syncthreads(); // dSᵀ complete; the adds before this one visible
		if constexpr (STAGES == 1) {
			// dQ reads dSᵀ and K alone: the one stage's Q, dO and row scalars
			// are free, and the next tile's come in while dQ is computed.
			if (i > lo) {
				load_q(0, i - 1);
				if (tid < BR) next = row_of(i - 1);
			}
			cp_async_commit();
		}
		constexpr int DQ = is_mma<T>() ? (D < DQC ? D : DQC) : (D < 64 ? D : 64), MU = BR / 16, UNITS = MU * (D / DQ);
		TW_UNROLL_BY(1)
		for (int u = warp; u < UNITS; u += W) {
			const int m0 = u % MU * 16, d0 = u / MU * DQ;
			// The lane's two rows of the unit, ρ = r0 + m0 + gq + 8·h2, and the
			// element offset of its first column in each (for the loads and
			// the adds alike); columns d0 + 8n + 2tq, those below dh.
			bool live[2];
			int64_t at[2];
			TW_UNROLL
			for (int h2 = 0; h2 < 2; h2++) {
				const int rho = r0 + m0 + gq + 8 * h2;
				live[h2] = rho < rows;
				at[h2] = live[h2] ? qrow(rho) * a.dh + d0 + 2 * tq : 0;
			}
			// The rest, twice compiled: for a unit whose columns are all
			// below dh (every unit when dh = D) without a test per column.
			auto unit = [&](auto wide) {
				constexpr bool kWide = decltype(wide)::value;
				auto col = [&](int n) { return kWide || d0 + 8 * n < a.dh; };
				// The partial sum's loads are issued first, their latency
				// hidden by the product; −0 where there is none to add
				// (x + −0 = x for every x, so the sum below needs no test).
				float acc[DQ / 8][4], prev[DQ / 8][4];
				TW_UNROLL
				for (int h2 = 0; h2 < 2; h2++) {
					const float *pp = a.dqacc + at[h2];
#if defined(__CUDA_ARCH__)
					// An opaque copy: without it ptxas rebuilds the address
					// from the kernel's parameters for each load (two constant
					// loads and two adds each, ~70 instructions per unit);
					// with it, one register pair and immediate offsets.
					if constexpr (kWide && is_mma<T>()) asm("mov.b64 %0, %0;" : "+l"(pp));
#endif
					const bool load = ordered && live[h2];
					TW_UNROLL
					for (int n = 0; n < DQ / 8; n++) {
						float2 x = make_float2(-0.0f, -0.0f);
						if (load && col(n)) x = __ldcg((const float2 *)(pp + 8 * n));
						prev[n][2 * h2] = x.x, prev[n][2 * h2 + 1] = x.y;
					}
				}
				zero(acc);
				if constexpr (is_mma<T>() && DQC == 64) {
					// The schedule of before (see "dQ units" at the top), kept
					// for the sweep to compare.
					TW_UNROLL_BY(2)
					for (int kk = 0; kk < BC / 16; kk++) {
						uint32_t af[4]; // A[m][k] = dSᵀ[k][m]
						ldmatrix_x4_trans(af, dSt + TS::at(16 * kk + lane % 8 + 8 * (lane / 16), m0 + 8 * (lane / 8 % 2)));
						mma_kstep<T, D, DQ>(acc, af, Ks, 16 * kk, d0);
					}
				} else if constexpr (is_mma<T>()) {
					// Unrolled whole, each fragment loaded one load ahead of its
					// products: dSᵀ's A fragments in a ring of 2, K's B too.
					constexpr int NP = DQ / 16, L = 2;
					uint32_t af[2][4], bf[L][4];
					auto load_a = [&](int kk) {
						ldmatrix_x4_trans(af[kk % 2], dSt + TS::at(16 * kk + lane % 8 + 8 * (lane / 16), m0 + 8 * (lane / 8 % 2)));
					};
					auto load_b = [&](int i) {
						ldmatrix_x4_trans(bf[i % L], Ks + Tile<T, D>::at(16 * (i / NP) + lane % 16, d0 + 16 * (i % NP) + 8 * (lane / 16)));
					};
					load_a(0), load_b(0);
					TW_UNROLL
					for (int i = 0; i < BC / 16 * NP; i++) {
						const int kk = i / NP, n = i % NP;
						if (i + 1 < BC / 16 * NP) load_b(i + 1);
						if (n == 0 && kk + 1 < BC / 16) load_a(kk + 1);
						mma16816<T>(acc[2 * n], af[kk % 2], bf[i % L]);
						mma16816<T>(acc[2 * n + 1], af[kk % 2], bf[i % L] + 2);
					}
				} else {
					simt_nn<D, DQ, BC>(acc, (const float *)dSt + m0, 1, LDS, (const float *)Ks, 0, d0);
				}
				// The adds, in the block's mode (uniform: one branch, not one
				// per element).
				auto add = [&](auto mode) {
					constexpr int MODE = decltype(mode)::value;
					TW_UNROLL
					for (int h2 = 0; h2 < 2; h2++) {
						if (!live[h2]) continue;
						TW_UNROLL
						for (int n = 0; n < DQ / 8; n++) {
							if (!col(n)) break;
							const float x = acc[n][2 * h2] + prev[n][2 * h2], y = acc[n][2 * h2 + 1] + prev[n][2 * h2 + 1];
							if constexpr (MODE == kDQAtomic) { // scaled here: the sums are dq but for its rounding
								atomicAdd(a.dqacc + at[h2] + 8 * n, x * a.scale);
								atomicAdd(a.dqacc + at[h2] + 8 * n + 1, y * a.scale);
							} else if constexpr (MODE == kDQFinal) {
								store2(a.dq + at[h2] + 8 * n, x * a.scale, y * a.scale);
							} else {
								__stcg((float2 *)(a.dqacc + at[h2] + 8 * n), make_float2(x, y));
							}
						}
					}
				};
				if (atomic) add(IntC<kDQAtomic>());
				else if (final_add) add(IntC<kDQFinal>());
				else add(IntC<kDQPartial>());
			};
			if (d0 + DQ <= a.dh) unit(IntC<1>());
			else unit(IntC<0>());
		}
		if (i > lo && tid < BR) put_row(STAGES == 2 ? buf ^ 1 : 0, next);
		cp_async_wait<0>();
		__syncthreads(); // the adds done; the next tile's Q, dO and scalars in
		if (tid == 0 && !final_add && !atomic) release_one(qc);
	}

	// dK, dV: the parts that take part add in ascending order (see the top);
	// the last writes dk, dv.
	int rank = 0;
	for (int p = 0; p < part; p++) {
		int l, u;
		range(p, &l, &u);
		rank += l < u;
	}
	int *kc = a.kctr + (int64_t)id * a.g + kvh;
	if (rank > 0) {
		if (tid == 0) acquire_wait(kc, rank);
		__syncthreads();
	}
	TW_UNROLL
	for (int m = 0; m < MK; m++)
		TW_UNROLL
		for (int h2 = 0; h2 < 2; h2++) {
			const int j = key0 + 16 * m + 8 * h2;
			if (j >= kl) continue;
			const int64_t base = ((int64_t)(ks + j) * a.g + kvh) * a.dh;
			TW_UNROLL
			for (int n = 0; n < NCOL / 8; n++) {
				const int col = cw + 8 * n + 2 * tq;
				if (col >= a.dh) continue;
				float2 xk = make_float2(dka[m][n][2 * h2], dka[m][n][2 * h2 + 1]);
				float2 xv = make_float2(dva[m][n][2 * h2], dva[m][n][2 * h2 + 1]);
				float *pk = a.dkvacc + base + col, *pv = pk + a.nkg * a.dh;
				if (rank > 0) {
					const float2 ok = __ldcg((const float2 *)pk), ov = __ldcg((const float2 *)pv);
					xk.x = ok.x + xk.x, xk.y = ok.y + xk.y;
					xv.x = ov.x + xv.x, xv.y = ov.y + xv.y;
				}
				if (last_part) {
					store2(a.dk + base + col, xk.x * a.scale, xk.y * a.scale);
					store2(a.dv + base + col, xv.x, xv.y);
				} else {
					__stcg((float2 *)pk, xk);
					__stcg((float2 *)pv, xv);
				}
			}
		}
	if (!last_part) {
		__syncthreads();
		if (tid == 0) release_one(kc);
	}
}

// ---- Launchers --------------------------------------------------------------------

namespace {

constexpr BwdConfig kDefaultBf16 = kBwdConfigs128[0]; // bf16's only one at D = 32, 64; at 128 where kLargeBf16 does not fit
constexpr BwdConfig kLargeBf16{128, 128, 1};           // the default at D = 128 where it fits
constexpr BwdConfig kDefaultF32{64, 64, 1};            // f32's only one

// The default bf16 configuration at head width dh (see the top): the large
// one on the devices of the class it was measured fastest on, whose shared
// memory holds 128 × 128 × 2 (an H100 or H200; an A100 holds 128 × 128 × 1
// but not that, and keeps its default until one is measured there).
BwdConfig default_bf16(int64_t dh) {
	if (dh <= 64) return kDefaultBf16;
	return smem_optin() >= BwdSmem<bf16, 128, 128, 128, 2>::bytes ? kLargeBf16 : kDefaultBf16;
}

// The configuration cfg asks for with dtype dt (bf16: is_bf16) at head
// width dh, 0 fields taking the default; f32 runs its one configuration
// whatever cfg says (the tile fields tune bf16).
BwdConfig resolve(const tw_attention_config *cfg, bool is_bf16, int64_t dh) {
	BwdConfig c = is_bf16 ? default_bf16(dh) : kDefaultF32;
	if (cfg && is_bf16) {
		if (cfg->bwd_rows) c.rows = cfg->bwd_rows;
		if (cfg->bwd_keys) c.keys = cfg->bwd_keys;
		if (cfg->bwd_stages) c.stages = cfg->bwd_stages;
		if (cfg->bwd_warp_keys) c.warp_keys = cfg->bwd_warp_keys;
		if (cfg->bwd_dq_cols) c.dq_cols = cfg->bwd_dq_cols;
	}
	return c;
}

// The split of the query tiles: cfg's, or the smallest that makes about two
// blocks per SM out of the key blocks (ceil(nk/keys)·g, a bound: sequences'
// partial tiles add a few), at most the query tiles a sequence can have and
// at most 16.
int split_of(const tw_attention_config *cfg, int64_t nq, int64_t nk, int64_t h, int64_t g, int keys) {
	if (cfg && cfg->bwd_split > 0) return cfg->bwd_split;
	const int64_t blocks = ceil_div<int64_t>(nk, keys) * g;
	int64_t s = blocks > 0 ? ceil_div<int64_t>(2 * (int64_t)sm_count(), blocks) : 1;
	const int64_t tiles = ceil_div<int64_t>(nq * (g > 0 ? h / g : 1), 64);
	s = s < tiles ? s : tiles;
	s = s < 16 ? s : 16;
	return s < 1 ? 1 : (int)s;
}

// Whether cfg's dQ mode is one the backward takes (0 or 1).
bool dq_mode_ok(const tw_attention_config *cfg) { return !cfg || cfg->bwd_dq_atomic == 0 || cfg->bwd_dq_atomic == 1; }

// Workspace regions (byte offsets), a function of the arguments of
// tw_attention_backward_workspace only, so that it and the launcher agree.
struct Workspace {
	size_t dl, ctr, dq, dkv, bytes;
	int64_t nqctr, nkctr; // counters past the ticket: per query tile, per key tile (times g)
	bool split;           // whether dkv is reserved
};

Workspace workspace_of(int64_t nq, int64_t nk, int64_t h, int64_t g, int64_t dh, const tw_attention_config *cfg) {
	auto up = [](size_t x) { return (x + 255) / 256 * 256; };
	Workspace w{};
	const int64_t rep = g > 0 ? h / g : 0;
	// Bounds for tiles of 64 (the smallest), with at most nq (nk) sequences
	// that have query rows (keys).
	w.nqctr = tiles_bound(nq * rep, 64, nq) * g;
	w.nkctr = tiles_bound(nk, 64, nk) * g;
	const int sb = split_of(cfg, nq, nk, h, g, resolve(cfg, true, dh).keys);
	const int sf = split_of(cfg, nq, nk, h, g, resolve(cfg, false, dh).keys);
	w.split = sb > 1 || sf > 1;
	w.dl = 0;
	w.ctr = up(w.dl + sizeof(float) * nq * h);
	w.dq = up(w.ctr + sizeof(int) * (1 + w.nqctr + w.nkctr));
	w.dkv = up(w.dq + sizeof(float) * nq * h * dh);
	w.bytes = w.dkv + (w.split ? sizeof(float) * 2 * nk * g * dh : 0);
	return w;
}

// The instantiation of entries I … of kBwdConfigs128 (bf16, D = 128) that c
// names, as dispatch below; cudaErrorInvalidValue if none.
template <int I, class F> cudaError_t dispatch128(BwdConfig c, F f) {
	constexpr int n = sizeof(kBwdConfigs128) / sizeof(kBwdConfigs128[0]);
	if constexpr (I == n) {
		return cudaErrorInvalidValue;
	} else {
		constexpr BwdConfig x = kBwdConfigs128[I];
		if (c == x)
			return f((bf16 *)nullptr, IntC<128>(), IntC<x.rows>(), IntC<x.keys>(), IntC<x.stages>(), IntC<x.warp_keys>(),
			         IntC<x.dq_cols>());
		return dispatch128<I + 1>(c, f);
	}
}

// Calls f(T*, D, BR, BC, STAGES, WK as integral_constants) for the storage
// type dt names, the padded head width D ∈ {32, 64, 128} that fits dh and
// the compiled configuration c names; cudaErrorInvalidValue if there is
// none.
template <class F> cudaError_t dispatch(tw_dtype dt, int64_t dh, BwdConfig c, F f) {
	if (dt == TW_F32) {
		if (!(c == kDefaultF32)) return cudaErrorInvalidValue;
		float *t = nullptr;
		if (dh <= 32) return f(t, IntC<32>(), IntC<64>(), IntC<64>(), IntC<1>(), IntC<16>(), IntC<32>());
		if (dh <= 64) return f(t, IntC<64>(), IntC<64>(), IntC<64>(), IntC<1>(), IntC<16>(), IntC<32>());
		return f(t, IntC<128>(), IntC<64>(), IntC<64>(), IntC<1>(), IntC<16>(), IntC<32>());
	}
	if (dt != TW_BF16) return cudaErrorInvalidValue;
	if (dh > 64) return dispatch128<0>(c, f);
	if (!(c == kDefaultBf16)) return cudaErrorInvalidValue;
	if (dh <= 32) return f((bf16 *)nullptr, IntC<32>(), IntC<64>(), IntC<128>(), IntC<2>(), IntC<16>(), IntC<32>());
	return f((bf16 *)nullptr, IntC<64>(), IntC<64>(), IntC<128>(), IntC<2>(), IntC<16>(), IntC<32>());
}

} // namespace

extern "C" const char *tw_attention_backward_check(const tw_attention_config *cfg, tw_dtype dt, int64_t dh) {
	if (cfg && (cfg->bwd_rows < 0 || cfg->bwd_keys < 0 || cfg->bwd_stages < 0 || cfg->bwd_split < 0 || cfg->bwd_warp_keys < 0 ||
	            cfg->bwd_dq_cols < 0))
		return "a backward field is negative";
	if (!dq_mode_ok(cfg)) return "the backward's dQ mode (bwd_dq_atomic) is neither 0 nor 1";
	if (dh <= 0) return "the head width is not positive";
	size_t bytes = 0;
	const cudaError_t e = dispatch(dt, dh, resolve(cfg, dt == TW_BF16, dh), [&](auto *t, auto width, auto br, auto bc, auto stages, auto wk, auto) {
		typedef std::remove_pointer_t<decltype(t)> T;
		bytes = BwdSmem<T, decltype(width)::value, decltype(br)::value, decltype(bc)::value, decltype(stages)::value,
		                decltype(wk)::value>::bytes;
		return cudaSuccess;
	});
	if (e != cudaSuccess) return "the backward's tiles are not compiled for this dtype and head width";
	const size_t optin = smem_optin();
	if (optin > 0 && bytes > optin) return "the backward's tiles need more shared memory than this device has";
	return nullptr;
}

extern "C" size_t tw_attention_backward_workspace(int64_t nq, int64_t nk, int64_t h, int64_t g, int64_t dh,
                                                   const tw_attention_config *cfg) {
	if (nq < 0 || nk < 0 || h < 0 || g < 1 || dh < 0) return 0;
	return workspace_of(nq, nk, h, g, dh, cfg).bytes;
}

extern "C" cudaError_t tw_attention_backward(void *dq, void *dk, void *dv, const void *dout, const void *out,
                                             const float *lse, const void *q, const void *k, const void *v,
                                             const int32_t *seqs, int64_t nseq, tw_dtype dt, int64_t nq, int64_t nk,
                                             int64_t h, int64_t g, int64_t dh, float scale, int noncausal,
                                             const tw_attention_config *cfg, void *workspace, cudaStream_t stream) {
	if (nseq < 0 || nq < 0 || nk < 0 || h < 0 || g < 0 || dh < 0) return cudaErrorInvalidValue;
	if (cfg && (cfg->bwd_rows < 0 || cfg->bwd_keys < 0 || cfg->bwd_stages < 0 || cfg->bwd_split < 0 || cfg->bwd_warp_keys < 0 ||
	            cfg->bwd_dq_cols < 0))
		return cudaErrorInvalidValue;
	if (!dq_mode_ok(cfg)) return cudaErrorInvalidValue;
	const BwdConfig c = resolve(cfg, dt == TW_BF16, dh);
	// The configuration is checked before anything else (even when there is
	// nothing to compute), so that a sweep learns at once what is not built.
	cudaError_t e = dispatch(dt, dh > 0 ? dh : 8, c, [](auto...) { return cudaSuccess; });
	if (e != cudaSuccess) return e;
	if (dh == 0 || (nq * h == 0 && nk * g == 0)) return cudaSuccess; // every gradient is empty
	if (!shapes_ok(nq, nk, h, g, dh, {dq, dk, dv, dout, out, q, k, v})) return cudaErrorInvalidValue;
	const int split = split_of(cfg, nq, nk, h, g, c.keys);
	const int64_t grid = tiles_bound(nk, c.keys, nseq) * g * split;
	if (grid > INT32_MAX || split > INT32_MAX / g) return cudaErrorInvalidValue;
	const Workspace w = workspace_of(nq, nk, h, g, dh, cfg);
	unsigned char *ws = (unsigned char *)workspace;
	float *Dl = (float *)(ws + w.dl);
	int *ctr = (int *)(ws + w.ctr);
	const float sl2 = scale_log2e(scale);
	return dispatch(dt, dh, c, [&](auto *t, auto width, auto br, auto bc, auto stages, auto wk, auto dqc) {
		typedef std::remove_pointer_t<decltype(t)> T;
		constexpr int D = decltype(width)::value, BR = decltype(br)::value, BC = decltype(bc)::value,
		              S = decltype(stages)::value, WK = decltype(wk)::value, DQC = decltype(dqc)::value;
		// dQ by atomics: bf16 only (f32 ignores the mode, as it does the tiles).
		const bool atomic = std::is_same<T, bf16>::value && cfg && cfg->bwd_dq_atomic == 1;
		float *dqacc = std::is_same<T, float>::value ? (float *)dq : (float *)(ws + w.dq);
		const int64_t items = nq * h + nk * g, nctr = 1 + w.nqctr + w.nkctr, ndqz = atomic ? nq * h * dh : 0;
		int64_t work = items * 32 > nctr ? items * 32 : nctr;
		work = work > ndqz / 4 ? work : ndqz / 4;
		LAUNCH(grid_for(work, 256), 256, 0, stream, attn_bwd_prep_kernel<T>)(
		    Dl, (T *)dq, (T *)dk, (T *)dv, (const T *)dout, (const T *)out, seqs, (int)nseq, nq, nk, (int)h, (int)g,
		    (int)dh, ctr, nctr, dqacc, ndqz);
		cudaError_t e = cudaGetLastError();
		if (e != cudaSuccess || nseq == 0 || grid == 0) return e;
		BwdArgs<T> a{};
		a.dq = (T *)dq, a.dk = (T *)dk, a.dv = (T *)dv;
		a.dqacc = dqacc, a.dq_atomic = atomic;
		a.dkvacc = split > 1 ? (float *)(ws + w.dkv) : nullptr;
		a.ticket = ctr, a.qctr = ctr + 1, a.kctr = ctr + 1 + w.nqctr;
		a.nqctr = w.nqctr, a.nkctr = w.nkctr, a.nkg = nk * g;
		a.dout = (const T *)dout, a.q = (const T *)q, a.k = (const T *)k, a.v = (const T *)v;
		a.lse = lse, a.Dl = Dl, a.seqs = seqs;
		a.nseq = (int)nseq, a.h = (int)h, a.g = (int)g, a.dh = (int)dh, a.split = split, a.noncausal = noncausal != 0;
		a.rep = FastDiv::of((int)(h / g));
		a.scale = scale, a.sl2 = sl2;
		const size_t bytes = BwdSmem<T, D, BR, BC, S, WK>::bytes;
		static_assert(BwdSmem<T, D, BR, BC, S, WK>::bytes <= 227 * 1024, "shared memory");
		if ((e = allow_smem(attn_bwd_kernel<T, D, BR, BC, S, WK, DQC>, bytes)) != cudaSuccess) return e;
		LAUNCH((unsigned)grid, 2 * BC, bytes, stream, attn_bwd_kernel<T, D, BR, BC, S, WK, DQC>)(a);
		if ((e = cudaGetLastError()) != cudaSuccess || !atomic) return e;
		return tw_cast(dq, TW_BF16, dqacc, TW_F32, nq * h * dh, stream); // dq = round(Σ scale·dS·K)
	});
}
