// tw_emu.h — CUDA C++ with CPU meaning: the device side of the kernel
// emulator. The stand-in headers cuda_runtime.h, cuda_bf16.h, cuda_fp16.h
// (and mma.h, for nvcuda::wmma) include it; .cu files compiled with g++ get
// it instead of the CUDA toolkit.
//
// Contract:
//  - A launch runs every block of its grid before it returns. Blocks are
//    spread over a persistent pool of OS threads; a block runs start to end
//    on one OS thread, its threads being fibers (one 64 KiB stack each) that
//    switch only at barriers and warp collectives. Kernels thus see CUDA's
//    guarantees and nothing more: no ordering between blocks, and between the
//    threads of a block only what barriers and collectives impose.
//  - threadIdx, blockIdx, blockDim, gridDim are per-OS-thread variables the
//    scheduler sets before it resumes a fiber. __shared__ is thread_local:
//    static shared variables are per OS thread, hence per running block.
//    Dynamic shared memory is the one symbol `extern __shared__ unsigned char
//    smem[];` (cast it to the type you need); it is filled with 0xFF bytes
//    (NaN in f32/bf16/f16) before each block.
//  - __syncthreads, warp shuffles, votes, __syncwarp and the wmma *_sync
//    calls are out-of-line calls into the runtime (the compiler cannot keep
//    shared values in registers across them). They check what CUDA leaves
//    undefined and abort with a message naming the call site: a
//    __syncthreads that not every thread of the block reaches (an early
//    return, or threads at different barriers); a warp mask that leaves out
//    the caller, names lanes that do not exist, or differs between lanes; a
//    shuffle that reads a lane outside the mask.
//  - Memory accesses keep CUDA's alignment rules: the emulated code is built
//    with UBSan's alignment check (kernels/emu/CMakeLists.txt), so a load
//    or store below the accessed type's alignment ends the process, naming
//    the kernel's file:line, as a GPU faults; the vector and 16-bit float
//    types carry CUDA's alignments.
//  - Atomics are real atomics (blocks run concurrently); fences are fences.
//  - Math intrinsics compute the precise function (__expf is expf). Plain
//    a*b+c may be contracted into an FMA, as nvcc contracts it (the emulated
//    code is built with -mfma -ffp-contract=fast); the explicitly rounded
//    __fmul_rn, __fadd_rn, __fsub_rn (and __dmul_rn, __dadd_rn, __dsub_rn)
//    never are.
//  - LAUNCH (kernels/common.cuh) expands to tw_emu::make_launch(...)(args);
//    a launch with a bad configuration fails as CUDA's does (the error is
//    returned by cudaGetLastError) and is also reported on stderr.
//
//  - sm_80's asynchronous copies (cp.async: issue, commit, wait) and the
//    shared state space are modelled in tw_emu_sm80.h, mma.sync m16n8k16
//    and ldmatrix in tw_emu_warp_mma.h (with the PTX ISA's fragment
//    layouts); kernels reach them through kernels/sm80.cuh, so that the
//    emulator runs the code nvcc compiles for sm_80 and later.
//
// Not emulated: __CUDA_ARCH__ is undefined, so other inline PTX must sit
// behind `#ifdef __CUDA_ARCH__` with a portable #else; register and
// shared-memory limits (see nvcc -Xptxas -v); spin-waits on another thread
// of the same block unless the loop calls __nanosleep (a yield here);
// cooperative groups, dynamic parallelism, textures, the TMA and mbarriers.
#ifndef TW_EMU_H
#define TW_EMU_H

#ifndef __cplusplus
#error "tw_emu.h is C++; plain C code includes cuda_runtime_api.h"
#endif

// Standard headers first: libstdc++ 12 uses __noinline__ as an attribute
// name, so <memory> must be seen before the macro below exists; glibc
// declares __expf and friends, so <math.h> must be seen before they become
// macros.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmath>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cuda_runtime_api.h"

// ---- Keywords ---------------------------------------------------------------

#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __shared__ thread_local
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __grid_constant__
// __restrict__ is already a GCC keyword.

// ---- Vector types -----------------------------------------------------------
// Each with the alignment CUDA's vector_types.h gives it (__align__ or
// __builtin_align__): a GPU faults on an access below it, and the
// emulator's alignment check (kernels/emu/CMakeLists.txt) does the same.
// The 3-element types have their element's alignment, as in CUDA.
// tests/test_alignment.cu checks every one against CUDA's values.

#define TW_EMU_VEC2(T, name, align)                                                  \
	struct __attribute__((aligned(align))) name { T x, y; };                           \
	inline name make_##name(T x, T y) { return name{x, y}; }
#define TW_EMU_VEC3(T, name)                                                         \
	struct name { T x, y, z; };                                                        \
	inline name make_##name(T x, T y, T z) { return name{x, y, z}; }
#define TW_EMU_VEC4(T, name, align)                                                  \
	struct __attribute__((aligned(align))) name { T x, y, z, w; };                     \
	inline name make_##name(T x, T y, T z, T w) { return name{x, y, z, w}; }

TW_EMU_VEC2(float, float2, 8)
TW_EMU_VEC3(float, float3)
TW_EMU_VEC4(float, float4, 16)
TW_EMU_VEC2(double, double2, 16)
TW_EMU_VEC2(int, int2, 8)
TW_EMU_VEC3(int, int3)
TW_EMU_VEC4(int, int4, 16)
TW_EMU_VEC2(unsigned int, uint2, 8)
TW_EMU_VEC3(unsigned int, uint3)
TW_EMU_VEC4(unsigned int, uint4, 16)
TW_EMU_VEC2(short, short2, 4)
TW_EMU_VEC4(short, short4, 8)
TW_EMU_VEC2(unsigned short, ushort2, 4)
TW_EMU_VEC4(unsigned short, ushort4, 8)
TW_EMU_VEC2(signed char, char2, 2)
TW_EMU_VEC4(signed char, char4, 4)
TW_EMU_VEC2(unsigned char, uchar2, 2)
TW_EMU_VEC4(unsigned char, uchar4, 4)
TW_EMU_VEC2(long long, longlong2, 16)
TW_EMU_VEC2(unsigned long long, ulonglong2, 16)
#undef TW_EMU_VEC2
#undef TW_EMU_VEC3
#undef TW_EMU_VEC4

struct dim3 {
	unsigned int x, y, z;
	constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
	constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
	constexpr operator uint3() const { return uint3{x, y, z}; }
};

// ---- Built-in variables -----------------------------------------------------
// Per OS thread; the scheduler stores the running fiber's values before it
// resumes it. A fiber never moves to another OS thread.

inline thread_local uint3 threadIdx{};
inline thread_local uint3 blockIdx{};
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;
constexpr int warpSize = 32;

#include "tw_emu_fp16.h"

// ---- Runtime entry points (kernels/emu/runtime.cpp) ------------------------

namespace tw_emu {

struct LaunchConfig {
	dim3 grid, block;
	size_t smem;          // dynamic shared memory bytes
	cudaStream_t stream;
	const char *name;     // the kernel expression as written at the launch
	const void *func;     // the kernel, for cudaFuncSetAttribute's limits
	// Copy and release a launch's context (its arguments), so that a launch
	// on a capturing stream can be kept in the graph and replayed later.
	void *(*clone)(const void *ctx);
	void (*drop)(void *ctx);
};
// Runs body(ctx) once per thread of every block; returns the launch error
// (also stored for cudaGetLastError). On a stream that is capturing, the
// launch is checked and kept in the graph (with a clone of ctx) instead.
cudaError_t launch(const LaunchConfig &cfg, void (*body)(void *), void *ctx);

enum BarrierOp { kSyncthreads, kSyncthreadsCount, kSyncthreadsAnd, kSyncthreadsOr };
int block_barrier(int op, int pred, const char *file, int line);

enum WarpOp {
	kSyncwarp, kShfl, kBallot, kAny, kAll,
	kReduceAdd, kReduceMin, kReduceMax, // 'variant' 1: signed
	kWarpCall,
};
enum ShflVariant { kShflIdx, kShflUp, kShflDown, kShflXor };
// A warp collective: the calling lane contributes value (and, for shuffles,
// its variant/arg/width); returns its result once every lane in mask called
// the same collective with the same mask.
uint64_t warp_op(int op, unsigned mask, uint64_t value, int variant, int arg, int width, const char *file, int line);
// A collective of all 32 lanes of a warp: once every lane has arrived, fn
// runs once, with each lane's arg (index = lane), then every lane continues.
void warp_call(void (*fn)(void *const *lane_args), void *arg, const char *what, const char *file, int line);
// The lanes of the caller's warp that call __activemask at the same call
// site, once none of the warp's lanes can run any further.
unsigned active_mask(const char *file, int line);
void yield();
long long clock_ns();
// Reports a kernel bug (with the running kernel, block and thread) and aborts.
[[noreturn]] void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

inline int lane_id() {
	return (int)((threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & 31u);
}

template <class T> inline T shfl(unsigned mask, T v, int variant, int arg, int width, const char *file, int line) {
	static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 8, "shuffles move types of at most 8 bytes");
	uint64_t bits = 0;
	memcpy(&bits, &v, sizeof(T));
	bits = warp_op(kShfl, mask, bits, variant, arg, width, file, line);
	memcpy(&v, &bits, sizeof(T));
	return v;
}

} // namespace tw_emu

// ---- Synchronisation and warp collectives ----------------------------------

inline void __syncthreads(const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
	tw_emu::block_barrier(tw_emu::kSyncthreads, 0, file, line);
}
inline int __syncthreads_count(int pred, const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
	return tw_emu::block_barrier(tw_emu::kSyncthreadsCount, pred, file, line);
}
inline int __syncthreads_and(int pred, const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
	return tw_emu::block_barrier(tw_emu::kSyncthreadsAnd, pred, file, line);
}
inline int __syncthreads_or(int pred, const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
	return tw_emu::block_barrier(tw_emu::kSyncthreadsOr, pred, file, line);
}
inline void __syncwarp(unsigned mask = 0xffffffffu, const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
	tw_emu::warp_op(tw_emu::kSyncwarp, mask, 0, 0, 0, 0, file, line);
}

template <class T>
inline T __shfl_sync(unsigned mask, T var, int srcLane, int width = warpSize, const char *file = __builtin_FILE(),
                     int line = __builtin_LINE()) {
	return tw_emu::shfl(mask, var, tw_emu::kShflIdx, srcLane, width, file, line);
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize, const char *file = __builtin_FILE(),
                        int line = __builtin_LINE()) {
	return tw_emu::shfl(mask, var, tw_emu::kShflUp, (int)delta, width, file, line);
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                          const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
	return tw_emu::shfl(mask, var, tw_emu::kShflDown, (int)delta, width, file, line);
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = warpSize, const char *file = __builtin_FILE(),
                         int line = __builtin_LINE()) {
	return tw_emu::shfl(mask, var, tw_emu::kShflXor, laneMask, width, file, line);
}

inline unsigned __ballot_sync(unsigned mask, int pred, const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
	return (unsigned)tw_emu::warp_op(tw_emu::kBallot, mask, pred != 0, 0, 0, 0, file, line);
}
inline int __any_sync(unsigned mask, int pred, const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
	return (int)tw_emu::warp_op(tw_emu::kAny, mask, pred != 0, 0, 0, 0, file, line);
}
inline int __all_sync(unsigned mask, int pred, const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
	return (int)tw_emu::warp_op(tw_emu::kAll, mask, pred != 0, 0, 0, 0, file, line);
}
// Not a synchronisation in CUDA, but the emulator must let the other lanes
// catch up to tell which are active: the result is the lanes that reach this
// same call (lanes that returned, or wait elsewhere, are inactive).
inline unsigned __activemask(const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
	return tw_emu::active_mask(file, line);
}

#define TW_EMU_REDUCE(name, op, T, is_signed)                                                                     \
	inline T name(unsigned mask, T v, const char *file = __builtin_FILE(), int line = __builtin_LINE()) {          \
		return (T)tw_emu::warp_op(op, mask, (uint64_t)(uint32_t)v, is_signed, 0, 0, file, line);                     \
	}
TW_EMU_REDUCE(__reduce_add_sync, tw_emu::kReduceAdd, unsigned, 0)
TW_EMU_REDUCE(__reduce_add_sync, tw_emu::kReduceAdd, int, 1)
TW_EMU_REDUCE(__reduce_min_sync, tw_emu::kReduceMin, unsigned, 0)
TW_EMU_REDUCE(__reduce_min_sync, tw_emu::kReduceMin, int, 1)
TW_EMU_REDUCE(__reduce_max_sync, tw_emu::kReduceMax, unsigned, 0)
TW_EMU_REDUCE(__reduce_max_sync, tw_emu::kReduceMax, int, 1)
#undef TW_EMU_REDUCE

inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
// A yield point: a spin-wait on another thread of the block works only if
// its loop calls __nanosleep.
inline void __nanosleep(unsigned) { tw_emu::yield(); }
inline long long clock64() { return tw_emu::clock_ns(); }

// ---- Atomics (relaxed, as CUDA's) --------------------------------------------

#define TW_EMU_ATOMIC_INT(T)                                                                             \
	inline T atomicAdd(T *a, T v) { return __atomic_fetch_add(a, v, __ATOMIC_RELAXED); }                  \
	inline T atomicSub(T *a, T v) { return __atomic_fetch_sub(a, v, __ATOMIC_RELAXED); }                  \
	inline T atomicAnd(T *a, T v) { return __atomic_fetch_and(a, v, __ATOMIC_RELAXED); }                  \
	inline T atomicOr(T *a, T v) { return __atomic_fetch_or(a, v, __ATOMIC_RELAXED); }                    \
	inline T atomicXor(T *a, T v) { return __atomic_fetch_xor(a, v, __ATOMIC_RELAXED); }                  \
	inline T atomicExch(T *a, T v) { return __atomic_exchange_n(a, v, __ATOMIC_RELAXED); }                \
	inline T atomicCAS(T *a, T expected, T v) {                                                          \
		__atomic_compare_exchange_n(a, &expected, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);            \
		return expected;                                                                                   \
	}                                                                                                    \
	inline T atomicMax(T *a, T v) {                                                                      \
		T old = __atomic_load_n(a, __ATOMIC_RELAXED);                                                      \
		while (old < v && !__atomic_compare_exchange_n(a, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) \
			;                                                                                                \
		return old;                                                                                        \
	}                                                                                                    \
	inline T atomicMin(T *a, T v) {                                                                      \
		T old = __atomic_load_n(a, __ATOMIC_RELAXED);                                                      \
		while (old > v && !__atomic_compare_exchange_n(a, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) \
			;                                                                                                \
		return old;                                                                                        \
	}
TW_EMU_ATOMIC_INT(int)
TW_EMU_ATOMIC_INT(unsigned int)
TW_EMU_ATOMIC_INT(long long)
TW_EMU_ATOMIC_INT(unsigned long long)
#undef TW_EMU_ATOMIC_INT

namespace tw_emu {
// Atomic read-modify-write of a value stored in the bits of U, through a
// compare-and-swap loop; f maps the old value to the new one.
template <class T, class U, class F> inline T atomic_update(T *addr, F f) {
	static_assert(sizeof(T) == sizeof(U), "bit sizes");
	U *p = reinterpret_cast<U *>(addr);
	U old = __atomic_load_n(p, __ATOMIC_RELAXED);
	for (;;) {
		T o, n;
		memcpy(&o, &old, sizeof(T));
		n = f(o);
		U nb;
		memcpy(&nb, &n, sizeof(T));
		if (__atomic_compare_exchange_n(p, &old, nb, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return o;
	}
}
} // namespace tw_emu

inline float atomicAdd(float *a, float v) {
	return tw_emu::atomic_update<float, uint32_t>(a, [v](float o) { return o + v; });
}
inline double atomicAdd(double *a, double v) {
	return tw_emu::atomic_update<double, uint64_t>(a, [v](double o) { return o + v; });
}
inline __nv_bfloat16 atomicAdd(__nv_bfloat16 *a, __nv_bfloat16 v) {
	return tw_emu::atomic_update<__nv_bfloat16, uint16_t>(a, [v](__nv_bfloat16 o) { return o + v; });
}
inline __half atomicAdd(__half *a, __half v) {
	return tw_emu::atomic_update<__half, uint16_t>(a, [v](__half o) { return o + v; });
}
inline float atomicExch(float *a, float v) {
	return tw_emu::atomic_update<float, uint32_t>(a, [v](float) { return v; });
}

// ---- Math and bit intrinsics --------------------------------------------------

// glibc declares these names itself; map them to the precise functions.
#define __expf(x) expf(x)
#define __exp10f(x) exp10f(x)
#define __logf(x) logf(x)
#define __log2f(x) log2f(x)
#define __log10f(x) log10f(x)
#define __sinf(x) sinf(x)
#define __cosf(x) cosf(x)
#define __tanf(x) tanf(x)
#define __powf(x, y) powf(x, y)
#define __sincosf(x, s, c) sincosf(x, s, c)

inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
// Explicitly rounded arithmetic: nvcc never contracts these into an FMA,
// nor their operands or results into a neighbouring one, and neither may
// g++, which builds the emulated kernels with -ffp-contract=fast (as nvcc
// contracts plain a*b+c). tw_emu::rounded hides a value from the optimiser
// (an empty asm that claims to change it, in an SSE register): a product
// passed through it is no longer a product that a later addition could
// fuse, and a sum's operands are no longer products it could absorb. (A
// plain a*b added to the result of __fadd_rn may still be fused, as nvcc
// may fuse it.)
namespace tw_emu {
template <class T> inline T rounded(T x) {
	asm("" : "+x"(x));
	return x;
}
} // namespace tw_emu
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __fadd_rn(float a, float b) { return tw_emu::rounded(a) + tw_emu::rounded(b); }
inline float __fsub_rn(float a, float b) { return tw_emu::rounded(a) - tw_emu::rounded(b); }
inline float __fmul_rn(float a, float b) { return tw_emu::rounded(a * b); }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
inline double __dadd_rn(double a, double b) { return tw_emu::rounded(a) + tw_emu::rounded(b); }
inline double __dsub_rn(double a, double b) { return tw_emu::rounded(a) - tw_emu::rounded(b); }
inline double __dmul_rn(double a, double b) { return tw_emu::rounded(a * b); }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __drcp_rn(double x) { return 1.0 / x; }
inline double __dsqrt_rn(double x) { return sqrt(x); }
inline float __saturatef(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; } // NaN -> 0
inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
inline int __float2int_rz(float x) { return (int)x; }
inline unsigned __float2uint_rn(float x) { return (unsigned)nearbyintf(x); }
inline float __int2float_rn(int x) { return (float)x; }
inline float __uint2float_rn(unsigned x) { return (float)x; }
inline float __int_as_float(int x) { float f; memcpy(&f, &x, 4); return f; }
inline int __float_as_int(float f) { int x; memcpy(&x, &f, 4); return x; }
inline float __uint_as_float(unsigned x) { float f; memcpy(&f, &x, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned x; memcpy(&x, &f, 4); return x; }
inline double __longlong_as_double(long long x) { double d; memcpy(&d, &x, 8); return d; }
inline long long __double_as_longlong(double d) { long long x; memcpy(&x, &d, 8); return x; }

inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
	x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
	x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
	x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
	return __builtin_bswap32(x);
}

// CUDA's overloaded min/max for device code.
#define TW_EMU_MINMAX(T)                                  \
	inline T min(T a, T b) { return b < a ? b : a; }        \
	inline T max(T a, T b) { return a < b ? b : a; }
TW_EMU_MINMAX(int)
TW_EMU_MINMAX(unsigned int)
TW_EMU_MINMAX(long)
TW_EMU_MINMAX(unsigned long)
TW_EMU_MINMAX(long long)
TW_EMU_MINMAX(unsigned long long)
#undef TW_EMU_MINMAX
// Mixed signedness compares as unsigned, as CUDA's overloads do.
#define TW_EMU_MINMAX_MIXED(S, U)                                                 \
	inline U min(S a, U b) { return min((U)a, b); }                                 \
	inline U min(U a, S b) { return min(a, (U)b); }                                 \
	inline U max(S a, U b) { return max((U)a, b); }                                 \
	inline U max(U a, S b) { return max(a, (U)b); }
TW_EMU_MINMAX_MIXED(int, unsigned int)
TW_EMU_MINMAX_MIXED(long, unsigned long)
TW_EMU_MINMAX_MIXED(long long, unsigned long long)
#undef TW_EMU_MINMAX_MIXED
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }

// Cache-hinted loads and stores are plain ones.
template <class T> inline T __ldg(const T *p) { return *p; }
template <class T> inline T __ldcg(const T *p) { return *p; }
template <class T> inline T __ldcs(const T *p) { return *p; }
template <class T> inline T __ldlu(const T *p) { return *p; }
template <class T> inline void __stcg(T *p, T v) { *p = v; }
template <class T> inline void __stcs(T *p, T v) { *p = v; }
template <class T> inline void __stwb(T *p, T v) { *p = v; }

// ---- Host API templates -----------------------------------------------------

template <class T> inline cudaError_t cudaFuncSetAttribute(T *entry, cudaFuncAttribute attr, int value) {
	return cudaFuncSetAttribute(reinterpret_cast<const void *>(entry), attr, value);
}
template <class T>
inline cudaError_t cudaMemcpyToSymbol(const T &symbol, const void *src, size_t count, size_t offset = 0,
                                      cudaMemcpyKind = cudaMemcpyHostToDevice) {
	memcpy(reinterpret_cast<char *>(const_cast<T *>(&symbol)) + offset, src, count);
	return cudaSuccess;
}
template <class T>
inline cudaError_t cudaMemcpyFromSymbol(void *dst, const T &symbol, size_t count, size_t offset = 0,
                                        cudaMemcpyKind = cudaMemcpyDeviceToHost) {
	memcpy(dst, reinterpret_cast<const char *>(&symbol) + offset, count);
	return cudaSuccess;
}

#include "tw_emu_banks.h"
#include "tw_emu_sm80.h"
#include "tw_emu_warp_mma.h"

// ---- Launch -----------------------------------------------------------------

namespace tw_emu {

template <class... P> struct Launch {
	LaunchConfig cfg;
	void (*kernel)(P...);

	// Arguments are converted to the kernel's parameter types and copied
	// once, as CUDA copies them into the launch's parameter buffer.
	template <class... A> void operator()(A &&...a) const {
		static_assert(sizeof...(A) == sizeof...(P), "LAUNCH: wrong number of kernel arguments");
		using Args = std::tuple<std::decay_t<P>...>;
		struct Ctx {
			void (*k)(P...);
			Args args;
		} ctx{kernel, Args(std::forward<A>(a)...)};
		LaunchConfig c = cfg;
		c.clone = [](const void *p) -> void * { return new Ctx(*static_cast<const Ctx *>(p)); };
		c.drop = [](void *p) { delete static_cast<Ctx *>(p); };
		launch(c,
		       [](void *p) {
			       Ctx *c = static_cast<Ctx *>(p);
			       async::thread_begin();
			       std::apply(c->k, c->args);
		       },
		       &ctx);
	}
};

template <class... P>
inline Launch<P...> make_launch(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, const char *name,
                                void (*kernel)(P...)) {
	return Launch<P...>{
		LaunchConfig{grid, block, smem, stream, name, reinterpret_cast<const void *>(kernel), nullptr, nullptr}, kernel};
}

} // namespace tw_emu

// The kernel comes last so that template arguments with commas need no
// parentheses: TW_EMU_LAUNCH(grid, block, smem, stream, k<64, 128>)(args...).
#define TW_EMU_LAUNCH(grid, block, smem, stream, ...) \
	::tw_emu::make_launch((grid), (block), (smem), (stream), #__VA_ARGS__, __VA_ARGS__)

#endif // TW_EMU_H
