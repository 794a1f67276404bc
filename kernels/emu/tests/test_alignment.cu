// test_alignment.cu — what a GPU requires of addresses, and the emulator
// with it:
//  - every vector type and 16-bit float type has CUDA's alignment (compile
//    time; under nvcc the same asserts check the CUDA headers themselves);
//  - dynamic shared memory, static shared arrays and cudaMalloc'd memory
//    are aligned at least as a GPU aligns them;
//  - a load or store at an address that is not a multiple of the accessed
//    type's alignment, which a GPU refuses with a misaligned-address fault,
//    aborts the emulated kernel with its file:line (UBSan's alignment check,
//    kernels/emu/CMakeLists.txt), while the same kernel on aligned data runs.
// The kernels compile with nvcc too; the aborts are checked only under the
// emulator.
#include <stdint.h>

#include <string>

#include "../../common.cuh"
#include "harness.h"

static const std::string kFile = "test_alignment.cu:";

// ---- CUDA's alignments (vector_types.h, cuda_bf16.hpp, cuda_fp16.hpp) ----------

#define ALIGNED(T, n) static_assert(alignof(T) == (n) && sizeof(T) % (n) == 0, #T " must be " #n "-byte aligned, as in CUDA")
ALIGNED(char2, 2);
ALIGNED(uchar2, 2);
ALIGNED(char4, 4);
ALIGNED(uchar4, 4);
ALIGNED(short2, 4);
ALIGNED(ushort2, 4);
ALIGNED(short4, 8);
ALIGNED(ushort4, 8);
ALIGNED(int2, 8);
ALIGNED(uint2, 8);
ALIGNED(int3, 4);
ALIGNED(uint3, 4);
ALIGNED(int4, 16);
ALIGNED(uint4, 16);
ALIGNED(float2, 8);
ALIGNED(float3, 4);
ALIGNED(float4, 16);
ALIGNED(double2, 16);
ALIGNED(longlong2, 16);
ALIGNED(ulonglong2, 16);
ALIGNED(__nv_bfloat16, 2);
ALIGNED(__nv_bfloat162, 4);
ALIGNED(__half, 2);
ALIGNED(__half2, 4);
#undef ALIGNED

// ---- Shared and global memory ---------------------------------------------------

// out[0]: the dynamic shared memory's address modulo 256; out[1]: a static
// float4 array's modulo 16 (declared after a 1-byte one that could push it).
__global__ void smem_addresses(unsigned *out) {
	extern __shared__ unsigned char smem[];
	__shared__ unsigned char odd[1];
	__shared__ float4 quads[2];
	if (threadIdx.x == 0) {
		odd[0] = 1;
		quads[0] = make_float4(odd[0], 2, 3, 4);
		out[0] = (unsigned)((uintptr_t)smem % 256);
		out[1] = (unsigned)((uintptr_t)quads % 16);
	}
}

TEST(smem_and_malloc_alignment) {
	DeviceBuf<unsigned> out(2);
	LAUNCH(1, 32, 64, 0, smem_addresses)(out.p);
	CUDA_OK(cudaDeviceSynchronize());
	const std::vector<unsigned> got = out.download();
	CHECKF(got[0] % 16 == 0, "dynamic shared memory at 16-byte boundary + %u", got[0] % 16); // CUDA: 16 at least
	CHECKF(got[1] == 0, "a __shared__ float4 array at 16-byte boundary + %u", got[1]);
	for (size_t n : {1, 3, 100, 4097}) {
		void *p = nullptr;
		CUDA_OK(cudaMalloc(&p, n));
		const uintptr_t mod = (uintptr_t)p % 256;
		cudaFree(p);
		CHECKF(mod == 0, "cudaMalloc(%zu) at 256-byte boundary + %zu", n, (size_t)mod);
	}
}

// ---- Misaligned accesses ------------------------------------------------------------

// out[i] = in[i] + 1 over n floats, through plain f32 loads and stores.
static const int kLoadLine = __LINE__ + 2;
__global__ void add_one(float *out, const float *in, int n) {
	for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = in[i] + 1.0f;
}

// A float4 copy: p and q must be 16-byte aligned.
static const int kQuadLine = __LINE__ + 2;
__global__ void copy_quads(float4 *q, const float4 *p, int n) {
	for (int i = threadIdx.x; i < n; i += blockDim.x) q[i] = p[i];
}

// A __nv_bfloat162 store: q must be 4-byte aligned.
static const int kPairLine = __LINE__ + 3;
__global__ void store_pairs(__nv_bfloat16 *q, int n) {
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		reinterpret_cast<__nv_bfloat162 *>(q)[i] = __floats2bfloat162_rn(1.0f, 2.0f);
}

TEST(aligned_accesses_run) {
	DeviceBuf<float> in(8 + 64), out(8 + 64);
	LAUNCH(1, 32, 0, 0, add_one)(out.p + 1, in.p + 1, 64); // 4-byte aligned: legal
	LAUNCH(1, 32, 0, 0, copy_quads)((float4 *)(out.p + 4), (const float4 *)(in.p + 4), 16);
	DeviceBuf<__nv_bfloat16> h(2 + 64);
	LAUNCH(1, 32, 0, 0, store_pairs)(h.p + 2, 32);
	CUDA_OK(cudaDeviceSynchronize());
}

EMU_CHILD(misaligned_f32_load) {
	DeviceBuf<float> in(65), out(64);
	LAUNCH(1, 32, 0, 0, add_one)(out.p, (const float *)((const char *)in.p + 2), 64);
	cudaDeviceSynchronize();
}

EMU_CHILD(misaligned_float4_load) {
	DeviceBuf<float> in(72), out(64);
	LAUNCH(1, 32, 0, 0, copy_quads)((float4 *)out.p, (const float4 *)(in.p + 2), 16); // 8-byte aligned
	cudaDeviceSynchronize();
}

EMU_CHILD(misaligned_bf162_store) {
	DeviceBuf<__nv_bfloat16> h(66);
	LAUNCH(1, 32, 0, 0, store_pairs)(h.p + 1, 32); // 2-byte aligned
	cudaDeviceSynchronize();
}

EMU_TEST(misaligned_accesses_abort) {
	CHECK(expect_abort("misaligned_f32_load", {},
	                   {kFile + std::to_string(kLoadLine) + ":", ": runtime error: load of misaligned address ",
	                    "which requires 4 byte alignment"}));
	// A struct copy reads through operator='s reference: UBSan reports the
	// reference binding.
	CHECK(expect_abort("misaligned_float4_load", {},
	                   {kFile + std::to_string(kQuadLine) + ":", ": runtime error: ", " misaligned address ", "float4",
	                    "which requires 16 byte alignment"}));
	CHECK(expect_abort("misaligned_bf162_store", {},
	                   {kFile + std::to_string(kPairLine) + ":", ": runtime error: store to misaligned address ",
	                    "__nv_bfloat162", "which requires 4 byte alignment"}));
}
