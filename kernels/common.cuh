// common.cuh — included first by every kernel file: the launch macro and the
// device helpers kernels share. Compiles with nvcc (real GPU) and with g++
// against kernels/emu (the emulator's include directory first on the path).
//
// LAUNCH(grid, block, smem, stream, kernel)(args...)
//   launches kernel: `kernel<<<grid, block, smem, stream>>>(args...)` under
//   nvcc, the emulator's launch under g++. The kernel comes last, so a
//   template kernel needs no parentheses: LAUNCH(g, b, 0, s, gemm<64, 128>)(x).
//   grid and block are dim3 or integers; a dim3 with several extents must be
//   written dim3(x, y) (a braced {x, y} would split at its comma). The
//   launch's error, if any, is returned by cudaGetLastError() afterwards.
//   Each launch is counted on the calling host thread (tw_launch_count in
//   kernels.h), the macro being the one place kernels are launched from; it
//   expands to an expression, so it may stand wherever a kernel call may.
//
// Dynamic shared memory: declare it as
//   extern __shared__ unsigned char smem[];
// and cast (the emulator backs exactly this name). More than 48 KiB needs
// cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, n)
// first, on a GPU and in the emulator alike.
//
// Barriers must be reached by every thread of the block: do not return early
// from a kernel that has a __syncthreads after the return (guard the work
// instead); the emulator aborts on it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <atomic>

// Counts one launch on the calling host thread (launch.cu).
extern "C" void tw_count_launch(void);

#ifdef __CUDACC__
#define LAUNCH(grid, block, smem, stream, ...) \
	tw_count_launch(), __VA_ARGS__<<<(grid), (block), (smem), (stream)>>>
#else
#define LAUNCH(grid, block, smem, stream, ...) \
	tw_count_launch(), TW_EMU_LAUNCH(grid, block, smem, stream, __VA_ARGS__)
#endif

// TW_UNROLL and TW_UNROLL_BY(n) unroll the loop that follows (fully, or n
// times); nvcc and GCC (the emulator build) spell the pragma differently.
#define TW_PRAGMA(x) _Pragma(#x)
#ifdef __CUDACC__
#define TW_UNROLL TW_PRAGMA(unroll)
#define TW_UNROLL_BY(n) TW_PRAGMA(unroll n)
#else
#define TW_UNROLL TW_PRAGMA(GCC unroll 16)
#define TW_UNROLL_BY(n) TW_PRAGMA(GCC unroll n)
#endif

// TW_SITE declares, as a device helper's last parameters, its caller's file
// and line under the emulator, which names them in its messages and counts
// memory traffic by call site (kernels/emu/include/tw_emu_banks.h); under
// nvcc nothing. TW_SITE_MORE is the same after other parameters; TW_AT and
// TW_AT_MORE pass them on to another helper.
#ifdef __CUDACC__
#define TW_SITE
#define TW_SITE_MORE
#define TW_AT
#define TW_AT_MORE
#else
#define TW_SITE const char *file = __builtin_FILE(), int line = __builtin_LINE()
#define TW_SITE_MORE , TW_SITE
#define TW_AT file, line
#define TW_AT_MORE , file, line
#endif

// The current device's SM count, asked of the runtime once per device (the
// emulator answers 132); 1 when the query fails (no device: the launch that
// follows fails by itself). Grids and the default splits follow it.
inline int sm_count() {
	static std::atomic<int> cache[64];
	int dev = 0;
	if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return 1;
	int v = cache[dev].load(std::memory_order_relaxed);
	if (v > 0) return v;
	if (cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || v < 1) return 1;
	cache[dev].store(v, std::memory_order_relaxed);
	return v;
}

// The shared memory a block of the current device may opt in to, in bytes
// (cached per device like sm_count; 0 if the runtime cannot tell).
inline size_t smem_optin() {
	static std::atomic<int> cache[64];
	int dev = 0;
	if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return 0;
	int v = cache[dev].load(std::memory_order_relaxed);
	if (v > 0) return (size_t)v;
	if (cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess || v < 1) return 0;
	cache[dev].store(v, std::memory_order_relaxed);
	return (size_t)v;
}

// ceil(a / b) for positive integers.
template <class T> __host__ __device__ __forceinline__ T ceil_div(T a, T b) { return (a + b - 1) / b; }

// Blocks for a grid-stride loop over n elements: enough to fill a GPU,
// capped so the emulator does not pay for many tiny blocks.
__host__ __forceinline__ unsigned grid_for(int64_t n, int block, unsigned cap = 1024) {
	int64_t g = ceil_div<int64_t>(n, block);
	return (unsigned)(g < 1 ? 1 : g > cap ? cap : g);
}

// Element conversions between the storage types kernels use and float.
__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
template <class T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16(x); }
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half(x); }

// 2^x: the SFU instruction (flush-to-zero; 2^-inf = 0) on a GPU, exp2f here.
// For softmax exponentials (attention's both directions, the loss head's
// log-sum-exp): exp2f would add a range check and a rescale around each for
// results below 2^-126.
__device__ __forceinline__ float fast_exp2(float x) {
#ifdef __CUDA_ARCH__
	float y;
	asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
	return y;
#else
	return exp2f(x);
#endif
}

// 1/x correctly rounded, for x in [1, 2^126) only: the SFU's approximate
// reciprocal and one FMA correction. That is __frcp_rn's own fast path in
// its sm_90 code, without the test it makes of every input for the values
// it does not take (zero, subnormal, ≥ 2^126, ∞, NaN), which branch to an
// out-of-line slow path: a caller tests its range once for many values
// (sigmoid_pack, below). The emulator's self-test (test_rounding.cu)
// compares it with __frcp_rn over all of [1, 2^126) on a GPU.
__device__ __forceinline__ float rcp_fast(float x) {
#ifdef __CUDA_ARCH__
	float r;
	asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(x));
	return __fmaf_rn(r, __fmaf_rn(-x, r, 1.0f), r);
#else
	return 1.0f / x;
#endif
}

// s = sigmoid(g) = 1/(1 + exp(−g)) for a pack of N, the reciprocal
// correctly rounded: rcp_fast when every 1 + exp(−g) of the
// pack is below 2^126 (g > −87.3 and no NaN), else __frcp_rn for the pack.
// One test a pack: __frcp_rn tests each value and branches around an
// out-of-line slow path (in the sm_90 code of the bf16 SwiGLU, about 6 of
// the 34 instructions an element took).
template <int N> __device__ __forceinline__ void sigmoid_pack(float (&s)[N], const float (&g)[N]) {
	bool fast = true;
	for (int e = 0; e < N; e++) {
		s[e] = 1.0f + expf(-g[e]);
		fast &= s[e] < 0x1p126f;
	}
	if (fast)
		for (int e = 0; e < N; e++) s[e] = rcp_fast(s[e]);
	else
		for (int e = 0; e < N; e++) s[e] = __frcp_rn(s[e]);
}

// max(a, b), NaN when either is (PTX max.NaN, sm_80 on): one instruction
// where fmaxf, which ignores a NaN, would need a separate NaN test.
__device__ __forceinline__ float fmax_nan(float a, float b) {
#ifdef __CUDA_ARCH__
	float y;
	asm("max.NaN.f32 %0, %1, %2;\n" : "=f"(y) : "f"(a), "f"(b));
	return y;
#else
	return a != a || b != b ? __builtin_nanf("") : fmaxf(a, b);
#endif
}

// Sum and max over the 32 lanes of a full warp; every lane gets the result.
__device__ __forceinline__ float warp_sum(float v) {
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}
__device__ __forceinline__ float warp_max(float v) {
	for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

// Sum and max over a block whose size is a multiple of 32 (at most 1024);
// every thread gets the result. scratch: 32 floats of shared memory, free for
// reuse once the call returns. All threads of the block must call it.
__device__ __forceinline__ float block_sum(float v, float *scratch) {
	const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
	v = warp_sum(v);
	if (lane == 0) scratch[warp] = v;
	__syncthreads();
	v = lane < nwarps ? scratch[lane] : 0.0f;
	v = warp_sum(v);
	__syncthreads();
	return v;
}
__device__ __forceinline__ float block_max(float v, float *scratch) {
	const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
	v = warp_max(v);
	if (lane == 0) scratch[warp] = v;
	__syncthreads();
	v = lane < nwarps ? scratch[lane] : -INFINITY;
	v = warp_max(v);
	__syncthreads();
	return v;
}
