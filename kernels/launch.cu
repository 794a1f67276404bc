// launch.cu — the launch counter behind tw_launch_count (kernels.h), and
// tw_hold, a kernel that keeps a stream busy for a while.
//
// LAUNCH (common.cuh) calls tw_count_launch before every kernel launch. The
// count is per host thread, so that a caller that makes all of one op's
// launcher calls on one thread (engine/cuda locks its goroutine to its
// thread for each op) can attribute the launches between two reads to that
// op alone, whatever other threads launch meanwhile.
//
// tw_hold(ns) runs one thread that waits until the device's clock has
// advanced ns nanoseconds (%globaltimer on a GPU, sleeping 1 µs between
// reads; the emulator's clock64, which is in nanoseconds). An op profile
// (engine/cuda/opprofile.go) queues it before a run of small ops, so that
// the host has queued them by the time the device reaches them: each op
// then starts when the one before it ends, as in a replayed graph, instead
// of when the host gets to it. It is a launch like any other: counted, and
// its error returned by cudaGetLastError.
#include "common.cuh"
#include "kernels.h"

static thread_local int64_t launches;

extern "C" void tw_count_launch(void) { launches++; }

extern "C" int64_t tw_launch_count(void) { return launches; }

// The device's clock in nanoseconds.
__device__ __forceinline__ long long now_ns() {
#ifdef __CUDA_ARCH__
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return (long long)t;
#else
	return clock64(); // the emulator's is in nanoseconds
#endif
}

__global__ void hold_kernel(long long ns) {
	const long long t0 = now_ns();
	while (now_ns() - t0 < ns) __nanosleep(1000);
}

extern "C" cudaError_t tw_hold(int64_t ns, cudaStream_t stream) {
	if (ns <= 0) return cudaSuccess;
	LAUNCH(1, 1, 0, stream, hold_kernel)((long long)ns);
	return cudaGetLastError();
}
