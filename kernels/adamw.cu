// adamw.cu — the AdamW update, in place: of one parameter tensor (tw_adamw),
// or of a whole table of them in one launch (tw_adamw_multi).
//
// Contract: engine.Backend.AdamW and AdamWMulti (engine/backend.go); the
// launchers' arguments are listed in kernels.h. What the kernels add to it:
//   The update is engine/cpu's f32 formula (vec.c twcpu_adamw), operation
//   for operation. With decay = 1 − lr·wd and step = lr/bc1 (both f32,
//   formed by the launcher as the CPU forms them; bc1 = 1 − β1^t and
//   bc2 = sqrt(1 − β2^t) come from the caller), for every element, in f32:
//       g = grad·grad_scale
//       m = β1·m + (1−β1)·g
//       v = β2·v + (1−β2)·(g·g)
//       w = w·decay − (step·m) / (sqrt(v)/bc2 + eps)
//   where w is the master element when there is one (the parameter then
//   receives w rounded to its dtype) and the parameter's otherwise. Every
//   operation is an explicitly rounded intrinsic (__fmul_rn, __fadd_rn,
//   __fdiv_rn, __fsqrt_rn), so nvcc contracts nothing into FMAs, and vec.c
//   turns contraction off: the GPU, the emulator and the CPU compute the
//   same bits, and tw_adamw_multi the same bits as tw_adamw.
//   tw_adamw: a non-float dtype, or a bf16/f16 param without a master, is
//   cudaErrorInvalidValue (checked first); otherwise n ≤ 0 launches nothing.
//   tw_adamw_multi: the table of spans is in device memory, which a launcher
//   does not read, so engine.NewParamTable is what checks it (increasing,
//   non-overlapping offsets; float dtypes; a master unless f32). A non-float
//   gdt is cudaErrorInvalidValue; end ≤ 0 or nspans ≤ 0 launches nothing.
//
// Design.
//
// adamw_kernel: element-wise, one thread per element, grid-stride loop.
//   When every array is aligned to its 4-element pack (16 bytes for f32, 8
//   for 16-bit types), a thread handles 4 consecutive elements with one
//   vector load or store per array; a tail of n % 4 elements (or every
//   element, when some pointer is misaligned) goes element by element. Each
//   element is updated by exactly one thread: deterministic, no atomics, no
//   shared memory.
//
// adamw_multi_kernel: the flat range [0, end) is cut into chunks of kChunk
//   elements, one block per chunk (grid-stride over chunks). A block finds
//   the first span that ends inside its chunk by binary search over the
//   table (every thread searches alike; the table is small and cached), then
//   walks the spans that overlap the chunk, and for each overlap runs the
//   same per-element loop as adamw_kernel over the block's threads, with the
//   parameter's dtype and master chosen per span (uniform across the block)
//   and the vector path taken when that overlap's pointers are aligned. One
//   launch updates every parameter; the table is built once by the caller.
#include <type_traits>

#include "common.cuh"
#include "kernels.h"
#include "pack.cuh"

static constexpr int kBlock = 256;

struct AdamWArgs {
	float gscale, b1, b2, c1, c2, eps, decay, step, bc2; // c1 = 1 − β1, c2 = 1 − β2
};

// One element's update; m and v are updated in place, the new weight returned.
static __device__ __forceinline__ float adamw_update(float w, float g, float &m, float &v, const AdamWArgs &a) {
	const float gs = __fmul_rn(g, a.gscale);
	m = __fadd_rn(__fmul_rn(a.b1, m), __fmul_rn(a.c1, gs));
	v = __fadd_rn(__fmul_rn(a.b2, v), __fmul_rn(a.c2, __fmul_rn(gs, gs)));
	const float den = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), a.bc2), a.eps);
	return __fsub_rn(__fmul_rn(w, a.decay), __fdiv_rn(__fmul_rn(a.step, m), den));
}

// One thread's share of the update of n elements: the 4-element packs
// first, first + stride, … when vec (every pointer aligned to its Pack; the
// caller checks), then the elements after the packs (or all of them)
// first, first + stride, …. P, G: param and grad element types. kMaster:
// master is given (the update runs on it; param receives its rounding).
template <class P, class G, bool kMaster>
static __device__ __forceinline__ void adamw_range(P *__restrict__ param,        // [n]
                                                   const G *__restrict__ grad,   // [n]
                                                   float *__restrict__ m,        // [n]
                                                   float *__restrict__ v,        // [n]
                                                   float *__restrict__ master,   // [n] when kMaster, else unused
                                                   int64_t n, const AdamWArgs &a, bool vec, int64_t first,
                                                   int64_t stride) {
	int64_t i = first;
	int64_t done = 0; // elements [0, done) are the vector loop's
	if (vec) {
		const int64_t n4 = n / 4; // [n4] packs of 4
		for (int64_t q = i; q < n4; q += stride) {
			const int64_t e = 4 * q;
			float g[4], mm[4], vv[4], w[4]; // elements e…e+3
			load_pack(g, grad + e);
			load_pack(mm, m + e);
			load_pack(vv, v + e);
			if constexpr (kMaster) load_pack(w, master + e);
			else load_pack(w, param + e);
			for (int k = 0; k < 4; k++) w[k] = adamw_update(w[k], g[k], mm[k], vv[k], a);
			store_pack(m + e, mm);
			store_pack(v + e, vv);
			store_pack(param + e, w);
			if constexpr (kMaster) store_pack(master + e, w);
		}
		done = 4 * n4;
	}
	for (i += done; i < n; i += stride) {
		float mi = m[i], vi = v[i];
		const float w = adamw_update(kMaster ? master[i] : to_float(param[i]), to_float(grad[i]), mi, vi, a);
		m[i] = mi;
		v[i] = vi;
		if constexpr (kMaster) master[i] = w;
		param[i] = from_float<P>(w);
	}
}

// vec: every pointer is aligned to its 4-element Pack (checked by the
// launcher).
template <class P, class G, bool kMaster>
__global__ void __launch_bounds__(kBlock)
	adamw_kernel(P *__restrict__ param,        // [n]
	             const G *__restrict__ grad,   // [n]
	             float *__restrict__ m,        // [n]
	             float *__restrict__ v,        // [n]
	             float *__restrict__ master,   // [n] when kMaster, else unused
	             int64_t n, AdamWArgs a, bool vec) {
	adamw_range<P, G, kMaster>(param, grad, m, v, master, n, a, vec, blockIdx.x * (int64_t)blockDim.x + threadIdx.x,
	                           (int64_t)gridDim.x * blockDim.x);
}

// The f32 constants of one update, formed as engine/cpu forms them.
static AdamWArgs adamw_args(float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                            float bc1, float bc2) {
	AdamWArgs a;
	a.gscale = grad_scale;
	a.b1 = beta1;
	a.b2 = beta2;
	a.c1 = 1.0f - beta1;
	a.c2 = 1.0f - beta2;
	a.eps = eps;
	// f32 product, then f32 difference. The volatile keeps a host compiler
	// from fusing the two into an FMA (as g++ may where the host has one: the
	// emulator's build, an aarch64 host), which can move decay by one unit
	// (at lr 0.1, wd 0.3).
	const volatile float lr_wd = lr * weight_decay;
	a.decay = 1.0f - lr_wd;
	a.step = lr / bc1;
	a.bc2 = bc2;
	return a;
}

extern "C" cudaError_t tw_adamw(void *param, tw_dtype pdt, const void *grad, tw_dtype gdt, float *m, float *v,
                                float *master, int64_t n, float lr, float beta1, float beta2, float eps,
                                float weight_decay, float grad_scale, float bc1, float bc2, cudaStream_t stream) {
	auto is_float = [](tw_dtype d) { return d == TW_F32 || d == TW_BF16 || d == TW_F16; };
	if (!is_float(pdt) || !is_float(gdt) || (pdt != TW_F32 && master == nullptr)) return cudaErrorInvalidValue;
	if (n <= 0) return cudaSuccess;
	const AdamWArgs a = adamw_args(lr, beta1, beta2, eps, weight_decay, grad_scale, bc1, bc2);
	return dispatch_float(pdt, [&](auto *pt) {
		return dispatch_float(gdt, [&](auto *gt) {
			using P = elem_t<decltype(pt)>;
			using G = elem_t<decltype(gt)>;
			const bool vec = pack_aligned<P, 4>(param) && pack_aligned<G, 4>(grad) && pack_aligned<float, 4>(m) &&
			                 pack_aligned<float, 4>(v) && (!master || pack_aligned<float, 4>(master));
			const unsigned grid = grid_for(ceil_div<int64_t>(n, vec ? 4 : 1), kBlock, 4096);
			if (master) {
				LAUNCH(grid, kBlock, 0, stream, adamw_kernel<P, G, true>)((P *)param, (const G *)grad, m, v, master, n,
				                                                         a, vec);
			} else if constexpr (std::is_same_v<P, float>) { // a 16-bit param without master was refused above
				LAUNCH(grid, kBlock, 0, stream, adamw_kernel<P, G, false>)((P *)param, (const G *)grad, m, v, master,
				                                                          n, a, vec);
			}
			return cudaGetLastError();
		});
	});
}

// ---- the multi-tensor update ------------------------------------------------------

static constexpr int64_t kChunk = 4096; // flat elements per block and chunk

// Whether p may be accessed as a 4-element Pack of T, on the device.
template <class T> static __device__ __forceinline__ bool aligned4(const void *p) {
	return (uintptr_t)p % alignof(Pack<T, 4>) == 0;
}

// The block's update of elements [j, j+len) of one parameter whose element
// type is P; g, m, v and master point at element j's entries.
template <class P, class G>
static __device__ __forceinline__ void adamw_span_part(P *param, const G *g, float *m, float *v, float *master,
                                                       int64_t len, const AdamWArgs &a) {
	const bool vec = aligned4<P>(param) && aligned4<G>(g) && aligned4<float>(m) && aligned4<float>(v) &&
	                 (master == nullptr || aligned4<float>(master));
	if (master != nullptr) adamw_range<P, G, true>(param, g, m, v, master, len, a, vec, threadIdx.x, blockDim.x);
	else if constexpr (std::is_same_v<P, float>)
		adamw_range<P, G, false>(param, g, m, v, nullptr, len, a, vec, threadIdx.x, blockDim.x);
}

template <class G>
__global__ void __launch_bounds__(kBlock)
	adamw_multi_kernel(const tw_adamw_span *__restrict__ spans, // [nspans], increasing off
	                   int64_t nspans,
	                   const G *__restrict__ grad, // [end]
	                   float *__restrict__ m,      // [end]
	                   float *__restrict__ v,      // [end]
	                   float *__restrict__ master, // the spans' masters, or nullptr
	                   int64_t end, AdamWArgs a) {
	const int64_t nchunks = ceil_div<int64_t>(end, kChunk);
	for (int64_t c = blockIdx.x; c < nchunks; c += gridDim.x) { // uniform across the block
		const int64_t cs = c * kChunk, ce = min(cs + kChunk, end);
		int64_t lo = 0, hi = nspans; // the first span that ends after cs
		while (lo < hi) {
			const int64_t mid = (lo + hi) / 2;
			if (spans[mid].off + spans[mid].n > cs) hi = mid;
			else lo = mid + 1;
		}
		for (int64_t s = lo; s < nspans && spans[s].off < ce; s++) {
			const tw_adamw_span sp = spans[s];
			const int64_t a0 = max(cs, sp.off), len = min(ce, sp.off + sp.n) - a0;
			const int64_t j = a0 - sp.off; // the overlap's first element within the parameter
			float *ms = sp.master_off >= 0 ? master + sp.master_off + j : nullptr;
			switch (sp.dtype) {
			case TW_F32: adamw_span_part((float *)(uintptr_t)sp.param + j, grad + a0, m + a0, v + a0, ms, len, a); break;
			case TW_BF16:
				adamw_span_part((__nv_bfloat16 *)(uintptr_t)sp.param + j, grad + a0, m + a0, v + a0, ms, len, a);
				break;
			case TW_F16: adamw_span_part((__half *)(uintptr_t)sp.param + j, grad + a0, m + a0, v + a0, ms, len, a); break;
			default: break; // not a float type: refused by engine.NewParamTable
			}
		}
	}
}

extern "C" cudaError_t tw_adamw_multi(const tw_adamw_span *spans, int64_t nspans, int64_t end, const void *grad,
                                      tw_dtype gdt, float *m, float *v, float *master, float lr, float beta1,
                                      float beta2, float eps, float weight_decay, float grad_scale, float bc1,
                                      float bc2, cudaStream_t stream) {
	const AdamWArgs a = adamw_args(lr, beta1, beta2, eps, weight_decay, grad_scale, bc1, bc2);
	return dispatch_float(gdt, [&](auto *gt) {
		using G = elem_t<decltype(gt)>;
		if (end <= 0 || nspans <= 0) return cudaSuccess;
		const unsigned grid = grid_for(ceil_div<int64_t>(end, kChunk), 1, 4096);
		LAUNCH(grid, kBlock, 0, stream, adamw_multi_kernel<G>)(spans, nspans, (const G *)grad, m, v, master, end, a);
		return cudaGetLastError();
	});
}
