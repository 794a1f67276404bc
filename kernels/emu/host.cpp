// host.cpp — the CUDA runtime host API of the kernel emulator (declared in
// include/cuda_runtime_api.h).
//
// Contract: one device, device 0, whose memory is host memory. cudaMalloc
// returns 256-byte-aligned memory filled with 0xFF bytes and records the
// allocation; copies and memsets check that their device side lies inside
// one live allocation and their host side does not, and fail with
// cudaErrorInvalidValue otherwise, so host/device pointer mix-ups fail here
// as they would on a GPU. All work is synchronous; streams and events are
// handles that exist for the API's sake (events record the host clock). The
// last error is per host thread, as in CUDA.
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <mutex>

#include "internal.h"

struct CUstream_st {
	unsigned flags;
};
struct CUevent_st {
	long long t_ns; // -1 until recorded
};

namespace tw_emu {
namespace {

thread_local cudaError_t tls_last_error = cudaSuccess;

struct Allocs {
	std::mutex mu;
	std::map<uintptr_t, size_t> live; // start -> bytes
	size_t total = 0;
	std::map<const void *, size_t> smem_limit; // kernel -> MaxDynamicSharedMemorySize
};

Allocs &allocs() {
	static Allocs *a = new Allocs; // never destroyed: usable until the process is gone
	return *a;
}

cudaError_t ret(cudaError_t e) {
	if (e != cudaSuccess) tls_last_error = e;
	return e;
}

// Whether p points into a live allocation and [p, p+n) stays inside it.
bool device_range(const void *p, size_t n) {
	Allocs &a = allocs();
	std::lock_guard<std::mutex> l(a.mu);
	uintptr_t u = (uintptr_t)p;
	auto it = a.live.upper_bound(u);
	if (it == a.live.begin()) return false;
	--it;
	size_t off = u - it->first; // it->first <= u
	return off < it->second && n <= it->second - off;
}

bool is_device(const void *p) { return device_range(p, 0); }

} // namespace

void set_last_error(cudaError_t e) { tls_last_error = e; }

size_t smem_optin_limit() {
	static size_t lim = (size_t)env_long("TW_EMU_SMEM_KB", 227) * 1024;
	return lim < kSmemBytes ? lim : kSmemBytes;
}

size_t func_smem_limit(const void *func) {
	Allocs &a = allocs();
	std::lock_guard<std::mutex> l(a.mu);
	auto it = a.smem_limit.find(func);
	return it == a.smem_limit.end() ? 48 * 1024 : it->second;
}

} // namespace tw_emu

using namespace tw_emu;

extern "C" {

cudaError_t cudaGetLastError(void) {
	cudaError_t e = tls_last_error;
	tls_last_error = cudaSuccess;
	return e;
}

cudaError_t cudaPeekAtLastError(void) { return tls_last_error; }

const char *cudaGetErrorName(cudaError_t e) {
	switch (e) {
	case cudaSuccess: return "cudaSuccess";
	case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
	case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
	case cudaErrorInitializationError: return "cudaErrorInitializationError";
	case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
	case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
	case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
	case cudaErrorNoDevice: return "cudaErrorNoDevice";
	case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
	case cudaErrorInvalidDeviceFunction: return "cudaErrorInvalidDeviceFunction";
	case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
	case cudaErrorNotReady: return "cudaErrorNotReady";
	case cudaErrorLaunchOutOfResources: return "cudaErrorLaunchOutOfResources";
	case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
	case cudaErrorNotSupported: return "cudaErrorNotSupported";
	default: return "cudaErrorUnknown";
	}
}

const char *cudaGetErrorString(cudaError_t e) {
	switch (e) {
	case cudaSuccess: return "no error";
	case cudaErrorInvalidValue: return "invalid argument";
	case cudaErrorMemoryAllocation: return "out of memory";
	case cudaErrorInitializationError: return "initialization error";
	case cudaErrorInvalidConfiguration: return "invalid configuration argument";
	case cudaErrorInvalidDevicePointer: return "invalid device pointer";
	case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
	case cudaErrorNoDevice: return "no CUDA-capable device is detected";
	case cudaErrorInvalidDevice: return "invalid device ordinal";
	case cudaErrorInvalidDeviceFunction: return "invalid device function";
	case cudaErrorInvalidResourceHandle: return "invalid resource handle";
	case cudaErrorNotReady: return "device not ready";
	case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
	case cudaErrorLaunchFailure: return "unspecified launch failure";
	case cudaErrorNotSupported: return "operation not supported";
	default: return "unknown error";
	}
}

cudaError_t cudaGetDeviceCount(int *count) {
	*count = 1;
	return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
	*device = 0;
	return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : ret(cudaErrorInvalidDevice); }

cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device) {
	if (device != 0) return ret(cudaErrorInvalidDevice);
	switch (attr) {
	case cudaDevAttrMaxThreadsPerBlock: *value = 1024; break;
	case cudaDevAttrMaxSharedMemoryPerBlock: *value = 48 * 1024; break;
	case cudaDevAttrWarpSize: *value = 32; break;
	case cudaDevAttrMultiProcessorCount: *value = 132; break;
	case cudaDevAttrComputeCapabilityMajor: *value = 9; break;
	case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
	case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = (int)smem_optin_limit(); break;
	default: return ret(cudaErrorInvalidValue);
	}
	return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
	size_t total = (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGESIZE);
	Allocs &a = allocs();
	std::lock_guard<std::mutex> l(a.mu);
	*total_bytes = total;
	*free_bytes = total > a.total ? total - a.total : 0;
	return cudaSuccess;
}

cudaError_t cudaMalloc(void **devPtr, size_t size) {
	if (!devPtr) return ret(cudaErrorInvalidValue);
	*devPtr = nullptr;
	if (size == 0) return cudaSuccess;
	size_t rounded = (size + 255) / 256 * 256;
	void *p = aligned_alloc(256, rounded);
	if (!p) return ret(cudaErrorMemoryAllocation);
	memset(p, 0xff, rounded);
	Allocs &a = allocs();
	std::lock_guard<std::mutex> l(a.mu);
	a.live[(uintptr_t)p] = size;
	a.total += size;
	*devPtr = p;
	return cudaSuccess;
}

cudaError_t cudaFree(void *devPtr) {
	if (!devPtr) return cudaSuccess;
	Allocs &a = allocs();
	{
		std::lock_guard<std::mutex> l(a.mu);
		auto it = a.live.find((uintptr_t)devPtr);
		if (it == a.live.end()) return ret(cudaErrorInvalidValue);
		a.total -= it->second;
		a.live.erase(it);
	}
	free(devPtr);
	return cudaSuccess;
}

cudaError_t cudaMallocHost(void **ptr, size_t size) {
	if (!ptr) return ret(cudaErrorInvalidValue);
	*ptr = aligned_alloc(256, (size + 255) / 256 * 256 + (size == 0 ? 256 : 0));
	return *ptr ? cudaSuccess : ret(cudaErrorMemoryAllocation);
}

cudaError_t cudaFreeHost(void *ptr) {
	free(ptr);
	return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, cudaMemcpyKind kind) {
	if (count == 0) return cudaSuccess;
	bool ok;
	switch (kind) {
	case cudaMemcpyHostToHost: ok = !is_device(dst) && !is_device(src); break;
	case cudaMemcpyHostToDevice: ok = device_range(dst, count) && !is_device(src); break;
	case cudaMemcpyDeviceToHost: ok = !is_device(dst) && device_range(src, count); break;
	case cudaMemcpyDeviceToDevice: ok = device_range(dst, count) && device_range(src, count); break;
	case cudaMemcpyDefault:
		ok = (!is_device(dst) || device_range(dst, count)) && (!is_device(src) || device_range(src, count));
		break;
	default: return ret(cudaErrorInvalidMemcpyDirection);
	}
	if (!ok || !dst || !src) return ret(cudaErrorInvalidValue);
	memmove(dst, src, count);
	return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, cudaMemcpyKind kind, cudaStream_t) {
	return cudaMemcpy(dst, src, count, kind);
}

cudaError_t cudaMemset(void *devPtr, int value, size_t count) {
	if (count == 0) return cudaSuccess;
	if (!device_range(devPtr, count)) return ret(cudaErrorInvalidValue);
	memset(devPtr, value, count);
	return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t) {
	return cudaMemset(devPtr, value, count);
}

cudaError_t cudaStreamCreate(cudaStream_t *stream) { return cudaStreamCreateWithFlags(stream, 0); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags) {
	if (!stream) return ret(cudaErrorInvalidValue);
	*stream = new CUstream_st{flags};
	return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
	if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread)
		return ret(cudaErrorInvalidResourceHandle);
	delete stream;
	return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }

cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t event, unsigned int) {
	return event ? cudaSuccess : ret(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventCreate(cudaEvent_t *event) { return cudaEventCreateWithFlags(event, 0); }

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int) {
	if (!event) return ret(cudaErrorInvalidValue);
	*event = new CUevent_st{-1};
	return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
	if (!event) return ret(cudaErrorInvalidResourceHandle);
	delete event;
	return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t) {
	if (!event) return ret(cudaErrorInvalidResourceHandle);
	event->t_ns = clock_ns();
	return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
	return event ? cudaSuccess : ret(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventQuery(cudaEvent_t event) { return event ? cudaSuccess : ret(cudaErrorInvalidResourceHandle); }

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
	if (!ms || !start || !end) return ret(cudaErrorInvalidResourceHandle);
	if (start->t_ns < 0 || end->t_ns < 0) return ret(cudaErrorInvalidResourceHandle);
	*ms = (float)((double)(end->t_ns - start->t_ns) / 1e6);
	return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void *func, cudaFuncAttribute attr, int value) {
	if (!func) return ret(cudaErrorInvalidDeviceFunction);
	switch (attr) {
	case cudaFuncAttributeMaxDynamicSharedMemorySize: {
		if (value < 0 || (size_t)value > smem_optin_limit()) return ret(cudaErrorInvalidValue);
		Allocs &a = allocs();
		std::lock_guard<std::mutex> l(a.mu);
		a.smem_limit[func] = (size_t)value;
		return cudaSuccess;
	}
	case cudaFuncAttributePreferredSharedMemoryCarveout:
		return value >= -1 && value <= 100 ? cudaSuccess : ret(cudaErrorInvalidValue);
	}
	return ret(cudaErrorInvalidValue);
}

} // extern "C"
