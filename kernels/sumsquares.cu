// sumsquares.cu — the deterministic sum of squares behind the global
// gradient norm.
//
// Contract: engine.Backend.SumSquares (engine/backend.go); the launcher's
// arguments are listed in kernels.h. What the kernels add to it: x is f32,
// bf16 or f16 (an integer dtype is cudaErrorInvalidValue); the workspace is
// tw_sum_squares_workspace(n) bytes, 8-byte aligned. n ≤ 0 launches nothing.
//
// Design.
//
// sum_squares: fixed parts of kSumPart = 2^14 elements (a quarter of the CPU
//   backend's 2^16-element chunks: four times the blocks, so the grid fills
//   a GPU and its last wave is short). sum_squares_parts_kernel: one block of
//   kSumBlock threads per part (grid-stride over parts). A part is split
//   into groups of W elements, W = 16 bytes / sizeof(element) (a 16-byte
//   load); thread t sums the squares of groups t, t + kSumBlock, … in f64,
//   each group's elements in index order, then block_sum_f64's fixed tree
//   gives the part's partial. The thread loads kSumUnroll groups before it
//   adds any (several loads in flight; the additions keep their order).
//   Where x is aligned, the iterations whose groups all lie inside the
//   part test no element against its end: in the sm_90 code 110
//   instructions per 32 bf16 elements, where each element's 64-bit test
//   had made it 537 (commit 4f938ec; the kernel measured 51% and 84% of the
//   copy bandwidth at 2k and 8k tokens on an H200, 2026-11-27, commit
//   9b1ace1). A
//   group is read with one vector load when x is 16-byte aligned and the
//   group lies wholly inside x, else element by element: the arithmetic is
//   the same, so alignment does not change the result either. The partials
//   go to the workspace ([nparts] f64); sum_squares_final_kernel (one block
//   of kFinalBlock threads) sums them: thread t takes partials t, t +
//   kFinalBlock, … in order, then the fixed tree, and thread 0 adds the
//   f32-rounded total to out[0]. With a single part the first kernel adds
//   its partial to out[0] itself (the same bits: the second kernel would
//   only add zeros). Every addition's order is fixed by n alone: the same
//   bits whatever the grid or the device. No atomics.
//
// Speed on a GPU is unmeasured (written without one).
#include "common.cuh"
#include "kernels.h"
#include "pack.cuh"
#include "vec.cuh"

static constexpr int kSumBlock = 256;        // threads per part
static constexpr int kSumUnroll = 4;         // groups a thread loads before it adds them
static constexpr int kFinalBlock = 1024;     // threads of the block summing the partials
static constexpr int64_t kSumPart = 1 << 14; // elements per part

// Sum over the 32 lanes of a full warp in f64 by xor butterflies: a fixed
// order, and every lane ends with the same bits.
static __device__ __forceinline__ double warp_sum_f64(double v) {
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

// Sum over a block of blockDim.x threads (a multiple of 32, at most 1024) in
// a fixed order: each warp's butterfly, then warp 0 adds the warp sums (in
// lanes 0…nwarps−1, zeros above) by the same butterfly. The result is valid
// in thread 0 (and in all of warp 0). scratch: 32 doubles of shared memory,
// free for reuse once the call returns. Every thread must call it.
static __device__ __forceinline__ double block_sum_f64(double v, double *scratch) {
	const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
	v = warp_sum_f64(v);
	if (lane == 0) scratch[warp] = v;
	__syncthreads();
	if (warp == 0) v = warp_sum_f64(lane < nwarps ? scratch[lane] : 0.0);
	__syncthreads();
	return v;
}

// ---- sum of squares -------------------------------------------------------------

// Partial sums of squares of the parts of x; with one part, adds it to
// out[0] instead of writing partials. aligned: x is aligned to its 16-byte
// Pack (parts start at multiples of 2^14 elements, so every group is).
template <class T>
__global__ void __launch_bounds__(kSumBlock)
	sum_squares_parts_kernel(double *__restrict__ partials, // [nparts], or nullptr with one part
	                         float *__restrict__ out,       // [1], written only with one part
	                         const T *__restrict__ x,       // [n]
	                         int64_t n, int64_t nparts, bool aligned) {
	constexpr int W = pack_width<T>(); // elements per group: one 16-byte load
	__shared__ double scratch[32];
	for (int64_t c = blockIdx.x; c < nparts; c += gridDim.x) { // uniform across the block
		const T *xc = x + c * kSumPart;                          // [len] this part
		const int64_t len = min(kSumPart, n - c * kSumPart);
		const int64_t groups = ceil_div<int64_t>(len, W);
		double acc = 0.0;
		int64_t g0 = threadIdx.x;
		// Whole iterations (every group loaded at once, no element tested
		// against len), then the rest: the same additions in the same order.
		if (aligned)
			for (; (g0 + (int64_t)(kSumUnroll - 1) * kSumBlock + 1) * W <= len; g0 += (int64_t)kSumBlock * kSumUnroll) {
				Held<T, W> h[kSumUnroll]; // as loaded: widened when added
				TW_UNROLL
				for (int u = 0; u < kSumUnroll; u++) h[u] = ld_held<W>(xc + (g0 + (int64_t)u * kSumBlock) * W);
				TW_UNROLL
				for (int u = 0; u < kSumUnroll; u++) {
					float f[W];
					widen(f, h[u]);
					for (int k = 0; k < W; k++) acc += (double)f[k] * f[k];
				}
			}
		for (; g0 < groups; g0 += (int64_t)kSumBlock * kSumUnroll) {
			float f[kSumUnroll][W];
			TW_UNROLL
			for (int u = 0; u < kSumUnroll; u++) {
				const int64_t g = g0 + (int64_t)u * kSumBlock;
				if (aligned && (g + 1) * W <= len) {
					load_pack(f[u], xc + g * W);
				} else {
					for (int k = 0; k < W; k++) {
						const int64_t i = g * W + k;
						f[u][k] = i < len ? to_float(xc[i]) : 0.0f;
					}
				}
			}
			TW_UNROLL
			for (int u = 0; u < kSumUnroll; u++) {
				const int64_t g = g0 + (int64_t)u * kSumBlock;
				for (int k = 0; k < W; k++)
					if (g * W + k < len) acc += (double)f[u][k] * f[u][k];
			}
		}
		acc = block_sum_f64(acc, scratch);
		if (threadIdx.x == 0) {
			if (nparts == 1) out[0] += (float)acc;
			else partials[c] = acc;
		}
	}
}

__global__ void __launch_bounds__(kFinalBlock)
	sum_squares_final_kernel(float *__restrict__ out,             // [1]
	                         const double *__restrict__ partials, // [nparts]
	                         int64_t nparts) {
	__shared__ double scratch[32];
	double acc = 0.0;
	for (int64_t c = threadIdx.x; c < nparts; c += kFinalBlock) acc += partials[c];
	acc = block_sum_f64(acc, scratch);
	if (threadIdx.x == 0) out[0] += (float)acc;
}

static int64_t sum_squares_parts(int64_t n) { return n <= 0 ? 0 : (n + kSumPart - 1) / kSumPart; }

extern "C" size_t tw_sum_squares_workspace(int64_t n) {
	const int64_t c = sum_squares_parts(n);
	return c > 1 ? (size_t)c * sizeof(double) : 0;
}

template <class T>
static cudaError_t sum_squares(float *out, const T *x, int64_t n, double *partials, cudaStream_t stream) {
	const int64_t nparts = sum_squares_parts(n);
	const bool aligned = pack_aligned<T, pack_width<T>()>(x);
	const unsigned grid = (unsigned)(nparts < 65535 ? nparts : 65535);
	LAUNCH(grid, kSumBlock, 0, stream, sum_squares_parts_kernel<T>)(nparts > 1 ? partials : nullptr, out, x, n,
	                                                                 nparts, aligned);
	cudaError_t err = cudaGetLastError();
	if (err != cudaSuccess || nparts == 1) return err;
	LAUNCH(1, kFinalBlock, 0, stream, sum_squares_final_kernel)(out, partials, nparts);
	return cudaGetLastError();
}

extern "C" cudaError_t tw_sum_squares(float *out, const void *x, tw_dtype dt, int64_t n, void *workspace,
                                      cudaStream_t stream) {
	return dispatch_float(dt, [&](auto *t) {
		using T = elem_t<decltype(t)>;
		if (n <= 0) return cudaSuccess;
		double *partials = (double *)workspace; // [nparts] when nparts > 1
		return sum_squares(out, (const T *)x, n, partials, stream);
	});
}
