// test_fp16.cu — bf16 and f16 conversions and arithmetic, run in kernels:
// hand-picked edge cases (ties to even, NaN, infinities, overflow, f16
// subnormals), exhaustive round trips of all 65536 encodings, and a property
// check of round-to-nearest-even on two million floats.
#include <math.h>
#include <string.h>

#include "../../common.cuh"
#include "harness.h"

// ---- Kernels: conversions in bulk -----------------------------------------------

__global__ void encode(const float *x, unsigned short *bf, unsigned short *hf, int n) {
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		bf[i] = __bfloat16_as_ushort(__float2bfloat16(x[i]));
		hf[i] = __half_as_ushort(__float2half(x[i]));
	}
}

__global__ void decode(const unsigned short *h, float *bf, float *hf, int n) {
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		bf[i] = __bfloat162float(__ushort_as_bfloat16(h[i]));
		hf[i] = __half2float(__ushort_as_half(h[i]));
	}
}

static float f32(uint32_t u) {
	float f;
	memcpy(&f, &u, 4);
	return f;
}

// bf16 and f16 encodings of xs, computed on the device.
static void encode_all(const std::vector<float> &xs, std::vector<unsigned short> *bf, std::vector<unsigned short> *hf) {
	const int n = (int)xs.size();
	DeviceBuf<float> x(n);
	DeviceBuf<unsigned short> b(n), h(n);
	x.upload(xs);
	LAUNCH(grid_for(n, 256), 256, 0, 0, encode)(x.p, b.p, h.p, n);
	*bf = b.download();
	*hf = h.download();
}

// Values of all 65536 encodings, as bf16 and as f16.
static void decode_table(std::vector<float> *bf, std::vector<float> *hf) {
	std::vector<unsigned short> all(65536);
	for (int i = 0; i < 65536; i++) all[i] = (unsigned short)i;
	DeviceBuf<unsigned short> h(65536);
	DeviceBuf<float> b(65536), f(65536);
	h.upload(all);
	LAUNCH(grid_for(65536, 256), 256, 0, 0, decode)(h.p, b.p, f.p, 65536);
	*bf = b.download();
	*hf = f.download();
}

// ---- Edge cases ---------------------------------------------------------------------

struct Case {
	uint32_t in;  // float bits
	int bf, hf;   // expected encodings; -1: NaN expected, -2: not checked
	const char *what;
};

static const Case kCases[] = {
    {0x3f800000, 0x3f80, 0x3c00, "1"},
    {0x3f808000, 0x3f80, 0x3c04, "1 + 2^-8: bf16 tie, to even (down)"},
    {0x3f818000, 0x3f82, 0x3c0c, "1 + 3·2^-8: bf16 tie, to even (up)"},
    {0x3f808001, 0x3f81, 0x3c04, "just above the bf16 tie: up"},
    {0x3f807fff, 0x3f80, 0x3c04, "just below the bf16 tie: down"},
    {0x3f801000, 0x3f80, 0x3c00, "1 + 2^-11: f16 tie, to even (down)"},
    {0x3f803000, 0x3f80, 0x3c02, "1 + 3·2^-11: f16 tie, to even (up)"},
    {0x80000000, 0x8000, 0x8000, "-0"},
    {0x7f800000, 0x7f80, 0x7c00, "inf"},
    {0xff800000, 0xff80, 0xfc00, "-inf"},
    {0x7f7fffff, 0x7f80, 0x7c00, "FLT_MAX: inf in both"},
    {0x7f7f7fff, 0x7f7f, 0x7c00, "the largest float that stays finite in bf16"},
    {0x00000001, 0x0000, 0x0000, "the smallest float subnormal"},
    {0x00018000, 0x0002, 0x0000, "a float subnormal at a bf16 tie, to even (up)"},
    {0x477fe000, 0x4780, 0x7bff, "65504, the largest f16"},
    {0x477fefff, 0x4780, 0x7bff, "just below 65520: stays finite in f16"},
    {0x477ff000, 0x4780, 0x7c00, "65520: f16 tie, to even (inf)"},
    {0xd01502f9, 0xd015, 0xfc00, "-1e10"},
    {0x33800000, 0x3380, 0x0001, "2^-24, the smallest f16 subnormal"},
    {0x33000000, 0x3300, 0x0000, "2^-25: f16 tie, to even (zero)"},
    {0x33400000, 0x3340, 0x0001, "1.5·2^-25: up"},
    {0x33c00000, 0x33c0, 0x0002, "1.5·2^-24: f16 tie, to even (up)"},
    {0x38800000, 0x3880, 0x0400, "2^-14, the smallest f16 normal"},
    {0x387fc000, 0x3880, 0x03ff, "1023·2^-24, the largest f16 subnormal"},
    {0x387fe000, 0x3880, 0x0400, "1023.5·2^-24: f16 tie, to even (into the normals)"},
    // bf16: every NaN becomes the canonical 0x7fff, as an H200 returns it
    // (2026-11-27: 0xffffffff gave 0x7fff, not 0xffff); f16: any quiet NaN.
    {0x7fc00000, 0x7fff, -1, "NaN"},
    {0x7f800001, 0x7fff, -1, "signalling NaN with a low payload: must not become inf"},
    {0xffffffff, 0x7fff, -1, "NaN with every bit set"},
};

TEST(fp16_edge_cases) {
	std::vector<float> xs;
	for (const Case &c : kCases) xs.push_back(f32(c.in));
	std::vector<unsigned short> bf, hf;
	encode_all(xs, &bf, &hf);
	for (size_t i = 0; i < xs.size(); i++) {
		const Case &c = kCases[i];
		if (c.bf == -1)
			CHECKF((bf[i] & 0x7f80) == 0x7f80 && (bf[i] & 0x40), "%s: bf16 %04x is not a quiet NaN", c.what, bf[i]);
		else
			CHECKF(bf[i] == c.bf, "%s: bf16 %04x, want %04x", c.what, bf[i], c.bf);
		if (c.hf == -1)
			CHECKF((hf[i] & 0x7c00) == 0x7c00 && (hf[i] & 0x200), "%s: f16 %04x is not a quiet NaN", c.what, hf[i]);
		else
			CHECKF(hf[i] == c.hf, "%s: f16 %04x, want %04x", c.what, hf[i], c.hf);
	}
	std::vector<float> db, dh;
	decode_table(&db, &dh);
	CHECK(db[0x4049] == 3.140625f && isnan(db[0x7fc0]) && db[0xff80] == -INFINITY);
	CHECK(dh[0x0001] == f32(0x33800000) && dh[0x03ff] == 1023.0f / (1 << 24) && dh[0xfc00] == -INFINITY);
	CHECK(isnan(dh[0x7e00]) && dh[0x3c00] == 1.0f && dh[0x7bff] == 65504.0f);
}

// ---- Exhaustive round trips -------------------------------------------------------

TEST(fp16_round_trips) {
	std::vector<float> db, dh;
	decode_table(&db, &dh);
	std::vector<unsigned short> bb, bh, hb, hh;
	encode_all(db, &bb, &bh); // every bf16 value, encoded again
	encode_all(dh, &hb, &hh); // every f16 value, encoded again
	for (uint32_t h = 0; h < 65536; h++) {
		if (isnan(db[h]))
			CHECKF((bb[h] & 0x7f80) == 0x7f80 && (bb[h] & 0x7f), "bf16 NaN %04x came back as %04x", h, bb[h]);
		else
			CHECKF(bb[h] == h, "bf16 %04x came back as %04x", h, bb[h]);
		if (isnan(dh[h]))
			CHECKF((hh[h] & 0x7c00) == 0x7c00 && (hh[h] & 0x3ff), "f16 NaN %04x came back as %04x", h, hh[h]);
		else
			CHECKF(hh[h] == h, "f16 %04x came back as %04x", h, hh[h]);
	}
}

// ---- Round to nearest, ties to even ---------------------------------------------------

// r, the encoding of x, must be at least as close to x as the encodings next
// to it; on a tie its last bit must be 0. value[] maps encodings to floats.
static bool nearest_even(float x, unsigned short r, const std::vector<float> &value) {
	const float v = value[r];
	if (isinf(v)) return true; // overflow: the edge cases cover it
	unsigned short up = (unsigned short)(r + 1), down = (unsigned short)(r - 1);
	if ((r & 0x7fff) == 0) down = (unsigned short)((r ^ 0x8000) + 1); // across zero
	const double e = fabs((double)x - v);
	for (unsigned short nb : {up, down}) {
		const float w = value[nb];
		if (isnan(w) || isinf(w)) continue;
		const double en = fabs((double)x - w);
		if (en < e || (en == e && (r & 1))) return false;
	}
	return true;
}

TEST(fp16_nearest_even) {
	std::vector<float> xs;
	uint32_t s = 12345;
	for (int i = 0; i < 2000000; i++) {
		s = s * 1664525u + 1013904223u;
		uint32_t u = s;
		if (i % 4 == 0) u &= 0x8fffffffu;                 // many small magnitudes, f16 subnormals among them
		if (i % 8 == 1) u = (u & ~0xffffu) | 0x8000u;     // exact bf16 ties
		if (i % 8 == 3) u = (u & ~0x1fffu) | 0x1000u;     // exact f16 ties
		const float x = f32(u);
		if (!isnan(x) && !isinf(x)) xs.push_back(x);
	}
	std::vector<unsigned short> bf, hf;
	encode_all(xs, &bf, &hf);
	std::vector<float> db, dh;
	decode_table(&db, &dh);
	for (size_t i = 0; i < xs.size(); i++) {
		CHECKF(nearest_even(xs[i], bf[i], db), "bf16 of %08x gave %04x", (unsigned)*(const uint32_t *)&xs[i], bf[i]);
		if (fabsf(xs[i]) < 65504.0f)
			CHECKF(nearest_even(xs[i], hf[i], dh), "f16 of %08x gave %04x", (unsigned)*(const uint32_t *)&xs[i], hf[i]);
	}
}

// ---- Arithmetic and the storage helpers ------------------------------------------------

__global__ void arithmetic(float *out) {
	const __nv_bfloat16 a = __float2bfloat16(1.5f), b = __float2bfloat16(2.25f);
	out[0] = __bfloat162float(a + b);
	out[1] = __bfloat162float(a * b);
	out[2] = __bfloat162float(a - b);
	out[3] = a < b;
	out[4] = -a == __float2bfloat16(-1.5f);
	out[5] = __bfloat162float(__hfma(a, b, a));
	const __half c = __float2half(0.1f), d = __float2half(3.0f);
	out[6] = __half2float(c * d);
	out[7] = __half2float(__hadd(c, d));
	const __nv_bfloat162 p = __floats2bfloat162_rn(1.0f, -2.0f);
	out[8] = __low2float(p);
	out[9] = __high2float(p);
	const float2 q = __half22float2(__floats2half2_rn(0.5f, 1e5f));
	out[10] = q.x;
	out[11] = q.y;
}

TEST(fp16_arithmetic) {
	DeviceBuf<float> out(12);
	LAUNCH(1, 1, 0, 0, arithmetic)(out.p);
	CUDA_OK(cudaGetLastError());
	std::vector<float> o = out.download();
	CHECK(o[0] == 3.75f && o[1] == 3.375f && o[2] == -0.75f && o[3] == 1 && o[4] == 1);
	CHECKF(o[5] == 4.875f, "%f", o[5]);                  // 1.5·2.25 + 1.5 = 4.875, exact in bf16
	CHECKF(o[6] == 0.2998046875f, "%.10f", o[6]);       // f16(0.1)·3 rounded to f16
	CHECKF(o[7] == 3.099609375f, "%.10f", o[7]);
	CHECK(o[8] == 1.0f && o[9] == -2.0f && o[10] == 0.5f && isinf(o[11]));
}

__global__ void convert(const float *x, __nv_bfloat16 *b, __half *h, float *back, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) {
		b[i] = from_float<__nv_bfloat16>(x[i]);
		h[i] = from_float<__half>(x[i]);
		back[i] = to_float(b[i]) + to_float(h[i]);
	}
}

TEST(fp16_storage_helpers) {
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
