// test_matmul.cu — a shared-memory-tiled f32 matmul and wmma GEMMs (bf16
// and f16 operands, row- and column-major operands and results, f32 and f16
// accumulators) against host loops; and the emulator's costs: per barrier
// per thread, per shuffle per lane, the 256³ tiled matmul and the 256³ wmma
// GEMM.
#include <math.h>
#include <stdlib.h>

#include <time.h>

#include <algorithm>
#include <type_traits>

#include <mma.h>

#include "../../common.cuh"
#include "harness.h"

using namespace nvcuda;

// C[M,N] = A[M,K]·B[K,N], row-major; TILE×TILE threads per block.
template <int TILE>
__global__ void matmul_tiled(const float *A, const float *B, float *C, int M, int N, int K) {
	__shared__ float As[TILE][TILE], Bs[TILE][TILE + 1];
	const int tx = threadIdx.x, ty = threadIdx.y;
	const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
	float acc = 0.0f;
	for (int k0 = 0; k0 < K; k0 += TILE) {
		As[ty][tx] = row < M && k0 + tx < K ? A[(size_t)row * K + k0 + tx] : 0.0f;
		Bs[ty][tx] = k0 + ty < K && col < N ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
		__syncthreads();
		for (int k = 0; k < TILE; k++) acc += As[ty][k] * Bs[k][tx];
		__syncthreads();
	}
	if (row < M && col < N) C[(size_t)row * N + col] = acc;
}

static std::vector<float> random_matrix(int n, unsigned seed) {
	std::vector<float> v(n);
	for (int i = 0; i < n; i++) {
		seed = seed * 1664525u + 1013904223u;
		v[i] = (float)((seed >> 9) % 2001) / 1000.0f - 1.0f;
	}
	return v;
}

// Reference: out[i,j] = Σ_k a(i,k)·b(k,j) in double.
template <class FA, class FB> static std::vector<double> ref_matmul(int M, int N, int K, FA a, FB b) {
	std::vector<double> c((size_t)M * N);
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			double s = 0;
			for (int k = 0; k < K; k++) s += (double)a(i, k) * b(k, j);
			c[(size_t)i * N + j] = s;
		}
	return c;
}

static double run_tiled(int M, int N, int K, std::vector<float> *out, int reps) {
	std::vector<float> a = random_matrix(M * K, 1), b = random_matrix(K * N, 2);
	DeviceBuf<float> A(M * K), B(K * N), C(M * N);
	A.upload(a);
	B.upload(b);
	double t = median_time(reps, [&] {
		LAUNCH(dim3(ceil_div(N, 16), ceil_div(M, 16)), dim3(16, 16), 0, 0, matmul_tiled<16>)(A.p, B.p, C.p, M, N, K);
	});
	*out = C.download();
	return t;
}

TEST(tiled_matmul) {
	const int shapes[][3] = {{256, 256, 256}, {100, 75, 37}, {1, 17, 3}};
	for (auto &s : shapes) {
		const int M = s[0], N = s[1], K = s[2];
		std::vector<float> got;
		run_tiled(M, N, K, &got, 1);
		CUDA_OK(cudaGetLastError());
		std::vector<float> a = random_matrix(M * K, 1), b = random_matrix(K * N, 2);
		std::vector<double> want = ref_matmul(M, N, K, [&](int i, int k) { return a[(size_t)i * K + k]; },
		                                      [&](int k, int j) { return b[(size_t)k * N + j]; });
		for (size_t i = 0; i < want.size(); i++)
			CHECKF(fabs(got[i] - want[i]) < 1e-4 * (1 + fabs(want[i])), "%dx%dx%d [%zu]: %f vs %f", M, N, K, i, got[i],
			       want[i]);
	}
}

// C = A·B with one warp per 16×16 tile of C, four warps per block (a 32×32
// region). A [M,K] row-major. B [K,N] row-major, or (BT) Bᵀ stored [N,K],
// read as a col_major matrix_b. C [M,N] row-major, or (CT) stored [N,M].
template <class T, bool BT, bool CT>
__global__ void wmma_gemm(const T *A, const T *B, float *C, int M, int N, int K) {
	typedef typename std::conditional<BT, wmma::col_major, wmma::row_major>::type BLayout;
	const int warp = threadIdx.x / 32;
	const int tm = blockIdx.y * 32 + warp / 2 * 16, tn = blockIdx.x * 32 + warp % 2 * 16;
	wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
	wmma::fragment<wmma::matrix_b, 16, 16, 16, T, BLayout> b;
	wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
	wmma::fill_fragment(acc, 0.0f);
	for (int k = 0; k < K; k += 16) {
		wmma::load_matrix_sync(a, A + (size_t)tm * K + k, K);
		wmma::load_matrix_sync(b, BT ? B + (size_t)tn * K + k : B + (size_t)k * N + tn, BT ? K : N);
		wmma::mma_sync(acc, a, b, acc);
	}
	if (CT)
		wmma::store_matrix_sync(C + (size_t)tn * M + tm, acc, M, wmma::mem_col_major);
	else
		wmma::store_matrix_sync(C + (size_t)tm * N + tn, acc, N, wmma::mem_row_major);
}

template <class T, bool BT, bool CT> static double run_wmma(int M, int N, int K, int reps, bool check) {
	std::vector<float> af = random_matrix(M * K, 3), bf = random_matrix(K * N, 4);
	std::vector<T> a(af.begin(), af.end()), b(bf.size());
	for (int k = 0; k < K; k++)
		for (int j = 0; j < N; j++) b[BT ? (size_t)j * K + k : (size_t)k * N + j] = T(bf[(size_t)k * N + j]);
	DeviceBuf<T> dA(a.size()), dB(b.size());
	DeviceBuf<float> dC((size_t)M * N);
	dA.upload(a);
	dB.upload(b);
	double t = median_time(reps, [&] {
		LAUNCH(dim3(N / 32, M / 32), 128, 0, 0, wmma_gemm<T, BT, CT>)(dA.p, dB.p, dC.p, M, N, K);
	});
	if (cudaGetLastError() != cudaSuccess) return -1;
	if (!check) return t;
	std::vector<float> c = dC.download();
	std::vector<double> want = ref_matmul(M, N, K, [&](int i, int k) { return float(a[(size_t)i * K + k]); },
	                                      [&](int k, int j) { return float(T(bf[(size_t)k * N + j])); });
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			float g = c[CT ? (size_t)j * M + i : (size_t)i * N + j];
			double w = want[(size_t)i * N + j];
			if (fabs(g - w) > 1e-4 * (1 + fabs(w))) {
				fprintf(stderr, "  [%d,%d]: %f, want %f\n", i, j, g, w);
				return -1;
			}
		}
	return t;
}

TEST(wmma_gemm) {
	CHECK((run_wmma<__nv_bfloat16, false, false>(64, 64, 64, 1, true)) >= 0);
	CHECK((run_wmma<__nv_bfloat16, true, true>(64, 64, 64, 1, true)) >= 0);
	CHECK((run_wmma<__half, false, true>(64, 96, 32, 1, true)) >= 0);
	CHECK((run_wmma<__half, true, false>(32, 64, 128, 1, true)) >= 0);
}

// D = A·B + C on one 16×16×16 tile with f16 accumulators, loaded from and
// stored to memory, and an element-wise pass over the fragment.
__global__ void wmma_half_acc(const __half *A, const __half *B, const __half *C, __half *D) {
	wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::col_major> a;
	wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b;
	wmma::fragment<wmma::accumulator, 16, 16, 16, __half> c;
	wmma::load_matrix_sync(a, A, 16);
	wmma::load_matrix_sync(b, B, 16);
	wmma::load_matrix_sync(c, C, 16, wmma::mem_row_major);
	wmma::mma_sync(c, a, b, c);
	for (int i = 0; i < c.num_elements; i++) c.x[i] = __hmul(c.x[i], __float2half(2.0f));
	wmma::store_matrix_sync(D, c, 16, wmma::mem_row_major);
}

TEST(wmma_half_accumulator) {
	std::vector<float> af = random_matrix(256, 5), bf = random_matrix(256, 6), cf = random_matrix(256, 7);
	std::vector<__half> a(af.begin(), af.end()), b(bf.begin(), bf.end()), c(cf.begin(), cf.end());
	DeviceBuf<__half> dA(256), dB(256), dC(256), dD(256);
	dA.upload(a);
	dB.upload(b);
	dC.upload(c);
	LAUNCH(1, 32, 0, 0, wmma_half_acc)(dA.p, dB.p, dC.p, dD.p);
	CUDA_OK(cudaGetLastError());
	std::vector<__half> d = dD.download();
	for (int i = 0; i < 16; i++)
		for (int j = 0; j < 16; j++) {
			double s = float(c[i * 16 + j]);
			for (int k = 0; k < 16; k++) s += (double)float(a[k * 16 + i]) * float(b[k * 16 + j]); // A col-major
			float g = float(d[i * 16 + j]);
			CHECKF(fabs(g - 2 * s) < 4e-3 * (1 + fabs(2 * s)), "[%d,%d]: %f, want %f", i, j, g, 2 * s);
		}
}

// ---- Costs ------------------------------------------------------------------------

__global__ void barrier_loop(int n, int *out) {
	int x = 0;
	for (int i = 0; i < n; i++) {
		x += i;
		__syncthreads();
	}
	if (threadIdx.x == 0) out[blockIdx.x] = x;
}

__global__ void shuffle_loop(int n, int *out) {
	int x = threadIdx.x;
	for (int i = 0; i < n; i++) x += __shfl_xor_sync(0xffffffffu, x, i & 31);
	if (threadIdx.x == 0) out[blockIdx.x] = x;
}

static double cpu_seconds() {
	timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

// Median wall time and median CPU time (all threads) of reps runs of f.
template <class F> static void measure(int reps, F f, double *wall, double *cpu) {
	std::vector<double> c;
	*wall = median_time(reps, [&] {
		double c0 = cpu_seconds();
		f();
		c.push_back(cpu_seconds() - c0);
	});
	std::sort(c.begin(), c.end());
	*cpu = c[c.size() / 2];
}

TEST(emulator_costs) {
	const int blocks = 64, threads = 256, n = 200;
	const double ops = (double)blocks * threads * n;
	DeviceBuf<int> out(blocks);
	LAUNCH(blocks, threads, 0, 0, barrier_loop)(1, out.p); // warm-up: pool, stacks
	double wall, cpu;
	measure(5, [&] { LAUNCH(blocks, threads, 0, 0, barrier_loop)(n, out.p); }, &wall, &cpu);
	CUDA_OK(cudaGetLastError());
	printf("  __syncthreads: %.1f ns CPU per thread per barrier (%.1f ns wall)\n", cpu / ops * 1e9, wall / ops * 1e9);
	measure(5, [&] { LAUNCH(blocks, threads, 0, 0, shuffle_loop)(n, out.p); }, &wall, &cpu);
	printf("  __shfl_xor_sync: %.1f ns CPU per lane per shuffle (%.1f ns wall)\n", cpu / ops * 1e9, wall / ops * 1e9);

	std::vector<float> c;
	wall = run_tiled(256, 256, 256, &c, 5);
	printf("  256³ f32 matmul, 16×16 shared-memory tiles: %.1f ms wall (median of 5)\n", wall * 1e3);
	wall = run_wmma<__nv_bfloat16, false, false>(256, 256, 256, 5, false);
	printf("  256³ bf16 wmma GEMM, one warp per 16×16 tile: %.1f ms wall (median of 5)\n", wall * 1e3);
	wall = run_wmma<__nv_bfloat16, false, false>(64, 64, 64, 5, false);
	printf("  64³ bf16 wmma GEMM: %.2f ms wall (median of 5)\n", wall * 1e3);
	CUDA_OK(cudaGetLastError());
}
