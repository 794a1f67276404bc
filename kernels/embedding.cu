// embedding.cu — token embedding lookup and its scatter-add backward.
//
// Contract: engine.Backend.Embedding and EmbeddingBackward
// (engine/backend.go); the launchers' arguments are listed in kernels.h.
// What the kernels add to it: any pair of float dtypes for the table and the
// rows; the backward rounds to the table's dtype after each addition, in
// token order, as the CPU backend does, so repeated ids give the same bits on
// every run (and the same bits as engine/cpu). The forward is not told v and
// trusts the ids; the backward skips ids outside [0, v). The backward needs
// tw_embedding_backward_workspace(n) bytes of workspace (8-byte aligned).
// n ≤ 0 or d ≤ 0 launches nothing.
//
// Design.
//   Rows move in packs of 16 bytes (Pack, see pack.cuh) when d and the
//   pointers allow (d a multiple of the pack, both tensors aligned to it),
//   else element by element (the same kernels with a pack of 1).
//
//   Forward: a block of up to kFwdThreads threads per token and span of
//   columns (grid y); each thread loads up to kFwdUnroll packs of the table
//   row before it stores any, so several loads are in flight per thread.
//   Same dtypes copy bits; mixed ones convert through f32. A thread whose
//   packs all lie in the row (all of them at Llama's 4096 columns) takes
//   them without a test each: where each pack was tested and an empty one
//   selected past the row's end, nvcc split the bf16 packs into 16-bit
//   halves and joined them again to store them (71 PRMT in the 192
//   instructions of its sm_90 code; none on the new path).
//
//   Backward, deterministic without atomics on the table:
//   1. embedding_sort_kernel: each block sorts a tile of kSortTile tokens by
//      the 64-bit key (id as unsigned) << 32 | position, in shared memory
//      (bitonic: the first three merge levels and the last three steps of
//      every level in registers, eight keys a thread, the others through
//      shared memory). Keys are unique, so the order is unique: any correct
//      sort gives the same bits. Past n the tile is padded with ~0, which
//      sorts last and is never a valid id.
//   2. embedding_rank_kernel (only when n spans several tiles): the key's
//      place in the whole order is the number of smaller keys, the sum over
//      the tiles of a binary search in each (sorted) tile; each key is
//      written there. O(n · tiles · log kSortTile) reads, from L2.
//   3. embedding_backward_sum_kernel: a block per sorted key and span of
//      columns (grid y; a span is up to kSumThreads threads of kSumPacks
//      packs). The block whose key starts a run of one id (the previous key
//      has another id) owns that table row; the others return at once. Each
//      thread of the owner holds its kSumPacks packs of the row in f32 and
//      walks the run — the id's tokens in position order — kSumUnroll
//      tokens a round: it loads their packs of dout (up to kSumUnroll ·
//      kSumPacks independent loads in flight), then the next round's keys,
//      then adds this round's packs in order, rounding to the table's dtype
//      after each addition; it stores its packs once. A round thus waits for
//      one load (its rows), the keys having come in during the last one.
//   Every table element is thus written by one thread, and its additions
//   happen in token order: the same bits as the old one-block-per-token walk
//   and as engine/cpu, on every run. Cost: a sort of 8n bytes, then one read
//   of each dout row and one read and write of each used table row.
//   A run of k equal ids is a chain of k dependent additions per column on
//   one block per column span.
//
// Speed. On an H200 (2026-11-27, 9b1ace1) the backward took 39.8 µs at
// 2048 tokens of Llama's 4096 columns (30% of the copy bandwidth) and 102
// µs at 8192 (46%), its ids drawn at random (few repeats), when a thread
// of the sums held one pack and loaded each round's keys, then its rows:
// one or two loads in flight, behind a load of keys. Now a thread holds two
// packs, and a round's keys come in with the round before (2026-11-29,
// unmeasured). A frequent token (a space, a comma: tens of times in 2048
// tokens of text) is a run whose rounds are a chain: kSumUnroll tokens a
// round keeps it to a quarter of its length in loads waited for. The sort
// of 2048 keys is one block.
#include "common.cuh"
#include "kernels.h"
#include "pack.cuh"
#include "vec.cuh"

static constexpr int kFwdThreads = 128; // most threads of a forward block
static constexpr int kFwdUnroll = 4;    // packs in flight per forward thread
static constexpr int kSortThreads = 256;
static constexpr int kSortItems = 8;                         // keys per thread (a power of two)
static constexpr int kSortTile = kSortThreads * kSortItems; // keys per sorted tile (a power of two)
static constexpr int kRankThreads = 256;
static constexpr int kSumThreads = 128; // most threads of a backward block
static constexpr int kSumPacks = 2;     // packs of the row per backward thread
static constexpr int kSumUnroll = 4;    // tokens whose rows are loaded before they are added

typedef unsigned long long u64;
static constexpr u64 kPad = ~0ull; // the key that pads the last tile

// ---- forward ---------------------------------------------------------------------

// Stores a pack of the table's row into out's: its bits when the dtypes
// are one, else converted through f32.
template <class To, class Tt, int V> __device__ __forceinline__ void put_row_pack(To *dst, const Pack<Tt, V> &p) {
	if constexpr (std::is_same<To, Tt>::value) {
		put_pack(dst, p);
	} else {
		float f[V];
		for (int e = 0; e < V; e++) f[e] = to_float(p.v[e]);
		store_pack(dst, f);
	}
}

template <class To, class Tt, int V>
__global__ void __launch_bounds__(kFwdThreads)
	embedding_kernel(To *__restrict__ out, const Tt *__restrict__ table, const int32_t *__restrict__ ids, int64_t d) {
	const int64_t i = blockIdx.x;
	const Tt *src = table + (int64_t)ids[i] * d; // [d]
	To *dst = out + i * d;                       // [d]
	const int64_t span = (int64_t)blockDim.x * V * kFwdUnroll;
	const int64_t j0 = (int64_t)blockIdx.y * span + (int64_t)threadIdx.x * V;
	const int64_t last = j0 + (int64_t)(kFwdUnroll - 1) * blockDim.x * V;
	Pack<Tt, V> p[kFwdUnroll];
	if (last < d) { // every pack of the thread lies in the row: no test, no select of an empty pack
		TW_UNROLL
		for (int u = 0; u < kFwdUnroll; u++) p[u] = ld<V>(src + j0 + (int64_t)u * blockDim.x * V);
		TW_UNROLL
		for (int u = 0; u < kFwdUnroll; u++) put_row_pack(dst + j0 + (int64_t)u * blockDim.x * V, p[u]);
		return;
	}
TW_UNROLL
	for (int u = 0; u < kFwdUnroll; u++) {
		const int64_t j = j0 + (int64_t)u * blockDim.x * V;
		p[u] = j < d ? ld<V>(src + j) : Pack<Tt, V>{};
	}
TW_UNROLL
	for (int u = 0; u < kFwdUnroll; u++) {
		const int64_t j = j0 + (int64_t)u * blockDim.x * V;
		if (j < d) put_row_pack(dst + j, p[u]);
	}
}

// ---- backward: the sort --------------------------------------------------------------

// Orders a and b ascending (asc) or descending.
static __device__ __forceinline__ void order(u64 &a, u64 &b, bool asc) {
	if ((a > b) == asc) {
		const u64 t = a;
		a = b;
		b = t;
	}
}

// One bitonic step of stride j < kSortItems inside a thread's keys r, which
// are elements base … base+kSortItems−1 of the sequence; k is the merge
// level (the size of the runs being merged).
template <int J> static __device__ __forceinline__ void step_in_registers(u64 (&r)[kSortItems], int base, int k) {
TW_UNROLL
	for (int e = 0; e < kSortItems; e++)
		if ((e & J) == 0) order(r[e], r[e + J], ((base + e) & k) == 0);
}
template <int J> static __device__ __forceinline__ void steps_in_registers(u64 (&r)[kSortItems], int base, int k) {
	if constexpr (J > 0) {
		if (J < k) step_in_registers<J>(r, base, k);
		steps_in_registers<J / 2>(r, base, k);
	}
}

__global__ void __launch_bounds__(kSortThreads)
	embedding_sort_kernel(u64 *__restrict__ tiles,          // [tiles, kSortTile] sorted keys
	                      const int32_t *__restrict__ ids, // [n]
	                      int64_t n) {
	__shared__ u64 s[kSortTile];
	const int64_t t0 = (int64_t)blockIdx.x * kSortTile;
	const int base = kSortItems * threadIdx.x; // this thread's keys: elements base … base+7 of the tile
	u64 r[kSortItems];
TW_UNROLL
	for (int e = 0; e < kSortItems; e++) {
		const int64_t p = t0 + base + e;
		r[e] = p < n ? (u64)(uint32_t)ids[p] << 32 | (u64)p : kPad;
	}
	// Merge levels up to kSortItems: inside the thread.
	for (int k = 2; k <= kSortItems; k <<= 1) steps_in_registers<kSortItems / 2>(r, base, k);
	// The larger levels: strides ≥ kSortItems through shared memory, the
	// smaller ones in registers.
	for (int k = 2 * kSortItems; k <= kSortTile; k <<= 1) {
TW_UNROLL
		for (int e = 0; e < kSortItems; e++) s[base + e] = r[e];
		__syncthreads();
		for (int j = k / 2; j >= kSortItems; j /= 2) {
			for (int q = threadIdx.x; q < kSortTile / 2; q += kSortThreads) {
				const int i = (q & ~(j - 1)) << 1 | (q & (j - 1)), l = i | j; // the pair (i, i + j)
				u64 a = s[i], b = s[l];
				order(a, b, (i & k) == 0);
				s[i] = a, s[l] = b;
			}
			__syncthreads();
		}
TW_UNROLL
		for (int e = 0; e < kSortItems; e++) r[e] = s[base + e];
		steps_in_registers<kSortItems / 2>(r, base, k);
		__syncthreads(); // every thread has read its keys before the next level writes s
	}
TW_UNROLL
	for (int e = 0; e < kSortItems; e++) tiles[t0 + base + e] = r[e];
}

// The number of keys in the sorted tile t[0, kSortTile) that are < key.
static __device__ __forceinline__ int count_below(const u64 *__restrict__ t, u64 key) {
	int p = 0;
TW_UNROLL
	for (int step = kSortTile / 2; step > 0; step /= 2)
		if (t[p + step - 1] < key) p += step;
	return p + (t[p] < key);
}

__global__ void __launch_bounds__(kRankThreads)
	embedding_rank_kernel(u64 *__restrict__ sorted,      // [n] all keys in order
	                      const u64 *__restrict__ tiles, // [ntiles, kSortTile]
	                      int64_t ntiles) {
	const int64_t g = (int64_t)blockIdx.x * kRankThreads + threadIdx.x;
	if (g >= ntiles * kSortTile) return;
	const u64 key = tiles[g];
	if (key == kPad) return;
	int64_t rank = 0;
	// Four searches at a time: independent chains of loads.
	for (int64_t t = 0; t < ntiles; t += 4) {
		int c[4];
TW_UNROLL
		for (int u = 0; u < 4; u++) c[u] = t + u < ntiles ? count_below(tiles + (t + u) * kSortTile, key) : 0;
		rank += (int64_t)c[0] + c[1] + c[2] + c[3];
	}
	sorted[rank] = key;
}

// ---- backward: the sums --------------------------------------------------------------

template <class Tt, class To, int V>
__global__ void __launch_bounds__(kSumThreads)
	embedding_backward_sum_kernel(Tt *__restrict__ dtable,       // [v, d]
	                              const To *__restrict__ dout,   // [n, d]
	                              const u64 *__restrict__ keys,  // [n] sorted (id, position)
	                              int64_t n, int64_t v, int64_t d) {
	const int64_t b = blockIdx.x;
	const u64 key = keys[b];
	const uint32_t id = (uint32_t)(key >> 32);
	// No barriers below: a block (or thread) with nothing to do returns.
	if ((int64_t)id >= v) return;                                 // outside [0, v): skipped
	if (b > 0 && (uint32_t)(keys[b - 1] >> 32) == id) return;    // not the first of its run
	const int64_t step = (int64_t)blockDim.x * V; // columns between a thread's packs
	const int64_t j0 = (int64_t)blockIdx.y * step * kSumPacks + (int64_t)threadIdx.x * V;
	if (j0 >= d) return;
	Tt *row = dtable + (int64_t)id * d; // [d] the owned row
	float acc[kSumPacks][V];            // the thread's packs of it, in f32
TW_UNROLL
	for (int p = 0; p < kSumPacks; p++)
		if (j0 + p * step < d) load_pack(acc[p], row + j0 + p * step);
	// The run, kSumUnroll tokens a round; each round's keys are loaded while
	// the round before adds, so a round waits for one load (its rows), not
	// two (keys, then rows).
	u64 kv[kSumUnroll];
TW_UNROLL
	for (int u = 0; u < kSumUnroll; u++) kv[u] = b + u < n ? keys[b + u] : kPad;
	for (int64_t k = b;; k += kSumUnroll) {
		bool has[kSumUnroll], run = true;
TW_UNROLL
		for (int u = 0; u < kSumUnroll; u++) has[u] = run = run && (uint32_t)(kv[u] >> 32) == id;
		Held<To, V> g[kSumUnroll][kSumPacks] = {}; // the tokens' packs of dout, as loaded
TW_UNROLL
		for (int u = 0; u < kSumUnroll; u++)
TW_UNROLL
			for (int p = 0; p < kSumPacks; p++)
				if (has[u] && j0 + p * step < d) g[u][p] = ld_held<V>(dout + (int64_t)(uint32_t)kv[u] * d + j0 + p * step);
		const bool more = has[kSumUnroll - 1];
		if (more) {
TW_UNROLL
			for (int u = 0; u < kSumUnroll; u++) {
				const int64_t q = k + kSumUnroll + u;
				kv[u] = q < n ? keys[q] : kPad;
			}
		}
TW_UNROLL
		for (int u = 0; u < kSumUnroll; u++)
TW_UNROLL
			for (int p = 0; p < kSumPacks; p++)
				if (has[u] && j0 + p * step < d) {
					float f[V];
					widen(f, g[u][p]);
					for (int e = 0; e < V; e++) acc[p][e] = to_float(from_float<Tt>(acc[p][e] + f[e]));
				}
		if (!more) break;
	}
TW_UNROLL
	for (int p = 0; p < kSumPacks; p++)
		if (j0 + p * step < d) store_pack(row + j0 + p * step, acc[p]);
}

// ---- launchers --------------------------------------------------------------------

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
			auto launch = [&](auto kernel, int w) {
				const int64_t packs = ceil_div<int64_t>(d, w);
				const int threads = row_threads(ceil_div<int64_t>(packs, kFwdUnroll), kFwdThreads);
				const int64_t spans = ceil_div<int64_t>(packs, (int64_t)threads * kFwdUnroll);
				if (spans > 65535) return cudaErrorInvalidValue;
				LAUNCH(dim3((unsigned)n, (unsigned)spans), threads, 0, stream, kernel)(
					(To *)out, (const Tt *)table, ids, d);
				return cudaGetLastError();
			};
			if (pack_for<To, Tt>(out, table, d) == V) return launch(embedding_kernel<To, Tt, V>, V);
			return launch(embedding_kernel<To, Tt, 1>, 1);
		});
	});
}

static int64_t sort_tiles(int64_t n) { return ceil_div<int64_t>(n, kSortTile); }

extern "C" size_t tw_embedding_backward_workspace(int64_t n) {
	if (n <= 0) return 0;
	const int64_t t = sort_tiles(n);
	return (size_t)(t * kSortTile + (t > 1 ? n : 0)) * sizeof(u64);
}

extern "C" cudaError_t tw_embedding_backward(void *dtable, tw_dtype tdt, const void *dout, tw_dtype odt,
                                             const int32_t *ids, int64_t n, int64_t v, int64_t d, void *workspace,
                                             cudaStream_t stream) {
	if (n <= 0 || d <= 0 || v <= 0) return cudaSuccess;
	if (n > INT32_MAX) return cudaErrorInvalidValue;
	return dispatch_float(tdt, [&](auto *t) {
		return dispatch_float(odt, [&](auto *o) {
			using Tt = elem_t<decltype(t)>;
			using To = elem_t<decltype(o)>;
			constexpr int V = 16 / (sizeof(To) > sizeof(Tt) ? sizeof(To) : sizeof(Tt));
			const int w = pack_for<Tt, To>(dtable, dout, d);
			const int64_t packs = ceil_div<int64_t>(d, w);
			const int threads = row_threads(ceil_div<int64_t>(packs, kSumPacks), kSumThreads);
			const int64_t spans = ceil_div<int64_t>(packs, (int64_t)threads * kSumPacks);
			if (spans > 65535) return cudaErrorInvalidValue;

			const int64_t ntiles = sort_tiles(n);
			u64 *tiles = (u64 *)workspace;                          // [ntiles, kSortTile]
			u64 *keys = ntiles > 1 ? tiles + ntiles * kSortTile : tiles; // [n] sorted
			LAUNCH((unsigned)ntiles, kSortThreads, 0, stream, embedding_sort_kernel)(tiles, ids, n);
			cudaError_t err = cudaGetLastError();
			if (err != cudaSuccess) return err;
			if (ntiles > 1) {
				LAUNCH((unsigned)ceil_div<int64_t>(ntiles * kSortTile, kRankThreads), kRankThreads, 0, stream,
				       embedding_rank_kernel)(keys, tiles, ntiles);
				if ((err = cudaGetLastError()) != cudaSuccess) return err;
			}
			const dim3 grid((unsigned)n, (unsigned)spans);
			if (w == V)
				LAUNCH(grid, threads, 0, stream, embedding_backward_sum_kernel<Tt, To, V>)(
					(Tt *)dtable, (const To *)dout, keys, n, v, d);
			else
				LAUNCH(grid, threads, 0, stream, embedding_backward_sum_kernel<Tt, To, 1>)(
					(Tt *)dtable, (const To *)dout, keys, n, v, d);
			return cudaGetLastError();
		});
	});
}
