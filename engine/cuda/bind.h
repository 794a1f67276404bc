/*
 * bind.h — makes a CUDA context current on the calling OS thread, for
 * device_cuda.go and device_emu.go (the driver API's <cuda.h>, or the
 * emulator's stand-in for it).
 */
#ifndef TW_ENGINE_CUDA_BIND_H
#define TW_ENGINE_CUDA_BIND_H

#include <cuda.h>

/* Makes ctx current unless it already is (a query: the common case costs
 * next to nothing). */
static inline CUresult tw_bind_ctx(CUcontext ctx) {
	CUcontext cur = 0;
	CUresult r = cuCtxGetCurrent(&cur);
	if (r != CUDA_SUCCESS || cur == ctx) return r;
	return cuCtxSetCurrent(ctx);
}

#endif
