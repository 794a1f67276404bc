// vecio.cuh — splitting a run of elements into a misaligned head, a body of
// 16-byte packs and a tail, for the kernels that read rows of any length at
// any element offset with vector loads (logsoftmax), and an unrolling hint
// both compilers read (embedding, logsoftmax, sumsquares, sample). Include
// after pack.cuh.
//
// A run x[0, len) of T splits as
//   head: x[0, h), h < V elements up to the first 16-byte boundary (0 when
//         x is aligned), read element by element;
//   body: (len − h) / V packs of V = 16/sizeof(T) elements from x + h, each
//         one aligned 16-byte access (Pack<T, V>);
//   tail: the last (len − h) % V elements, read element by element.
// Every T is at least sizeof(T)-aligned (the engine's tensors are), so h is
// an integer count of elements.
#pragma once

#include <stdint.h>

#include "pack.cuh"

// Loop unrolling hints, spelled for nvcc or for g++ (the emulator build).
#define TW_VECIO_PRAGMA(x) _Pragma(#x)
#ifdef __CUDACC__
#define TW_UNROLL TW_VECIO_PRAGMA(unroll)
#else
#define TW_UNROLL TW_VECIO_PRAGMA(GCC unroll 16)
#endif

// Elements before the first 16-byte boundary at or after p, at most len.
template <class T> __host__ __device__ __forceinline__ int64_t vec_head(const T *p, int64_t len) {
	const int64_t h = (int64_t)((16 - (uintptr_t)p % 16) % 16) / (int64_t)sizeof(T);
	return h < len ? h : len;
}
