// elementwise.cu — element-wise kernels over flat arrays of any float dtype.
//
// Contract: engine.Backend.Fill, Cast and Add (engine/backend.go); the
// launchers' arguments are listed in kernels.h (Copy is a device-to-device
// copy, no kernel). What the kernels add to it: arithmetic is f32 and each
// result is rounded once (nearest even, NaN kept) to its dtype; n ≤ 0
// launches nothing.
//
// Design: grid-stride loops, so any n runs on any grid. Deterministic: every
// element is computed by one thread.
#include <type_traits>

#include "common.cuh"
#include "kernels.h"

static constexpr int kBlock = 256;

#define GRID_STRIDE(i, n) \
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

template <class T> __global__ void fill_kernel(T *x, int64_t n, float v) {
	const T t = from_float<T>(v);
	GRID_STRIDE(i, n) x[i] = t;
}

template <class D, class S> __global__ void cast_kernel(D *__restrict__ dst, const S *__restrict__ src, int64_t n) {
	GRID_STRIDE(i, n) dst[i] = from_float<D>(to_float(src[i]));
}

// No __restrict__: out may alias a or b.
template <class T> __global__ void add_kernel(T *out, const T *a, const T *b, int64_t n) {
	GRID_STRIDE(i, n) out[i] = from_float<T>(to_float(a[i]) + to_float(b[i]));
}

// dispatch calls f with a null pointer of the C++ type that dt names, or
// returns cudaErrorInvalidValue for a dtype the kernels do not take.
template <class F> static cudaError_t dispatch(tw_dtype dt, F f) {
	switch (dt) {
	case TW_F32: return f((float *)nullptr);
	case TW_BF16: return f((__nv_bfloat16 *)nullptr);
	case TW_F16: return f((__half *)nullptr);
	default: return cudaErrorInvalidValue;
	}
}

extern "C" cudaError_t tw_fill(void *x, tw_dtype dt, int64_t n, float v, cudaStream_t stream) {
	if (n <= 0) return cudaSuccess;
	return dispatch(dt, [&](auto *t) {
		using T = std::remove_pointer_t<decltype(t)>;
		LAUNCH(grid_for(n, kBlock), kBlock, 0, stream, fill_kernel<T>)((T *)x, n, v);
		return cudaGetLastError();
	});
}

extern "C" cudaError_t tw_cast(void *dst, tw_dtype ddt, const void *src, tw_dtype sdt, int64_t n, cudaStream_t stream) {
	if (n <= 0) return cudaSuccess;
	return dispatch(ddt, [&](auto *d) {
		return dispatch(sdt, [&](auto *s) {
			using D = std::remove_pointer_t<decltype(d)>;
			using S = std::remove_pointer_t<decltype(s)>;
			LAUNCH(grid_for(n, kBlock), kBlock, 0, stream, cast_kernel<D, S>)((D *)dst, (const S *)src, n);
			return cudaGetLastError();
		});
	});
}

extern "C" cudaError_t tw_add(void *out, const void *a, const void *b, tw_dtype dt, int64_t n, cudaStream_t stream) {
	if (n <= 0) return cudaSuccess;
	return dispatch(dt, [&](auto *t) {
		using T = std::remove_pointer_t<decltype(t)>;
		LAUNCH(grid_for(n, kBlock), kBlock, 0, stream, add_kernel<T>)((T *)out, (const T *)a, (const T *)b, n);
		return cudaGetLastError();
	});
}
