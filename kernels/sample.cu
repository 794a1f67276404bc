// sample.cu — draw one token per row of logits: greedy, temperature, top-k,
// top-p.
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
//   tw_sample_workspace(b, v) bytes, 16-byte aligned (as cudaMalloc gives):
//   the weights, [b, round_up(v, 4)] f32, then per row the radix histograms
//   and per-chunk partials (sample_layout below). top_k ≤ 0 or ≥ v keeps
//   every token.
//   b ≤ 0 or v ≤ 0 launches nothing; an integer dtype or v ≥ 2^29 (the exact
//   mantissa sums below need V·2^24 < 2^53) is cudaErrorInvalidValue.
//
// Design: every row is split into S chunks of C weights (C = 4096, larger
// for rows over 256·4096 so that S ≤ kMaxChunks; S and C depend on v
// alone), one block of kThreads threads per (row, chunk), so a batch of 8
// rows of 128256 logits runs on 8·32 blocks instead of 8. The steps that
// need the whole row are separate launches on the stream; what a block needs
// from the others it reads from the workspace, and what several blocks add
// up is either an integer (atomics, exact in any order) or written per chunk
// and summed in a fixed order. So every result depends on the logits, u and
// the shape alone: the same ids on every run and every device.
//
// argmax (temperature ≤ 0): argmax_chunk_kernel keeps each thread's best
//   (value, index) with a strict >, so its lowest index on ties, reduces them
//   over the block by the order (value descending, index ascending) and
//   writes the chunk's winner; argmax_finish_kernel reduces the chunks'.
//
// temperature > 0:
//   1. max_chunk_kernel: each chunk's max; the chunk-0 block of a row also
//      zeroes the row's histograms and draw slots.
//   2. weights_kernel: the row's max from the chunks', the weights into the
//      workspace (one f64 exp per token, as engine/cpu: the exact f32
//      weights are what make the sums below exact and the ids equal to the
//      CPU's), and the first radix histogram (with top-k also the first
//      count histogram); without top-p and top-k also the chunk's candidate
//      mass.
//   3. topk_pass_kernel, three launches (top-k only): the k-th heaviest
//      weight τ_k by a radix select that counts tokens.
//   4. radix_pass_kernel, three launches (top-p only): the nucleus threshold
//      τ by a radix select over the weights' bits, 8 bits at a time.
//   5. nucleus_chunk_kernel (top-k or top-p): τ and how many of its ties the
//      candidates keep, the chunk's mass above τ and its ties at τ.
//   6. draw_kernel: the chunk's running sums; the first candidate whose sum
//      exceeds u·M, and the last positive candidate, into two integer slots
//      of the row by atomicMax; sample_finish_kernel writes the id.
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
//   values, so it counts tokens. Integer sums are exact in any order, so a
//   block histograms its chunk with shared-memory atomics (every 8th lane
//   shares one of 8 private copies, against contention on the popular
//   buckets of tied bf16 logits) and adds its non-zero buckets to the row's
//   histogram in global memory with integer atomics: deterministic. The pick
//   after a pass is made by every block that needs it, from the row's
//   histograms, by the same arithmetic: a block replays all the picks before
//   its own pass (a few hundred cycles of warp 0 each). Rounding enters only
//   where masses of different exponents meet: the f64 suffix sums over
//   exponent buckets (a fixed order: warp 0, 8 buckets a lane, high to low,
//   then a Kogge-Stone suffix scan across lanes) and the final
//   hi + lo·2^(E−150). Σe itself is the total of pass 1's buckets in that
//   same order. If rounding ever leaves no bucket reaching the target, the
//   lowest non-empty one is taken (every token kept). r is found by
//   bisection on the exact mass above τ plus r·τ.
//
//   Top-k (0 < k < v) first, top-p second, as the contract orders them. The
//   k candidates are every token with e > τ_k plus the first r_k tokens
//   (lowest indices) with e = τ_k, τ_k the k-th heaviest weight: the same
//   radix select finds it, picking after each pass the highest digit whose
//   count of tokens from the top reaches k (counts are integers: exact).
//   Its histograms hold the counts and, in passes 1 to 3, the mantissa sums
//   (pass 1's are the top-p histogram's, which weights_kernel fills either
//   way), so the mass of the k, M_k = hi + (lo + r_k·mant(τ_k))·unit, is
//   summed as the nucleus mass is. With top-p the nucleus select then runs
//   with the target top_p·M_k, and the candidates are the shorter of the
//   two prefixes of the ranking: the nucleus, unless rounding left it the
//   longer. The weights kernel keeps mantissa sums in copies 0–3 of its
//   shared histogram and counts in copies 4–7. Without top-k none of this
//   runs: the launches and their work are those of top-p alone.
//
//   Draw. The candidates' mass of chunk s is M_s = (Σ of its weights > τ,
//   f64 in a fixed order) + k_s·τ, k_s its ties kept (the first r ties of the
//   row in index order: the ties of the chunks before s are counted first).
//   A block walks its chunk in tiles of kThreads·kItems weights, thread t
//   owning kItems consecutive ones; the running sum at a weight is
//   P_s (Σ of M over the chunks before, in chunk order) + the tiles before +
//   a block-wide f64 exclusive scan of the threads' sums (fixed order) + the
//   thread's own sum up to it. The draw is the first candidate in index
//   order whose running sum exceeds u·M: each block finds its first, the
//   row's slot keeps the lowest (atomicMax of v − index).
//
//   Against engine/cpu (sequential f64 sums, a sort for the nucleus) ids
//   differ only where a draw or the nucleus boundary lies within f64
//   rounding of a tie.
//
//   Cost: the logits are read twice and the f32 weights written once and
//   read up to five times (eight with top-k and top-p; L2-resident for a
//   batch of rows), spread over S·b blocks; 8 launches with top-p or top-k,
//   11 with both, 5 with neither, 2 for greedy. The logits are read in
//   16-byte packs (8 bf16 or 4 f32 a lane; 4 bf16 by the weights kernel,
//   whose lanes store a float4 each) where v is a multiple of a pack and
//   the logits are aligned to one (Llama 3's 128256 is), element by
//   element otherwise; the weights are written and read as float4s, a
//   warp's 512 bytes contiguous, except in the draw, whose lanes own 16
//   consecutive weights each (its four float4s 64 bytes apart: each load
//   takes half of every sector it touches, the next the other half, from
//   L1). Speed on a GPU is unmeasured (written without one); at a few rows
//   the launches, not the bytes, will dominate.
#include "common.cuh"
#include "kernels.h"
#include "pack.cuh"
#include "vec.cuh"

static constexpr int kThreads = 256; // threads per block
static constexpr int kWarps = kThreads / 32;
static constexpr int kItems = 16;               // weights per thread per draw tile
static constexpr int kTile = kThreads * kItems; // weights per tile: the smallest chunk
static constexpr int kMaxChunks = 256;          // most chunks per row
static constexpr int kBins = 256;               // radix buckets (8-bit digits)
static constexpr int kCopies = 8;               // private histogram copies (lane % 8)
static constexpr int kPasses = 4;               // radix passes
static_assert(kThreads >= kBins, "one thread per bucket when the copies are summed");
static_assert(kTile % 4 == 0, "chunks start on 16-byte boundaries of the weights");

typedef unsigned long long u64;

// The workspace of b rows of v logits.
struct SampleLayout {
	int64_t vp;     // a row of weights, padded to a multiple of 4
	int64_t chunk;  // C, a multiple of kTile
	int64_t chunks; // S
	float *w;       // [b, vp] weights
	u64 *hist;      // [b, kPasses, kBins] the row's radix histograms
	u64 *khist;     // [b, 2, kPasses, kBins] top-k: the counts, then the mantissa sums of passes 2, 3
	double *mass;   // [b, S] the chunks' candidate mass above τ (all of it without top-k and top-p)
	float *cmax;    // [b, S] the chunks' max logit (argmax: their best value)
	int *cidx;      // [b, S] argmax: the chunks' best index; top-k, top-p: their ties at τ
	unsigned *slot; // [b, 2] the draw (v − index, 0: none), the last positive candidate (index + 1)
	size_t bytes;
};

static SampleLayout sample_layout(void *ws, int64_t b, int64_t v) {
	SampleLayout l;
	l.vp = (v + 3) / 4 * 4;
	l.chunk = kTile;
	while (ceil_div<int64_t>(v, l.chunk) > kMaxChunks) l.chunk *= 2;
	l.chunks = ceil_div<int64_t>(v, l.chunk);
	char *p = (char *)ws;
	size_t off = 0;
	auto take = [&](size_t n) {
		char *q = p ? p + off : nullptr;
		off += (n + 15) / 16 * 16;
		return q;
	};
	l.w = (float *)take((size_t)(b * l.vp) * sizeof(float));
	l.hist = (u64 *)take((size_t)(b * kPasses * kBins) * sizeof(u64));
	l.khist = (u64 *)take((size_t)(b * 2 * kPasses * kBins) * sizeof(u64));
	l.mass = (double *)take((size_t)(b * l.chunks) * sizeof(double));
	l.cmax = (float *)take((size_t)(b * l.chunks) * sizeof(float));
	l.cidx = (int *)take((size_t)(b * l.chunks) * sizeof(int));
	l.slot = (unsigned *)take((size_t)(b * 2) * sizeof(unsigned));
	l.bytes = off;
	return l;
}

// The block's shared state.
struct SampleSmem {
	u64 hist[kCopies][kBins + 1]; // [8][257] histogram copies; +1 pads copies onto other banks
	u64 bins[kBins];              // [256] the row's histogram of a pass: mantissa sums, or counts (pass 4)
	double vals[kBins];           // [256] the buckets' masses as f64 (exact), per pass's units
	double dscan[kWarps];         // f64 warp totals of scans and sums
	long long iscan[kWarps];      // integer warp totals of scans
	float fscan[32];              // block_max scratch
	int iv[kWarps];               // argmax: the warps' best indices
	int digit;                    // the digit a search picked
	double before;                // the mass of the buckets above it
	long long cbefore;            // top-k: the tokens in the buckets above it
	double dsum;                  // a sum thread 0 made for the block
	int found;                    // draw: this block's first drawn index (INT32_MAX: none yet)
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
		T w = lane < kWarps ? scratch[lane] : T(0);
		for (int o = 1; o < 32; o <<= 1) {
			const T y = __shfl_up_sync(0xffffffffu, w, o);
			if (lane >= o) w += y;
		}
		if (lane < kWarps) scratch[lane] = w;
	}
	__syncthreads();
	const T r = warp > 0 ? scratch[warp - 1] + excl : excl;
	total = scratch[kWarps - 1];
	__syncthreads();
	return r;
}

// Sum over the block in a fixed order (each warp's xor butterfly, then warp
// 0 over the warp sums); every thread gets it. scratch: kWarps values.
static __device__ __forceinline__ double block_sum_f64(double v, double *scratch) {
	const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	if (lane == 0) scratch[warp] = v;
	__syncthreads();
	v = lane < kWarps ? scratch[lane] : 0.0;
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	__syncthreads();
	return v;
}

static __device__ __forceinline__ void hist_clear(SampleSmem &sm) {
	for (int i = threadIdx.x; i < kCopies * (kBins + 1); i += kThreads) (&sm.hist[0][0])[i] = 0;
}
static __device__ __forceinline__ void hist_add(SampleSmem &sm, unsigned digit, u64 val) {
	atomicAdd(&sm.hist[threadIdx.x % kCopies][digit], val);
}
// Two histograms at once, in half the copies each: val into copies 0–3,
// 1 (a count) into copies 4–7.
static __device__ __forceinline__ void hist_add_counted(SampleSmem &sm, unsigned digit, u64 val) {
	atomicAdd(&sm.hist[threadIdx.x % (kCopies / 2)][digit], val);
	atomicAdd(&sm.hist[kCopies / 2 + threadIdx.x % (kCopies / 2)][digit], 1ull);
}
// Adds the sum of the block's copies [c0, c1) to the row's histogram g
// [kBins]. No barriers.
static __device__ __forceinline__ void hist_flush_copies(SampleSmem &sm, u64 *g, int c0, int c1) {
	if (threadIdx.x < kBins) {
		u64 s = 0;
		for (int c = c0; c < c1; c++) s += sm.hist[c][threadIdx.x];
		if (s != 0) atomicAdd(&g[threadIdx.x], s);
	}
}
// Adds the block's histogram (its copies summed) to the row's, g [kBins].
// Starts with a barrier (the copies are complete) and ends with one.
static __device__ __forceinline__ void hist_flush(SampleSmem &sm, u64 *g) {
	__syncthreads();
	hist_flush_copies(sm, g, 0, kCopies);
	__syncthreads();
}
// hist_flush of hist_add_counted's two histograms: the values into g, the
// counts into counts.
static __device__ __forceinline__ void hist_flush_counted(SampleSmem &sm, u64 *g, u64 *counts) {
	__syncthreads();
	hist_flush_copies(sm, g, 0, kCopies / 2);
	hist_flush_copies(sm, counts, kCopies / 2, kCopies);
	__syncthreads();
}

// Pass kinds: how a bucket's sum turns into a mass (vals).
enum Units { kExponentBuckets, kMantissaSums, kCounts };

// Reads the row's histogram g into bins and turns it into masses in vals:
// kExponentBuckets: bucket E holds Σ mant24, mass Σ·2^(max(E,1)−150) (f64,
// exact); kMantissaSums: Σ mant24 in the units of τ's exponent; kCounts:
// bucket d is the single value prefix·128 + d, mass count·mant24 of it.
// Ends with a barrier.
static __device__ void hist_load(SampleSmem &sm, const u64 *g, Units units, unsigned prefix) {
	if (threadIdx.x < kBins) {
		const unsigned d = threadIdx.x;
		const u64 s = g[d];
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

// Run by warp 0 on a top-k histogram (sm.bins: counts, sm.vals: masses):
// the highest bucket d with Σ_{d' ≥ d} bins[d'] ≥ need, into sm.digit, the
// tokens above it Σ_{d' > d} bins[d'] into sm.cbefore and their mass
// Σ_{d' > d} vals[d'] into sm.before (f64 in bucket_suffix's order). need ≤
// Σ bins: the select only narrows to buckets that hold the k-th token.
static __device__ void pick_count(SampleSmem &sm, long long need) {
	const int lane = threadIdx.x;
	double c;
	bucket_suffix(sm.vals, c);
	long long n = 0; // the lane's tokens, then those of the lanes from this one up
	for (int k = 7; k >= 0; k--) n += (long long)sm.bins[8 * lane + k];
	for (int o = 1; o < 32; o <<= 1) {
		const long long y = __shfl_down_sync(0xffffffffu, n, o);
		if (lane + o < 32) n += y;
	}
	long long above = __shfl_down_sync(0xffffffffu, n, 1);
	if (lane == 31) above = 0;
	int found = -1;
	double found_before = 0.0;
	long long found_count = 0;
	for (int k = 7; k >= 0; k--) {
		const int d = 8 * lane + k;
		const long long m = (long long)sm.bins[d];
		if (found < 0 && above + m >= need) found = d, found_before = c, found_count = above;
		above += m;
		c += sm.vals[d];
	}
	const unsigned fm = __ballot_sync(0xffffffffu, found >= 0); // never 0, as need ≤ Σ bins
	const int src = 31 - __clz((int)fm);
	const int d = __shfl_sync(0xffffffffu, found, src);
	const double before = __shfl_sync(0xffffffffu, found_before, src);
	const long long cbefore = __shfl_sync(0xffffffffu, found_count, src);
	if (lane == 0) sm.digit = d, sm.before = before, sm.cbefore = cbefore;
}

// Where the radix select stands after some passes' picks.
struct Select {
	double total;    // Σe (pass 1's buckets)
	double target;   // top_p·Σe
	double hi;       // mass of the exponents above τ's (f64)
	double lo;       // mass in τ's exponent above the prefix, in units (exact)
	double unit;     // 2^(max(E,1)−150) of τ's exponent E
	unsigned prefix; // τ's bits found so far
	int pshift;      // the prefix is bits ≥ pshift
	long long ties;  // after pass 4: the row's tokens with e = τ
};

// Replays the picks after the first `picks` passes (1 ≤ picks ≤ kPasses;
// only the total when !nucleus) from the row's histograms g [kPasses,
// kBins], as every block of the row does: the same inputs and arithmetic
// give every block the same Select. The nucleus is top_p of the mass
// `over`, or of Σe when over < 0. All threads must call it.
static __device__ Select replay(SampleSmem &sm, const u64 *g, int picks, bool nucleus, float top_p, double over) {
	Select s{};
	hist_load(sm, g, kExponentBuckets, 0);
	if (threadIdx.x < 32) {
		double unused;
		const double total = bucket_suffix(sm.vals, unused);
		if (nucleus) pick_bucket(sm, 0.0, 0.0, 1.0, (double)top_p * (over < 0.0 ? total : over));
		if (threadIdx.x == 0) sm.dsum = total;
	}
	__syncthreads();
	s.total = sm.dsum;
	s.target = (double)top_p * (over < 0.0 ? s.total : over);
	if (!nucleus) {
		__syncthreads();
		return s;
	}
	s.prefix = (unsigned)sm.digit;
	s.hi = sm.before;
	s.unit = mant_unit(s.prefix);
	s.lo = 0.0;
	s.pshift = 23;
	for (int pass = 1; pass < picks; pass++) {
		const int shift = pass < 3 ? s.pshift - 8 : 0; // digits: bits 22..15, 14..7, 6..0
		__syncthreads(); // the last search's results are read
		hist_load(sm, g + pass * kBins, pass < 3 ? kMantissaSums : kCounts, s.prefix);
		if (threadIdx.x < 32) pick_bucket(sm, s.hi, s.lo, s.unit, s.target);
		__syncthreads();
		s.lo += sm.before;
		s.prefix = (s.prefix << (s.pshift - shift)) | (unsigned)sm.digit;
		s.pshift = shift;
		if (pass == 3) s.ties = (long long)sm.bins[sm.digit];
	}
	__syncthreads(); // sm is free for the caller
	return s;
}

// Where the top-k select stands after some passes' picks.
struct KSelect {
	double hi;       // mass of the exponents above τ_k's (f64)
	double lo;       // mass in τ_k's exponent above the prefix, in units (exact)
	double unit;     // 2^(max(E,1)−150) of τ_k's exponent E
	unsigned prefix; // τ_k's bits found so far
	int pshift;      // the prefix is bits ≥ pshift
	long long above; // the tokens above the prefix's buckets
	long long ties;  // after pass 4: the row's tokens with e = τ_k
};

// Replays the top-k picks after the first `picks` passes (0 ≤ picks ≤
// kPasses) from the row's histograms g (pass 1's masses) and kg [2,
// kPasses, kBins], as replay does for top-p. All threads must call it.
static __device__ KSelect kreplay(SampleSmem &sm, const u64 *g, const u64 *kg, int picks, long long k) {
	KSelect s{};
	s.pshift = 31;
	for (int pass = 0; pass < picks; pass++) {
		const int shift = pass == 0 ? 23 : pass < 3 ? s.pshift - 8 : 0; // digits: bits 30..23, 22..15, 14..7, 6..0
		__syncthreads(); // the last search's results are read
		if (threadIdx.x < kBins) {
			const unsigned d = threadIdx.x;
			const u64 count = kg[pass * kBins + d];
			sm.bins[d] = count;
			sm.vals[d] = pass == 0  ? (double)g[d] * mant_unit(d)
			             : pass < 3 ? (double)kg[(kPasses + pass) * kBins + d]
			                        : (double)count * (double)mant24((s.prefix << 7) | (d & 127u));
		}
		__syncthreads();
		if (threadIdx.x < 32) pick_count(sm, k - s.above);
		__syncthreads();
		if (pass == 0) s.hi = sm.before, s.unit = mant_unit((unsigned)sm.digit);
		else s.lo += sm.before;
		s.above += sm.cbefore;
		s.prefix = (s.prefix << (s.pshift - shift)) | (unsigned)sm.digit;
		s.pshift = shift;
		if (pass == 3) s.ties = (long long)sm.bins[sm.digit];
	}
	__syncthreads(); // sm is free for the caller
	return s;
}

// The candidates after all passes: τ, the ties they keep (r) and their
// mass M.
struct Nucleus {
	float tau;     // −1 without top-k and top-p: every weight is a candidate
	long long r;   // ties at τ kept (the first r in index order)
	long long ties;
	double mass;   // M, the candidates' total
};

// The k heaviest tokens (0 < k < v).
static __device__ Nucleus topk_of(SampleSmem &sm, const u64 *g, const u64 *kg, long long k) {
	const KSelect s = kreplay(sm, g, kg, kPasses, k);
	Nucleus n;
	n.tau = __uint_as_float(s.prefix);
	n.ties = s.ties;
	n.r = k - s.above;
	n.mass = s.hi + (s.lo + (double)n.r * (double)mant24(s.prefix)) * s.unit;
	return n;
}

// The top-p nucleus of the mass `over` (Σe when over < 0), or every token
// when !nucleus.
static __device__ Nucleus nucleus_p(SampleSmem &sm, const u64 *g, bool nucleus, float top_p, double over) {
	const Select s = replay(sm, g, kPasses, nucleus, top_p, over);
	Nucleus n{-1.0f, 0, 0, s.total};
	if (!nucleus) return n;
	n.tau = __uint_as_float(s.prefix);
	n.ties = s.ties;
	// The fewest ties r ≥ 1 that reach the target (all of them if rounding
	// leaves the target out of reach).
	const double m_tau = (double)mant24(s.prefix);
	long long lo_r = 1, hi_r = s.ties;
	while (lo_r < hi_r) {
		const long long mid = (lo_r + hi_r) / 2;
		if (s.hi + (s.lo + (double)mid * m_tau) * s.unit >= s.target) hi_r = mid;
		else lo_r = mid + 1;
	}
	n.r = lo_r;
	n.mass = s.hi + (s.lo + (double)lo_r * m_tau) * s.unit;
	return n;
}

// The candidates: the k heaviest tokens (kTopK; 0 < k < v), then the
// top-p nucleus among them (nucleus). Without kTopK, kg and k are unused:
// the code is top-p's alone.
template <bool kTopK>
static __device__ Nucleus nucleus_of(SampleSmem &sm, const u64 *g, const u64 *kg, bool nucleus, float top_p,
                                     long long k) {
	if (!kTopK) return nucleus_p(sm, g, nucleus, top_p, -1.0);
	const Nucleus kn = topk_of(sm, g, kg, k);
	if (!nucleus) return kn;
	const Nucleus pn = nucleus_p(sm, g, true, top_p, kn.mass);
	return pn.tau > kn.tau || (pn.tau == kn.tau && pn.r <= kn.r) ? pn : kn;
}

// ---- greedy ---------------------------------------------------------------------

// Is (v, i) ahead of (bv, bi) in the order value descending, index ascending?
// An index < 0 marks an empty slot, behind everything.
static __device__ __forceinline__ bool ahead(float v, int i, float bv, int bi) {
	return i >= 0 && (bi < 0 || v > bv || (v == bv && i < bi));
}

// Reduces (best, bi) over the block by that order; thread 0 gets the winner.
static __device__ __forceinline__ void block_best(float &best, int &bi, SampleSmem &sm) {
	const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
	for (int o = 16; o > 0; o >>= 1) {
		const float ov = __shfl_xor_sync(0xffffffffu, best, o);
		const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
		if (ahead(ov, oi, best, bi)) best = ov, bi = oi;
	}
	if (lane == 0) sm.fscan[warp] = best, sm.iv[warp] = bi;
	__syncthreads();
	if (warp == 0) {
		best = lane < kWarps ? sm.fscan[lane] : -INFINITY;
		bi = lane < kWarps ? sm.iv[lane] : -1;
		for (int o = 16; o > 0; o >>= 1) {
			const float ov = __shfl_xor_sync(0xffffffffu, best, o);
			const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
			if (ahead(ov, oi, best, bi)) best = ov, bi = oi;
		}
	}
	__syncthreads();
}

// The kernels that read the logits take them N at a time (Pack<T, N>:
// N = 16 bytes' worth where v is a multiple of it and the logits are
// aligned to it, else 1), each thread a pack of every kThreads, in index
// order within its own.
template <class T, int N>
__global__ void __launch_bounds__(kThreads)
	argmax_chunk_kernel(SampleLayout l, const T *__restrict__ logits, int64_t v) {
	__shared__ SampleSmem sm;
	const int64_t row = blockIdx.x, c = blockIdx.y;
	const T *x = logits + row * v; // [v]
	const int64_t j0 = c * l.chunk, j1 = min(v, j0 + l.chunk);
	float best = -INFINITY;
	int bi = -1;
	for (int64_t j = j0 + N * threadIdx.x; j < j1; j += N * kThreads) {
		float f[N];
		load_pack<N>(f, x + j);
		for (int k = 0; k < N; k++) {
			const float key = f[k] != f[k] ? -INFINITY : f[k]; // NaN never wins
			if (bi < 0 || key > best) best = key, bi = (int)(j + k);
		}
	}
	block_best(best, bi, sm);
	if (threadIdx.x == 0) l.cmax[row * l.chunks + c] = best, l.cidx[row * l.chunks + c] = bi;
}

template <class T>
__global__ void __launch_bounds__(32)
	argmax_finish_kernel(int32_t *__restrict__ ids, SampleLayout l, const T *__restrict__ logits, int64_t v) {
	const int64_t row = blockIdx.x;
	float best = -INFINITY;
	int bi = -1;
	for (int64_t c = threadIdx.x; c < l.chunks; c += 32) {
		const float cv = l.cmax[row * l.chunks + c];
		const int ci = l.cidx[row * l.chunks + c];
		if (ahead(cv, ci, best, bi)) best = cv, bi = ci;
	}
	for (int o = 16; o > 0; o >>= 1) {
		const float ov = __shfl_xor_sync(0xffffffffu, best, o);
		const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
		if (ahead(ov, oi, best, bi)) best = ov, bi = oi;
	}
	if (threadIdx.x == 0) {
		const float x0 = to_float(logits[row * v]);
		ids[row] = x0 != x0 ? 0 : bi; // engine/cpu keeps index 0 when it is NaN
	}
}

// ---- temperature, top-k and top-p --------------------------------------------------

template <class T, int N>
__global__ void __launch_bounds__(kThreads)
	max_chunk_kernel(SampleLayout l, const T *__restrict__ logits, int64_t v, bool topk) {
	__shared__ SampleSmem sm;
	const int64_t row = blockIdx.x, c = blockIdx.y;
	const T *x = logits + row * v; // [v]
	const int64_t j0 = c * l.chunk, j1 = min(v, j0 + l.chunk);
	float mx = -INFINITY;
	for (int64_t j = j0 + N * threadIdx.x; j < j1; j += N * kThreads) {
		float f[N];
		load_pack<N>(f, x + j);
		for (int k = 0; k < N; k++) mx = fmaxf(mx, f[k]);
	}
	mx = block_max(mx, sm.fscan);
	if (threadIdx.x == 0) l.cmax[row * l.chunks + c] = mx;
	if (c == 0) { // the row's integer slots start at 0 for the atomics of the later steps
		for (int i = threadIdx.x; i < kPasses * kBins; i += kThreads) l.hist[row * kPasses * kBins + i] = 0;
		if (topk)
			for (int i = threadIdx.x; i < 2 * kPasses * kBins; i += kThreads) l.khist[row * 2 * kPasses * kBins + i] = 0;
		if (threadIdx.x < 2) l.slot[row * 2 + threadIdx.x] = 0;
	}
}

// kTopK: also the count histogram of the exponents (top-k's first pass).
// N is 1 or 4 (4 bf16 read as 8 bytes, so that a warp's stores of their
// weights, one float4 a lane, are contiguous); with 4 the row has no
// padding.
template <class T, int N, bool kTopK>
__global__ void __launch_bounds__(kThreads)
	weights_kernel(SampleLayout l, const T *__restrict__ logits, int64_t v, float inv_t, bool nucleus) {
	static_assert(N == 1 || N == 4, "a lane's weights are one float or one float4");
	__shared__ SampleSmem sm;
	const int64_t row = blockIdx.x, c = blockIdx.y;
	const T *x = logits + row * v;   // [v]
	float *w = l.w + row * l.vp;     // [vp] weights, zero from v on
	float mx = -INFINITY;            // the row's max, from its chunks' (exact in any order)
	for (int64_t k = 0; k < l.chunks; k++) mx = fmaxf(mx, l.cmax[row * l.chunks + k]);
	hist_clear(sm);
	__syncthreads();
	const int64_t j0 = c * l.chunk, j1 = min(l.vp, j0 + l.chunk);
	double own = 0.0; // the chunk's mass, without top-p: this thread's weights in index order
	for (int64_t j = j0 + N * threadIdx.x; j < j1; j += N * kThreads) {
		float e[N] = {};
		if (j < v) load_pack<N>(e, x + j); // N = 1 past v: the padding's zero
		for (int k = 0; k < N; k++) {
			if (j + k >= v) continue;
			const float y = __fmul_rn(__fsub_rn(e[k], mx), inv_t);
			e[k] = (float)exp((double)y);
			const unsigned bits = __float_as_uint(e[k]);
			if (kTopK) hist_add_counted(sm, bits >> 23, mant24(bits));
			else hist_add(sm, bits >> 23, mant24(bits));
		}
		if constexpr (N == 4) store_pack<4>(w + j, e);
		else w[j] = e[0];
		for (int k = 0; k < N; k++) own += (double)e[k];
	}
	if (kTopK) hist_flush_counted(sm, l.hist + row * kPasses * kBins, l.khist + row * 2 * kPasses * kBins);
	else hist_flush(sm, l.hist + row * kPasses * kBins);
	if (!nucleus && !kTopK) {
		own = block_sum_f64(own, sm.dscan);
		if (threadIdx.x == 0) l.mass[row * l.chunks + c] = own;
	}
}

// Pass `pass` (1…3) of top-k's radix select: the picks before it, then the
// counts (and in passes 1, 2 the mantissa sums) of the chunk's weights whose
// bits above the digit equal the prefix.
__global__ void __launch_bounds__(kThreads)
	topk_pass_kernel(SampleLayout l, int64_t v, int pass, long long top_k) {
	__shared__ SampleSmem sm;
	const int64_t row = blockIdx.x, c = blockIdx.y;
	const u64 *g = l.hist + row * kPasses * kBins;
	u64 *kg = l.khist + row * 2 * kPasses * kBins;
	const KSelect s = kreplay(sm, g, kg, pass, top_k);
	const int shift = pass < 3 ? s.pshift - 8 : 0;
	const unsigned dmask = (1u << (s.pshift - shift)) - 1;
	hist_clear(sm);
	__syncthreads();
	const float *w = l.w + row * l.vp; // [vp] weights
	const int64_t q0 = c * l.chunk / 4, q1 = min(l.vp, (c + 1) * l.chunk) / 4;
	for (int64_t q = q0 + threadIdx.x; q < q1; q += kThreads) {
		float e[4];
		load_pack<4>(e, w + 4 * q);
		for (int k = 0; k < 4; k++) {
			const unsigned bits = __float_as_uint(e[k]);
			if (4 * q + k < v && (bits >> s.pshift) == s.prefix) {
				if (pass < 3) hist_add_counted(sm, (bits >> shift) & dmask, mant24(bits));
				else hist_add(sm, bits & dmask, 1u);
			}
		}
	}
	if (pass < 3) hist_flush_counted(sm, kg + (kPasses + pass) * kBins, kg + pass * kBins);
	else hist_flush(sm, kg + pass * kBins);
}

// Pass `pass` (1…3) of the radix select: the picks before it, then the
// histogram of the chunk's weights whose bits above the digit equal the
// prefix. With top-k (kTopK, top_k > 0) the nucleus is top_p of the k's
// mass.
template <bool kTopK>
__global__ void __launch_bounds__(kThreads)
	radix_pass_kernel(SampleLayout l, int64_t v, int pass, float top_p, long long top_k) {
	__shared__ SampleSmem sm;
	const int64_t row = blockIdx.x, c = blockIdx.y;
	u64 *g = l.hist + row * kPasses * kBins;
	const double over = kTopK ? topk_of(sm, g, l.khist + row * 2 * kPasses * kBins, top_k).mass : -1.0;
	const Select s = replay(sm, g, pass, true, top_p, over);
	const int shift = pass < 3 ? s.pshift - 8 : 0;
	const unsigned dmask = (1u << (s.pshift - shift)) - 1;
	hist_clear(sm);
	__syncthreads();
	const float *w = l.w + row * l.vp; // [vp] weights
	const int64_t q0 = c * l.chunk / 4, q1 = min(l.vp, (c + 1) * l.chunk) / 4;
	for (int64_t q = q0 + threadIdx.x; q < q1; q += kThreads) {
		float e[4];
		load_pack<4>(e, w + 4 * q);
		for (int k = 0; k < 4; k++) {
			const unsigned bits = __float_as_uint(e[k]);
			if (4 * q + k < v && (bits >> s.pshift) == s.prefix)
				hist_add(sm, (bits >> shift) & dmask, pass < 3 ? mant24(bits) : 1u);
		}
	}
	hist_flush(sm, g + pass * kBins);
}

// The chunk's mass above τ (f64, fixed order) and its ties at τ.
template <bool kTopK>
__global__ void __launch_bounds__(kThreads)
	nucleus_chunk_kernel(SampleLayout l, int64_t v, float top_p, bool nucleus, long long top_k) {
	__shared__ SampleSmem sm;
	const int64_t row = blockIdx.x, c = blockIdx.y;
	const Nucleus nu =
		nucleus_of<kTopK>(sm, l.hist + row * kPasses * kBins, l.khist + row * 2 * kPasses * kBins, nucleus, top_p, top_k);
	const float *w = l.w + row * l.vp; // [vp] weights, zero from v on
	const int64_t j0 = c * l.chunk, j1 = min(l.vp, j0 + l.chunk);
	double above = 0.0; // this thread's weights above τ, in index order
	long long ties = 0;
	for (int64_t j = j0 + 4 * threadIdx.x; j < j1; j += 4 * kThreads) {
		float e[4];
		load_pack<4>(e, w + j);
		for (int k = 0; k < 4 && j + k < v; k++) {
			if (e[k] > nu.tau) above += (double)e[k];
			ties += e[k] == nu.tau;
		}
	}
	above = block_sum_f64(above, sm.dscan);
	long long all;
	block_exclusive_scan(ties, sm.iscan, all);
	if (threadIdx.x == 0) l.mass[row * l.chunks + c] = above, l.cidx[row * l.chunks + c] = (int)all;
}

template <bool kTopK>
__global__ void __launch_bounds__(kThreads)
	draw_kernel(SampleLayout l, const float *__restrict__ u, int64_t v, float top_p, bool nucleus, long long top_k) {
	__shared__ SampleSmem sm;
	const int64_t row = blockIdx.x, c = blockIdx.y;
	const Nucleus nu =
		nucleus_of<kTopK>(sm, l.hist + row * kPasses * kBins, l.khist + row * 2 * kPasses * kBins, nucleus, top_p, top_k);
	const bool limited = nucleus || kTopK; // candidates: the weights above τ and r ties at τ
	const bool rank_ties = nu.r < nu.ties; // only some ties at τ are candidates
	const double target = (double)u[row] * nu.mass;
	// P_s and the ties before this chunk, by thread 0 in chunk order.
	if (threadIdx.x == 0) {
		double p = 0.0;
		long long tb = 0;
		for (int64_t k = 0; k < c; k++) {
			double m = l.mass[row * l.chunks + k];
			if (limited) {
				const long long tk = l.cidx[row * l.chunks + k];
				const long long kept = rank_ties ? max(0ll, min(tk, nu.r - tb)) : tk;
				m += (double)kept * (double)nu.tau;
				tb += tk;
			}
			p += m;
		}
		sm.dsum = p;
		sm.iscan[0] = tb;
		sm.found = INT32_MAX;
	}
	__syncthreads();
	double carry = sm.dsum;        // the candidates' mass before this tile
	long long tie_carry = sm.iscan[0]; // ties at τ before this tile
	__syncthreads();
	const float *w = l.w + row * l.vp;
	const int64_t j0c = c * l.chunk, j1c = min(v, j0c + l.chunk);
	int last = -1; // this thread's last positive candidate
	for (int64_t base = j0c; base < j1c; base += kTile) {
		const int64_t j0 = base + (int64_t)kItems * threadIdx.x; // this thread's kItems weights
		float e[kItems];
		TW_UNROLL
		for (int h = 0; h < kItems; h += 4) {
			const float4 e4 = j0 + h < l.vp ? *reinterpret_cast<const float4 *>(w + j0 + h) : make_float4(0, 0, 0, 0);
			e[h] = e4.x, e[h + 1] = e4.y, e[h + 2] = e4.z, e[h + 3] = e4.w;
		}
		long long rank = 0; // ties at τ in the row before this thread's first weight
		if (rank_ties) {    // uniform across the block
			long long nt = 0, tile_ties;
			for (int k = 0; k < kItems; k++) nt += j0 + k < j1c && e[k] == nu.tau;
			rank = tie_carry + block_exclusive_scan(nt, sm.iscan, tile_ties);
			tie_carry += tile_ties;
		}
		double cw[kItems], own = 0.0; // candidate weights; their sum
		for (int k = 0; k < kItems; k++) {
			const bool in = j0 + k < j1c;
			const bool tie = in && e[k] == nu.tau;
			cw[k] = in && (e[k] > nu.tau || (tie && (!rank_ties || rank < nu.r))) ? (double)e[k] : 0.0;
			rank += tie;
			own += cw[k];
		}
		double tile_mass;
		double s = carry + block_exclusive_scan(own, sm.dscan, tile_mass);
		carry += tile_mass;
		bool drawn = false;
		for (int k = 0; k < kItems && !drawn; k++) {
			if (cw[k] > 0.0) {
				s += cw[k];
				last = (int)(j0 + k);
				if (s > target) {
					atomicMin(&sm.found, (int)(j0 + k));
					drawn = true;
				}
			}
		}
		if (__syncthreads_or(drawn)) break; // a barrier, and uniform across the block
	}
	if (last >= 0) atomicMax(&l.slot[row * 2 + 1], (unsigned)last + 1);
	__syncthreads();
	if (threadIdx.x == 0 && sm.found != INT32_MAX) atomicMax(&l.slot[row * 2], (unsigned)(v - sm.found));
}

__global__ void __launch_bounds__(32) sample_finish_kernel(int32_t *__restrict__ ids, SampleLayout l, int64_t v, int64_t b) {
	const int64_t row = (int64_t)blockIdx.x * 32 + threadIdx.x;
	if (row >= b) return;
	const unsigned drawn = l.slot[row * 2], last = l.slot[row * 2 + 1];
	ids[row] = drawn ? (int32_t)(v - drawn) : last ? (int32_t)(last - 1) : 0;
}

// ---- launchers --------------------------------------------------------------------

extern "C" size_t tw_sample_workspace(int64_t b, int64_t v) {
	return b > 0 && v > 0 ? sample_layout(nullptr, b, v).bytes : 0;
}

template <class T, int N>
static cudaError_t sample(int32_t *ids, const T *logits, const float *u, int64_t b, int64_t v, float temperature,
                          float top_p, int64_t top_k, void *ws, cudaStream_t stream) {
	const SampleLayout l = sample_layout(ws, b, v);
	const dim3 grid((unsigned)b, (unsigned)l.chunks);
	const unsigned rows32 = (unsigned)ceil_div<int64_t>(b, 32);
	cudaError_t err;
#define TW_SAMPLE_CHECK()                                                                                             \
	if ((err = cudaGetLastError()) != cudaSuccess) return err
	if (temperature <= 0) {
		LAUNCH(grid, kThreads, 0, stream, argmax_chunk_kernel<T, N>)(l, logits, v);
		TW_SAMPLE_CHECK();
		LAUNCH((unsigned)b, 32, 0, stream, argmax_finish_kernel<T>)(ids, l, logits, v);
		return cudaGetLastError();
	}
	const float inv_t = 1 / temperature; // f32, as engine/cpu
	const bool nucleus = top_p > 0 && top_p < 1;
	const long long k = top_k > 0 && top_k < v ? top_k : 0; // 0: every token
	LAUNCH(grid, kThreads, 0, stream, max_chunk_kernel<T, N>)(l, logits, v, k > 0);
	TW_SAMPLE_CHECK();
	if (k > 0) LAUNCH(grid, kThreads, 0, stream, weights_kernel<T, N == 1 ? 1 : 4, true>)(l, logits, v, inv_t, nucleus);
	else LAUNCH(grid, kThreads, 0, stream, weights_kernel<T, N == 1 ? 1 : 4, false>)(l, logits, v, inv_t, nucleus);
	TW_SAMPLE_CHECK();
	if (k > 0) {
		for (int pass = 1; pass < kPasses; pass++) {
			LAUNCH(grid, kThreads, 0, stream, topk_pass_kernel)(l, v, pass, k);
			TW_SAMPLE_CHECK();
		}
	}
	if (nucleus) {
		for (int pass = 1; pass < kPasses; pass++) {
			if (k > 0) LAUNCH(grid, kThreads, 0, stream, radix_pass_kernel<true>)(l, v, pass, top_p, k);
			else LAUNCH(grid, kThreads, 0, stream, radix_pass_kernel<false>)(l, v, pass, top_p, k);
			TW_SAMPLE_CHECK();
		}
	}
	if (k > 0) {
		LAUNCH(grid, kThreads, 0, stream, nucleus_chunk_kernel<true>)(l, v, top_p, nucleus, k);
		TW_SAMPLE_CHECK();
		LAUNCH(grid, kThreads, 0, stream, draw_kernel<true>)(l, u, v, top_p, nucleus, k);
	} else {
		if (nucleus) {
			LAUNCH(grid, kThreads, 0, stream, nucleus_chunk_kernel<false>)(l, v, top_p, nucleus, k);
			TW_SAMPLE_CHECK();
		}
		LAUNCH(grid, kThreads, 0, stream, draw_kernel<false>)(l, u, v, top_p, nucleus, k);
	}
	TW_SAMPLE_CHECK();
	LAUNCH(rows32, 32, 0, stream, sample_finish_kernel)(ids, l, v, b);
#undef TW_SAMPLE_CHECK
	return cudaGetLastError();
}

extern "C" cudaError_t tw_sample(int32_t *ids, const void *logits, tw_dtype dt, const float *u, int64_t b, int64_t v,
                                 float temperature, float top_p, int64_t top_k, void *workspace, cudaStream_t stream) {
	return dispatch_float(dt, [&](auto *t) {
		using T = elem_t<decltype(t)>;
		if (v >= (int64_t)1 << 29) return cudaErrorInvalidValue;
		if (b <= 0 || v <= 0) return cudaSuccess;
		if (b > INT32_MAX) return cudaErrorInvalidValue;
		constexpr int P = pack_width<T>();
		if (v % P == 0 && pack_aligned<T, P>(logits))
			return sample<T, P>(ids, (const T *)logits, u, b, v, temperature, top_p, top_k, workspace, stream);
		return sample<T, 1>(ids, (const T *)logits, u, b, v, temperature, top_p, top_k, workspace, stream);
	});
}
