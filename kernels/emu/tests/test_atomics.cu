// test_atomics.cu — atomics from many blocks running on several OS threads.
#include "../../common.cuh"
#include "harness.h"

struct Counters {
	int i;
	unsigned u;
	unsigned long long ull;
	float f;
	double d;
	int imax, imin;
	int cas;
	int exch;
	__nv_bfloat16 bf;
	__half hf;
};

__global__ void atomics(Counters *c, int *tickets) {
	const int g = blockIdx.x * blockDim.x + threadIdx.x;
	tickets[atomicAdd(&c->i, 1)] = g; // each thread a distinct ticket
	atomicAdd(&c->u, 2u);
	atomicAdd(&c->ull, 1ull << 33);
	atomicAdd(&c->f, 1.0f);
	atomicAdd(&c->d, 0.5);
	atomicMax(&c->imax, g * 7 % 1009);
	atomicMin(&c->imin, 1000 - g * 7 % 1009);
	int old = c->cas, seen; // increment through compare-and-swap
	while ((seen = atomicCAS(&c->cas, old, old + 3)) != old) old = seen;
	atomicExch(&c->exch, g);
	if (g < 100) {
		atomicAdd(&c->bf, __float2bfloat16(1.0f));
		atomicAdd(&c->hf, __float2half(1.0f));
	}
}

TEST(atomics_many_blocks) {
	const int blocks = 64, nt = 256, n = blocks * nt;
	DeviceBuf<Counters> c(1);
	DeviceBuf<int> tickets(n);
	Counters z{};
	z.imax = -1;
	z.imin = 1 << 30;
	cudaMemcpy(c.p, &z, sizeof z, cudaMemcpyHostToDevice);
	LAUNCH(blocks, nt, 0, 0, atomics)(c.p, tickets.p);
	CUDA_OK(cudaGetLastError());
	Counters r = c.download()[0];
	CHECKF(r.i == n && r.u == 2u * n && r.ull == (unsigned long long)n << 33, "%d %u %llu", r.i, r.u, r.ull);
	CHECKF(r.f == (float)n && r.d == n * 0.5, "%f %f", r.f, r.d);
	CHECKF(r.imax == 1008 && r.imin == 1000 - 1008, "%d %d", r.imax, r.imin);
	CHECKF(r.cas == 3 * n, "%d", r.cas);
	CHECKF(r.exch >= 0 && r.exch < n, "%d", r.exch);
	CHECKF(float(r.bf) == 100.0f && float(r.hf) == 100.0f, "%f %f", float(r.bf), float(r.hf));
	std::vector<int> t = tickets.download();
	std::vector<char> seen(n, 0);
	for (int g : t) {
		CHECK(g >= 0 && g < n && !seen[g]);
		seen[g] = 1;
	}
}
