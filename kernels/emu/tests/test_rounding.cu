// test_rounding.cu — FMA contraction and the explicitly rounded intrinsics.
// nvcc contracts a·b + c into one FMA by default, which rounds once where
// the source rounds twice; the emulated kernels are built to contract too
// (kernels/emu/CMakeLists.txt), so that a kernel relying on a rounded
// product fails here as on a GPU. The intrinsics __fmul_rn, __fadd_rn,
// __fsub_rn (and their double forms) are never contracted, on a GPU or here.
//
// With a = b = 1 + 2⁻¹² (f32) the exact product is 1 + 2⁻¹¹ + 2⁻²⁴, which
// rounds to c = 1 + 2⁻¹¹ (a tie, to even): a·b − c is 2⁻²⁴ when fused and 0
// when the product is rounded first. In f64, a = b = 1 + 2⁻²⁷ gives 2⁻⁵⁴.
#include <string.h>

#include "../../common.cuh"
#include "harness.h"

// a·b − c as written: nvcc fuses it, and so must g++ here. (g++ fuses a
// product only when every use of it is an addition, so it has a kernel of
// its own.)
__global__ void plain(float *out, const float *in) { out[0] = in[0] * in[1] - in[2]; }
__global__ void plain_f64(double *out, const double *in) { out[0] = in[0] * in[1] - in[2]; }

// out[k] for the k-th intrinsic way of computing a·b − c (see the test).
__global__ void intrinsics(float *out, const float *in) {
	const float a = in[0], b = in[1], c = in[2];
	out[0] = __fmul_rn(a, b) - c;
	out[1] = __fsub_rn(a * b, c);
	out[2] = __fadd_rn(a * b, -c);
	out[3] = __fmaf_rn(a, b, -c);
}

__global__ void intrinsics_f64(double *out, const double *in) {
	const double a = in[0], b = in[1], c = in[2];
	out[0] = __dmul_rn(a, b) - c;
	out[1] = __dsub_rn(a * b, c);
	out[2] = __dadd_rn(a * b, -c);
	out[3] = __fma_rn(a, b, -c);
}

// Runs kernel (one thread) on in = {a, a, c} and returns its n outputs.
template <class T> static std::vector<T> run(void (*kernel)(T *, const T *), int n, T a, T c) {
	DeviceBuf<T> in(3), out(n);
	in.upload({a, a, c});
	LAUNCH(1, 1, 0, 0, kernel)(out.p, in.p);
	cudaDeviceSynchronize();
	return out.download();
}

static const float kA = 1.0f + 0x1p-12f, kC = 1.0f + 0x1p-11f;
static const double kA64 = 1.0 + 0x1p-27, kC64 = 1.0 + 0x1p-26;

TEST(rounded_intrinsics_are_not_contracted) {
	const std::vector<float> f = run(intrinsics, 4, kA, kC);
	CHECKF(f[0] == 0.0f, "__fmul_rn(a, b) - c = %a", f[0]);
	CHECKF(f[1] == 0.0f, "__fsub_rn(a * b, c) = %a", f[1]);
	CHECKF(f[2] == 0.0f, "__fadd_rn(a * b, -c) = %a", f[2]);
	CHECKF(f[3] == 0x1p-24f, "__fmaf_rn(a, b, -c) = %a, want 0x1p-24", f[3]);
	const std::vector<double> d = run(intrinsics_f64, 4, kA64, kC64);
	CHECKF(d[0] == 0.0, "__dmul_rn(a, b) - c = %a", d[0]);
	CHECKF(d[1] == 0.0, "__dsub_rn(a * b, c) = %a", d[1]);
	CHECKF(d[2] == 0.0, "__dadd_rn(a * b, -c) = %a", d[2]);
	CHECKF(d[3] == 0x1p-54, "__fma_rn(a, b, -c) = %a, want 0x1p-54", d[3]);
}

// Whether nvcc fuses a given a·b − c is its choice, not CUDA's promise: this
// checks the emulator's build only (it must contract, or it hides the bug).
EMU_TEST(plain_product_is_contracted) {
	const std::vector<float> f = run(plain, 1, kA, kC);
	CHECKF(f[0] == 0x1p-24f, "a * b - c = %a: not fused into an FMA (want 0x1p-24); is -ffp-contract=fast -mfma set?",
	       f[0]);
	const std::vector<double> d = run(plain_f64, 1, kA64, kC64);
	CHECKF(d[0] == 0x1p-54, "a * b - c = %a in f64: not fused into an FMA (want 0x1p-54)", d[0]);
}

// rcp_fast (common.cuh) against __frcp_rn for the floats 0x3f800000 + i,
// i = 0, step, 2·step, … below 126·2²³: [1, 2^126), where rcp_fast is
// meant to be exact. Counts the mismatches and keeps the least i of one.
__global__ void rcp_compare(unsigned long long *bad, unsigned *first, unsigned step) {
	const unsigned n = 126u << 23, stride = gridDim.x * blockDim.x * step;
	for (unsigned i = (blockIdx.x * blockDim.x + threadIdx.x) * step; i < n; i += stride) {
		const float x = __uint_as_float(0x3f800000u + i);
		if (__float_as_uint(rcp_fast(x)) != __float_as_uint(__frcp_rn(x))) {
			atomicAdd(bad, 1ull);
			atomicMin(first, i);
		}
	}
}

// On a GPU every float of [1, 2^126) (about 10⁹: well under a second);
// here, where rcp_fast is 1/x by definition, one in 4099.
TEST(rcp_fast_is_correctly_rounded) {
#ifdef TW_EMU
	const unsigned step = 4099, grid = 64;
#else
	const unsigned step = 1, grid = 4096;
#endif
	DeviceBuf<unsigned long long> bad(1);
	DeviceBuf<unsigned> first(1);
	bad.upload({0ull});
	first.upload({~0u});
	LAUNCH(grid, 256, 0, 0, rcp_compare)(bad.p, first.p, step);
	CUDA_OK(cudaDeviceSynchronize());
	const unsigned long long nbad = bad.download()[0];
	const unsigned bits = 0x3f800000u + first.download()[0];
	float x;
	memcpy(&x, &bits, sizeof x);
	CHECKF(nbad == 0, "%llu floats x in [1, 2^126) with rcp_fast(x) != __frcp_rn(x), the first %a", nbad, (double)x);
}
