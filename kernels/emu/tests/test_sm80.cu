// test_sm80.cu — cp.async, the sm_80 copy of kernels/sm80.cuh that the
// bf16 GEMM and attention are built on: when copies become visible, group
// counting, zero fill, a GEMM-like pipeline and the bugs a wrong wait count
// or a missing barrier make in it, and the misuse the emulator reports
// (test_mma.cu has ldmatrix and mma.sync). What a GPU guarantees is
// checked everywhere; what only the emulator pins down (a copy is not
// visible before its wait) only under it.
#include <math.h>
#include <string.h>

#include <string>

#include "../../common.cuh"
#include "../../sm80.cuh"
#include "harness.h"

static const std::string kFile = "test_sm80.cu:";

// The value of word i of the copy sources: never 0, never the emulator's
// 0xFFFFFFFF.
static uint32_t word(int i) { return 0x01000000u + (uint32_t)i; }

static std::vector<uint32_t> words(int n) {
	std::vector<uint32_t> v(n);
	for (int i = 0; i < n; i++) v[i] = word(i);
	return v;
}

// ---- Visibility and group counting ----------------------------------------------

// Each of 32 threads issues four 16-byte copies of its own part of src:
// copies 0, 1 and 2 committed as one group each, copy 3 left uncommitted.
// It records its four destinations (4 words each) at five points:
//   0 before any wait, 1 after wait_group 2, 2 after wait_group 1,
//   3 after wait_group 0, 4 after a commit and wait_group 0.
// snap [5][32 threads][4 copies][4 words].
__device__ void record(const uint32_t (*s)[4][4], uint32_t *snap, int point) {
	const int t = threadIdx.x;
	for (int c = 0; c < 4; c++)
		for (int w = 0; w < 4; w++) snap[((point * 32 + t) * 4 + c) * 4 + w] = s[t][c][w];
}

__global__ void copy_groups(const uint32_t *src, uint32_t *snap) {
	__shared__ __align__(16) uint32_t s[32][4][4];
	const int t = threadIdx.x;
	for (int c = 0; c < 4; c++) {
		cp_async16(s[t][c], src + (t * 4 + c) * 4, 16);
		if (c < 3) cp_async_commit();
	}
	record(s, snap, 0);
	cp_async_wait<2>();
	record(s, snap, 1);
	cp_async_wait<1>();
	record(s, snap, 2);
	cp_async_wait<0>();
	record(s, snap, 3);
	cp_async_commit();
	cp_async_wait<0>();
	record(s, snap, 4);
}

// Under the emulator a destination holds 0xFFFFFFFF until its wait; on a GPU
// it is undefined until then, and only what must be visible is checked.
TEST(cp_async_groups) {
	const int n = 32 * 4 * 4;
	DeviceBuf<uint32_t> src(n), snap(5 * n);
	src.upload(words(n));
	LAUNCH(1, 32, 0, 0, copy_groups)(src.p, snap.p);
	CUDA_OK(cudaGetLastError());
	const std::vector<uint32_t> got = snap.download();
	const int visible[5] = {0, 1, 2, 3, 4}; // copies a wait has covered at each point
	for (int p = 0; p < 5; p++)
		for (int t = 0; t < 32; t++)
			for (int c = 0; c < 4; c++)
				for (int w = 0; w < 4; w++) {
					const uint32_t g = got[(size_t)((p * 32 + t) * 4 + c) * 4 + w];
					const uint32_t data = word((t * 4 + c) * 4 + w);
					if (c < visible[p]) {
						CHECKF(g == data, "point %d thread %d copy %d word %d: 0x%08x, want the data 0x%08x", p, t, c, w,
						       g, data);
					} else {
#ifdef TW_EMU
						CHECKF(g == 0xffffffffu, "point %d thread %d copy %d word %d: 0x%08x before its wait, want 0xffffffff",
						       p, t, c, w, g);
#endif
					}
				}
}

// ---- Zero fill ----------------------------------------------------------------------

// Thread t copies the first t % 17 bytes of its 16-byte source and zero-fills
// the rest; the destination first holds 0xAB bytes. out [32][16] bytes.
__global__ void copy_partial(const unsigned char *src, unsigned char *out) {
	__shared__ __align__(16) unsigned char s[32][16];
	const int t = threadIdx.x;
	for (int i = 0; i < 16; i++) s[t][i] = 0xAB;
	cp_async16(s[t], src + 16 * t, t % 17);
	cp_async_commit();
	cp_async_wait<0>();
	for (int i = 0; i < 16; i++) out[16 * t + i] = s[t][i];
}

TEST(cp_async_zero_fill) {
	std::vector<unsigned char> h(32 * 16);
	for (size_t i = 0; i < h.size(); i++) h[i] = (unsigned char)(i % 251 + 1); // no zeros
	DeviceBuf<unsigned char> src(h.size()), out(h.size());
	src.upload(h);
	LAUNCH(1, 32, 0, 0, copy_partial)(src.p, out.p);
	CUDA_OK(cudaGetLastError());
	const std::vector<unsigned char> got = out.download();
	for (int t = 0; t < 32; t++)
		for (int i = 0; i < 16; i++) {
			const int want = i < t % 17 ? h[16 * t + i] : 0;
			CHECKF(got[16 * t + i] == want, "thread %d (source size %d) byte %d: 0x%02x, want 0x%02x", t, t % 17, i,
			       got[16 * t + i], want);
		}
}

// ---- A pipeline like the GEMM's -------------------------------------------------

// Three stages in dynamic shared memory, k-tiles of x [ktiles][64] float4
// copied two ahead, one group committed per iteration: the GEMM's loop.
// Thread t sums, over the k-tiles, the chunk thread (t + 1) % 64 copied, so
// that the barrier after the wait matters. WAIT: the wait_group count (1 is
// right for three stages); SYNC: whether the barrier is there. out [64].
template <int WAIT, bool SYNC> __global__ void pipeline_sum(const float4 *x, int ktiles, float *out) {
	extern __shared__ __align__(128) unsigned char smem[];
	float4(*stage)[64] = reinterpret_cast<float4(*)[64]>(smem); // [3][64]
	const int t = threadIdx.x;
	for (int s = 0; s < 2; s++) {
		if (s < ktiles) cp_async16(&stage[s][t], &x[s * 64 + t], 16);
		cp_async_commit();
	}
	float sum = 0.0f;
	for (int kt = 0; kt < ktiles; kt++) {
		cp_async_wait<WAIT>();
		if (SYNC) __syncthreads();
		if (kt + 2 < ktiles) cp_async16(&stage[(kt + 2) % 3][t], &x[(kt + 2) * 64 + t], 16);
		cp_async_commit();
		const float4 v = stage[kt % 3][(t + 1) % 64];
		sum += v.x + v.y + v.z + v.w;
	}
	cp_async_wait<0>();
	out[t] = sum;
}

struct PipelineRun {
	static const int kTiles = 7;
	std::vector<float> x, want;
	DeviceBuf<float4> dx{kTiles * 64};
	DeviceBuf<float> out{64};
	PipelineRun() : x(kTiles * 64 * 4), want(64) {
		for (size_t i = 0; i < x.size(); i++) x[i] = (float)(i % 97) * 0.25f - 12.0f;
		std::vector<float4> h(kTiles * 64);
		memcpy(h.data(), x.data(), x.size() * sizeof(float));
		dx.upload(h);
		for (int t = 0; t < 64; t++) {
			float sum = 0.0f;
			for (int kt = 0; kt < kTiles; kt++) {
				const float *v = &x[(kt * 64 + (t + 1) % 64) * 4];
				sum += v[0] + v[1] + v[2] + v[3];
			}
			want[t] = sum;
		}
	}
	template <int WAIT, bool SYNC> std::vector<float> run() {
		LAUNCH(1, 64, 3 * 64 * sizeof(float4), 0, pipeline_sum<WAIT, SYNC>)(dx.p, kTiles, out.p);
		return out.download();
	}
};

TEST(cp_async_pipeline) {
	PipelineRun p;
	const std::vector<float> got = p.run<1, true>();
	CUDA_OK(cudaGetLastError());
	for (int t = 0; t < 64; t++) CHECKF(got[t] == p.want[t], "thread %d: %g, want %g", t, got[t], p.want[t]);
}

// A wrong wait count and a missing barrier read destinations before their
// copies land: NaN under the emulator, in either thread order.
EMU_TEST(cp_async_pipeline_bugs) {
	PipelineRun p;
	auto has_nan = [](const std::vector<float> &v) {
		for (float f : v)
			if (isnan(f)) return true;
		return false;
	};
	for (int reverse = 0; reverse < 2; reverse++) {
		const bool ok = !has_nan(with_reverse(reverse, [&] { return p.run<1, true>(); }));
		const bool wrong_wait = has_nan(with_reverse(reverse, [&] { return p.run<2, true>(); }));
		const bool no_barrier = has_nan(with_reverse(reverse, [&] { return p.run<1, false>(); }));
		CHECKF(ok, "reverse %d: the correct pipeline gave NaN", reverse);
		CHECKF(wrong_wait, "reverse %d: wait_group 2 in a three-stage pipeline went unnoticed", reverse);
		CHECKF(no_barrier, "reverse %d: the missing barrier went unnoticed", reverse);
	}
}

// ---- What the emulator reports ------------------------------------------------------
// Each kernel breaks one requirement, on a line the test names.

// One misuse of cp.async per value of `bug`, each on its own line.
static const int kCopyLine = __LINE__ + 4;
__global__ void copy_misuse(const uint32_t *src, uint32_t *global_dst, int bug) {
	__shared__ __align__(16) uint32_t s[8];
	switch (bug) {
	case 0: cp_async16(s, src, 16); break;            // correct
	case 1: cp_async16(global_dst, src, 16); break;   // destination in global memory
	case 2: cp_async16(s + 1, src, 16); break;        // destination 4-byte aligned
	case 3: cp_async16(s, src + 2, 16); break;        // source 8-byte aligned
	case 4: cp_async16(s, src, 17); break;            // source size past the copy size
	case 5: cp_async16(s, s + 4, 16); break;          // source in shared memory
	}
	cp_async_commit();
	cp_async_wait<0>();
	global_dst[threadIdx.x] = s[0];
}

static void copy_misuse_child(int bug) {
	DeviceBuf<uint32_t> src(64), dst(64);
	LAUNCH(1, 32, 0, 0, copy_misuse)(src.p, dst.p, bug);
	cudaDeviceSynchronize();
}
EMU_CHILD(copy_global_dst) { copy_misuse_child(1); }
EMU_CHILD(copy_misaligned_dst) { copy_misuse_child(2); }
EMU_CHILD(copy_misaligned_src) { copy_misuse_child(3); }
EMU_CHILD(copy_bad_size) { copy_misuse_child(4); }
EMU_CHILD(copy_shared_src) { copy_misuse_child(5); }

EMU_TEST(diag_cp_async) {
	auto line = [](int bug) { return kFile + std::to_string(kCopyLine + bug); };
	{ // the correct copy: no report, the data
		DeviceBuf<uint32_t> src(64), dst(64);
		src.upload(words(64));
		LAUNCH(1, 32, 0, 0, copy_misuse)(src.p, dst.p, 0);
		CUDA_OK(cudaGetLastError());
		const std::vector<uint32_t> got = dst.download();
		for (int t = 0; t < 32; t++) CHECKF(got[t] == word(0), "thread %d: 0x%08x, want 0x%08x", t, got[t], word(0));
	}
	CHECK(expect_abort("copy_global_dst", {}, {"cp.async at ", line(1), "is not in shared memory", "kernel \"copy_misuse\""}));
	CHECK(expect_abort("copy_misaligned_dst", {}, {"cp.async at ", line(2), "not aligned to the copy size 16"}));
	CHECK(expect_abort("copy_misaligned_src", {}, {"cp.async at ", line(3), "not aligned to the copy size 16"}));
	CHECK(expect_abort("copy_bad_size", {}, {"cp.async at ", line(4), "source size 17 outside 0..16"}));
	CHECK(expect_abort("copy_shared_src", {}, {"cp.async at ", line(5), "is in shared memory, not global"}));
}
