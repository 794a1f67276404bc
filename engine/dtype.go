package engine

import (
	"fmt"
	"math"

	"github.com/x448/float16"
)

// DType is the element type of a tensor.
type DType uint8

// The element types. F32, BF16 and F16 are floating point; I32 holds token
// ids, positions, targets and sequence tables.
const (
	F32  DType = iota // IEEE-754 binary32
	BF16              // bfloat16: the top 16 bits of a binary32
	F16               // IEEE-754 binary16
	I32               // two's-complement int32
)

// Size returns the number of bytes of one element.
func (d DType) Size() int {
	switch d {
	case F32, I32:
		return 4
	case BF16, F16:
		return 2
	}
	panic(fmt.Sprintf("engine: unknown dtype %d", uint8(d)))
}

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool { return d == F32 || d == BF16 || d == F16 }

// String returns the conventional lower-case name: f32, bf16, f16, i32.
func (d DType) String() string {
	switch d {
	case F32:
		return "f32"
	case BF16:
		return "bf16"
	case F16:
		return "f16"
	case I32:
		return "i32"
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// FileName returns the dtype's name in tensor file formats (safetensors):
// "F32", "BF16", "F16" or "I32".
func (d DType) FileName() string {
	switch d {
	case F32:
		return "F32"
	case BF16:
		return "BF16"
	case F16:
		return "F16"
	case I32:
		return "I32"
	}
	return ""
}

// ParseDType returns the DType named s (f32, bf16, f16 or i32).
func ParseDType(s string) (DType, error) {
	for _, d := range []DType{F32, BF16, F16, I32} {
		if d.String() == s {
			return d, nil
		}
	}
	return 0, fmt.Errorf("unknown dtype %q (want f32, bf16, f16 or i32)", s)
}

// F32ToBF16 rounds f to the nearest bfloat16, ties to even. NaN stays NaN
// (quiet, sign kept); infinities and signed zeros are kept.
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 { // NaN: keep the sign, force a quiet payload
		return uint16(u>>16) | 0x0040
	}
	// Round to nearest even: add 0x7fff plus the lowest kept bit.
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// BF16ToF32 widens a bfloat16 to float32 exactly.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// RoundBF16 returns f rounded to the nearest bfloat16 value, as a float32.
func RoundBF16(f float32) float32 { return BF16ToF32(F32ToBF16(f)) }

// F32ToF16 rounds f to the nearest binary16, ties to even.
func F32ToF16(f float32) uint16 { return float16.Fromfloat32(f).Bits() }

// F16ToF32 widens a binary16 to float32 exactly.
func F16ToF32(h uint16) float32 { return float16.Frombits(h).Float32() }

// RoundF16 returns f rounded to the nearest binary16 value, as a float32.
func RoundF16(f float32) float32 { return F16ToF32(F32ToF16(f)) }

// Round returns f rounded to the precision of d (f unchanged for F32).
// It panics for I32.
func (d DType) Round(f float32) float32 {
	switch d {
	case F32:
		return f
	case BF16:
		return RoundBF16(f)
	case F16:
		return RoundF16(f)
	}
	panic(fmt.Sprintf("engine: Round on non-float dtype %v", d))
}
