// test_warp.cu — warp shuffles (all four kinds, widths, partial masks),
// votes, __activemask, __reduce_*_sync and __syncwarp, against host loops.
#include "../../common.cuh"
#include "harness.h"

constexpr int kOut = 12; // values written per thread

// Each thread t of a 64-thread block (two warps) holds v = f(block, t).
__host__ __device__ inline int value_of(int block, int t) { return (block * 131 + t * 17) % 97 - 40; }

__global__ void shuffles(int *out) {
	const int t = threadIdx.x, lane = t % 32;
	const int v = value_of(blockIdx.x, t);
	int *o = out + (blockIdx.x * blockDim.x + t) * kOut;
	int s = v; // butterfly sum: every lane gets the warp's total
	for (int m = 16; m > 0; m >>= 1) s += __shfl_xor_sync(0xffffffffu, s, m);
	o[0] = s;
	int d = v; // tree sum: lane 0 gets the total
	for (int k = 16; k > 0; k >>= 1) d += __shfl_down_sync(0xffffffffu, d, k);
	o[1] = lane == 0 ? d : 0;
	o[2] = __shfl_sync(0xffffffffu, v, 7);      // broadcast lane 7
	o[3] = __shfl_sync(0xffffffffu, v, 35, 16); // in 16-lane segments: lane 3 of the segment
	int scan = v; // inclusive prefix sum
	for (int k = 1; k < 32; k <<= 1) {
		int u = __shfl_up_sync(0xffffffffu, scan, k);
		if (lane >= k) scan += u;
	}
	o[4] = scan;
	int g = v; // sums over groups of 8 lanes
	for (int m = 4; m > 0; m >>= 1) g += __shfl_xor_sync(0xffffffffu, g, m, 8);
	o[5] = g;
	o[6] = __shfl_down_sync(0xffffffffu, v, 5, 8); // past the segment: own value
	double dv = v * 0.5;                           // 8-byte values
	o[7] = (int)(2 * __shfl_xor_sync(0xffffffffu, dv, 1));
	float f = __shfl_up_sync(0xffffffffu, (float)v, 2);
	o[8] = (int)f;
	// Half the warp on its own: lanes 0-15 with mask 0x0000ffff.
	int h = 0;
	if (lane < 16) {
		h = v;
		for (int m = 8; m > 0; m >>= 1) h += __shfl_xor_sync(0x0000ffffu, h, m);
	}
	o[9] = h;
	o[10] = (int)__reduce_add_sync(0xffffffffu, v);
	o[11] = __reduce_min_sync(0xffffffffu, v) * 1000 + __reduce_max_sync(0xffffffffu, v);
}

TEST(warp_shuffles) {
	const int blocks = 3, nt = 64;
	DeviceBuf<int> out(blocks * nt * kOut);
	LAUNCH(blocks, nt, 0, 0, shuffles)(out.p);
	CUDA_OK(cudaGetLastError());
	std::vector<int> h = out.download();
	for (int b = 0; b < blocks; b++)
		for (int t = 0; t < nt; t++) {
			const int lane = t % 32, w0 = t - lane;
			auto v = [&](int l) { return value_of(b, w0 + l); };
			int sum = 0, scan = 0, g = 0, half = 0, mn = 1 << 30, mx = -(1 << 30);
			for (int l = 0; l < 32; l++) {
				sum += v(l);
				if (l <= lane) scan += v(l);
				if (l / 8 == lane / 8) g += v(l);
				if (l < 16) half += v(l);
				mn = v(l) < mn ? v(l) : mn;
				mx = v(l) > mx ? v(l) : mx;
			}
			const int want[kOut] = {sum,
			                        lane == 0 ? sum : 0,
			                        v(7),
			                        v(lane / 16 * 16 + 3),
			                        scan,
			                        g,
			                        lane % 8 + 5 < 8 ? v(lane + 5) : v(lane),
			                        v(lane ^ 1),
			                        lane >= 2 ? v(lane - 2) : v(lane),
			                        lane < 16 ? half : 0,
			                        sum,
			                        mn * 1000 + mx};
			const int *got = &h[(b * nt + t) * kOut];
			for (int k = 0; k < kOut; k++)
				CHECKF(got[k] == want[k], "block %d thread %d value %d: got %d, want %d", b, t, k, got[k], want[k]);
		}
}

__global__ void votes(unsigned *out) {
	const int lane = threadIdx.x % 32;
	unsigned *o = out + threadIdx.x * 6;
	o[0] = __ballot_sync(0xffffffffu, lane % 3 == 0);
	o[1] = __any_sync(0xffffffffu, lane == 5);
	o[2] = __any_sync(0xffffffffu, lane > 40);
	o[3] = __all_sync(0xffffffffu, lane < 32);
	o[4] = __all_sync(0xffffffffu, lane < 31);
	o[5] = 0;
	if (lane < 10) return; // lanes 10-31 carry on
	__syncwarp(0xfffffc00u);
	o[5] = __activemask();
}

TEST(warp_votes) {
	DeviceBuf<unsigned> out(64 * 6);
	LAUNCH(1, 64, 0, 0, votes)(out.p);
	CUDA_OK(cudaGetLastError());
	std::vector<unsigned> h = out.download();
	unsigned ballot = 0;
	for (int l = 0; l < 32; l += 3) ballot |= 1u << l;
	for (int t = 0; t < 64; t++) {
		const unsigned *o = &h[t * 6];
		CHECKF(o[0] == ballot && o[1] == 1 && o[2] == 0 && o[3] == 1 && o[4] == 0, "thread %d", t);
		CHECKF(o[5] == (t % 32 < 10 ? 0u : 0xfffffc00u), "thread %d: activemask %08x", t, o[5]);
	}
}

// A 48-thread block: the second warp has 16 lanes, so its collectives name
// only those.
__global__ void partial_warp(int *out) {
	const int t = threadIdx.x, lane = t % 32;
	const unsigned mask = t < 32 ? 0xffffffffu : 0x0000ffffu;
	int s = t;
	for (int m = 1; m < 16; m <<= 1) s += __shfl_xor_sync(mask, s, m);
	out[t] = s;
	// __syncwarp orders shared-memory traffic within a warp.
	__shared__ int buf[48];
	buf[t] = t * 2;
	__syncwarp(mask);
	out[48 + t] = buf[t - lane + (lane + 1) % (t < 32 ? 32 : 16)];
}

TEST(warp_partial) {
	DeviceBuf<int> out(96);
	LAUNCH(1, 48, 0, 0, partial_warp)(out.p);
	CUDA_OK(cudaGetLastError());
	std::vector<int> h = out.download();
	for (int t = 0; t < 48; t++) {
		int g0 = t / 16 * 16, sum = 0;
		for (int l = 0; l < 16; l++) sum += g0 + l;
		const int lane = t % 32, w = t < 32 ? 32 : 16;
		CHECKF(h[t] == sum, "thread %d: %d, want %d", t, h[t], sum);
		CHECKF(h[48 + t] == 2 * (t - lane + (lane + 1) % w), "thread %d: %d", t, h[48 + t]);
	}
}
