// host.cpp — the CUDA runtime host API of the kernel emulator (declared in
// include/cuda_runtime_api.h), and the driver API subset of include/cuda.h.
//
// Contract: TW_EMU_DEVICES devices (default 2) whose memory is host memory.
// cudaMalloc returns 256-byte-aligned memory filled with 0xFF bytes and
// records the allocation; copies and memsets check that their device side
// lies inside one live allocation and their host side does not, and fail with
// cudaErrorInvalidValue otherwise, so host/device pointer mix-ups fail here
// as they would on a GPU. All work is synchronous; streams and events are
// handles that exist for the API's sake (events record the host clock). The
// last error and the current context are per host thread, as in CUDA; streams
// and events belong to a context, and work queued on a stream from a thread
// whose current context is another fails (check_stream).
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "cuda.h"
#include "internal.h"

// A device's primary context; one per device, never destroyed.
struct CUctx_st {
	int device;
	std::atomic<int> refs{0};             // cuDevicePrimaryCtxRetain minus Release
	std::atomic<int> pending{cudaSuccess}; // a faulted kernel's error, until a synchronisation reports it
};
// One piece of work a graph holds, run by cudaGraphLaunch.
struct GraphNode {
	enum Kind { kKernel, kCopy, kSet } kind;
	tw_emu::LaunchConfig cfg;   // kKernel: the launch as captured
	void (*body)(void *);       // kKernel
	std::shared_ptr<void> args; // kKernel: its context (arguments), cloned at capture
	void *dst;                  // kCopy, kSet
	const void *src;            // kCopy
	size_t count;               // kCopy, kSet: bytes
	int value;                  // kSet
};
struct CUgraph_st {
	std::vector<GraphNode> nodes;
};
struct CUgraphExec_st {
	std::vector<GraphNode> nodes;
};
struct CUstream_st {
	unsigned flags;
	CUctx_st *ctx;
	CUgraph_st *capture = nullptr; // the graph being captured on the stream, or none
	bool invalidated = false;      // the capture has failed (cudaStreamEndCapture says so)
	cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
};
struct CUevent_st {
	long long t_ns; // -1 until recorded
	CUctx_st *ctx;
};

namespace tw_emu {
namespace {

constexpr int kMaxDevices = 8;

thread_local cudaError_t tls_last_error = cudaSuccess;
thread_local CUctx_st *tls_ctx = nullptr; // the current context; none at first
thread_local int tls_device = 0;          // cudaSetDevice's device

struct State {
	std::mutex mu;
	std::map<uintptr_t, size_t> live; // start -> bytes
	size_t total = 0;
	long mallocs = 0;
	// (device, kernel) -> MaxDynamicSharedMemorySize: the attribute is per device.
	std::map<std::pair<int, const void *>, size_t> smem_limit;
	int ndevices = 1;
	CUctx_st primary[kMaxDevices];
	std::atomic<int> streams{0}, events{0};
	// Armed faults: 0 or the error the next call of that kind returns.
	std::atomic<int> fault_attr{cudaSuccess}, fault_kernel{cudaSuccess};
	std::atomic<int> switch_delay_us{0};
	std::atomic<int> graphs{0};
	// Streams capturing (under mu), and how many of them in global mode.
	std::set<CUstream_st *> capturing;
	int global_captures = 0;
};

State &state() {
	static State *st = [] {
		State *s = new State; // never destroyed: usable until the process is gone
		long n = env_long("TW_EMU_DEVICES", 2);
		s->ndevices = n < 1 ? 1 : n > kMaxDevices ? kMaxDevices : (int)n;
		for (int d = 0; d < kMaxDevices; d++) s->primary[d].device = d;
		return s;
	}();
	return *st;
}

cudaError_t ret(cudaError_t e) {
	if (e != cudaSuccess) tls_last_error = e;
	return e;
}

// Whether p points into a live allocation and [p, p+n) stays inside it.
bool device_range(const void *p, size_t n) {
	State &a = state();
	std::lock_guard<std::mutex> l(a.mu);
	uintptr_t u = (uintptr_t)p;
	auto it = a.live.upper_bound(u);
	if (it == a.live.begin()) return false;
	--it;
	size_t off = u - it->first; // it->first <= u
	return off < it->second && n <= it->second - off;
}

bool is_device(const void *p) { return device_range(p, 0); }

// Makes ctx current on this thread, taking as long as the switch delay says
// when it changes anything.
void set_current(CUctx_st *ctx) {
	if (ctx != tls_ctx) {
		int us = state().switch_delay_us.load(std::memory_order_relaxed);
		if (us > 0) std::this_thread::sleep_for(std::chrono::microseconds(us));
	}
	tls_ctx = ctx;
}

// The context runtime calls use: the current one, or else the primary
// context of the thread's device, made current (the runtime's lazy binding).
CUctx_st *runtime_ctx() {
	if (!tls_ctx) tls_ctx = &state().primary[tls_device];
	return tls_ctx;
}

// The context work queued on s goes to.
CUctx_st *stream_ctx(cudaStream_t s) {
	if (s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread) return runtime_ctx();
	return s->ctx;
}

// Reports (once) the fault pending in ctx.
cudaError_t take_pending(CUctx_st *ctx) {
	return ret((cudaError_t)ctx->pending.exchange(cudaSuccess));
}

// Whether s is a stream that is capturing (a capture that failed included).
bool is_capturing(cudaStream_t s) {
	if (s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread) return false;
	std::lock_guard<std::mutex> l(state().mu);
	return s->capture != nullptr;
}

// Marks s's capture failed because of op, saying so on stderr; returns the
// error op fails with.
cudaError_t invalidate(cudaStream_t s, const char *op) {
	std::lock_guard<std::mutex> l(state().mu);
	if (!s->invalidated)
		fprintf(stderr, "tw-emu: %s on a capturing stream: not allowed in a graph; the capture is invalidated\n", op);
	s->invalidated = true;
	return cudaErrorStreamCaptureUnsupported;
}

// Fails op, an unsafe call while a capture in global mode is under way,
// invalidating every capture; cudaSuccess when no such capture is.
cudaError_t prohibited(const char *op) {
	State &a = state();
	std::lock_guard<std::mutex> l(a.mu);
	if (a.global_captures == 0) return cudaSuccess;
	fprintf(stderr, "tw-emu: %s while a stream is capturing (global mode): the captures are invalidated\n", op);
	for (CUstream_st *s : a.capturing) s->invalidated = true;
	return cudaErrorStreamCaptureUnsupported;
}

// Appends node to the graph s is capturing.
void capture_node(cudaStream_t s, GraphNode node) {
	std::lock_guard<std::mutex> l(state().mu);
	if (!s->invalidated) s->capture->nodes.push_back(std::move(node));
}

} // namespace

void set_last_error(cudaError_t e) { tls_last_error = e; }

bool capture_launch(const LaunchConfig &c, void (*body)(void *), void *ctx, cudaError_t *err) {
	if (!is_capturing(c.stream)) return false;
	*err = cudaSuccess;
	if (!c.clone || !c.drop) {
		*err = invalidate(c.stream, "a launch whose arguments cannot be kept");
		return true;
	}
	GraphNode n{};
	n.kind = GraphNode::kKernel;
	n.cfg = c;
	n.body = body;
	n.args = std::shared_ptr<void>(c.clone(ctx), c.drop);
	capture_node(c.stream, std::move(n));
	return true;
}

size_t smem_optin_limit() {
	static size_t lim = (size_t)env_long("TW_EMU_SMEM_KB", 227) * 1024;
	return lim < kSmemBytes ? lim : kSmemBytes;
}

size_t func_smem_limit(const void *func) {
	State &a = state();
	const int dev = runtime_ctx()->device;
	std::lock_guard<std::mutex> l(a.mu);
	auto it = a.smem_limit.find({dev, func});
	return it == a.smem_limit.end() ? 48 * 1024 : it->second;
}

cudaError_t check_stream(cudaStream_t s, std::string *why) {
	CUctx_st *cur = runtime_ctx(), *sc = stream_ctx(s);
	if (sc == cur) return cudaSuccess;
	*why = "the stream belongs to device " + std::to_string(sc->device) + "'s context, but device " +
	       std::to_string(cur->device) + "'s is current on this thread";
	return cudaErrorDeviceUninitialized;
}

void after_launch(cudaStream_t s) {
	int e = state().fault_kernel.exchange(cudaSuccess);
	if (e != cudaSuccess) stream_ctx(s)->pending.store(e);
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
	case cudaErrorDeviceUninitialized: return "cudaErrorDeviceUninitialized";
	case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
	case cudaErrorNotReady: return "cudaErrorNotReady";
	case cudaErrorLaunchOutOfResources: return "cudaErrorLaunchOutOfResources";
	case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
	case cudaErrorNotSupported: return "cudaErrorNotSupported";
	case cudaErrorIllegalState: return "cudaErrorIllegalState";
	case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
	case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
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
	case cudaErrorDeviceUninitialized: return "invalid device context";
	case cudaErrorInvalidResourceHandle: return "invalid resource handle";
	case cudaErrorNotReady: return "device not ready";
	case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
	case cudaErrorLaunchFailure: return "unspecified launch failure";
	case cudaErrorNotSupported: return "operation not supported";
	case cudaErrorIllegalState: return "the operation cannot be performed in the present state";
	case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
	case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
	default: return "unknown error";
	}
}

cudaError_t cudaGetDeviceCount(int *count) {
	*count = state().ndevices;
	return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
	*device = runtime_ctx()->device;
	return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
	if (device < 0 || device >= state().ndevices) return ret(cudaErrorInvalidDevice);
	tls_device = device;
	set_current(&state().primary[device]);
	return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
	if (cudaError_t e = prohibited("cudaDeviceSynchronize")) return ret(e);
	return take_pending(runtime_ctx());
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device) {
	if (device < 0 || device >= state().ndevices) return ret(cudaErrorInvalidDevice);
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
	State &a = state();
	std::lock_guard<std::mutex> l(a.mu);
	*total_bytes = total;
	*free_bytes = total > a.total ? total - a.total : 0;
	return cudaSuccess;
}

cudaError_t cudaMalloc(void **devPtr, size_t size) {
	if (!devPtr) return ret(cudaErrorInvalidValue);
	if (cudaError_t e = prohibited("cudaMalloc")) {
		*devPtr = nullptr;
		return ret(e);
	}
	*devPtr = nullptr;
	if (size == 0) return cudaSuccess;
	size_t rounded = (size + 255) / 256 * 256;
	void *p = aligned_alloc(256, rounded);
	if (!p) return ret(cudaErrorMemoryAllocation);
	memset(p, 0xff, rounded);
	State &a = state();
	std::lock_guard<std::mutex> l(a.mu);
	a.live[(uintptr_t)p] = size;
	a.total += size;
	a.mallocs++;
	*devPtr = p;
	return cudaSuccess;
}

cudaError_t cudaFree(void *devPtr) {
	if (!devPtr) return cudaSuccess;
	if (cudaError_t e = prohibited("cudaFree")) return ret(e);
	State &a = state();
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

// The copy of cudaMemcpy, done now: checks its arguments and copies.
static cudaError_t copy_now(void *dst, const void *src, size_t count, cudaMemcpyKind kind) {
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

// Fails like a launch when stream belongs to another context than the
// current one; op names the call in the message on stderr.
static cudaError_t queue_check(cudaStream_t stream, const char *op) {
	std::string why;
	cudaError_t e = check_stream(stream, &why);
	if (e != cudaSuccess) fprintf(stderr, "tw-emu: %s failed (%s): %s\n", op, cudaGetErrorName(e), why.c_str());
	return e;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, cudaMemcpyKind kind) {
	if (cudaError_t e = prohibited("cudaMemcpy")) return ret(e);
	return copy_now(dst, src, count, kind);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, cudaMemcpyKind kind, cudaStream_t stream) {
	if (cudaError_t e = queue_check(stream, "cudaMemcpyAsync")) return ret(e);
	if (!is_capturing(stream)) return copy_now(dst, src, count, kind);
	const bool d2d = kind == cudaMemcpyDeviceToDevice ||
	                 (kind == cudaMemcpyDefault && is_device(dst) && is_device(src));
	if (!d2d) return ret(invalidate(stream, "cudaMemcpyAsync to or from the host"));
	if (count == 0) return cudaSuccess;
	if (!device_range(dst, count) || !device_range(src, count)) return ret(cudaErrorInvalidValue);
	GraphNode n{};
	n.kind = GraphNode::kCopy;
	n.dst = dst;
	n.src = src;
	n.count = count;
	capture_node(stream, std::move(n));
	return cudaSuccess;
}

// The memset of cudaMemset, done now.
static cudaError_t set_now(void *devPtr, int value, size_t count) {
	if (count == 0) return cudaSuccess;
	if (!device_range(devPtr, count)) return ret(cudaErrorInvalidValue);
	memset(devPtr, value, count);
	return cudaSuccess;
}

cudaError_t cudaMemset(void *devPtr, int value, size_t count) {
	if (cudaError_t e = prohibited("cudaMemset")) return ret(e);
	return set_now(devPtr, value, count);
}

cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream) {
	if (cudaError_t e = queue_check(stream, "cudaMemsetAsync")) return ret(e);
	if (!is_capturing(stream)) return set_now(devPtr, value, count);
	if (count == 0) return cudaSuccess;
	if (!device_range(devPtr, count)) return ret(cudaErrorInvalidValue);
	GraphNode n{};
	n.kind = GraphNode::kSet;
	n.dst = devPtr;
	n.count = count;
	n.value = value;
	capture_node(stream, std::move(n));
	return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *stream) { return cudaStreamCreateWithFlags(stream, 0); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags) {
	if (!stream) return ret(cudaErrorInvalidValue);
	*stream = new CUstream_st{flags, runtime_ctx()};
	state().streams++;
	return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
	if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread)
		return ret(cudaErrorInvalidResourceHandle);
	if (is_capturing(stream)) return ret(cudaErrorIllegalState);
	delete stream;
	state().streams--;
	return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
	if (is_capturing(stream)) return ret(invalidate(stream, "cudaStreamSynchronize"));
	return take_pending(stream_ctx(stream));
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
	if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread)
		return ret(cudaErrorStreamCaptureUnsupported);
	if (mode < cudaStreamCaptureModeGlobal || mode > cudaStreamCaptureModeRelaxed) return ret(cudaErrorInvalidValue);
	if (cudaError_t e = queue_check(stream, "cudaStreamBeginCapture")) return ret(e);
	State &a = state();
	std::lock_guard<std::mutex> l(a.mu);
	if (stream->capture) return ret(cudaErrorIllegalState);
	stream->capture = new CUgraph_st;
	stream->invalidated = false;
	stream->mode = mode;
	a.capturing.insert(stream);
	if (mode == cudaStreamCaptureModeGlobal) a.global_captures++;
	return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph) {
	if (!graph) return ret(cudaErrorInvalidValue);
	*graph = nullptr;
	if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread)
		return ret(cudaErrorIllegalState);
	State &a = state();
	std::lock_guard<std::mutex> l(a.mu);
	CUgraph_st *g = stream->capture;
	if (!g) return ret(cudaErrorIllegalState);
	stream->capture = nullptr;
	a.capturing.erase(stream);
	if (stream->mode == cudaStreamCaptureModeGlobal) a.global_captures--;
	if (stream->invalidated) {
		delete g;
		return ret(cudaErrorStreamCaptureInvalidated);
	}
	a.graphs++;
	*graph = g;
	return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus *status) {
	if (!status) return ret(cudaErrorInvalidValue);
	*status = cudaStreamCaptureStatusNone;
	if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) return cudaSuccess;
	std::lock_guard<std::mutex> l(state().mu);
	if (stream->capture)
		*status = stream->invalidated ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
	return cudaSuccess;
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags) {
	if (!exec || !graph || flags != 0) return ret(cudaErrorInvalidValue);
	*exec = new CUgraphExec_st{graph->nodes};
	state().graphs++;
	return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
	if (!exec) return ret(cudaErrorInvalidResourceHandle);
	if (cudaError_t e = queue_check(stream, "cudaGraphLaunch")) return ret(e);
	for (const GraphNode &n : exec->nodes) {
		cudaError_t e = cudaSuccess;
		switch (n.kind) {
		case GraphNode::kKernel: {
			LaunchConfig c = n.cfg;
			c.stream = stream;
			e = launch(c, n.body, n.args.get());
			break;
		}
		case GraphNode::kCopy: e = cudaMemcpyAsync(n.dst, n.src, n.count, cudaMemcpyDeviceToDevice, stream); break;
		case GraphNode::kSet: e = cudaMemsetAsync(n.dst, n.value, n.count, stream); break;
		}
		if (e != cudaSuccess) return ret(e);
	}
	return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
	if (!exec) return ret(cudaErrorInvalidResourceHandle);
	delete exec;
	state().graphs--;
	return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
	if (!graph) return ret(cudaErrorInvalidResourceHandle);
	delete graph;
	state().graphs--;
	return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t event, unsigned int) {
	return event ? cudaSuccess : ret(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventCreate(cudaEvent_t *event) { return cudaEventCreateWithFlags(event, 0); }

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int) {
	if (!event) return ret(cudaErrorInvalidValue);
	*event = new CUevent_st{-1, runtime_ctx()};
	state().events++;
	return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
	if (!event) return ret(cudaErrorInvalidResourceHandle);
	delete event;
	state().events--;
	return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
	if (!event) return ret(cudaErrorInvalidResourceHandle);
	if (cudaError_t e = queue_check(stream, "cudaEventRecord")) return ret(e);
	if (event->ctx != stream_ctx(stream)) return ret(cudaErrorInvalidResourceHandle);
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
	if (int e = state().fault_attr.exchange(cudaSuccess)) return ret((cudaError_t)e);
	switch (attr) {
	case cudaFuncAttributeMaxDynamicSharedMemorySize: {
		if (value < 0 || (size_t)value > smem_optin_limit()) return ret(cudaErrorInvalidValue);
		State &a = state();
		const int dev = runtime_ctx()->device;
		std::lock_guard<std::mutex> l(a.mu);
		a.smem_limit[{dev, func}] = (size_t)value;
		return cudaSuccess;
	}
	case cudaFuncAttributePreferredSharedMemoryCarveout:
		return value >= -1 && value <= 100 ? cudaSuccess : ret(cudaErrorInvalidValue);
	}
	return ret(cudaErrorInvalidValue);
}

// ---- Driver API (include/cuda.h) -------------------------------------------

CUresult cuInit(unsigned int flags) { return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }

CUresult cuDeviceGetCount(int *count) {
	if (!count) return CUDA_ERROR_INVALID_VALUE;
	*count = state().ndevices;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal) {
	if (!device) return CUDA_ERROR_INVALID_VALUE;
	if (ordinal < 0 || ordinal >= state().ndevices) return CUDA_ERROR_INVALID_DEVICE;
	*device = ordinal;
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
	if (!pctx) return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= state().ndevices) return CUDA_ERROR_INVALID_DEVICE;
	state().primary[dev].refs++;
	*pctx = &state().primary[dev];
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
	if (dev < 0 || dev >= state().ndevices) return CUDA_ERROR_INVALID_DEVICE;
	std::atomic<int> &refs = state().primary[dev].refs;
	for (int r = refs.load(); r > 0;)
		if (refs.compare_exchange_weak(r, r - 1)) return CUDA_SUCCESS;
	return CUDA_ERROR_INVALID_CONTEXT; // nothing retained
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
	set_current(ctx);
	return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *pctx) {
	if (!pctx) return CUDA_ERROR_INVALID_VALUE;
	*pctx = tls_ctx;
	return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *device) {
	if (!device) return CUDA_ERROR_INVALID_VALUE;
	if (!tls_ctx) return CUDA_ERROR_INVALID_CONTEXT;
	*device = tls_ctx->device;
	return CUDA_SUCCESS;
}

// ---- Emulator controls ---------------------------------------------------------

void tw_emu_inject_fault(tw_emu_fault kind, cudaError_t e) {
	switch (kind) {
	case TW_EMU_FAULT_FUNC_ATTRIBUTE: state().fault_attr.store(e); break;
	case TW_EMU_FAULT_KERNEL: state().fault_kernel.store(e); break;
	}
}

void tw_emu_get_counters(tw_emu_counters *c) {
	State &a = state();
	std::lock_guard<std::mutex> l(a.mu);
	c->streams = a.streams.load();
	c->events = a.events.load();
	c->allocations = (long)a.live.size();
	c->bytes = a.total;
	c->mallocs = a.mallocs;
	c->graphs = a.graphs.load();
}

int tw_emu_primary_ctx_refs(int device) {
	return device >= 0 && device < kMaxDevices ? state().primary[device].refs.load() : 0;
}

void tw_emu_set_ctx_switch_delay_us(int us) { state().switch_delay_us.store(us < 0 ? 0 : us); }

} // extern "C"
