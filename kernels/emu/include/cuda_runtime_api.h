/*
 * cuda_runtime_api.h — the emulator's stand-in for the CUDA runtime's C API.
 *
 * Contract: the subset of the CUDA runtime host API that turnwise uses, with
 * the real names, signatures and numeric values (error codes, enums), so that
 * the same host code and the same cgo preamble work against libcudart and
 * against the emulator. Plain C: cgo includes it. "Device" memory is host
 * memory; every call completes before it returns (streams and events exist,
 * but work is synchronous); errors are reported as CUDA reports them, through
 * the return value and, for launches, cudaGetLastError (per host thread).
 *
 * Devices and contexts are modelled as far as host code can get them wrong:
 * TW_EMU_DEVICES devices (default 2, at most 8) share the host's memory; each
 * has a primary context (cuda.h, the driver API subset); each host thread
 * has a current context, none at first. A runtime call that needs one when
 * none is current makes the primary context of the thread's device
 * (cudaSetDevice, default 0) current, as the CUDA runtime does. Streams and
 * events belong to the context current when they were created; work queued
 * on a stream of another context than the calling thread's current one
 * fails (see below).
 *
 * The emulator's include directory must come before any real CUDA headers on
 * the include path.
 */
#ifndef TW_EMU_CUDA_RUNTIME_API_H
#define TW_EMU_CUDA_RUNTIME_API_H

#include <stddef.h>

#define TW_EMU 1
#define CUDART_VERSION 11080

#ifdef __cplusplus
#define TW_EMU_DEFAULT(v) = v
extern "C" {
#else
#define TW_EMU_DEFAULT(v)
#endif

typedef enum cudaError {
	cudaSuccess = 0,
	cudaErrorInvalidValue = 1,
	cudaErrorMemoryAllocation = 2,
	cudaErrorInitializationError = 3,
	cudaErrorInvalidConfiguration = 9,
	cudaErrorInvalidDevicePointer = 17,
	cudaErrorInvalidMemcpyDirection = 21,
	cudaErrorNoDevice = 100,
	cudaErrorInvalidDevice = 101,
	cudaErrorInvalidDeviceFunction = 98,
	cudaErrorDeviceUninitialized = 201, /* "invalid device context": CUDA_ERROR_INVALID_CONTEXT */
	cudaErrorInvalidResourceHandle = 400,
	cudaErrorIllegalState = 401,
	cudaErrorNotReady = 600,
	cudaErrorLaunchOutOfResources = 701,
	cudaErrorLaunchFailure = 719,
	cudaErrorNotSupported = 801,
	cudaErrorStreamCaptureUnsupported = 900,
	cudaErrorStreamCaptureInvalidated = 901,
	cudaErrorUnknown = 999
} cudaError_t;

typedef enum cudaMemcpyKind {
	cudaMemcpyHostToHost = 0,
	cudaMemcpyHostToDevice = 1,
	cudaMemcpyDeviceToHost = 2,
	cudaMemcpyDeviceToDevice = 3,
	cudaMemcpyDefault = 4
} cudaMemcpyKind;

typedef enum cudaFuncAttribute {
	cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
	cudaFuncAttributePreferredSharedMemoryCarveout = 9
} cudaFuncAttribute;

typedef enum cudaDeviceAttr {
	cudaDevAttrMaxThreadsPerBlock = 1,
	cudaDevAttrMaxSharedMemoryPerBlock = 8,
	cudaDevAttrWarpSize = 10,
	cudaDevAttrMultiProcessorCount = 16,
	cudaDevAttrComputeCapabilityMajor = 75,
	cudaDevAttrComputeCapabilityMinor = 76,
	cudaDevAttrMaxSharedMemoryPerBlockOptin = 97
} cudaDeviceAttr;

/* Streams and events are opaque handles, as in CUDA (and the same struct
 * type as the driver API's CUstream). Stream 0 is the legacy default stream. */
typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
#define cudaStreamLegacy ((cudaStream_t)0x1)
#define cudaStreamPerThread ((cudaStream_t)0x2)
#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventBlockingSync 0x01
#define cudaEventDisableTiming 0x02

/* Errors. */
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
const char *cudaGetErrorString(cudaError_t error);
const char *cudaGetErrorName(cudaError_t error);

/* Devices 0 .. TW_EMU_DEVICES-1. cudaSetDevice makes the device's primary
 * context current on the calling thread; cudaGetDevice names the device of
 * the current context. */
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);

/* Memory. cudaMalloc'd memory is 256-byte aligned and filled with 0xFF bytes
 * (a NaN in f32, bf16 and f16), so reads of unwritten memory show up. The
 * device side of a copy or memset must lie inside one live allocation. */
cudaError_t cudaMalloc(void **devPtr, size_t size);
cudaError_t cudaFree(void *devPtr);
cudaError_t cudaMallocHost(void **ptr, size_t size);
cudaError_t cudaFreeHost(void *ptr);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream TW_EMU_DEFAULT(0));
cudaError_t cudaMemset(void *devPtr, int value, size_t count);
cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream TW_EMU_DEFAULT(0));

/* Streams and events (synchronous underneath). A kernel launch,
 * cudaMemcpyAsync, cudaMemsetAsync or cudaEventRecord on a stream created in
 * another context than the calling thread's current one fails with
 * cudaErrorDeviceUninitialized ("invalid device context") and says so on
 * stderr; recording an event of one context on a stream of another fails with
 * cudaErrorInvalidResourceHandle. Streams 0, cudaStreamLegacy and
 * cudaStreamPerThread are the current context's. cudaStreamSynchronize and
 * cudaDeviceSynchronize report (once) the error of a kernel that faulted in
 * the stream's context since the last synchronisation (see
 * tw_emu_inject_fault). */
cudaError_t cudaStreamCreate(cudaStream_t *stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags TW_EMU_DEFAULT(0));
cudaError_t cudaEventCreate(cudaEvent_t *event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream TW_EMU_DEFAULT(0));
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);

/* Stream capture and graphs, modelled as far as a capture-and-replay loop
 * needs them. Between cudaStreamBeginCapture and cudaStreamEndCapture, the
 * kernel launches, device-to-device cudaMemcpyAsync and cudaMemsetAsync
 * queued on the stream are checked as launches are and kept, in order, in
 * the graph instead of run; cudaGraphLaunch runs a graph's work in that
 * order on a stream (cudaGraphInstantiateWithFlags copies it, flags 0).
 * What a capture cannot hold fails with cudaErrorStreamCaptureUnsupported
 * and invalidates the capture, whose cudaStreamEndCapture then returns
 * cudaErrorStreamCaptureInvalidated and no graph: synchronising the
 * capturing stream, a copy to or from the host on it, and, while any
 * capture in global mode is under way, cudaMalloc, cudaFree, cudaMemcpy,
 * cudaMemset and cudaDeviceSynchronize from any thread (every capture in
 * progress is invalidated). Capturing the legacy stream (0) is
 * unsupported; beginning a capture on a capturing stream, or ending one on a
 * stream that is not capturing, is cudaErrorIllegalState. Graphs are
 * linear: no fork, join or event nodes. */
typedef struct CUgraph_st *cudaGraph_t;
typedef struct CUgraphExec_st *cudaGraphExec_t;
typedef enum cudaStreamCaptureMode {
	cudaStreamCaptureModeGlobal = 0,
	cudaStreamCaptureModeThreadLocal = 1,
	cudaStreamCaptureModeRelaxed = 2
} cudaStreamCaptureMode;
typedef enum cudaStreamCaptureStatus {
	cudaStreamCaptureStatusNone = 0,
	cudaStreamCaptureStatusActive = 1,
	cudaStreamCaptureStatusInvalidated = 2
} cudaStreamCaptureStatus;
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus *status);
cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);

/* Kernel attributes. The emulator records MaxDynamicSharedMemorySize per
 * kernel and refuses launches that ask for more dynamic shared memory than
 * that (48 KiB until raised), as a GPU does. The opt-in ceiling is 227 KiB
 * (H100; TW_EMU_SMEM_KB changes it, e.g. 163 for A100). */
cudaError_t cudaFuncSetAttribute(const void *func, cudaFuncAttribute attr, int value);

/* Emulator controls (no CUDA equivalent). Reverse order runs each block's
 * threads last-to-first (last warp first, and within a warp the last lane
 * first): run a kernel both ways and compare the outputs to catch a missing
 * barrier. The environment variable TW_EMU_REVERSE=1 sets it at start-up. */
void tw_emu_set_reverse(int on);
int tw_emu_reverse(void);

/* Shared-memory bank conflicts, counted by the model in tw_emu_banks.h for
 * ldmatrix, cp.async, ld_shared and st_shared, per call
 * site of each kernel. tw_emu_set_bank_stats(1) empties the table and counts
 * every block from then on, (0) stops counting; TW_EMU_BANKS=1 counts from
 * start-up and prints the table to stderr at exit. tw_emu_bank_stats copies
 * up to max sites into sites and returns how many there are. The strings
 * are the program's own (they live as long as it). */
typedef struct {
	const char *kernel; /* the kernel as written at its launch */
	const char *op;     /* "ldmatrix.x4", "cp.async", "st.shared", ... */
	const char *file;   /* the call site */
	int line;
	unsigned long long requests;   /* warp instructions */
	unsigned long long wavefronts; /* shared-memory wavefronts they took */
	unsigned long long ideal;      /* the fewest they could: one per phase */
	/* Accesses of global memory (cp.async, the pack helpers' loads and
	 * stores): the 32-byte sectors the warps' accesses touched, and the
	 * fewest that hold the bytes they touched (above it an instruction uses
	 * sectors in part: scattered chunks, or rows off 32 bytes). */
	unsigned long long sectors, sectors_ideal;
	int lane_bytes; /* the fewest bytes one lane moved in one access */
} tw_emu_bank_site;
void tw_emu_set_bank_stats(int on);
int tw_emu_bank_stats(tw_emu_bank_site *sites, int max);

/* Fault injection, for tests of host code's error handling. The next call of
 * the kind named, from any thread, fails with error e (armed once; arming
 * again replaces it):
 *   TW_EMU_FAULT_FUNC_ATTRIBUTE  cudaFuncSetAttribute returns e and leaves it
 *                                as the thread's last error, as CUDA does;
 *   TW_EMU_FAULT_KERNEL          the next kernel launch runs and returns
 *                                cudaSuccess, but its context reports e at its
 *                                next synchronisation, as a kernel that
 *                                faults on a GPU does. */
typedef enum { TW_EMU_FAULT_FUNC_ATTRIBUTE = 1, TW_EMU_FAULT_KERNEL = 2 } tw_emu_fault;
void tw_emu_inject_fault(tw_emu_fault kind, cudaError_t e);

/* What is alive, for tests that check that host code releases what it
 * takes. */
typedef struct {
	int streams;      /* created and not destroyed */
	int events;       /* created and not destroyed */
	long allocations; /* live cudaMalloc allocations */
	size_t bytes;     /* their size */
	long mallocs;     /* cudaMalloc calls that allocated, since start-up */
	int graphs;       /* graphs and instantiated graphs not destroyed */
} tw_emu_counters;
void tw_emu_get_counters(tw_emu_counters *c);
/* References to device's primary context held through
 * cuDevicePrimaryCtxRetain and not yet released. */
int tw_emu_primary_ctx_refs(int device);
/* Makes cuCtxSetCurrent and cudaSetDevice sleep this many microseconds when
 * they change the calling thread's context (default 0). A real switch takes
 * nanoseconds; a long one gives Go's scheduler time to hand a goroutine that
 * is not locked to its thread to another one in between, which is how tests
 * show that host code binds and launches on one thread. */
void tw_emu_set_ctx_switch_delay_us(int us);

#ifdef __cplusplus
}
#endif

#endif /* TW_EMU_CUDA_RUNTIME_API_H */
