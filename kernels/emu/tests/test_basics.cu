// test_basics.cu — indexing, shared memory and barriers, launches (template
// kernels, configuration errors, dynamic shared memory limits), the host
// API, and the C launchers of kernels/elementwise.cu.
#include <math.h>

#include "../../common.cuh"
#include "../../kernels.h"
#include "harness.h"

// ---- Indexing over multi-dimensional grids ------------------------------------

__global__ void index_kernel(int4 *out, uint4 *dims) {
	const int bx = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
	const int tx = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
	const int nthreads = blockDim.x * blockDim.y * blockDim.z;
	out[bx * nthreads + tx] = make_int4(blockIdx.x * 100 + threadIdx.x, blockIdx.y * 100 + threadIdx.y,
	                                    blockIdx.z * 100 + threadIdx.z, bx);
	if (bx == 0 && tx == 0) {
		dims[0] = make_uint4(gridDim.x, gridDim.y, gridDim.z, warpSize);
		dims[1] = make_uint4(blockDim.x, blockDim.y, blockDim.z, 0);
	}
}

TEST(indexing) {
	const dim3 grid(3, 2, 2), block(4, 3, 2);
	const int nb = 12, nt = 24;
	DeviceBuf<int4> out(nb * nt);
	DeviceBuf<uint4> dims(2);
	LAUNCH(grid, block, 0, 0, index_kernel)(out.p, dims.p);
	CUDA_OK(cudaGetLastError());
	std::vector<int4> h = out.download();
	for (int bz = 0; bz < 2; bz++)
		for (int by = 0; by < 2; by++)
			for (int bx = 0; bx < 3; bx++)
				for (int tz = 0; tz < 2; tz++)
					for (int ty = 0; ty < 3; ty++)
						for (int tx = 0; tx < 4; tx++) {
							int b = bx + 3 * (by + 2 * bz), t = tx + 4 * (ty + 3 * tz);
							int4 v = h[b * nt + t];
							CHECKF(v.x == bx * 100 + tx && v.y == by * 100 + ty && v.z == bz * 100 + tz && v.w == b,
							       "block %d thread %d: (%d,%d,%d,%d)", b, t, v.x, v.y, v.z, v.w);
						}
	std::vector<uint4> d = dims.download();
	CHECK(d[0].x == 3 && d[0].y == 2 && d[0].z == 2 && d[0].w == 32);
	CHECK(d[1].x == 4 && d[1].y == 3 && d[1].z == 2);
}

// ---- Shared memory: tree reductions -------------------------------------------

// Static shared memory, 256 threads: one partial sum per block.
__global__ void reduce_static(const float *x, float *partial, int n) {
	__shared__ float s[256];
	const int t = threadIdx.x;
	float v = 0.0f;
	for (int i = blockIdx.x * 256 + t; i < n; i += gridDim.x * 256) v += x[i];
	s[t] = v;
	__syncthreads();
	for (int stride = 128; stride > 0; stride >>= 1) {
		if (t < stride) s[t] += s[t + stride];
		__syncthreads();
	}
	if (t == 0) partial[blockIdx.x] = s[0];
}

// Dynamic shared memory, any power-of-two block size.
__global__ void reduce_dynamic(const float *x, float *partial, int n) {
	extern __shared__ unsigned char smem[];
	float *s = reinterpret_cast<float *>(smem);
	const int t = threadIdx.x, nt = blockDim.x;
	float v = 0.0f;
	for (int i = blockIdx.x * nt + t; i < n; i += gridDim.x * nt) v += x[i];
	s[t] = v;
	__syncthreads();
	for (int stride = nt / 2; stride > 0; stride >>= 1) {
		if (t < stride) s[t] += s[t + stride];
		__syncthreads();
	}
	if (t == 0) partial[blockIdx.x] = s[0];
}

// block_sum from common.cuh.
__global__ void reduce_helper(const float *x, float *partial, int n) {
	__shared__ float scratch[32];
	float v = 0.0f;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) v += x[i];
	v = block_sum(v, scratch);
	if (threadIdx.x == 0) partial[blockIdx.x] = v;
}

TEST(shared_reduction) {
	const int n = 100003, blocks = 37;
	std::vector<float> h(n);
	double want = 0;
	for (int i = 0; i < n; i++) {
		h[i] = (float)((i * 7919) % 1000) / 1000.0f;
		want += h[i];
	}
	DeviceBuf<float> x(n), partial(blocks);
	x.upload(h);
	for (int variant = 0; variant < 4; variant++) {
		if (variant == 0) LAUNCH(blocks, 256, 0, 0, reduce_static)(x.p, partial.p, n);
		if (variant == 1) LAUNCH(blocks, 512, 512 * sizeof(float), 0, reduce_dynamic)(x.p, partial.p, n);
		if (variant == 2) LAUNCH(blocks, 64, 64 * sizeof(float), 0, reduce_dynamic)(x.p, partial.p, n);
		if (variant == 3) LAUNCH(blocks, 384, 0, 0, reduce_helper)(x.p, partial.p, n);
		CUDA_OK(cudaGetLastError());
		double got = 0;
		for (float p : partial.download()) got += p;
		CHECKF(fabs(got - want) < 1e-3 * want, "variant %d: %f, want %f", variant, got, want);
	}
}

__global__ void barrier_reductions(const int *pred, int *out) {
	const int t = threadIdx.x;
	int c = __syncthreads_count(pred[t]);
	int a = __syncthreads_and(pred[t]);
	int o = __syncthreads_or(pred[t]);
	int none = __syncthreads_or(0);
	out[t] = c * 1000 + a * 100 + o * 10 + none;
}

TEST(syncthreads_count_and_or) {
	const int n = 96;
	std::vector<int> p(n);
	int count = 0;
	for (int i = 0; i < n; i++) count += p[i] = i % 3 == 0;
	DeviceBuf<int> pred(n), out(n);
	pred.upload(p);
	LAUNCH(1, n, 0, 0, barrier_reductions)(pred.p, out.p);
	for (int v : out.download()) CHECKF(v == count * 1000 + 0 + 10 + 0, "%d", v);
}

// Dynamic shared memory starts as NaN bytes in every block; static shared
// memory persists per OS thread (not checked: CUDA promises nothing).
__global__ void read_unwritten(float *out) {
	extern __shared__ unsigned char smem[];
	const float *s = reinterpret_cast<const float *>(smem);
	if (threadIdx.x == 0) out[blockIdx.x] = s[blockIdx.x % 64];
	__syncthreads();
	reinterpret_cast<float *>(smem)[threadIdx.x] = 1.0f; // dirty it for the next block
}

EMU_TEST(dynamic_smem_nan_fill) { // a GPU leaves shared memory as it was
	DeviceBuf<float> out(16);
	LAUNCH(16, 64, 256, 0, read_unwritten)(out.p);
	for (float v : out.download()) CHECK(isnan(v));
}

// ---- Launches -------------------------------------------------------------------

template <int A, int B> __global__ void affine(float *x, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] = x[i] * A + B;
}

__global__ void big_smem(float *out, int nfloats) {
	extern __shared__ unsigned char smem[];
	float *s = reinterpret_cast<float *>(smem);
	for (int i = threadIdx.x; i < nfloats; i += blockDim.x) s[i] = (float)(i % 7);
	__syncthreads();
	float v = 0;
	for (int i = threadIdx.x; i < nfloats; i += blockDim.x) v += s[nfloats - 1 - i];
	atomicAdd(out, v); // small integers: exact in any order
}

TEST(launch_template_and_errors) {
	DeviceBuf<float> x(1000);
	std::vector<float> h(1000, 1.0f);
	x.upload(h);
	LAUNCH(ceil_div(1000, 128), 128, 0, 0, affine<3, 2>)(x.p, 1000); // the comma needs no parentheses
	CUDA_OK(cudaGetLastError());
	for (float v : x.download()) CHECK(v == 5.0f);

	fprintf(stderr, "  (three launch errors are expected here)\n");
	LAUNCH(1, 2048, 0, 0, affine<1, 0>)(x.p, 1000);
	CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
	CHECK(cudaGetLastError() == cudaSuccess); // read and cleared
	LAUNCH(dim3(1, 70000), 32, 0, 0, affine<1, 0>)(x.p, 1000);
	CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);

	// Over 48 KiB of dynamic shared memory needs the attribute, as on a GPU.
	const int bytes = 100 * 1024, nfloats = bytes / 4;
	DeviceBuf<float> sum(1);
	CUDA_OK(cudaMemset(sum.p, 0, sizeof(float)));
	LAUNCH(1, 256, bytes, 0, big_smem)(sum.p, nfloats);
	CHECK(cudaGetLastError() == cudaErrorInvalidValue);
	CHECK(cudaFuncSetAttribute(big_smem, cudaFuncAttributeMaxDynamicSharedMemorySize, 300 * 1024) ==
	      cudaErrorInvalidValue);
	cudaGetLastError(); // the failed call above left its error there, as in CUDA
	CUDA_OK(cudaFuncSetAttribute(big_smem, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
	LAUNCH(1, 256, bytes, 0, big_smem)(sum.p, nfloats);
	CUDA_OK(cudaGetLastError());
	float want = 0;
	for (int i = 0; i < nfloats; i++) want += (float)(i % 7);
	CHECKF(sum.download()[0] == want, "%f, want %f", sum.download()[0], want);
}

// ---- Host API ---------------------------------------------------------------------

TEST(host_api) {
	unsigned char *d = nullptr;
	CUDA_OK(cudaMalloc((void **)&d, 1000));
	CHECK(((uintptr_t)d & 255) == 0);
	std::vector<unsigned char> h(1000, 7);
#ifdef TW_EMU
	CUDA_OK(cudaMemcpy(h.data(), d, 1000, cudaMemcpyDeviceToHost));
	CHECK(h[0] == 0xff && h[999] == 0xff); // fresh memory reads as NaN bytes
#endif
	CUDA_OK(cudaMemset(d, 0xff, 1000));
	CUDA_OK(cudaMemset(d + 10, 3, 20));
	cudaStream_t s;
	CUDA_OK(cudaStreamCreate(&s));
	CUDA_OK(cudaMemcpyAsync(h.data(), d, 1000, cudaMemcpyDeviceToHost, s));
	CUDA_OK(cudaStreamSynchronize(s));
	CHECK(h[9] == 0xff && h[10] == 3 && h[29] == 3 && h[30] == 0xff);

#ifdef TW_EMU
	// Host/device mix-ups and overruns fail instead of corrupting memory.
	CHECK(cudaMemcpy(h.data(), h.data() + 500, 10, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
	CHECK(cudaMemcpy(d, d + 500, 10, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
	CHECK(cudaMemcpy(h.data(), d + 990, 11, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
	CHECK(cudaMemset(h.data(), 0, 10) == cudaErrorInvalidValue);
	CHECK(cudaGetLastError() == cudaErrorInvalidValue);
	CHECK(cudaGetLastError() == cudaSuccess);
#endif
	CUDA_OK(cudaMemcpy(d + 500, d, 100, cudaMemcpyDeviceToDevice));
	CUDA_OK(cudaMemcpy(d, h.data(), 1000, cudaMemcpyDefault));
#ifdef TW_EMU
	CHECK(cudaFree(h.data()) == cudaErrorInvalidValue);
#endif
	CUDA_OK(cudaFree(d));
#ifdef TW_EMU
	CHECK(cudaFree(d) == cudaErrorInvalidValue); // double free
	cudaGetLastError();
#endif

	cudaEvent_t a, b;
	CUDA_OK(cudaEventCreate(&a));
	CUDA_OK(cudaEventCreate(&b));
	CUDA_OK(cudaEventRecord(a, s));
	CUDA_OK(cudaEventRecord(b, s));
	float ms = -1;
	CUDA_OK(cudaEventElapsedTime(&ms, a, b));
	CHECK(ms >= 0 && ms < 1000);
	CUDA_OK(cudaEventDestroy(a));
	CUDA_OK(cudaEventDestroy(b));
	CUDA_OK(cudaStreamDestroy(s));
	int v = 0;
	CUDA_OK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
	CHECK(v >= 163 * 1024); // A100: 163 KiB, H100 and the emulator: 227 KiB
	CHECK(strcmp(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory") == 0);
}

// ---- The library's C launchers ----------------------------------------------------

TEST(elementwise_launchers) {
	const int64_t n = 1000003;
	DeviceBuf<float> a(n), b(n);
	cudaStream_t s;
	CUDA_OK(cudaStreamCreate(&s));
	CUDA_OK(tw_fill(a.p, TW_F32, n, 1.5f, s));
	CUDA_OK(tw_fill(b.p, TW_F32, n, -0.25f, s));
	CUDA_OK(tw_add(a.p, a.p, b.p, TW_F32, n, s)); // out aliases a
	CUDA_OK(tw_fill(b.p, TW_F32, 0, 9.0f, s));    // n = 0: nothing
	CUDA_OK(cudaStreamSynchronize(s));
	std::vector<float> h = a.download();
	for (int64_t i = 0; i < n; i++) CHECKF(h[i] == 1.25f, "a[%ld] = %f", (long)i, h[i]);
	CHECK(b.download()[0] == -0.25f);
	CUDA_OK(cudaStreamDestroy(s));
}
