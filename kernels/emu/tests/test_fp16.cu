// test_fp16.cu — bf16 and f16 conversions: hand-picked edge cases (ties to
// even, NaN, infinities, overflow, f16 subnormals), exhaustive round trips,
// and a property check of round-to-nearest-even on many floats.
#include <math.h>
#include <string.h>

#include "../../common.cuh"
#include "harness.h"

static float f32(uint32_t u) {
	float f;
	memcpy(&f, &u, 4);
	return f;
}
static uint16_t bf(float f) { return __bfloat16_as_ushort(__float2bfloat16(f)); }
static uint16_t hf(float f) { return __half_as_ushort(__float2half(f)); }

TEST(bf16_edge_cases) {
	CHECK(bf(1.0f) == 0x3f80);
	CHECK(bf(f32(0x3f808000)) == 0x3f80);  // 1 + 2^-8: a tie, to even (down)
	CHECK(bf(f32(0x3f818000)) == 0x3f82);  // 1 + 3·2^-8: a tie, to even (up)
	CHECK(bf(f32(0x3f808001)) == 0x3f81);  // just above the tie: up
	CHECK(bf(f32(0x3f807fff)) == 0x3f80);  // just below: down
	CHECK(bf(-0.0f) == 0x8000);
	CHECK(bf(INFINITY) == 0x7f80 && bf(-INFINITY) == 0xff80);
	CHECK(bf(f32(0x7f7fffff)) == 0x7f80);  // FLT_MAX rounds to inf
	CHECK(bf(f32(0x7f7f7fff)) == 0x7f7f);  // the largest value that stays finite
	CHECK(bf(f32(0x00000001)) == 0x0000);  // the smallest subnormal: to zero
	CHECK(bf(f32(0x00018000)) == 0x0002);  // subnormal tie, to even (up)
	uint16_t n = bf(NAN);
	CHECK((n & 0x7f80) == 0x7f80 && (n & 0x7f) != 0);
	n = bf(f32(0x7f800001)); // signalling NaN with a low payload: must not become inf
	CHECK((n & 0x7f80) == 0x7f80 && (n & 0x40) != 0);
	n = bf(f32(0xffffffff));
	CHECK(n == 0xffff);
	CHECK(isnan(__bfloat162float(__ushort_as_bfloat16(0x7fc0))));
	CHECK(__bfloat162float(__ushort_as_bfloat16(0x4049)) == 3.140625f);
	__nv_bfloat162 p = __floats2bfloat162_rn(1.0f, -2.0f);
	CHECK(__low2float(p) == 1.0f && __high2float(p) == -2.0f);
	__nv_bfloat16 a = __float2bfloat16(1.5f), b = __float2bfloat16(2.25f);
	CHECK(float(a + b) == 3.75f && float(a * b) == 3.375f && float(a - b) == -0.75f && a < b && -a == __float2bfloat16(-1.5f));
}

TEST(f16_edge_cases) {
	CHECK(hf(1.0f) == 0x3c00);
	CHECK(hf(f32(0x3f801000)) == 0x3c00);  // 1 + 2^-11: a tie, to even (down)
	CHECK(hf(f32(0x3f803000)) == 0x3c02);  // 1 + 3·2^-11: a tie, to even (up)
	CHECK(hf(65504.0f) == 0x7bff);         // the largest f16
	CHECK(hf(65519.99f) == 0x7bff);        // below the midpoint to 65536: stays finite
	CHECK(hf(65520.0f) == 0x7c00);         // the midpoint rounds to even: inf
	CHECK(hf(1e10f) == 0x7c00 && hf(-1e10f) == 0xfc00);
	CHECK(hf(INFINITY) == 0x7c00);
	CHECK(hf(f32(0x33800000)) == 0x0001);  // 2^-24, the smallest subnormal
	CHECK(hf(f32(0x33000000)) == 0x0000);  // 2^-25: a tie, to even (zero)
	CHECK(hf(f32(0x33400000)) == 0x0001);  // 1.5·2^-25: up
	CHECK(hf(f32(0x33c00000)) == 0x0002);  // 1.5·2^-24: a tie, to even (up)
	CHECK(hf(f32(0x38800000)) == 0x0400);  // 2^-14, the smallest normal
	CHECK(hf(f32(0x387fc000)) == 0x03ff);  // 1023·2^-24, the largest subnormal
	CHECK(hf(f32(0x387fe000)) == 0x0400);  // 1023.5·2^-24: a tie, to even (up into the normals)
	CHECK(hf(-0.0f) == 0x8000);
	uint16_t n = hf(NAN);
	CHECK((n & 0x7c00) == 0x7c00 && (n & 0x3ff) != 0);
	n = hf(f32(0x7f800001));
	CHECK((n & 0x7c00) == 0x7c00 && (n & 0x200) != 0);
	CHECK(__half2float(__ushort_as_half(0x0001)) == f32(0x33800000));
	CHECK(__half2float(__ushort_as_half(0x03ff)) == 1023.0f / (1 << 24));
	CHECK(__half2float(__ushort_as_half(0xfc00)) == -INFINITY);
	CHECK(isnan(__half2float(__ushort_as_half(0x7e00))));
}

TEST(fp16_round_trips) {
	for (uint32_t h = 0; h < 65536; h++) {
		float b = __bfloat162float(__ushort_as_bfloat16((uint16_t)h));
		float f = __half2float(__ushort_as_half((uint16_t)h));
		if (!isnan(b)) CHECKF(bf(b) == h, "bf16 %04x", h);
		if (!isnan(f)) CHECKF(hf(f) == h, "f16 %04x", h);
		if (isnan(b)) CHECKF(isnan(__bfloat162float(__float2bfloat16(b))), "bf16 %04x", h);
		if (isnan(f)) CHECKF(isnan(__half2float(__float2half(f))), "f16 %04x", h);
	}
}

// Nearest, ties to even: r = round(x) must be at least as close to x as the
// representable neighbours of r; on a tie, r's last mantissa bit is 0.
template <class Round, class Back>
static bool nearest_even(float x, Round round, Back back, uint16_t *bad) {
	uint16_t r = round(x);
	*bad = r;
	float v = back(r);
	if (isinf(v)) return true; // overflow handled by the edge cases
	uint16_t up = (uint16_t)(r + 1), down = (uint16_t)(r - 1);
	if ((r & 0x7fff) == 0) down = (uint16_t)((r ^ 0x8000) + 1); // the other side of zero
	double e = fabs((double)x - v);
	for (uint16_t nb : {up, down}) {
		float w = back(nb);
		if (isnan(w) || isinf(w)) continue;
		double en = fabs((double)x - w);
		if (en < e) return false;
		if (en == e && (r & 1)) return false;
	}
	return true;
}

TEST(fp16_nearest_even) {
	uint32_t s = 12345;
	for (int i = 0; i < 2000000; i++) {
		s = s * 1664525u + 1013904223u;
		uint32_t u = s;
		if (i % 4 == 0) u &= 0x8fffffffu; // many small magnitudes, f16 subnormals among them
		if (i % 8 == 1) u = (u & ~0xffffu) | 0x8000u; // exact bf16 ties
		float x = f32(u);
		if (isnan(x) || isinf(x)) continue;
		uint16_t r;
		CHECKF(nearest_even(x, bf, [](uint16_t h) { return __bfloat162float(__ushort_as_bfloat16(h)); }, &r),
		       "bf16 of %08x gave %04x", u, r);
		if (fabsf(x) < 65504.0f)
			CHECKF(nearest_even(x, hf, [](uint16_t h) { return __half2float(__ushort_as_half(h)); }, &r),
			       "f16 of %08x gave %04x", u, r);
	}
}

// The same conversions inside a kernel, through the storage helpers.
__global__ void convert(const float *x, __nv_bfloat16 *b, __half *h, float *back, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) {
		b[i] = from_float<__nv_bfloat16>(x[i]);
		h[i] = from_float<__half>(x[i]);
		back[i] = to_float(b[i]) + to_float(h[i]);
	}
}

TEST(fp16_in_kernel) {
	const int n = 1000;
	std::vector<float> x(n);
	for (int i = 0; i < n; i++) x[i] = (i - 500) * 0.37f;
	DeviceBuf<float> dx(n), back(n);
	DeviceBuf<__nv_bfloat16> b(n);
	DeviceBuf<__half> h(n);
	dx.upload(x);
	LAUNCH(ceil_div(n, 128), 128, 0, 0, convert)(dx.p, b.p, h.p, back.p, n);
	CUDA_OK(cudaGetLastError());
	std::vector<float> got = back.download();
	for (int i = 0; i < n; i++) {
		float want = __bfloat162float(__float2bfloat16(x[i])) + __half2float(__float2half(x[i]));
		CHECKF(got[i] == want, "%d: %f vs %f", i, got[i], want);
	}
}
