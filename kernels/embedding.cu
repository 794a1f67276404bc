// embedding.cu — token embedding lookup and its scatter-add backward.
//
// Contract: engine.Backend.Embedding and EmbeddingBackward
// (engine/backend.go); the launchers' arguments are listed in kernels.h.
// What the kernels add to it: any pair of float dtypes for the table and the
// rows; the backward rounds to the table's dtype after each addition, as the
// CPU backend does, so repeated ids give the same bits on every run. The
// forward is not told v and trusts the ids; the backward skips ids outside
// [0, v). n ≤ 0 or d ≤ 0 launches nothing.
//
// Design.
//   Forward: one block per token; its threads copy the row in packs of 16
//   bytes (Pack, see pack.cuh) when the row length and the pointers allow,
//   else element by element. Same dtypes copy bits; mixed ones convert
//   through f32.
//   Backward, deterministic without atomics or sorting: one block per token
//   i. The block first looks at ids[0, i): if its id occurs there, an earlier
//   block owns that table row and this one exits. Otherwise the block owns
//   row ids[i]: it scans ids[i, n) a block-width chunk at a time, each warp
//   turning its 32 comparisons into a ballot mask in shared memory, and then
//   every thread walks the masks in token order, adding each matching row of
//   dout into its own columns of the table row. A table element is thus only
//   ever touched by one thread, in token order. Cost: O(n) id reads per
//   block (O(n²) in all, served from cache: ids are 4n bytes), plus one
//   read-modify-write of a table row per token.
#include "common.cuh"
#include "kernels.h"
#include "pack.cuh"

static constexpr int kRowThreads = 256; // most threads per row
static constexpr int kBwdThreads = 256; // threads of a backward block (also the id-scan chunk)

template <class To, class Tt, int V>
__global__ void __launch_bounds__(kRowThreads)
	embedding_kernel(To *__restrict__ out, const Tt *__restrict__ table, const int32_t *__restrict__ ids, int64_t d) {
	const int64_t i = blockIdx.x;
	const Tt *src = table + (int64_t)ids[i] * d; // [d]
	To *dst = out + i * d;                       // [d]
	for (int64_t j = (int64_t)threadIdx.x * V; j < d; j += (int64_t)blockDim.x * V) {
		if constexpr (std::is_same<To, Tt>::value) {
			*reinterpret_cast<Pack<To, V> *>(dst + j) = *reinterpret_cast<const Pack<Tt, V> *>(src + j);
		} else {
			float f[V];
			load_pack(f, src + j);
			store_pack(dst + j, f);
		}
	}
}

template <class Tt, class To, int V>
__global__ void __launch_bounds__(kBwdThreads)
	embedding_backward_kernel(Tt *__restrict__ dtable, const To *__restrict__ dout, const int32_t *__restrict__ ids,
	                          int64_t n, int64_t v, int64_t d) {
	__shared__ unsigned match[kBwdThreads / 32]; // ballot of each warp over the current chunk of ids
	const int64_t i = blockIdx.x;
	const int32_t id = ids[i];
	const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;

	// Does an earlier token own this row? (The answer is block-uniform, so
	// the early return is taken by all threads or none.)
	int seen = id < 0 || id >= v;
	for (int64_t k = threadIdx.x; k < i && !seen; k += blockDim.x) seen = ids[k] == id;
	if (__syncthreads_or(seen)) return;

	Tt *row = dtable + (int64_t)id * d; // [d], owned by this block
	for (int64_t c0 = i; c0 < n; c0 += blockDim.x) {
		const int64_t k = c0 + threadIdx.x;
		const unsigned m = __ballot_sync(0xffffffffu, k < n && ids[k] == id);
		if (lane == 0) match[warp] = m;
		__syncthreads();
		for (int w = 0; w < kBwdThreads / 32; w++) {
			for (unsigned bits = match[w]; bits != 0; bits &= bits - 1) {
				const To *g = dout + (c0 + w * 32 + __ffs((int)bits) - 1) * d; // [d], token in order
				for (int64_t j = (int64_t)threadIdx.x * V; j < d; j += (int64_t)blockDim.x * V) {
					float a[V], b[V];
					load_pack(a, row + j);
					load_pack(b, g + j);
					for (int e = 0; e < V; e++) a[e] += b[e];
					store_pack(row + j, a);
				}
			}
		}
		__syncthreads(); // match[] is rewritten by the next chunk
	}
}

// The pack width for a row of d elements of two dtypes, or 1 when a pointer
// is not aligned to its pack or d is not a multiple of it.
template <class A, class B> static int pack_for(const void *a, const void *b, int64_t d) {
	constexpr int V = 16 / (sizeof(A) > sizeof(B) ? sizeof(A) : sizeof(B));
	return d % V == 0 && pack_aligned<A, V>(a) && pack_aligned<B, V>(b) ? V : 1;
}

extern "C" cudaError_t tw_embedding(void *out, tw_dtype odt, const void *table, tw_dtype tdt, const int32_t *ids,
                                    int64_t n, int64_t d, cudaStream_t stream) {
	if (n <= 0 || d <= 0) return cudaSuccess;
	if (n > INT32_MAX) return cudaErrorInvalidValue;
	return dispatch_float(odt, [&](auto *o) {
		return dispatch_float(tdt, [&](auto *t) {
			using To = elem_t<decltype(o)>;
			using Tt = elem_t<decltype(t)>;
			constexpr int V = 16 / (sizeof(To) > sizeof(Tt) ? sizeof(To) : sizeof(Tt));
			if (pack_for<To, Tt>(out, table, d) == V)
				LAUNCH((unsigned)n, row_threads(d / V, kRowThreads), 0, stream, embedding_kernel<To, Tt, V>)(
					(To *)out, (const Tt *)table, ids, d);
			else
				LAUNCH((unsigned)n, row_threads(d, kRowThreads), 0, stream, embedding_kernel<To, Tt, 1>)(
					(To *)out, (const Tt *)table, ids, d);
			return cudaGetLastError();
		});
	});
}

extern "C" cudaError_t tw_embedding_backward(void *dtable, tw_dtype tdt, const void *dout, tw_dtype odt,
                                             const int32_t *ids, int64_t n, int64_t v, int64_t d,
                                             cudaStream_t stream) {
	if (n <= 0 || d <= 0 || v <= 0) return cudaSuccess;
	if (n > INT32_MAX) return cudaErrorInvalidValue;
	return dispatch_float(tdt, [&](auto *t) {
		return dispatch_float(odt, [&](auto *o) {
			using Tt = elem_t<decltype(t)>;
			using To = elem_t<decltype(o)>;
			constexpr int V = 16 / (sizeof(To) > sizeof(Tt) ? sizeof(To) : sizeof(Tt));
			if (pack_for<Tt, To>(dtable, dout, d) == V)
				LAUNCH((unsigned)n, kBwdThreads, 0, stream, embedding_backward_kernel<Tt, To, V>)(
					(Tt *)dtable, (const To *)dout, ids, n, v, d);
			else
				LAUNCH((unsigned)n, kBwdThreads, 0, stream, embedding_backward_kernel<Tt, To, 1>)(
					(Tt *)dtable, (const To *)dout, ids, n, v, d);
			return cudaGetLastError();
		});
	});
}
