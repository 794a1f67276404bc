// adamw.cu — the AdamW update of one parameter tensor, in place.
//
// Contract (launcher tw_adamw in kernels.h; engine.Backend.AdamW):
//   param [n] pdt, grad [n] gdt (f32, bf16 or f16 each), m, v [n] f32,
//   master [n] f32 or NULL (required unless pdt is f32). With
//   decay = 1 − lr·wd and step = lr/bc1 (both f32, formed by the launcher as
//   the CPU forms them; bc1 = 1 − β1^t and bc2 = sqrt(1 − β2^t) come from the
//   caller), for every i, in f32:
//       g = grad[i]·grad_scale
//       m = β1·m + (1−β1)·g
//       v = β2·v + (1−β2)·(g·g)
//       w = w·decay − (step·m) / (sqrt(v)/bc2 + eps)
//   where w is master[i] when master is given (param[i] then receives w
//   rounded to pdt) and param[i] otherwise. This is engine/cpu's f32 formula
//   (vec.c tw_adamw), operation for operation. Every operation is an
//   explicitly rounded intrinsic (__fmul_rn, __fadd_rn, __fdiv_rn,
//   __fsqrt_rn), so nvcc contracts nothing into FMAs and the GPU and the
//   emulator compute the same bits. (The CPU's compiler may fuse some of the
//   products into FMAs; the results then differ in the last bit.)
//   A non-float dtype, or a bf16/f16 param without a master, is
//   cudaErrorInvalidValue (checked first); otherwise n ≤ 0 launches nothing.
//
// Design: element-wise, one thread per element, grid-stride loop. When every
// array is aligned to its 4-element pack (16 bytes for f32, 8 for 16-bit
// types), a thread handles 4 consecutive elements with one vector load or
// store per array; a tail of n % 4 elements (or every element, when some
// pointer is misaligned) goes element by element. Each element is updated by
// exactly one thread: deterministic, no atomics, no shared memory.
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

// P, G: param and grad element types. kMaster: master is given (the update
// runs on it; param receives its rounding). vec: every pointer is aligned to
// its 4-element Pack (checked by the launcher).
template <class P, class G, bool kMaster>
__global__ void __launch_bounds__(kBlock)
	adamw_kernel(P *__restrict__ param,        // [n]
	             const G *__restrict__ grad,   // [n]
	             float *__restrict__ m,        // [n]
	             float *__restrict__ v,        // [n]
	             float *__restrict__ master,   // [n] when kMaster, else unused
	             int64_t n, AdamWArgs a, bool vec) {
	const int64_t stride = (int64_t)gridDim.x * blockDim.x;
	int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
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

extern "C" cudaError_t tw_adamw(void *param, tw_dtype pdt, const void *grad, tw_dtype gdt, float *m, float *v,
                                float *master, int64_t n, float lr, float beta1, float beta2, float eps,
                                float weight_decay, float grad_scale, float bc1, float bc2, cudaStream_t stream) {
	auto is_float = [](tw_dtype d) { return d == TW_F32 || d == TW_BF16 || d == TW_F16; };
	if (!is_float(pdt) || !is_float(gdt) || (pdt != TW_F32 && master == nullptr)) return cudaErrorInvalidValue;
	if (n <= 0) return cudaSuccess;
	AdamWArgs a;
	a.gscale = grad_scale;
	a.b1 = beta1;
	a.b2 = beta2;
	a.c1 = 1.0f - beta1;
	a.c2 = 1.0f - beta2;
	a.eps = eps;
	a.decay = 1.0f - lr * weight_decay; // as engine/cpu: f32 product, then f32 difference
	a.step = lr / bc1;
	a.bc2 = bc2;
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
