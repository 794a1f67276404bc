// test_fastdiv.cu — __umulhi (the high word of a 32 × 32-bit product) and
// attention.cuh's FastDiv, the division by a launch-wide divisor the
// attention kernels map their rows with: on the device, against the
// host's 64-bit products and integer division, for divisors from 1 to
// 2^31 − 1 and dividends across [0, 2^31), the multiples of the divisor
// and their neighbours included.
#include <stdint.h>

#include <initializer_list>
#include <vector>

#include "../../attention.cuh"
#include "harness.h"

__global__ void umulhi_kernel(const uint32_t *a, const uint32_t *b, uint32_t *hi, int n) {
	const int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) hi[i] = __umulhi(a[i], b[i]);
}

TEST(umulhi) {
	std::vector<uint32_t> a, b;
	const uint32_t v[] = {0u, 1u, 2u, 3u, 0x7fffffffu, 0x80000000u, 0xfffffffeu, 0xffffffffu, 0x12345678u, 0x9abcdef0u};
	for (uint32_t x : v)
		for (uint32_t y : v) a.push_back(x), b.push_back(y);
	const int n = (int)a.size();
	DeviceBuf<uint32_t> da(n), db(n), dh(n);
	da.upload(a);
	db.upload(b);
	LAUNCH((n + 127) / 128, 128, 0, 0, umulhi_kernel)(da.p, db.p, dh.p, n);
	CUDA_OK(cudaDeviceSynchronize());
	const std::vector<uint32_t> hi = dh.download();
	for (int i = 0; i < n; i++)
		CHECKF(hi[i] == (uint32_t)(((uint64_t)a[i] * b[i]) >> 32), "__umulhi(%#x, %#x) = %#x", a[i], b[i], hi[i]);
}

__global__ void fastdiv_kernel(FastDiv f, const int *n, int *q, int count) {
	const int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < count) q[i] = f.div(n[i]);
}

TEST(fastdiv) {
	std::vector<int> divisors;
	for (int d = 1; d <= 70; d++) divisors.push_back(d);
	for (int d : {96, 127, 128, 129, 1000, 4095, 65535, 65536, 65537, 1 << 20, (1 << 20) + 7, 1000000007, 1 << 30,
	              (1 << 30) + 1, 0x7ffffffe, 0x7fffffff})
		divisors.push_back(d);
	uint64_t state = 0x9e3779b97f4a7c15ull; // xorshift: dividends spread over [0, 2^31)
	for (int d : divisors) {
		std::vector<int> n;
		for (int x = 0; x < 300; x++) n.push_back(x);
		for (int64_t k : std::initializer_list<int64_t>{1, 2, 3, 1000, 0x7fffffff / d, 0x7fffffff / d - 1})
			for (int64_t e = -1; e <= 1; e++)
				if (k * d + e >= 0 && k * d + e <= 0x7fffffff) n.push_back((int)(k * d + e));
		n.push_back(0x7fffffff);
		n.push_back(0x7ffffffe);
		for (int x = 0; x < 200; x++) {
			state ^= state << 13, state ^= state >> 7, state ^= state << 17;
			n.push_back((int)(state & 0x7fffffff));
		}
		const int count = (int)n.size();
		DeviceBuf<int> dn(count), dq(count);
		dn.upload(n);
		const FastDiv f = FastDiv::of(d);
		LAUNCH((count + 127) / 128, 128, 0, 0, fastdiv_kernel)(f, dn.p, dq.p, count);
		CUDA_OK(cudaDeviceSynchronize());
		const std::vector<int> q = dq.download();
		int bad = 0;
		for (int i = 0; i < count && bad < 5; i++)
			if (q[i] != n[i] / d) {
				CHECKF(false, "FastDiv::of(%d).div(%d) = %d, want %d (m %#x, s %d)", d, n[i], q[i], n[i] / d, f.m, f.s);
				bad++;
			}
	}
}
