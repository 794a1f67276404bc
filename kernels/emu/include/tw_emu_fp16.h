// tw_emu_fp16.h — __nv_bfloat16 and __half (and their pairs) for the CUDA
// emulator, as cuda_bf16.h and cuda_fp16.h declare them.
//
// Contract: each type is 16 bits holding the IEEE-style encoding
// (bf16: 1-8-7, f16: 1-5-10). Conversions from float round to nearest, ties
// to even; NaN becomes bf16's canonical NaN 0x7fff (what cvt.rn.bf16.f32
// returns on an H200, sign and payload dropped) and an f16 quiet NaN (sign and
// payload kept: not yet compared with a GPU); overflow goes to ±inf; f16
// subnormals are produced and read exactly. Arithmetic is done in float and
// rounded once to the 16-bit type, which equals the GPU's result except in
// rare double-rounding cases of additions whose operands differ by more than
// 2^16 in magnitude. As in CUDA 11.8, a bf16 is built from float or double
// (not from an int: `__nv_bfloat16 x = 0;` is ambiguous there too) and
// converts implicitly to float; mixing it with float in one operator is
// ambiguous (write float(x) or __bfloat162float(x)).
#ifndef TW_EMU_FP16_H
#define TW_EMU_FP16_H

#include <stdint.h>
#include <string.h>

namespace tw_emu {

inline uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
inline float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

// float -> bf16 bits, round to nearest even.
inline uint16_t f32_to_bf16(float f) {
	uint32_t u = f32_bits(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fffu; // NaN: canonical
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}
// float -> bf16 bits, round toward zero.
inline uint16_t f32_to_bf16_rz(float f) {
	uint32_t u = f32_bits(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fffu; // NaN: canonical
	return (uint16_t)(u >> 16);
}
inline float bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

// float -> f16 bits, round to nearest even.
inline uint16_t f32_to_f16(float f) {
	uint32_t u = f32_bits(f);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
	u &= 0x7fffffffu;
	if (u > 0x7f800000u) return sign | 0x7e00u | (uint16_t)((u >> 13) & 0x3ffu); // NaN: quiet
	if (u >= 0x47800000u) return sign | 0x7c00u; // >= 65536 (and inf): inf
	if (u < 0x38800000u) {
		// |f| < 2^-14: an f16 subnormal (or zero). Adding 0.5 puts the value's
		// bits, in units of 2^-24, into the low mantissa bits of the float
		// sum, rounded to nearest even by the float adder.
		float s = bits_f32(u) + 0.5f;
		return sign | (uint16_t)(f32_bits(s) - 0x3f000000u);
	}
	// Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits
	// to nearest even; a carry out of the mantissa bumps the exponent, and
	// one past the largest finite value gives inf.
	uint32_t odd = (u >> 13) & 1u;
	u += 0xc8000fffu + odd; // (15 - 127) << 23, plus half an ulp minus one
	return sign | (uint16_t)(u >> 13);
}
inline float f16_to_f32(uint16_t h) {
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
	if (exp == 0) { // zero or subnormal: mant * 2^-24, exact in float
		float v = (float)mant * 5.9604644775390625e-8f;
		return bits_f32(f32_bits(v) | sign);
	}
	if (exp == 31) return bits_f32(sign | 0x7f800000u | (mant << 13));
	return bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

} // namespace tw_emu

// Each type carries the alignment cuda_bf16.hpp and cuda_fp16.hpp give it
// (__CUDA_ALIGN__): 2 bytes for a value, 4 for a pair. The emulator's
// alignment check (kernels/emu/CMakeLists.txt) then refuses what a GPU
// refuses, e.g. a __nv_bfloat162 load from an odd element.
struct __attribute__((aligned(2))) __nv_bfloat16_raw { unsigned short x; };
struct __attribute__((aligned(2))) __half_raw { unsigned short x; };

struct __attribute__((aligned(2))) __nv_bfloat16 {
	unsigned short __x;
	__nv_bfloat16() = default;
	__nv_bfloat16(float f) : __x(tw_emu::f32_to_bf16(f)) {}
	__nv_bfloat16(double d) : __x(tw_emu::f32_to_bf16((float)d)) {}
	__nv_bfloat16(const __nv_bfloat16_raw &r) : __x(r.x) {}
	operator __nv_bfloat16_raw() const { return __nv_bfloat16_raw{__x}; }
	operator float() const { return tw_emu::bf16_to_f32(__x); }
};

struct __attribute__((aligned(2))) __half {
	unsigned short __x;
	__half() = default;
	__half(float f) : __x(tw_emu::f32_to_f16(f)) {}
	__half(double d) : __x(tw_emu::f32_to_f16((float)d)) {}
	__half(int i) : __x(tw_emu::f32_to_f16((float)i)) {}
	__half(unsigned i) : __x(tw_emu::f32_to_f16((float)i)) {}
	__half(long long i) : __x(tw_emu::f32_to_f16((float)i)) {}
	__half(const __half_raw &r) : __x(r.x) {}
	operator __half_raw() const { return __half_raw{__x}; }
	operator float() const { return tw_emu::f16_to_f32(__x); }
};

struct __attribute__((aligned(4))) __nv_bfloat162 { __nv_bfloat16 x, y; };
struct __attribute__((aligned(4))) __half2 { __half x, y; };

typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;
typedef __half half;
typedef __half2 half2;

// Conversions.
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rz(float f) { return __nv_bfloat16_raw{tw_emu::f32_to_bf16_rz(f)}; }
inline __nv_bfloat16 __double2bfloat16(double d) { return __nv_bfloat16((float)d); }
inline float __bfloat162float(__nv_bfloat16 h) { return tw_emu::bf16_to_f32(h.__x); }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { return __nv_bfloat16_raw{u}; }
inline short __bfloat16_as_short(__nv_bfloat16 h) { return (short)h.__x; }
inline __nv_bfloat16 __short_as_bfloat16(short s) { return __nv_bfloat16_raw{(unsigned short)s}; }

inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline __half __double2half(double d) { return __half((float)d); }
inline float __half2float(__half h) { return tw_emu::f16_to_f32(h.__x); }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline __half __ushort_as_half(unsigned short u) { return __half_raw{u}; }
inline short __half_as_short(__half h) { return (short)h.__x; }
inline __half __short_as_half(short s) { return __half_raw{(unsigned short)s}; }

// Pairs.
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return {__nv_bfloat16(a), __nv_bfloat16(b)}; }
inline __nv_bfloat162 __float2bfloat162_rn(float a) { return {__nv_bfloat16(a), __nv_bfloat16(a)}; }
inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return {a, b}; }
inline __nv_bfloat162 __bfloat162bfloat162(__nv_bfloat16 a) { return {a, a}; }
inline __nv_bfloat162 make_bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return {a, b}; }
inline __half2 __floats2half2_rn(float a, float b) { return {__half(a), __half(b)}; }
inline __half2 __float2half2_rn(float a) { return {__half(a), __half(a)}; }
inline __half2 __halves2half2(__half a, __half b) { return {a, b}; }
inline __half2 __half2half2(__half a) { return {a, a}; }
inline __half2 make_half2(__half a, __half b) { return {a, b}; }
inline float __low2float(__nv_bfloat162 p) { return float(p.x); }
inline float __high2float(__nv_bfloat162 p) { return float(p.y); }
inline float __low2float(__half2 p) { return float(p.x); }
inline float __high2float(__half2 p) { return float(p.y); }
inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 p) { return p.x; }
inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 p) { return p.y; }
inline __half __low2half(__half2 p) { return p.x; }
inline __half __high2half(__half2 p) { return p.y; }

// Scalar and pair arithmetic, comparisons and operators, the same for both
// 16-bit types: computed in float, rounded once.
#define TW_EMU_HALF_OPS(T, T2)                                                                                 \
	inline T __hadd(T a, T b) { return T(float(a) + float(b)); }                                                 \
	inline T __hsub(T a, T b) { return T(float(a) - float(b)); }                                                 \
	inline T __hmul(T a, T b) { return T(float(a) * float(b)); }                                                 \
	inline T __hdiv(T a, T b) { return T(float(a) / float(b)); }                                                 \
	inline T __hfma(T a, T b, T c) { return T(__builtin_fmaf(float(a), float(b), float(c))); }                   \
	inline T __hneg(T a) { T r; r.__x = (unsigned short)(a.__x ^ 0x8000u); return r; }                           \
	inline T __habs(T a) { T r; r.__x = (unsigned short)(a.__x & 0x7fffu); return r; }                           \
	inline T __hmax(T a, T b) { return __builtin_fmaxf(float(a), float(b)) == float(a) ? a : b; }                \
	inline T __hmin(T a, T b) { return __builtin_fminf(float(a), float(b)) == float(a) ? a : b; }                \
	inline bool __hisnan(T a) { return float(a) != float(a); }                                                    \
	inline int __hisinf(T a) { float f = float(a); return f == __builtin_inff() ? 1 : f == -__builtin_inff() ? -1 : 0; } \
	inline bool __heq(T a, T b) { return float(a) == float(b); }                                                  \
	inline bool __hlt(T a, T b) { return float(a) < float(b); }                                                   \
	inline bool __hgt(T a, T b) { return float(a) > float(b); }                                                   \
	inline T operator+(const T &a, const T &b) { return __hadd(a, b); }                                           \
	inline T operator-(const T &a, const T &b) { return __hsub(a, b); }                                           \
	inline T operator*(const T &a, const T &b) { return __hmul(a, b); }                                           \
	inline T operator/(const T &a, const T &b) { return __hdiv(a, b); }                                           \
	inline T &operator+=(T &a, const T &b) { return a = __hadd(a, b); }                                           \
	inline T &operator-=(T &a, const T &b) { return a = __hsub(a, b); }                                           \
	inline T &operator*=(T &a, const T &b) { return a = __hmul(a, b); }                                           \
	inline T &operator/=(T &a, const T &b) { return a = __hdiv(a, b); }                                           \
	inline T operator+(const T &a) { return a; }                                                                  \
	inline T operator-(const T &a) { return __hneg(a); }                                                          \
	inline bool operator==(const T &a, const T &b) { return float(a) == float(b); }                               \
	inline bool operator!=(const T &a, const T &b) { return float(a) != float(b); }                               \
	inline bool operator<(const T &a, const T &b) { return float(a) < float(b); }                                 \
	inline bool operator>(const T &a, const T &b) { return float(a) > float(b); }                                 \
	inline bool operator<=(const T &a, const T &b) { return float(a) <= float(b); }                               \
	inline bool operator>=(const T &a, const T &b) { return float(a) >= float(b); }                               \
	inline T2 __hadd2(T2 a, T2 b) { return {__hadd(a.x, b.x), __hadd(a.y, b.y)}; }                                \
	inline T2 __hsub2(T2 a, T2 b) { return {__hsub(a.x, b.x), __hsub(a.y, b.y)}; }                                \
	inline T2 __hmul2(T2 a, T2 b) { return {__hmul(a.x, b.x), __hmul(a.y, b.y)}; }                                \
	inline T2 __hfma2(T2 a, T2 b, T2 c) { return {__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)}; }                \
	inline T2 operator+(const T2 &a, const T2 &b) { return __hadd2(a, b); }                                       \
	inline T2 operator-(const T2 &a, const T2 &b) { return __hsub2(a, b); }                                       \
	inline T2 operator*(const T2 &a, const T2 &b) { return __hmul2(a, b); }

TW_EMU_HALF_OPS(__nv_bfloat16, __nv_bfloat162)
TW_EMU_HALF_OPS(__half, __half2)
#undef TW_EMU_HALF_OPS

inline float2 __bfloat1622float2(__nv_bfloat162 p) { return float2{float(p.x), float(p.y)}; }
inline __nv_bfloat162 __float22bfloat162_rn(float2 f) { return {__nv_bfloat16(f.x), __nv_bfloat16(f.y)}; }
inline float2 __half22float2(__half2 p) { return float2{float(p.x), float(p.y)}; }
inline __half2 __float22half2_rn(float2 f) { return {__half(f.x), __half(f.y)}; }

#endif // TW_EMU_FP16_H
