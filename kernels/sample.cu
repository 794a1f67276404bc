// sample.cu — draw one token per row of logits: greedy, temperature, top-p.
//
// Contract: engine.Backend.Sample and the rule on engine.SampleParams
// (engine/backend.go); the launchers' arguments are listed in kernels.h.
// What the kernels add to it:
//   Greedy: NaN logits never win; a NaN at index 0 gives 0, as engine/cpu.
//   Weights: e_j = (float)exp((double)((x_j − max)·(1/T))), with the
//   difference and the product in f32 and 1/T formed in f32 as engine/cpu
//   does. When rounding leaves no candidate whose running sum exceeds u·M,
//   the draw is the last candidate with a positive weight. Logits must be
//   finite for T > 0.
//   tw_sample_workspace(b, v): b·round_up(v, 4)·4 bytes (16-byte aligned, as
//   cudaMalloc gives): the weights, [b, round_up(v, 4)] f32.
//   b ≤ 0 or v ≤ 0 launches nothing; an integer dtype, v ≥ 2^29 (the exact
//   mantissa sums below need V·2^24 < 2^53) is cudaErrorInvalidValue.
//
// Design: one block of kThreads threads per row (grid-stride over rows).
//
// argmax_kernel (temperature ≤ 0): each thread scans j = t, t + kThreads, …
//   (coalesced) keeping its best (value, index) with a strict >, so its
//   lowest index on ties; the block then reduces the pairs by the order
//   (value descending, index ascending): xor butterflies in each warp, then
//   warp 0 over the warp winners.
//
// sample_kernel (temperature > 0), per row:
//   1. the row's max (block_max, f32);
//   2. the weights into the workspace row (float4 stores, zeros padding the
//      row to a multiple of 4), and the first radix histogram;
//   3. the nucleus threshold τ by a radix select over the weights' bits (top-p
//      only, 3 more passes over the workspace row);
//   4. the draw: a block-wide prefix sum over the candidates in index order.
//
//   Radix select. Weights are non-negative f32, so their bit patterns order
//   like their values. The heaviest-first cumulative mass reaches top_p·Σe
//   exactly at the weight τ = the largest weight value t with
//   Σ_{e ≥ t} e ≥ top_p·Σe; the nucleus is every token with e > τ plus the
//   first r tokens (lowest indices) with e = τ, r the fewest that reach the
//   target. τ's 31 bits are found 8, 8, 8 and 7 bits at a time (exponent,
//   then the mantissa from the top). Each pass histograms the tokens whose
//   bits above the current digit equal the prefix found so far, then picks
//   the highest digit whose cumulative mass (from the top) reaches the target.
//   Masses are summed exactly: in pass 1 a bucket holds one exponent E, so
//   its mass is (Σ of the 24-bit integer mantissas)·2^(E−150) — an integer
//   sum, exact in u64 and in f64; passes 2 and 3 stay inside τ's exponent
//   and sum mantissas in the same integer units; pass 4's buckets are single
//   values, so it counts tokens. Integer sums are exact in any order, so the
//   histograms use shared-memory atomics (integer only) and are still
//   deterministic. To bound contention on popular buckets (ties are common
//   in bf16 logits) every 8th lane shares one of 8 private copies of the
//   histogram (rows padded against bank conflicts); the copies are summed
//   before the search. Rounding enters only where masses of different
//   exponents meet: the f64 suffix sums over exponent buckets (a fixed
//   order: warp 0, 8 buckets a lane, high to low, then a Kogge-Stone suffix
//   scan across lanes) and the final hi + lo·2^(E−150). Σe itself is the
//   total of pass 1's buckets in that same order. If rounding ever leaves no
//   bucket reaching the target, the lowest non-empty one is taken (every
//   token kept). r is found by bisection on the exact mass above τ plus r·τ.
//
//   Draw. The row is walked in tiles of kTile = kThreads·8 weights; thread t
//   owns the 8 consecutive weights at 8t (two float4 loads). The candidate
//   weights c_j (e_j or 0) get an f64 block-wide exclusive prefix sum
//   (per-thread sums in index order, Kogge-Stone scans within warps and over
//   the warp totals: a fixed order) plus the tiles before; when ties at τ are
//   only partly kept, an integer prefix count of the ties ranks them first.
//   Each thread finds its first positive candidate whose running sum exceeds
//   u·M; the block keeps the lowest such index (integer atomicMin) and stops
//   after the first tile that has one. So the draw is the first candidate in
//   index order whose (fixed-order) running sum exceeds u·M.
//
//   Everything is deterministic: the same logits and u give the same ids on
//   every run. Against engine/cpu (sequential f64 sums, a sort for the
//   nucleus) results differ only where a draw or the nucleus boundary lies
//   within f64 rounding of a tie.
//
//   Cost per row: two coalesced reads of the logits, one write and up to four
//   reads of the f32 weights (L2-resident for a 128256-token row), an f64
//   exp per token (as engine/cpu: about 20 FP64 instructions, the largest
//   compute term — expf would be several times cheaper but differs from the
//   CPU's weights in the last bit), and per pass a few hundred cycles of
//   search in warp 0. Rows run in parallel, one block each; a single row
//   uses one SM.
#include "common.cuh"
#include "kernels.h"
#include "pack.cuh"

static constexpr int kThreads = 1024;          // threads per block (one block per row)
static constexpr int kWarps = kThreads / 32;
static constexpr int kItems = 8;               // weights per thread per draw tile
static constexpr int kTile = kThreads * kItems; // weights per draw tile
static constexpr int kBins = 256;              // radix buckets (8-bit digits)
static constexpr int kCopies = 8;              // private histogram copies (lane % 8)
static_assert(kThreads >= kBins, "one thread per bucket when the copies are summed");

// The block's shared state.
struct SampleSmem {
	unsigned long long hist[kCopies][kBins + 1]; // [8][257] histogram copies; +1 pads copies onto other banks
	unsigned long long bins[kBins];              // [256] the copies summed: mantissa sums, or counts (pass 4)
	double vals[kBins];                          // [256] the buckets' masses as f64 (exact), per pass's units
	double dscan[kWarps];                        // [32] f64 warp totals of scans and sums
	int iscan[kWarps];                           // [32] i32 warp totals of scans
	float fscan[kWarps];                         // [32] block_max scratch
	int digit;                                   // the digit a search picked
	double before;                               // the mass of the buckets above it
	double total;                                // Σ of pass 1's buckets (Σe)
	int claim;                                   // lowest index drawn in this tile (INT32_MAX: none yet)
	int last;                                    // last candidate with a positive weight
};

// ---- helpers ----------------------------------------------------------------------

// The 24-bit integer mantissa of a non-negative float's bits: the weight is
// mant·2^(max(E, 1) − 150), E its exponent field.
static __device__ __forceinline__ unsigned mant24(unsigned bits) {
	return (bits & 0x7fffffu) | ((bits >> 23) ? 0x800000u : 0u);
}
static __device__ __forceinline__ double mant_unit(unsigned exponent) {
	return ldexp(1.0, (int)(exponent > 1 ? exponent : 1) - 150);
}

// Block-wide exclusive prefix sum of v over threads (thread order) in a fixed
// order; total receives the sum over the block. scratch: kWarps values of
// shared memory. Every thread must call it.
template <class T> static __device__ __forceinline__ T block_exclusive_scan(T v, T *scratch, T &total) {
	const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
	T x = v; // inclusive scan within the warp
	for (int o = 1; o < 32; o <<= 1) {
		const T y = __shfl_up_sync(0xffffffffu, x, o);
		if (lane >= o) x += y;
	}
	T excl = __shfl_up_sync(0xffffffffu, x, 1);
	if (lane == 0) excl = 0;
	if (lane == 31) scratch[warp] = x;
	__syncthreads();
	if (warp == 0) { // inclusive scan of the warp totals
		T w = scratch[lane];
		for (int o = 1; o < 32; o <<= 1) {
			const T y = __shfl_up_sync(0xffffffffu, w, o);
			if (lane >= o) w += y;
		}
		scratch[lane] = w;
	}
	__syncthreads();
	const T r = warp > 0 ? scratch[warp - 1] + excl : excl;
	total = scratch[kWarps - 1];
	__syncthreads();
	return r;
}

static __device__ __forceinline__ void hist_clear(SampleSmem &sm) {
	for (int i = threadIdx.x; i < kCopies * (kBins + 1); i += kThreads) (&sm.hist[0][0])[i] = 0;
}
static __device__ __forceinline__ void hist_add(SampleSmem &sm, unsigned digit, unsigned long long val) {
	atomicAdd(&sm.hist[threadIdx.x % kCopies][digit], val);
}

// Pass kinds: how a bucket's sum turns into a mass (vals).
enum Units { kExponentBuckets, kMantissaSums, kCounts };

// Sums the histogram copies into bins and turns them into masses in vals:
// kExponentBuckets: bucket E holds Σ mant24, mass Σ·2^(max(E,1)−150) (f64,
// exact); kMantissaSums: Σ mant24 in the units of τ's exponent; kCounts:
// bucket d is the single value prefix·128 + d, mass count·mant24 of it.
// Ends with a barrier.
static __device__ void hist_sum(SampleSmem &sm, Units units, unsigned prefix) {
	if (threadIdx.x < kBins) {
		const unsigned d = threadIdx.x;
		unsigned long long s = 0;
		for (int c = 0; c < kCopies; c++) s += sm.hist[c][d];
		sm.bins[d] = s;
		double m = (double)s;
		if (units == kExponentBuckets) m *= mant_unit(d);
		else if (units == kCounts) m *= (double)mant24((prefix << 7) | (d & 127u));
		sm.vals[d] = m;
	}
	__syncthreads();
}

// Run by warp 0. Lane l takes buckets 8l…8l+7; returns Σ vals (f64: each lane
// high to low, then a suffix scan across lanes, high lanes first) and sets
// above to the sum of the lanes above this one.
static __device__ __forceinline__ double bucket_suffix(const double *vals, double &above) {
	const int lane = threadIdx.x;
	double s = 0.0;
	for (int k = 7; k >= 0; k--) s += vals[8 * lane + k];
	for (int o = 1; o < 32; o <<= 1) {
		const double y = __shfl_down_sync(0xffffffffu, s, o);
		if (lane + o < 32) s += y;
	}
	above = __shfl_down_sync(0xffffffffu, s, 1);
	if (lane == 31) above = 0.0;
	return __shfl_sync(0xffffffffu, s, 0);
}

// Run by warp 0: the highest bucket d whose cumulative mass from the top
// reaches the target, hi + (lo + Σ_{d' ≥ d} vals[d'])·unit ≥ target (the
// lowest non-empty bucket when none does), and the mass above it
// Σ_{d' > d} vals[d'] (in vals' units), into sm.digit and sm.before.
static __device__ void pick_bucket(SampleSmem &sm, double hi, double lo, double unit, double target) {
	const int lane = threadIdx.x;
	double c;
	bucket_suffix(sm.vals, c);
	int found = -1, lowest = -1;
	double found_before = 0.0, lowest_before = 0.0;
	for (int k = 7; k >= 0; k--) {
		const int d = 8 * lane + k;
		const double m = sm.vals[d];
		if (m > 0.0) {
			const double after = c + m;
			if (found < 0 && hi + (lo + after) * unit >= target) found = d, found_before = c;
			lowest = d, lowest_before = c;
			c = after;
		}
	}
	const unsigned fm = __ballot_sync(0xffffffffu, found >= 0);
	const unsigned nm = __ballot_sync(0xffffffffu, lowest >= 0); // never 0: the max weight is 1
	const int src = fm ? 31 - __clz((int)fm) : __ffs((int)nm) - 1;
	const int d = __shfl_sync(0xffffffffu, fm ? found : lowest, src);
	const double before = __shfl_sync(0xffffffffu, fm ? found_before : lowest_before, src);
	if (lane == 0) sm.digit = d, sm.before = before;
}

// ---- greedy ---------------------------------------------------------------------

// Is (v, i) ahead of (bv, bi) in the order value descending, index ascending?
// An index < 0 marks an empty slot, behind everything.
static __device__ __forceinline__ bool ahead(float v, int i, float bv, int bi) {
	return i >= 0 && (bi < 0 || v > bv || (v == bv && i < bi));
}

template <class T>
__global__ void __launch_bounds__(kThreads)
	argmax_kernel(int32_t *__restrict__ ids,     // [b]
	              const T *__restrict__ logits,  // [b, v]
	              int64_t b, int64_t v) {
	__shared__ float wv[kWarps];
	__shared__ int wi[kWarps];
	const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
	for (int64_t row = blockIdx.x; row < b; row += gridDim.x) {
		const T *x = logits + row * v; // [v]
		float best = -INFINITY;
		int bi = -1;
		for (int j = threadIdx.x; j < v; j += kThreads) {
			const float f = to_float(x[j]);
			const float key = f != f ? -INFINITY : f; // NaN never wins
			if (bi < 0 || key > best) best = key, bi = j;
		}
		for (int o = 16; o > 0; o >>= 1) {
			const float ov = __shfl_xor_sync(0xffffffffu, best, o);
			const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
			if (ahead(ov, oi, best, bi)) best = ov, bi = oi;
		}
		if (lane == 0) wv[warp] = best, wi[warp] = bi;
		__syncthreads();
		if (warp == 0) {
			best = wv[lane], bi = wi[lane];
			for (int o = 16; o > 0; o >>= 1) {
				const float ov = __shfl_xor_sync(0xffffffffu, best, o);
				const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
				if (ahead(ov, oi, best, bi)) best = ov, bi = oi;
			}
			if (lane == 0) {
				const float x0 = to_float(x[0]);
				ids[row] = x0 != x0 ? 0 : bi; // engine/cpu keeps index 0 when it is NaN
			}
		}
		__syncthreads();
	}
}

// ---- temperature and top-p --------------------------------------------------------

template <class T>
__global__ void __launch_bounds__(kThreads)
	sample_kernel(int32_t *__restrict__ ids,    // [b]
	              const T *__restrict__ logits, // [b, v]
	              const float *__restrict__ u,  // [b]
	              float *__restrict__ ws,       // [b, vp] weights
	              int64_t b, int64_t v, int64_t vp, float inv_t, float top_p, bool nucleus) {
	__shared__ SampleSmem sm;
	const int nq = (int)(vp / 4); // float4 groups in a row
	for (int64_t row = blockIdx.x; row < b; row += gridDim.x) {
		const T *x = logits + row * v; // [v]
		float *w = ws + row * vp;      // [vp] weights, zero from v on

		// 1. The max.
		float mx = -INFINITY;
		for (int j = threadIdx.x; j < v; j += kThreads) mx = fmaxf(mx, to_float(x[j]));
		mx = block_max(mx, sm.fscan);

		// 2. The weights, and pass 1 of the radix select: buckets by exponent.
		hist_clear(sm);
		__syncthreads();
		for (int q = threadIdx.x; q < nq; q += kThreads) {
			float e[4];
			for (int k = 0; k < 4; k++) {
				const int j = 4 * q + k;
				e[k] = 0.0f;
				if (j < v) {
					const float y = __fmul_rn(__fsub_rn(to_float(x[j]), mx), inv_t);
					e[k] = (float)exp((double)y);
					const unsigned bits = __float_as_uint(e[k]);
					hist_add(sm, bits >> 23, mant24(bits));
				}
			}
			reinterpret_cast<float4 *>(w)[q] = make_float4(e[0], e[1], e[2], e[3]);
		}
		__syncthreads(); // the weights and the histogram are complete
		hist_sum(sm, kExponentBuckets, 0);
		if (threadIdx.x < 32) {
			double unused;
			const double total = bucket_suffix(sm.vals, unused);
			if (nucleus) pick_bucket(sm, 0.0, 0.0, 1.0, (double)top_p * total);
			if (threadIdx.x == 0) sm.total = total;
		}
		__syncthreads();

		// 3. The nucleus: τ, and how many of the ties at τ it keeps (r).
		float tau = -1.0f; // every weight is > −1: all tokens are candidates
		long long r = 0, ties = 0;
		double mass = sm.total; // M, the candidates' total
		if (nucleus) {          // uniform across the block
			const double target = (double)top_p * sm.total;
			unsigned prefix = (unsigned)sm.digit; // τ's bits found so far
			const double hi = sm.before;          // mass of the exponents above τ's (f64)
			const double unit = mant_unit(prefix); // 2^(max(E,1)−150) of τ's exponent E
			double lo = 0.0;                      // mass in τ's exponent above the prefix, in units (exact)
			int pshift = 23;                      // the prefix is bits ≥ pshift
			for (int pass = 0; pass < 3; pass++) {
				const int shift = pass < 2 ? pshift - 8 : 0; // digits: bits 22..15, 14..7, 6..0
				const unsigned dmask = (1u << (pshift - shift)) - 1;
				__syncthreads(); // the last search's results are read
				hist_clear(sm);
				__syncthreads();
				for (int q = threadIdx.x; q < nq; q += kThreads) {
					const float4 e4 = reinterpret_cast<const float4 *>(w)[q];
					const float e[4] = {e4.x, e4.y, e4.z, e4.w};
					for (int k = 0; k < 4; k++) {
						const unsigned bits = __float_as_uint(e[k]);
						if (4 * q + k < v && (bits >> pshift) == prefix)
							hist_add(sm, (bits >> shift) & dmask, pass < 2 ? mant24(bits) : 1u);
					}
				}
				__syncthreads();
				hist_sum(sm, pass < 2 ? kMantissaSums : kCounts, prefix);
				if (threadIdx.x < 32) pick_bucket(sm, hi, lo, unit, target);
				__syncthreads();
				lo += sm.before;
				prefix = (prefix << (pshift - shift)) | (unsigned)sm.digit;
				pshift = shift;
			}
			tau = __uint_as_float(prefix);
			ties = (long long)sm.bins[sm.digit];
			// The fewest ties r ≥ 1 that reach the target (all of them if
			// rounding leaves the target out of reach).
			const double m_tau = (double)mant24(prefix);
			long long lo_r = 1, hi_r = ties;
			while (lo_r < hi_r) {
				const long long mid = (lo_r + hi_r) / 2;
				if (hi + (lo + (double)mid * m_tau) * unit >= target) hi_r = mid;
				else lo_r = mid + 1;
			}
			r = lo_r;
			mass = hi + (lo + (double)r * m_tau) * unit;
		}
		const bool rank_ties = r < ties; // only some ties at τ are candidates

		// 4. The draw: the first candidate whose running sum exceeds u·M.
		const double target = (double)u[row] * mass;
		if (threadIdx.x == 0) sm.claim = INT32_MAX, sm.last = -1;
		__syncthreads();
		double carry = 0.0;     // candidate mass of the tiles before
		long long tie_carry = 0; // ties at τ in the tiles before
		int last = -1;           // this thread's last positive candidate
		for (int64_t base = 0; base < v; base += kTile) {
			const int64_t j0 = base + (int64_t)kItems * threadIdx.x; // this thread's 8 weights
			float e[kItems];
			for (int h = 0; h < kItems; h += 4) {
				const float4 e4 = j0 + h < vp ? reinterpret_cast<const float4 *>(w + j0)[h / 4] : make_float4(0, 0, 0, 0);
				e[h] = e4.x, e[h + 1] = e4.y, e[h + 2] = e4.z, e[h + 3] = e4.w;
			}
			long long rank = 0; // ties at τ before this thread's first weight
			if (rank_ties) {    // uniform across the block
				int nt = 0;
				for (int k = 0; k < kItems; k++) nt += j0 + k < v && e[k] == tau;
				int tile_ties;
				rank = tie_carry + block_exclusive_scan(nt, sm.iscan, tile_ties);
				tie_carry += tile_ties;
			}
			double c[kItems], own = 0.0; // candidate weights; their sum
			for (int k = 0; k < kItems; k++) {
				const bool tie = j0 + k < v && e[k] == tau;
				c[k] = (e[k] > tau || (tie && (!rank_ties || rank < r))) ? (double)e[k] : 0.0;
				rank += tie;
				own += c[k];
			}
			double tile_mass;
			double s = carry + block_exclusive_scan(own, sm.dscan, tile_mass);
			carry += tile_mass;
			bool drawn = false;
			for (int k = 0; k < kItems && !drawn; k++) {
				if (c[k] > 0.0) {
					s += c[k];
					last = (int)(j0 + k);
					if (s > target) {
						atomicMin(&sm.claim, (int)(j0 + k));
						drawn = true;
					}
				}
			}
			if (__syncthreads_or(drawn)) break; // a barrier, and uniform across the block
		}
		if (last >= 0) atomicMax(&sm.last, last);
		__syncthreads();
		if (threadIdx.x == 0) ids[row] = sm.claim != INT32_MAX ? sm.claim : (sm.last >= 0 ? sm.last : 0);
		__syncthreads(); // sm is reused by the next row
	}
}

// ---- launchers --------------------------------------------------------------------

static int64_t padded(int64_t v) { return (v + 3) / 4 * 4; }

extern "C" size_t tw_sample_workspace(int64_t b, int64_t v) {
	return b > 0 && v > 0 ? (size_t)b * (size_t)padded(v) * sizeof(float) : 0;
}

template <class T>
static cudaError_t sample(int32_t *ids, const T *logits, const float *u, int64_t b, int64_t v, float temperature,
                          float top_p, float *ws, cudaStream_t stream) {
	const unsigned grid = (unsigned)(b < 65535 ? b : 65535);
	if (temperature <= 0) {
		LAUNCH(grid, kThreads, 0, stream, argmax_kernel<T>)(ids, logits, b, v);
	} else {
		const float inv_t = 1 / temperature; // f32, as engine/cpu
		const bool nucleus = top_p > 0 && top_p < 1;
		LAUNCH(grid, kThreads, 0, stream, sample_kernel<T>)(ids, logits, u, ws, b, v, padded(v), inv_t, top_p, nucleus);
	}
	return cudaGetLastError();
}

extern "C" cudaError_t tw_sample(int32_t *ids, const void *logits, tw_dtype dt, const float *u, int64_t b, int64_t v,
                                 float temperature, float top_p, void *workspace, cudaStream_t stream) {
	return dispatch_float(dt, [&](auto *t) {
		using T = elem_t<decltype(t)>;
		if (v >= (int64_t)1 << 29) return cudaErrorInvalidValue;
		if (b <= 0 || v <= 0) return cudaSuccess;
		float *ws = (float *)workspace; // [b, padded(v)]
		return sample(ids, (const T *)logits, u, b, v, temperature, top_p, ws, stream);
	});
}
