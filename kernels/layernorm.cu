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
//   Forward: one block per row, 16-byte packs when d and the pointers
//   allow. Rows of up to 4·256 packs (8192 bf16 elements) are held in
//   registers: a block of ⌈packs/4⌉ threads (a multiple of 32; 128 for
//   Llama's 4096-wide bf16 rows), each loading its four packs, and those of
//   w and b, at once (held as loaded until all are issued: 10 of the 12
//   loads together in the bf16 sm_90 code, where w's and b's had come after
//   the row's reductions); the sum, the squared deviations from the mean (two
//   passes: no cancellation in the variance) and out come from the
//   registers. Wider rows use 256 threads and read the row three times (L1/
//   L2 hits after the first). Each sum is a warp-shuffle and shared-memory
//   block reduction in a fixed order, so mean and rstd are deterministic.
//   Backward: one kernel for dx and the partial sums of dw and db, then one
//   colsum_kernel launch that adds both in a fixed order (colsum.cuh). One
//   block per norm group of colsum.cuh (at least 16 consecutive rows, at
//   most 256 groups; the partition depends on n alone).
//   layernorm_backward_kernel, for rows up to 4096 f32 or 8192 16-bit
//   elements (norm_plan): up to four row slots per block, each loading its
//   next row (x, dout: 16-byte packs, held as words until they are
//   widened: pack.cuh's Held) while it reduces the current one; a
//   thread keeps its columns' dw and db partials in registers (w is re-read
//   per row: an L1 hit). Per
//   row: Σ g and Σ g·n over the slot (g = dout·w, n the normalised x; one
//   slot_sum2), then dx = r·(g − mean g − n·mean g·n), and the partials +=
//   dout·n, dout. flush_partial adds the slots' partials in slot order into
//   the workspace [2][groups, d] f32 (dw's, then db's). Wider rows take
//   layernorm_backward_smem_kernel: element by element, the partials in
//   shared memory, 4·d bytes per wanted gradient (over 48 KiB raises the
//   kernel's limit; 8·d ≤ 227 KiB when both are wanted, so d ≤ 29056), each
//   thread always owning the same columns (no races, no atomics, no bank
//   conflicts). Speed on a GPU: unmeasured since this design.
//   Both passes compute g with __fmul_rn, a product no compiler fuses: in
//   the dx pass, g − mean g written as g·w − c would become one FMA under nvcc
//   (it contracts by default), which subtracts c from the exact product
//   rather than from the rounded g that pass 1 summed, so a row whose g is
//   constant (d = 1 above all) gets the product's rounding error instead of
//   0 in dx.
#include <type_traits>

#include "colsum.cuh"
#include "common.cuh"
#include "kernels.h"
#include "pack.cuh"
#include "vec.cuh"

static constexpr int kRowThreads = 256; // most threads per row

// C = kCached keeps the row in registers: each thread loads its C packs
// (threadIdx.x + k·blockDim.x)·V at once (C loads in flight) and computes
// the mean, the variance and out from its registers. C = 0, for rows of
// more than kCached·256 packs, reads the row three times (L1/L2 hits after
// the first).
static constexpr int kCached = 4;

template <class T, class W, int V, int C>
__global__ void __launch_bounds__(kRowThreads)
	layernorm_kernel(T *__restrict__ out, float *__restrict__ mean, float *__restrict__ rstd, const T *__restrict__ x,
	                 const W *__restrict__ w, const W *__restrict__ b, int64_t d, float eps) {
	__shared__ float scratch[32];
	const int64_t off = (int64_t)blockIdx.x * d;
	const T *xs = x + off; // [d]
	if constexpr (C > 0) {
		// All the thread's loads (its packs of the row, of w and of b) are
		// issued before any is widened, as RMSNorm's: w and b then arrive
		// during the row's two reductions instead of after them.
		Held<T, V> xh[C];
		Held<W, V> wh[C], bh[C];
		TW_UNROLL
		for (int k = 0; k < C; k++) {
			const int64_t j = ((int64_t)threadIdx.x + (int64_t)k * blockDim.x) * V;
			if (j < d) xh[k] = ld_held<V>(xs + j), wh[k] = ld_held<V>(w + j), bh[k] = ld_held<V>(b + j);
		}
		float xv[C][V];
		float s = 0.0f;
		TW_UNROLL
		for (int k = 0; k < C; k++)
			if (((int64_t)threadIdx.x + (int64_t)k * blockDim.x) * V < d) {
				widen(xv[k], xh[k]);
				for (int e = 0; e < V; e++) s += xv[k][e];
			}
		const float mu = block_sum(s, scratch) / (float)d;
		float ss = 0.0f;
		TW_UNROLL
		for (int k = 0; k < C; k++)
			if (((int64_t)threadIdx.x + (int64_t)k * blockDim.x) * V < d)
				for (int e = 0; e < V; e++) ss += (xv[k][e] - mu) * (xv[k][e] - mu);
		const float r = 1.0f / sqrtf(block_sum(ss, scratch) / (float)d + eps);
		if (threadIdx.x == 0) {
			mean[blockIdx.x] = mu;
			rstd[blockIdx.x] = r;
		}
		TW_UNROLL
		for (int k = 0; k < C; k++) {
			const int64_t j = ((int64_t)threadIdx.x + (int64_t)k * blockDim.x) * V;
			if (j >= d) continue;
			float wv[V], bv[V];
			widen(wv, wh[k]);
			widen(bv, bh[k]);
			for (int e = 0; e < V; e++) xv[k][e] = (xv[k][e] - mu) * r * wv[e] + bv[e];
			store_pack(out + off + j, xv[k]);
		}
	} else {
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
}

// One row's packs of a thread (norm_plan): x and dout as loaded (Held:
// whole words until they are widened), with the row's mean and rstd.
template <class T, int V, int P> struct LNRow {
	Held<T, V> x[P], g[P];
	float mu, r;
};

template <class T, int V, int P>
__device__ __forceinline__ void load_ln_row(LNRow<T, V, P> &row, const T *__restrict__ x, const T *__restrict__ dout,
                                            const float *__restrict__ mean, const float *__restrict__ rstd, int64_t i,
                                            int64_t d, int t, int th) {
	row.mu = mean[i];
	row.r = rstd[i];
	TW_UNROLL
	for (int k = 0; k < P; k++) {
		const int64_t col = ((int64_t)t + (int64_t)k * th) * V;
		if (col < d) {
			row.x[k] = ld_held<V>(x + i * d + col);
			row.g[k] = ld_held<V>(dout + i * d + col);
		}
	}
}

template <class T, class W, int V, int P>
__global__ void __launch_bounds__(kNormThreads)
	layernorm_backward_kernel(T *__restrict__ dx, float *__restrict__ dw_part, float *__restrict__ db_part,
	                          const T *__restrict__ dout, const T *__restrict__ x, const W *__restrict__ w,
	                          const float *__restrict__ mean, const float *__restrict__ rstd, int64_t n, int64_t d,
	                          int64_t rows, int th) {
	extern __shared__ unsigned char smem[];
	__shared__ float2 scratch[2][32];
	const int slots = blockDim.x / th, slot = threadIdx.x / th, t = threadIdx.x - slot * th;
	const float rd = __frcp_rn((float)d); // 1/d: a product per row, no division's slow path in the loop
	float adw[P][V], adb[P][V];
	TW_UNROLL
	for (int k = 0; k < P; k++)
		for (int e = 0; e < V; e++) adw[k][e] = adb[k][e] = 0.0f;
	const int64_t lo = blockIdx.x * rows, hi = lo + rows < n ? lo + rows : n;
	LNRow<T, V, P> cur;
	if (lo + slot < hi) load_ln_row(cur, x, dout, mean, rstd, lo + slot, d, t, th);
	int it = 0;
	for (int64_t base = lo; base < hi; base += slots, it ^= 1) {
		const int64_t i = base + slot;
		const bool live = i < hi;
		LNRow<T, V, P> next;
		if (i + slots < hi) load_ln_row(next, x, dout, mean, rstd, i + slots, d, t, th);
		// cg = mean_j g_j, cn = mean_j g_j·n_j with g = dout·w.
		float sg = 0.0f, sgn = 0.0f;
		if (live)
			TW_UNROLL
			for (int k = 0; k < P; k++) {
				const int64_t col = ((int64_t)t + (int64_t)k * th) * V;
				if (col >= d) continue;
				float xv[V], gv[V], wv[V];
				widen(xv, cur.x[k]);
				widen(gv, cur.g[k]);
				widen(wv, ld<V>(w + col)); // an L1 hit after the first row
				for (int e = 0; e < V; e++) {
					const float g = __fmul_rn(gv[e], wv[e]); // rounded as below
					sg += g;
					sgn += g * ((xv[e] - cur.mu) * cur.r);
				}
			}
		slot_sum2(sg, sgn, scratch[it], th);
		const float cg = sg * rd, cn = sgn * rd;
		// dx = r·(g − cg − n·cn); the partials += dout·n, dout.
		if (live)
			TW_UNROLL
			for (int k = 0; k < P; k++) {
				const int64_t col = ((int64_t)t + (int64_t)k * th) * V;
				if (col >= d) continue;
				float xv[V], gv[V], wv[V];
				widen(xv, cur.x[k]);
				widen(gv, cur.g[k]);
				widen(wv, ld<V>(w + col));
				Pack<T, V> o;
				for (int e = 0; e < V; e++) {
					const float nv = (xv[e] - cur.mu) * cur.r;
					o.v[e] = from_float<T>(cur.r * (__fmul_rn(gv[e], wv[e]) - cg - nv * cn));
					adw[k][e] += gv[e] * nv;
					adb[k][e] += gv[e];
				}
				st<V>(dx + i * d + col, o);
			}
		cur = next;
	}
	float *fs = reinterpret_cast<float *>(smem);
	if (dw_part != nullptr) flush_partial<V, P>(dw_part + blockIdx.x * d, adw, fs, th, d);
	if (db_part != nullptr) flush_partial<V, P>(db_part + blockIdx.x * d, adb, fs, th, d);
}

// Rows too wide for layernorm_backward_kernel's registers: a block per
// group, element by element; thread t owns columns t, t + blockDim.x, … and
// their partials in shared memory (consecutive threads, consecutive banks).
template <class T, class W>
__global__ void __launch_bounds__(kRowThreads)
	layernorm_backward_smem_kernel(T *__restrict__ dx, float *__restrict__ dw_part, float *__restrict__ db_part,
	                               const T *__restrict__ dout, const T *__restrict__ x, const W *__restrict__ w,
	                               const float *__restrict__ mean, const float *__restrict__ rstd, int64_t n,
	                               int64_t d, int64_t rows) {
	extern __shared__ unsigned char smem[];
	const bool want_dw = dw_part != nullptr, want_db = db_part != nullptr;
	float *dws = reinterpret_cast<float *>(smem); // [d] this group's Σ dout·n (only when dw_part)
	float *dbs = dws + (want_dw ? d : 0);         // [d] this group's Σ dout (only when db_part)
	__shared__ float scratch[32];
	for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
		if (want_dw) dws[j] = 0.0f;
		if (want_db) dbs[j] = 0.0f;
	}
	const int64_t lo = blockIdx.x * rows, hi = lo + rows < n ? lo + rows : n;
	for (int64_t i = lo; i < hi; i++) {
		const T *xs = x + i * d, *gs = dout + i * d; // [d] each
		T *dxs = dx + i * d;                          // [d]
		const float mu = mean[i], r = rstd[i];
		float sg = 0.0f, sgn = 0.0f;
		for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
			const float g = __fmul_rn(to_float(gs[j]), to_float(w[j]));
			sg += g;
			sgn += g * ((to_float(xs[j]) - mu) * r);
		}
		const float cg = block_sum(sg, scratch) / (float)d;
		const float cn = block_sum(sgn, scratch) / (float)d;
		for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
			const float gv = to_float(gs[j]), nv = (to_float(xs[j]) - mu) * r;
			dxs[j] = from_float<T>(r * (__fmul_rn(gv, to_float(w[j])) - cg - nv * cn));
			if (want_dw) dws[j] += gv * nv;
			if (want_db) dbs[j] += gv;
		}
	}
	for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
		if (want_dw) dw_part[blockIdx.x * d + j] = dws[j];
		if (want_db) db_part[blockIdx.x * d + j] = dbs[j];
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
			constexpr int VT = pack_width<T>();
			const bool packed = d % VT == 0 && pack_aligned<T, VT>(out) && pack_aligned<T, VT>(x) &&
			                    pack_aligned<W, VT>(w) && pack_aligned<W, VT>(b);
			const auto launch = [&](auto v) {
				constexpr int V = decltype(v)::value;
				const int64_t packs = ceil_div<int64_t>(d, V);
				if (packs <= (int64_t)kCached * kRowThreads)
					LAUNCH((unsigned)n, row_threads(ceil_div<int64_t>(packs, kCached), kRowThreads), 0, stream,
					       layernorm_kernel<T, W, V, kCached>)((T *)out, mean, rstd, (const T *)x, (const W *)w,
					                                           (const W *)b, d, eps);
				else
					LAUNCH((unsigned)n, row_threads(packs, kRowThreads), 0, stream, layernorm_kernel<T, W, V, 0>)(
						(T *)out, mean, rstd, (const T *)x, (const W *)w, (const W *)b, d, eps);
				return cudaGetLastError();
			};
			return packed ? launch(std::integral_constant<int, VT>()) : launch(std::integral_constant<int, 1>());
		});
	});
}

extern "C" size_t tw_layernorm_backward_workspace(int64_t n, int64_t d) {
	if (n <= 0 || d <= 0) return 0;
	return 2 * (size_t)norm_groups(n) * (size_t)d * sizeof(float);
}

// Launches layernorm_backward_kernel with packs of V and P packs per thread.
template <class T, class W, int V, int P>
static cudaError_t launch_backward(const NormPlan &pl, T *dx, float *dw_part, float *db_part, const T *dout,
                                   const T *x, const W *w, const float *mean, const float *rstd, int64_t n, int64_t d,
                                   cudaStream_t stream) {
	LAUNCH((unsigned)norm_groups(n), pl.th * pl.slots, (dw_part || db_part) ? norm_flush_smem(pl, V) : 0, stream,
	       layernorm_backward_kernel<T, W, V, P>)(dx, dw_part, db_part, dout, x, w, mean, rstd, n, d, norm_rows(n),
	                                              pl.th);
	return cudaGetLastError();
}

// Launches the shared-memory kernel, raising its limit when the partials
// need more than the default 48 KiB.
template <class T, class W>
static cudaError_t launch_backward_smem(T *dx, float *dw_part, float *db_part, const T *dout, const T *x, const W *w,
                                        const float *mean, const float *rstd, int64_t n, int64_t d,
                                        cudaStream_t stream) {
	const size_t smem = ((dw_part ? 1 : 0) + (db_part ? 1 : 0)) * (size_t)d * sizeof(float);
	if (smem > 48 * 1024) {
		cudaError_t e = cudaFuncSetAttribute(layernorm_backward_smem_kernel<T, W>,
		                                     cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
		if (e != cudaSuccess) return e;
	}
	LAUNCH((unsigned)norm_groups(n), row_threads(d, kRowThreads), smem, stream, layernorm_backward_smem_kernel<T, W>)(
		dx, dw_part, db_part, dout, x, w, mean, rstd, n, d, norm_rows(n));
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
			const int64_t groups = norm_groups(n);
			float *dw_part = dw ? (float *)workspace : nullptr;                 // [groups, d]
			float *db_part = db ? (float *)workspace + groups * d : nullptr;    // [groups, d]
			const bool packed = d % V == 0 && pack_aligned<T, V>(dx) && pack_aligned<T, V>(dout) &&
			                    pack_aligned<T, V>(x) && pack_aligned<W, V>(w);
			const NormPlan pl = norm_plan(d, packed ? V : 1);
			cudaError_t e;
			if (pl.p == 0)
				e = launch_backward_smem<T, W>((T *)dx, dw_part, db_part, (const T *)dout, (const T *)x, (const W *)w,
				                               mean, rstd, n, d, stream);
			else if (!packed)
				e = launch_backward<T, W, 1, 8>(pl, (T *)dx, dw_part, db_part, (const T *)dout, (const T *)x,
				                                (const W *)w, mean, rstd, n, d, stream);
			else if (pl.p == 1)
				e = launch_backward<T, W, V, 1>(pl, (T *)dx, dw_part, db_part, (const T *)dout, (const T *)x,
				                                (const W *)w, mean, rstd, n, d, stream);
			else
				e = launch_backward<T, W, V, 2>(pl, (T *)dx, dw_part, db_part, (const T *)dout, (const T *)x,
				                                (const W *)w, mean, rstd, n, d, stream);
			if (e != cudaSuccess || !(dw || db)) return e;
			// One launch for both: dw's partials then db's lie contiguously.
			if (dw && db) return launch_colsum<W>((W *)dw, (W *)db, dw_part, groups, d, stream);
			return launch_colsum<W>(dw ? (W *)dw : (W *)db, nullptr, dw ? dw_part : db_part, groups, d, stream);
		});
	});
}
