/*
 * cuda.h — the emulator's stand-in for the CUDA driver API header.
 *
 * Contract: the few driver calls turnwise's host code makes about devices and
 * contexts, with the real names, signatures and numeric values, so that the
 * same C code binds a context against libcuda and against the emulator.
 * Plain C: cgo includes it. The model (one primary context per emulated
 * device, one current context per host thread) is described in
 * cuda_runtime_api.h, whose calls share it: cuCtxSetCurrent(ctx) is what
 * cudaSetDevice does with the device's primary context.
 *
 * Retaining a primary context counts a reference (tw_emu_primary_ctx_refs);
 * releasing the last one does not destroy anything here.
 */
#ifndef TW_EMU_CUDA_H
#define TW_EMU_CUDA_H

#include "cuda_runtime_api.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CUDA_VERSION 11080

typedef enum cudaError_enum {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_INVALID_VALUE = 1,
	CUDA_ERROR_NOT_INITIALIZED = 3,
	CUDA_ERROR_NO_DEVICE = 100,
	CUDA_ERROR_INVALID_DEVICE = 101,
	CUDA_ERROR_INVALID_CONTEXT = 201,
	CUDA_ERROR_INVALID_HANDLE = 400
} CUresult;

typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;

CUresult cuInit(unsigned int flags);
CUresult cuDeviceGetCount(int *count);
CUresult cuDeviceGet(CUdevice *device, int ordinal);
CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
CUresult cuDevicePrimaryCtxRelease(CUdevice dev);
/* ctx may be NULL: the thread then has no current context. */
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuCtxGetCurrent(CUcontext *pctx);
CUresult cuCtxGetDevice(CUdevice *device);

#ifdef __cplusplus
}
#endif

#endif /* TW_EMU_CUDA_H */
