// rmsnorm.cu — RMSNorm, RMSNorm fused with the residual add, and the backward.
//
// Contract: engine.Backend.RMSNorm, AddRMSNorm and RMSNormBackward
// (engine/backend.go); the launchers' arguments are listed in kernels.h.
// What the kernels add to it: the activations (dt) are any float dtype, the
// weight (wdt) dt or f32 (other pairs: cudaErrorInvalidValue). Arithmetic is
// f32; every value the contract materialises in the activation dtype (the
// normalised row, out, resid, dx) and the new dw is rounded once, to nearest
// even. dw is summed in a fixed order (see below). n ≤ 0 or d ≤ 0 launches
// nothing.
//
// Design.
//   Forward: one block per row, 16-byte packs when d and the pointers allow.
//   Rows of up to 4·256 packs (8192 bf16 elements) are held in registers: a
//   block of ⌈packs/4⌉ threads (a multiple of 32), each loading its four
//   packs at once (four loads in flight), summing squares in f32 (each
//   thread over its packs, then a warp-shuffle and shared-memory block
//   reduction: a fixed order, so rstd is deterministic) and writing out from
//   its registers; Llama's 4096-wide bf16 rows take blocks of 128 threads.
//   Wider rows use 256 threads and re-read the row (an L1/L2 hit) for out.
//   The fused add writes resid in the first pass; each thread touches the
//   same elements in both passes, so aliasing x is safe and needs no
//   barrier. The packs are held as loaded (pack.cuh's Held) until all of
//   the thread's loads are issued: widened as each came in, they had made
//   nvcc issue each load after the one before had arrived (sm_90: one load
//   of x in flight, two of x and delta), and on an H200 (2026-11-27,
//   9b1ace1) RMSNorm reached 55% of the copy bandwidth at 2048 tokens and
//   76% at 8192, the fused add 65% and 80%. Now 4 and 12 loads are issued
//   together (TestKernelCode holds them there); unmeasured.
//   Backward: one kernel for dx and the partial sums of dw, then
//   colsum_kernel, which adds the partials in a fixed order (in f64) and
//   rounds the new dw once (colsum.cuh). The rows are cut into the norm
//   groups of colsum.cuh (at least 16 consecutive rows, at most 256 groups:
//   a partition that depends on n alone, never on the device); one block per
//   group. rmsnorm_backward_kernel, for rows up to 4096 f32 or 8192 16-bit
//   elements (colsum.cuh's norm_plan): up to four row slots per block, each
//   loading its next row (x, dout and dx: 16-byte packs, held as words
//   until they are widened: pack.cuh's Held) while it reduces the current
//   one; a thread keeps its columns' dw partial in registers (w is re-read
//   per row: an L1 hit). Per row: x and dout widened once, c = Σ g·n over
//   the slot (slot_sum), then dx += r·(g − n·c) and the partial += dout·n.
//   (The sm_90 loop: ~600 instructions per 16 bf16 elements when the packs
//   were held as bf16 and widened at each use, now ~475.) flush_partial
//   adds the slots' partials in slot order into the workspace [groups, d]
//   f32. Wider rows take
//   rmsnorm_backward_smem_kernel: element by element, the partial in shared
//   memory (4·d bytes; over 48 KiB for d > 12288 raises the kernel's limit;
//   d ≤ 58112 with dw), each thread always owning the same columns (no
//   races, no atomics, no bank conflicts). Deterministic: the same bits on
//   every run and every GPU. Speed on a GPU: unmeasured since this design.
//   g = dout·w is computed with __fmul_rn in both passes: pass 2's g − n·c
//   must start from the g whose products pass 1 summed into c, not from the
//   exact product an FMA would use (nvcc contracts a·b − c by default; the
//   same hazard made layernorm's dx wrong on a GPU).
#include <type_traits>

#include "colsum.cuh"
#include "common.cuh"
#include "kernels.h"
#include "pack.cuh"
#include "vec.cuh"

static constexpr int kRowThreads = 256; // most threads per row

// Pass 2 of both forward kernels: out = round(w · round(xs·r)) over one row,
// each thread on the packs it read in pass 1.
template <class T, class W, int V>
__device__ __forceinline__ void norm_row(T *out, const T *xs, const W *w, int64_t d, float r) {
	for (int64_t j = (int64_t)threadIdx.x * V; j < d; j += (int64_t)blockDim.x * V) {
		float xv[V], wv[V];
		load_pack(xv, xs + j);
		load_pack(wv, w + j);
		for (int e = 0; e < V; e++) xv[e] *= r;
		round_to<T>(xv);
		for (int e = 0; e < V; e++) xv[e] *= wv[e];
		store_pack(out + j, xv);
	}
}

__device__ __forceinline__ float rstd_of(float ss, int64_t d, float eps) {
	return 1.0f / sqrtf(ss / (float)d + eps);
}

// The forward kernels: C = kCached keeps the row in registers (each thread
// loads its C packs (threadIdx.x + k·blockDim.x)·V at once, C loads in
// flight, then sums, then writes from the registers); C = 0, for rows of
// more than kCached·256 packs, loops over the row twice.
static constexpr int kCached = 4;

// out = round(w · round(v·r)) for one pack of V elements, w as loaded.
template <class T, class W, int V>
__device__ __forceinline__ void norm_pack(T *out, const Held<W, V> &w, float (&v)[V], float r) {
	float wv[V];
	widen(wv, w);
	for (int e = 0; e < V; e++) v[e] *= r;
	round_to<T>(v);
	for (int e = 0; e < V; e++) v[e] *= wv[e];
	store_pack(out, v);
}

template <class T, class W, int V, int C>
__global__ void __launch_bounds__(kRowThreads)
	rmsnorm_kernel(T *__restrict__ out, float *__restrict__ rstd, const T *__restrict__ x, const W *__restrict__ w,
	               int64_t d, float eps) {
	__shared__ float scratch[32];
	const T *xs = x + blockIdx.x * d; // [d]
	float ss = 0.0f;
	if constexpr (C > 0) {
		// All the thread's loads (its packs of the row and of w) are issued
		// before any is widened: widened as they came in, each waited for
		// the one before (nvcc 11.8, sm_90: one load of x in flight).
		Held<T, V> xh[C];
		Held<W, V> wh[C];
		TW_UNROLL
		for (int k = 0; k < C; k++) {
			const int64_t j = ((int64_t)threadIdx.x + (int64_t)k * blockDim.x) * V;
			if (j < d) xh[k] = ld_held<V>(xs + j), wh[k] = ld_held<V>(w + j);
		}
		float xv[C][V];
		TW_UNROLL
		for (int k = 0; k < C; k++)
			if (((int64_t)threadIdx.x + (int64_t)k * blockDim.x) * V < d) {
				widen(xv[k], xh[k]);
				for (int e = 0; e < V; e++) ss += xv[k][e] * xv[k][e];
			}
		const float r = rstd_of(block_sum(ss, scratch), d, eps);
		if (threadIdx.x == 0) rstd[blockIdx.x] = r;
		TW_UNROLL
		for (int k = 0; k < C; k++) {
			const int64_t j = ((int64_t)threadIdx.x + (int64_t)k * blockDim.x) * V;
			if (j < d) norm_pack<T, W, V>(out + blockIdx.x * d + j, wh[k], xv[k], r);
		}
	} else {
		for (int64_t j = (int64_t)threadIdx.x * V; j < d; j += (int64_t)blockDim.x * V) {
			float xv[V];
			load_pack(xv, xs + j);
			for (int e = 0; e < V; e++) ss += xv[e] * xv[e];
		}
		const float r = rstd_of(block_sum(ss, scratch), d, eps);
		if (threadIdx.x == 0) rstd[blockIdx.x] = r;
		norm_row<T, W, V>(out + blockIdx.x * d, xs, w, d, r);
	}
}

// resid may alias x: no __restrict__ on either (each thread reads its
// elements before it writes them).
template <class T, class W, int V, int C>
__global__ void __launch_bounds__(kRowThreads)
	add_rmsnorm_kernel(T *resid, T *__restrict__ out, float *__restrict__ rstd, const T *x,
	                   const T *__restrict__ delta, const W *__restrict__ w, int64_t d, float eps) {
	__shared__ float scratch[32];
	const int64_t off = blockIdx.x * d;
	float ss = 0.0f;
	if constexpr (C > 0) {
		// All loads first, widened after (see rmsnorm_kernel).
		Held<T, V> xh[C], dh[C];
		Held<W, V> wh[C];
		TW_UNROLL
		for (int k = 0; k < C; k++) {
			const int64_t j = ((int64_t)threadIdx.x + (int64_t)k * blockDim.x) * V;
			if (j < d) xh[k] = ld_held<V>(x + off + j), dh[k] = ld_held<V>(delta + off + j), wh[k] = ld_held<V>(w + j);
		}
		float xv[C][V];
		TW_UNROLL
		for (int k = 0; k < C; k++) {
			const int64_t j = ((int64_t)threadIdx.x + (int64_t)k * blockDim.x) * V;
			if (j >= d) continue;
			float dv[V];
			widen(xv[k], xh[k]);
			widen(dv, dh[k]);
			for (int e = 0; e < V; e++) xv[k][e] += dv[e];
			round_to<T>(xv[k]); // the sum as stored in resid
			for (int e = 0; e < V; e++) ss += xv[k][e] * xv[k][e];
			store_pack(resid + off + j, xv[k]);
		}
		const float r = rstd_of(block_sum(ss, scratch), d, eps);
		if (threadIdx.x == 0) rstd[blockIdx.x] = r;
		TW_UNROLL
		for (int k = 0; k < C; k++) {
			const int64_t j = ((int64_t)threadIdx.x + (int64_t)k * blockDim.x) * V;
			if (j < d) norm_pack<T, W, V>(out + off + j, wh[k], xv[k], r);
		}
	} else {
		for (int64_t j = (int64_t)threadIdx.x * V; j < d; j += (int64_t)blockDim.x * V) {
			float xv[V], dv[V];
			load_pack(xv, x + off + j);
			load_pack(dv, delta + off + j);
			for (int e = 0; e < V; e++) xv[e] += dv[e];
			round_to<T>(xv); // the sum as stored in resid
			for (int e = 0; e < V; e++) ss += xv[e] * xv[e];
			store_pack(resid + off + j, xv);
		}
		const float r = rstd_of(block_sum(ss, scratch), d, eps);
		if (threadIdx.x == 0) rstd[blockIdx.x] = r;
		norm_row<T, W, V>(out + off, resid + off, w, d, r); // this thread's own writes of pass 1
	}
}

// One row's packs of a thread (norm_plan): x, dout and dx, as loaded
// (Held: whole words until they are widened).
template <class T, int V, int P> struct RMSRow {
	Held<T, V> x[P], g[P], dx[P];
	float r;
};

template <class T, int V, int P>
__device__ __forceinline__ void load_rms_row(RMSRow<T, V, P> &row, const T *__restrict__ x, const T *__restrict__ dout,
                                             const T *dx, const float *__restrict__ rstd, int64_t i, int64_t d,
                                             int t, int th) {
	row.r = rstd[i];
	TW_UNROLL
	for (int k = 0; k < P; k++) {
		const int64_t col = ((int64_t)t + (int64_t)k * th) * V;
		if (col < d) {
			row.x[k] = ld_held<V>(x + i * d + col);
			row.g[k] = ld_held<V>(dout + i * d + col);
			row.dx[k] = ld_held<V>(dx + i * d + col);
		}
	}
}

template <class T, class W, int V, int P>
__global__ void __launch_bounds__(kNormThreads)
	rmsnorm_backward_kernel(T *__restrict__ dx, float *__restrict__ dw_part, const T *__restrict__ dout,
	                        const T *__restrict__ x, const W *__restrict__ w, const float *__restrict__ rstd,
	                        int64_t n, int64_t d, int64_t rows, int th) {
	extern __shared__ unsigned char smem[];
	__shared__ float scratch[2][32];
	const int slots = blockDim.x / th, slot = threadIdx.x / th, t = threadIdx.x - slot * th;
	float acc[P][V];
	TW_UNROLL
	for (int k = 0; k < P; k++)
		for (int e = 0; e < V; e++) acc[k][e] = 0.0f;
	const int64_t lo = blockIdx.x * rows, hi = lo + rows < n ? lo + rows : n;
	RMSRow<T, V, P> cur;
	if (lo + slot < hi) load_rms_row(cur, x, dout, dx, rstd, lo + slot, d, t, th);
	int it = 0;
	for (int64_t base = lo; base < hi; base += slots, it ^= 1) {
		const int64_t i = base + slot;
		const bool live = i < hi;
		RMSRow<T, V, P> next;
		if (i + slots < hi) load_rms_row(next, x, dout, dx, rstd, i + slots, d, t, th);
		// c = mean_j (dout·w)_j · n_j over the row. x and dout are widened
		// once for both passes, w per pass (an L1 hit after the first row).
		float s = 0.0f, xf[P][V], gf[P][V];
		if (live)
			TW_UNROLL
			for (int k = 0; k < P; k++) {
				const int64_t col = ((int64_t)t + (int64_t)k * th) * V;
				if (col >= d) continue;
				float wv[V];
				widen(xf[k], cur.x[k]);
				widen(gf[k], cur.g[k]);
				widen(wv, ld<V>(w + col));
				for (int e = 0; e < V; e++) s += __fmul_rn(gf[k][e], wv[e]) * (xf[k][e] * cur.r);
			}
		const float c = slot_sum(s, scratch[it], th) / (float)d;
		// dx += r·(g − n·c); the dw partial += dout·n.
		if (live)
			TW_UNROLL
			for (int k = 0; k < P; k++) {
				const int64_t col = ((int64_t)t + (int64_t)k * th) * V;
				if (col >= d) continue;
				float wv[V], a[V];
				widen(wv, ld<V>(w + col));
				widen(a, cur.dx[k]);
				Pack<T, V> o;
				for (int e = 0; e < V; e++) {
					const float gv = gf[k][e], nv = xf[k][e] * cur.r;
					a[e] += cur.r * (__fmul_rn(gv, wv[e]) - nv * c); // g as the sum rounded it
					acc[k][e] += gv * nv;
					o.v[e] = from_float<T>(a[e]);
				}
				st<V>(dx + i * d + col, o);
			}
		cur = next;
	}
	if (dw_part != nullptr) flush_partial<V, P>(dw_part + blockIdx.x * d, acc, reinterpret_cast<float *>(smem), th, d);
}

// Rows too wide for rmsnorm_backward_kernel's registers: a block per group,
// element by element; thread t owns columns t, t + blockDim.x, … and their
// dw partial in shared memory [d] (consecutive threads, consecutive banks).
template <class T, class W>
__global__ void __launch_bounds__(kRowThreads)
	rmsnorm_backward_smem_kernel(T *__restrict__ dx, float *__restrict__ dw_part, const T *__restrict__ dout,
	                             const T *__restrict__ x, const W *__restrict__ w, const float *__restrict__ rstd,
	                             int64_t n, int64_t d, int64_t rows) {
	extern __shared__ unsigned char smem[];
	float *dws = reinterpret_cast<float *>(smem); // [d] this group's Σ dout·n (only when dw_part)
	__shared__ float scratch[32];
	const bool want_dw = dw_part != nullptr;
	if (want_dw)
		for (int64_t j = threadIdx.x; j < d; j += blockDim.x) dws[j] = 0.0f;
	const int64_t lo = blockIdx.x * rows, hi = lo + rows < n ? lo + rows : n;
	for (int64_t i = lo; i < hi; i++) {
		const T *xs = x + i * d, *gs = dout + i * d; // [d] each
		T *dxs = dx + i * d;                          // [d]
		const float r = rstd[i];
		float s = 0.0f;
		for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
			s += __fmul_rn(to_float(gs[j]), to_float(w[j])) * (to_float(xs[j]) * r);
		const float c = block_sum(s, scratch) / (float)d;
		for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
			const float gv = to_float(gs[j]), nv = to_float(xs[j]) * r;
			float a = to_float(dxs[j]);
			a += r * (__fmul_rn(gv, to_float(w[j])) - nv * c);
			dxs[j] = from_float<T>(a);
			if (want_dw) dws[j] += gv * nv;
		}
	}
	if (want_dw)
		for (int64_t j = threadIdx.x; j < d; j += blockDim.x) dw_part[blockIdx.x * d + j] = dws[j];
}

// Calls f with a null W* for the weight dtype wdt, which must be T's or f32.
template <class T, class F> static cudaError_t dispatch_weight(tw_dtype dt, tw_dtype wdt, F f) {
	if (wdt == dt) return f((T *)nullptr);
	if (wdt == TW_F32) return f((float *)nullptr);
	return cudaErrorInvalidValue;
}

// Launches a forward kernel K<V, C> for rows of d elements in packs of V:
// the cached form when a row fits kCached packs per thread of a block.
template <int V, class L> static cudaError_t launch_forward(int64_t d, L launch) {
	const int64_t packs = ceil_div<int64_t>(d, V);
	if (packs <= (int64_t)kCached * kRowThreads)
		launch(std::integral_constant<int, kCached>(), row_threads(ceil_div<int64_t>(packs, kCached), kRowThreads));
	else
		launch(std::integral_constant<int, 0>(), row_threads(packs, kRowThreads));
	return cudaGetLastError();
}

extern "C" cudaError_t tw_rmsnorm(void *out, float *rstd, const void *x, const void *w, tw_dtype dt, tw_dtype wdt,
                                  int64_t n, int64_t d, float eps, cudaStream_t stream) {
	if (n <= 0 || d <= 0) return cudaSuccess;
	if (n > INT32_MAX) return cudaErrorInvalidValue;
	return dispatch_float(dt, [&](auto *t) {
		using T = elem_t<decltype(t)>;
		return dispatch_weight<T>(dt, wdt, [&](auto *wt) {
			using W = elem_t<decltype(wt)>;
			constexpr int V = pack_width<T>();
			if (d % V == 0 && pack_aligned<T, V>(out) && pack_aligned<T, V>(x) && pack_aligned<W, V>(w))
				return launch_forward<V>(d, [&](auto c, int threads) {
					LAUNCH((unsigned)n, threads, 0, stream, rmsnorm_kernel<T, W, V, decltype(c)::value>)(
						(T *)out, rstd, (const T *)x, (const W *)w, d, eps);
				});
			return launch_forward<1>(d, [&](auto c, int threads) {
				LAUNCH((unsigned)n, threads, 0, stream, rmsnorm_kernel<T, W, 1, decltype(c)::value>)(
					(T *)out, rstd, (const T *)x, (const W *)w, d, eps);
			});
		});
	});
}

extern "C" cudaError_t tw_add_rmsnorm(void *resid, void *out, float *rstd, const void *x, const void *delta,
                                      const void *w, tw_dtype dt, tw_dtype wdt, int64_t n, int64_t d, float eps,
                                      cudaStream_t stream) {
	if (n <= 0 || d <= 0) return cudaSuccess;
	if (n > INT32_MAX) return cudaErrorInvalidValue;
	return dispatch_float(dt, [&](auto *t) {
		using T = elem_t<decltype(t)>;
		return dispatch_weight<T>(dt, wdt, [&](auto *wt) {
			using W = elem_t<decltype(wt)>;
			constexpr int V = pack_width<T>();
			if (d % V == 0 && pack_aligned<T, V>(resid) && pack_aligned<T, V>(out) && pack_aligned<T, V>(x) &&
			    pack_aligned<T, V>(delta) && pack_aligned<W, V>(w))
				return launch_forward<V>(d, [&](auto c, int threads) {
					LAUNCH((unsigned)n, threads, 0, stream, add_rmsnorm_kernel<T, W, V, decltype(c)::value>)(
						(T *)resid, (T *)out, rstd, (const T *)x, (const T *)delta, (const W *)w, d, eps);
				});
			return launch_forward<1>(d, [&](auto c, int threads) {
				LAUNCH((unsigned)n, threads, 0, stream, add_rmsnorm_kernel<T, W, 1, decltype(c)::value>)(
					(T *)resid, (T *)out, rstd, (const T *)x, (const T *)delta, (const W *)w, d, eps);
			});
		});
	});
}

extern "C" size_t tw_rmsnorm_backward_workspace(int64_t n, int64_t d) {
	if (n <= 0 || d <= 0) return 0;
	return (size_t)norm_groups(n) * (size_t)d * sizeof(float);
}

// Launches rmsnorm_backward_kernel with packs of V and P packs per thread.
template <class T, class W, int V, int P>
static cudaError_t launch_backward(const NormPlan &pl, T *dx, float *part, const T *dout, const T *x, const W *w,
                                   const float *rstd, int64_t n, int64_t d, cudaStream_t stream) {
	LAUNCH((unsigned)norm_groups(n), pl.th * pl.slots, part ? norm_flush_smem(pl, V) : 0, stream,
	       rmsnorm_backward_kernel<T, W, V, P>)(dx, part, dout, x, w, rstd, n, d, norm_rows(n), pl.th);
	return cudaGetLastError();
}

// Launches the shared-memory kernel, raising its limit when the dw partial
// needs more than the default 48 KiB.
template <class T, class W>
static cudaError_t launch_backward_smem(T *dx, float *part, const T *dout, const T *x, const W *w, const float *rstd,
                                        int64_t n, int64_t d, cudaStream_t stream) {
	const size_t smem = part ? (size_t)d * sizeof(float) : 0;
	if (smem > 48 * 1024) {
		cudaError_t e = cudaFuncSetAttribute(rmsnorm_backward_smem_kernel<T, W>,
		                                     cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
		if (e != cudaSuccess) return e;
	}
	LAUNCH((unsigned)norm_groups(n), row_threads(d, kRowThreads), smem, stream, rmsnorm_backward_smem_kernel<T, W>)(
		dx, part, dout, x, w, rstd, n, d, norm_rows(n));
	return cudaGetLastError();
}

extern "C" cudaError_t tw_rmsnorm_backward(void *dx, void *dw, const void *dout, const void *x, const void *w,
                                           const float *rstd, tw_dtype dt, tw_dtype wdt, int64_t n, int64_t d,
                                           void *workspace, cudaStream_t stream) {
	if (n <= 0 || d <= 0) return cudaSuccess;
	if (dw && (workspace == nullptr || (size_t)d * sizeof(float) > 227 * 1024)) return cudaErrorInvalidValue;
	return dispatch_float(dt, [&](auto *t) {
		using T = elem_t<decltype(t)>;
		return dispatch_weight<T>(dt, wdt, [&](auto *wt) {
			using W = elem_t<decltype(wt)>;
			constexpr int V = pack_width<T>();
			float *part = dw ? (float *)workspace : nullptr; // [norm_groups(n), d]
			const bool packed = d % V == 0 && pack_aligned<T, V>(dx) && pack_aligned<T, V>(dout) &&
			                    pack_aligned<T, V>(x) && pack_aligned<W, V>(w);
			const NormPlan pl = norm_plan(d, packed ? V : 1);
			cudaError_t e;
			if (pl.p == 0)
				e = launch_backward_smem<T, W>((T *)dx, part, (const T *)dout, (const T *)x, (const W *)w, rstd, n, d,
				                               stream);
			else if (!packed)
				e = launch_backward<T, W, 1, 8>(pl, (T *)dx, part, (const T *)dout, (const T *)x, (const W *)w, rstd,
				                                n, d, stream);
			else if (pl.p == 1)
				e = launch_backward<T, W, V, 1>(pl, (T *)dx, part, (const T *)dout, (const T *)x, (const W *)w, rstd,
				                                n, d, stream);
			else
				e = launch_backward<T, W, V, 2>(pl, (T *)dx, part, (const T *)dout, (const T *)x, (const W *)w, rstd,
				                                n, d, stream);
			if (e != cudaSuccess || !dw) return e;
			return launch_colsum<W>((W *)dw, nullptr, part, norm_groups(n), d, stream);
		});
	});
}
