/*
 * kernels.h — the C launchers of turnwise's CUDA kernels, called from Go
 * through cgo (engine/cuda). Plain C: no C++ types cross this boundary.
 *
 * Conventions, for every launcher:
 *  - Pointers are device pointers (cudaMalloc'd; host memory under the
 *    emulator). bf16 and f16 data are passed as uint16_t*.
 *  - Element counts are int64_t.
 *  - stream is a cudaStream_t (struct CUstream_st*, the same handle type as
 *    the driver API's CUstream); 0 is the default stream. The launcher only
 *    enqueues work; it is done when the stream is synchronised (under the
 *    emulator it is done on return).
 *  - The result is the launch's error (cudaGetLastError() after the launch,
 *    taken on the calling thread): cudaSuccess or the CUDA error code.
 *
 * Built twice from the same sources (see CMakeLists.txt): with nvcc into
 * build/cuda/libtwkernels_cuda.a, and with g++ against kernels/emu into
 * build/emu/libtwkernels_emu.a. Including this header needs
 * cuda_runtime_api.h on the include path: the CUDA toolkit's, or
 * kernels/emu/include for the emulator.
 */
#ifndef TW_KERNELS_H
#define TW_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* elementwise.cu */

/* x[i] = v for i in [0, n). */
cudaError_t tw_fill_f32(float *x, int64_t n, float v, cudaStream_t stream);
/* out[i] = a[i] + b[i] for i in [0, n); out may alias a or b. */
cudaError_t tw_add_f32(float *out, const float *a, const float *b, int64_t n, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* TW_KERNELS_H */
