package engine

import (
	"encoding/binary"
	"fmt"
	"math"
)

// EncodeF32 converts float32 values to the little-endian bytes of dtype dt
// (rounding to nearest even for bf16 and f16; truncating toward zero for i32).
func EncodeF32(dt DType, src []float32) []byte {
	out := make([]byte, len(src)*dt.Size())
	for i, f := range src {
		switch dt {
		case F32:
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(f))
		case BF16:
			binary.LittleEndian.PutUint16(out[2*i:], F32ToBF16(f))
		case F16:
			binary.LittleEndian.PutUint16(out[2*i:], F32ToF16(f))
		case I32:
			binary.LittleEndian.PutUint32(out[4*i:], uint32(int32(f)))
		}
	}
	return out
}

// DecodeF32 converts little-endian bytes of dtype dt to float32 values.
func DecodeF32(dt DType, src []byte) []float32 {
	n := len(src) / dt.Size()
	out := make([]float32, n)
	for i := range out {
		switch dt {
		case F32:
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		case BF16:
			out[i] = BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		case F16:
			out[i] = F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		case I32:
			out[i] = float32(int32(binary.LittleEndian.Uint32(src[4*i:])))
		}
	}
	return out
}

// Alloc allocates a zeroed tensor on b.
func Alloc(b Allocator, dt DType, shape ...int) (*Tensor, error) {
	n := Shape(shape).Numel() * dt.Size()
	buf, err := b.NewBuffer(n)
	if err != nil {
		return nil, fmt.Errorf("allocating %v%v: %w", dt, Shape(shape), err)
	}
	return NewTensor(buf, 0, dt, shape...), nil
}

// MustAlloc is Alloc for sizes the caller knows fit (tests, small scratch);
// it panics on failure.
func MustAlloc(b Allocator, dt DType, shape ...int) *Tensor {
	t, err := Alloc(b, dt, shape...)
	if err != nil {
		panic(err)
	}
	return t
}

// FromF32 allocates a tensor of dtype dt on b and fills it with vals (rounded
// to dt). It panics if len(vals) differs from the shape's element count.
func FromF32(b Backend, dt DType, vals []float32, shape ...int) *Tensor {
	if len(vals) != Shape(shape).Numel() {
		panic(fmt.Sprintf("engine: FromF32: %d values for shape %v", len(vals), Shape(shape)))
	}
	t := MustAlloc(b, dt, shape...)
	b.Upload(t, EncodeF32(dt, vals))
	return t
}

// FromI32 allocates an i32 tensor on b holding vals.
func FromI32(b Backend, vals []int32, shape ...int) *Tensor {
	if len(vals) != Shape(shape).Numel() {
		panic(fmt.Sprintf("engine: FromI32: %d values for shape %v", len(vals), Shape(shape)))
	}
	t := MustAlloc(b, I32, shape...)
	SetI32(b, t, vals)
	return t
}

// SetF32 uploads vals into t, converting to t's dtype.
func SetF32(b Backend, t *Tensor, vals []float32) {
	if len(vals) != t.Numel() {
		panic(fmt.Sprintf("engine: SetF32: %d values for tensor %v", len(vals), t))
	}
	b.Upload(t, EncodeF32(t.DType(), vals))
}

// SetI32 uploads vals into the i32 tensor t.
func SetI32(b Backend, t *Tensor, vals []int32) {
	MustDType("SetI32", "t", t, I32)
	if len(vals) != t.Numel() {
		panic(fmt.Sprintf("engine: SetI32: %d values for tensor %v", len(vals), t))
	}
	raw := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(raw[4*i:], uint32(v))
	}
	b.Upload(t, raw)
}

// ToF32 downloads t and converts its elements to float32.
func ToF32(b Backend, t *Tensor) []float32 {
	raw := make([]byte, t.Bytes())
	b.Download(raw, t)
	return DecodeF32(t.DType(), raw)
}

// ToI32 downloads the i32 tensor t.
func ToI32(b Backend, t *Tensor) []int32 {
	MustDType("ToI32", "t", t, I32)
	raw := make([]byte, t.Bytes())
	b.Download(raw, t)
	out := make([]int32, t.Numel())
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out
}
