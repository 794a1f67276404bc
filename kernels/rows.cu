// rows.cu — copying whole rows to rows named by device data.
//
// Contract: engine.Backend.ScatterRows (engine/backend.go); the launcher's
// arguments are listed in kernels.h. The kernel moves bytes: any dtype, rows
// of any width. The row indices are read on the device, so a launch's
// parameters do not depend on them: a recorded launch (a CUDA graph) copies
// to whichever rows the index array holds when it is replayed (a KV cache
// written at the position of the token decoded).
//
// Design: one block of 256 threads per source row (grid.x = n, up to 2³¹−1);
// the row moves in 16-byte words when the row width and both bases allow it
// (every Llama shape), in 4-byte words when they allow that, else bytewise.
// A bf16 row of 1024 key/value elements (8 heads of 128) is 128 words: half
// the block idles, which matters little for a copy this small.
#include "common.cuh"
#include "kernels.h"

static constexpr int kRowsThreads = 256;

template <class W>
__global__ void __launch_bounds__(kRowsThreads)
	scatter_rows_kernel(W *__restrict__ dst, const W *__restrict__ src, const int32_t *__restrict__ rows, int64_t words) {
	const int64_t i = blockIdx.x;
	const int64_t r = rows[i];
	const W *s = src + i * words;
	W *d = dst + r * words;
	for (int64_t w = threadIdx.x; w < words; w += kRowsThreads) d[w] = s[w];
}

template <class W>
static cudaError_t launch_rows(void *dst, const void *src, const int32_t *rows, int64_t n, int64_t row_bytes,
                               cudaStream_t stream) {
	LAUNCH((unsigned)n, kRowsThreads, 0, stream, scatter_rows_kernel<W>)
	((W *)dst, (const W *)src, rows, row_bytes / (int64_t)sizeof(W));
	return cudaGetLastError();
}

extern "C" cudaError_t tw_scatter_rows(void *dst, const void *src, const int32_t *rows, int64_t n, int64_t row_bytes,
                                       cudaStream_t stream) {
	if (n < 0 || row_bytes < 0 || n > 0x7fffffff) return cudaErrorInvalidValue;
	if (n == 0 || row_bytes == 0) return cudaSuccess;
	const uintptr_t bases = (uintptr_t)dst | (uintptr_t)src;
	if (row_bytes % 16 == 0 && bases % 16 == 0) return launch_rows<uint4>(dst, src, rows, n, row_bytes, stream);
	if (row_bytes % 4 == 0 && bases % 4 == 0) return launch_rows<uint32_t>(dst, src, rows, n, row_bytes, stream);
	return launch_rows<uint8_t>(dst, src, rows, n, row_bytes, stream);
}
