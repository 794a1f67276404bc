// layernorm.cu — LayerNorm with a weight and a bias, and its backward.
//
// Contract: engine.Backend.LayerNorm and LayerNormBackward
// (engine/backend.go); the launchers' arguments are listed in kernels.h.
// What the kernels add to it: the activations (dt) are any float dtype, the
// weight and bias (wdt) dt or f32 (other pairs: cudaErrorInvalidValue).
// Arithmetic is f32; out and dx are rounded once to dt, the new dw and db
// once to wdt. dw and db are summed in a fixed order (colsum.cuh). n ≤ 0 or
// d ≤ 0 launches nothing.
//
// Design.
//   Forward: one block per row (up to 256 threads; 16-byte packs when d and
//   the pointers allow). Pass 1 sums the row, pass 2 the squared deviations
//   from the mean (two passes: no cancellation in the variance), pass 3
//   writes out; passes 2 and 3 re-read the row, an L1/L2 hit. Each sum is a
//   warp-shuffle and shared-memory block reduction in a fixed order, so mean
//   and rstd are deterministic.
//   Backward: one kernel for dx and the partial sums of dw and db, then
//   colsum_kernel for each. A block per row group (colsum.cuh) walks its
//   rows: pass 1 reduces Σ g and Σ g·n over the row (g = dout·w, n the
//   normalised x), pass 2 writes dx = r·(g − mean g − n·mean g·n) and adds
//   dout·n and dout into [d] f32 partials in shared memory, each thread
//   always owning the same columns (no races, no atomics). The partials go to the workspace
//   [2][groups, d] f32 (dw's, then db's). Shared memory is 4·d bytes per
//   wanted gradient (over 48 KiB raises the kernel's limit; 8·d ≤ 227 KiB
//   when both are wanted, so d ≤ 29056).
//   Both passes compute g with __fmul_rn, a product no compiler fuses: in
//   pass 2, g − mean g written as g·w − c would become one FMA under nvcc
//   (it contracts by default), which subtracts c from the exact product
//   rather than from the rounded g that pass 1 summed, so a row whose g is
//   constant (d = 1 above all) gets the product's rounding error instead of
//   0 in dx.
#include "colsum.cuh"
#include "common.cuh"
#include "kernels.h"
#include "pack.cuh"

static constexpr int kRowThreads = 256; // most threads per row

template <class T, class W, int V>
__global__ void __launch_bounds__(kRowThreads)
	layernorm_kernel(T *__restrict__ out, float *__restrict__ mean, float *__restrict__ rstd, const T *__restrict__ x,
	                 const W *__restrict__ w, const W *__restrict__ b, int64_t d, float eps) {
	__shared__ float scratch[32];
	const int64_t off = (int64_t)blockIdx.x * d;
	const T *xs = x + off; // [d]
	const int64_t stride = (int64_t)blockDim.x * V;
	float s = 0.0f;
	for (int64_t j = (int64_t)threadIdx.x * V; j < d; j += stride) {
		float xv[V];
		load_pack(xv, xs + j);
		for (int e = 0; e < V; e++) s += xv[e];
	}
	const float mu = block_sum(s, scratch) / (float)d;
	float ss = 0.0f;
	for (int64_t j = (int64_t)threadIdx.x * V; j < d; j += stride) {
		float xv[V];
		load_pack(xv, xs + j);
		for (int e = 0; e < V; e++) ss += (xv[e] - mu) * (xv[e] - mu);
	}
	const float r = 1.0f / sqrtf(block_sum(ss, scratch) / (float)d + eps);
	if (threadIdx.x == 0) {
		mean[blockIdx.x] = mu;
		rstd[blockIdx.x] = r;
	}
	for (int64_t j = (int64_t)threadIdx.x * V; j < d; j += stride) {
		float xv[V], wv[V], bv[V];
		load_pack(xv, xs + j);
		load_pack(wv, w + j);
		load_pack(bv, b + j);
		for (int e = 0; e < V; e++) xv[e] = (xv[e] - mu) * r * wv[e] + bv[e];
		store_pack(out + off + j, xv);
	}
}

template <class T, class W, int V>
__global__ void __launch_bounds__(kRowThreads)
	layernorm_backward_kernel(T *__restrict__ dx, float *__restrict__ dw_part, float *__restrict__ db_part,
	                          const T *__restrict__ dout, const T *__restrict__ x, const W *__restrict__ w,
	                          const float *__restrict__ mean, const float *__restrict__ rstd, int64_t n, int64_t d,
	                          int64_t rows) {
	extern __shared__ unsigned char smem[];
	const bool want_dw = dw_part != nullptr, want_db = db_part != nullptr;
	float *dws = reinterpret_cast<float *>(smem); // [d] this group's Σ dout·n (only when dw_part)
	float *dbs = dws + (want_dw ? d : 0);         // [d] this group's Σ dout (only when db_part)
	__shared__ float scratch[32];
	const int64_t stride = (int64_t)blockDim.x * V;
	for (int64_t j = (int64_t)threadIdx.x * V; j < d; j += stride)
		for (int e = 0; e < V; e++) {
			if (want_dw) dws[j + e] = 0.0f;
			if (want_db) dbs[j + e] = 0.0f;
		}

	const int64_t lo = blockIdx.x * rows, hi = lo + rows < n ? lo + rows : n;
	for (int64_t i = lo; i < hi; i++) {
		const T *xs = x + i * d, *gs = dout + i * d; // [d] each
		T *dxs = dx + i * d;                          // [d]
		const float mu = mean[i], r = rstd[i];
		// Pass 1: cg = mean_j g_j, cn = mean_j g_j·n_j with g = dout·w.
		float sg = 0.0f, sgn = 0.0f;
		for (int64_t j = (int64_t)threadIdx.x * V; j < d; j += stride) {
			float xv[V], gv[V], wv[V];
			load_pack(xv, xs + j);
			load_pack(gv, gs + j);
			load_pack(wv, w + j);
			for (int e = 0; e < V; e++) {
				const float g = __fmul_rn(gv[e], wv[e]); // rounded as pass 2 rounds it
				sg += g;
				sgn += g * ((xv[e] - mu) * r);
			}
		}
		const float cg = block_sum(sg, scratch) / (float)d;
		const float cn = block_sum(sgn, scratch) / (float)d;
		// Pass 2: dx = r·(g − cg − n·cn); partials += dout·n, dout.
		for (int64_t j = (int64_t)threadIdx.x * V; j < d; j += stride) {
			float xv[V], gv[V], wv[V], out[V];
			load_pack(xv, xs + j);
			load_pack(gv, gs + j);
			load_pack(wv, w + j);
			for (int e = 0; e < V; e++) {
				const float nv = (xv[e] - mu) * r;
				out[e] = r * (__fmul_rn(gv[e], wv[e]) - cg - nv * cn);
				if (want_dw) dws[j + e] += gv[e] * nv;
				if (want_db) dbs[j + e] += gv[e];
			}
			store_pack(dxs + j, out);
		}
	}
	for (int64_t j = (int64_t)threadIdx.x * V; j < d; j += stride)
		for (int e = 0; e < V; e++) {
			if (want_dw) dw_part[blockIdx.x * d + j + e] = dws[j + e];
			if (want_db) db_part[blockIdx.x * d + j + e] = dbs[j + e];
		}
}

// Calls f with a null W* for the weight dtype wdt, which must be T's or f32.
template <class T, class F> static cudaError_t dispatch_weight(tw_dtype dt, tw_dtype wdt, F f) {
	if (wdt == dt) return f((T *)nullptr);
	if (wdt == TW_F32) return f((float *)nullptr);
	return cudaErrorInvalidValue;
}

extern "C" cudaError_t tw_layernorm(void *out, float *mean, float *rstd, const void *x, const void *w, const void *b,
                                    tw_dtype dt, tw_dtype wdt, int64_t n, int64_t d, float eps, cudaStream_t stream) {
	if (n <= 0 || d <= 0) return cudaSuccess;
	if (n > INT32_MAX) return cudaErrorInvalidValue;
	return dispatch_float(dt, [&](auto *t) {
		using T = elem_t<decltype(t)>;
		return dispatch_weight<T>(dt, wdt, [&](auto *wt) {
			using W = elem_t<decltype(wt)>;
			constexpr int V = pack_width<T>();
			if (d % V == 0 && pack_aligned<T, V>(out) && pack_aligned<T, V>(x) && pack_aligned<W, V>(w) &&
			    pack_aligned<W, V>(b))
				LAUNCH((unsigned)n, row_threads(d / V, kRowThreads), 0, stream, layernorm_kernel<T, W, V>)(
					(T *)out, mean, rstd, (const T *)x, (const W *)w, (const W *)b, d, eps);
			else
				LAUNCH((unsigned)n, row_threads(d, kRowThreads), 0, stream, layernorm_kernel<T, W, 1>)(
					(T *)out, mean, rstd, (const T *)x, (const W *)w, (const W *)b, d, eps);
			return cudaGetLastError();
		});
	});
}

extern "C" size_t tw_layernorm_backward_workspace(int64_t n, int64_t d) {
	if (n <= 0 || d <= 0) return 0;
	return 2 * (size_t)colsum_groups(n) * (size_t)d * sizeof(float);
}

// Launches the backward kernel with pack width V, raising its shared-memory
// limit when the partials need more than the default 48 KiB.
template <class T, class W, int V>
static cudaError_t launch_backward(T *dx, float *dw_part, float *db_part, const T *dout, const T *x, const W *w,
                                   const float *mean, const float *rstd, int64_t n, int64_t d, cudaStream_t stream) {
	const size_t smem = ((dw_part ? 1 : 0) + (db_part ? 1 : 0)) * (size_t)d * sizeof(float);
	if (smem > 48 * 1024) {
		cudaError_t e = cudaFuncSetAttribute(layernorm_backward_kernel<T, W, V>,
		                                     cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
		if (e != cudaSuccess) return e;
	}
	LAUNCH((unsigned)colsum_groups(n), row_threads(ceil_div<int64_t>(d, V), kRowThreads), smem, stream,
	       layernorm_backward_kernel<T, W, V>)(dx, dw_part, db_part, dout, x, w, mean, rstd, n, d,
	                                           colsum_group_rows(n));
	return cudaGetLastError();
}

extern "C" cudaError_t tw_layernorm_backward(void *dx, void *dw, void *db, const void *dout, const void *x,
                                             const void *w, const float *mean, const float *rstd, tw_dtype dt,
                                             tw_dtype wdt, int64_t n, int64_t d, void *workspace,
                                             cudaStream_t stream) {
	if (n <= 0 || d <= 0) return cudaSuccess;
	const size_t smem = ((dw ? 1 : 0) + (db ? 1 : 0)) * (size_t)d * sizeof(float);
	if ((dw || db) && (workspace == nullptr || smem > 227 * 1024)) return cudaErrorInvalidValue;
	return dispatch_float(dt, [&](auto *t) {
		using T = elem_t<decltype(t)>;
		return dispatch_weight<T>(dt, wdt, [&](auto *wt) {
			using W = elem_t<decltype(wt)>;
			constexpr int V = pack_width<T>();
			const int64_t nblk = colsum_groups(n);
			float *dw_part = dw ? (float *)workspace : nullptr;                  // [nblk, d]
			float *db_part = db ? (float *)workspace + nblk * d : nullptr;       // [nblk, d]
			cudaError_t e;
			if (d % V == 0 && pack_aligned<T, V>(dx) && pack_aligned<T, V>(dout) && pack_aligned<T, V>(x) &&
			    pack_aligned<W, V>(w))
				e = launch_backward<T, W, V>((T *)dx, dw_part, db_part, (const T *)dout, (const T *)x, (const W *)w,
				                             mean, rstd, n, d, stream);
			else
				e = launch_backward<T, W, 1>((T *)dx, dw_part, db_part, (const T *)dout, (const T *)x, (const W *)w,
				                             mean, rstd, n, d, stream);
			if (e == cudaSuccess && dw) e = launch_colsum<W>((W *)dw, dw_part, nblk, d, stream);
			if (e == cudaSuccess && db) e = launch_colsum<W>((W *)db, db_part, nblk, d, stream);
			return e;
		});
	});
}
