// test_contexts.cu — devices, per-thread current contexts, streams that
// belong to a context, and the emulator's fault injection and counters.
// On a GPU the context tests need two devices and pass trivially with one.
#include <thread>

#include "../../common.cuh"
#include "harness.h"

__global__ void add_one(int *x, int n) {
	const int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] += 1;
}

__global__ void smem_sum(int *out) {
	extern __shared__ unsigned char smem[];
	if (threadIdx.x == 0) out[0] = smem[0] == smem[0];
}

TEST(stream_context) {
	int n = 0;
	CUDA_OK(cudaGetDeviceCount(&n));
	if (n < 2) {
		fprintf(stderr, "  (one device: nothing to check)\n");
		return;
	}
	DeviceBuf<int> x(64);
	CUDA_OK(cudaMemset(x.p, 0, 64 * sizeof(int)));
	cudaStream_t s1;
	CUDA_OK(cudaSetDevice(1));
	CUDA_OK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
	LAUNCH(1, 64, 0, s1, add_one)(x.p, 64);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaStreamSynchronize(s1));

	// Device 0's context current, device 1's stream: refused.
	fprintf(stderr, "  (three context errors are expected here)\n");
	CUDA_OK(cudaSetDevice(0));
	LAUNCH(1, 64, 0, s1, add_one)(x.p, 64);
	cudaError_t e = cudaGetLastError();
	CHECK(e != cudaSuccess);
#ifdef TW_EMU
	CHECK(e == cudaErrorDeviceUninitialized);
	CHECK(cudaMemsetAsync(x.p, 0, 4, s1) == cudaErrorDeviceUninitialized);
	cudaGetLastError();
#endif

	// A new thread starts on device 0, whatever this one did.
	cudaError_t thread_err = cudaSuccess, thread_err_bound = cudaErrorUnknown;
	std::thread([&] {
		LAUNCH(1, 64, 0, s1, add_one)(x.p, 64);
		thread_err = cudaGetLastError();
		cudaSetDevice(1);
		LAUNCH(1, 64, 0, s1, add_one)(x.p, 64);
		thread_err_bound = cudaGetLastError();
	}).join();
	CHECK(thread_err != cudaSuccess);
	CHECK(thread_err_bound == cudaSuccess);

	CUDA_OK(cudaSetDevice(1));
	CUDA_OK(cudaStreamSynchronize(s1));
	for (int v : x.download()) CHECKF(v == 2, "%d, want 2 (two launches ran)", v);
	CUDA_OK(cudaStreamDestroy(s1));
	CUDA_OK(cudaSetDevice(0));
}

EMU_TEST(per_device_smem_attribute) {
	int n = 0;
	CUDA_OK(cudaGetDeviceCount(&n));
	if (n < 2) return;
	DeviceBuf<int> out(1);
	const int bytes = 64 * 1024;
	CUDA_OK(cudaSetDevice(1));
	CUDA_OK(cudaFuncSetAttribute(smem_sum, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
	LAUNCH(1, 32, bytes, 0, smem_sum)(out.p);
	CUDA_OK(cudaGetLastError());
	fprintf(stderr, "  (one launch error is expected here)\n");
	CUDA_OK(cudaSetDevice(0));
	LAUNCH(1, 32, bytes, 0, smem_sum)(out.p); // device 0 never raised the limit
	CHECK(cudaGetLastError() == cudaErrorInvalidValue);
}

// The emulator's own fault injection and counters: nothing to test on a GPU.
#ifdef TW_EMU
EMU_TEST(fault_injection_and_counters) {
	tw_emu_counters c0, c1;
	tw_emu_get_counters(&c0);
	cudaStream_t s;
	CUDA_OK(cudaStreamCreate(&s));
	cudaEvent_t ev;
	CUDA_OK(cudaEventCreate(&ev));
	DeviceBuf<int> x(16);
	tw_emu_get_counters(&c1);
	CHECK(c1.streams == c0.streams + 1 && c1.events == c0.events + 1);
	CHECK(c1.allocations == c0.allocations + 1 && c1.bytes == c0.bytes + 16 * sizeof(int));
	CHECK(c1.mallocs == c0.mallocs + 1);

	// A faulting kernel: the launch succeeds, the next synchronisation says so, once.
	tw_emu_inject_fault(TW_EMU_FAULT_KERNEL, cudaErrorLaunchFailure);
	LAUNCH(1, 16, 0, s, add_one)(x.p, 16);
	CUDA_OK(cudaGetLastError());
	CHECK(cudaStreamSynchronize(s) == cudaErrorLaunchFailure);
	CUDA_OK(cudaStreamSynchronize(s));
	cudaGetLastError();

	// A failing attribute call leaves its error as the thread's last error.
	tw_emu_inject_fault(TW_EMU_FAULT_FUNC_ATTRIBUTE, cudaErrorInvalidDeviceFunction);
	CHECK(cudaFuncSetAttribute(smem_sum, cudaFuncAttributeMaxDynamicSharedMemorySize, 1024) ==
	      cudaErrorInvalidDeviceFunction);
	CHECK(cudaGetLastError() == cudaErrorInvalidDeviceFunction);
	CUDA_OK(cudaFuncSetAttribute(smem_sum, cudaFuncAttributeMaxDynamicSharedMemorySize, 1024)); // disarmed

	CUDA_OK(cudaEventDestroy(ev));
	CUDA_OK(cudaStreamDestroy(s));
	tw_emu_get_counters(&c1);
	CHECK(c1.streams == c0.streams && c1.events == c0.events);
}
#endif
