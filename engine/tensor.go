package engine

import (
	"fmt"
	"strings"
)

// Shape is a tensor's extent along each dimension, outermost first.
type Shape []int

// Numel returns the number of elements (1 for a scalar shape).
func (s Shape) Numel() int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// Equal reports whether s and o have the same rank and extents.
func (s Shape) Equal(o Shape) bool {
	if len(s) != len(o) {
		return false
	}
	for i := range s {
		if s[i] != o[i] {
			return false
		}
	}
	return true
}

// String formats the shape as [a, b, c].
func (s Shape) String() string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = fmt.Sprint(d)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// Device names where a buffer lives.
type Device struct {
	Kind    string // "cpu", "cuda" or "cudaemu"
	Ordinal int    // device index within its kind
}

// CPU is the host device.
var CPU = Device{Kind: "cpu"}

// String returns "cpu" or kind:ordinal, e.g. "cuda:0".
func (d Device) String() string {
	if d.Kind == "cpu" {
		return "cpu"
	}
	return fmt.Sprintf("%s:%d", d.Kind, d.Ordinal)
}

// Buffer is a block of memory owned by a backend. Backends define their own
// buffer types; code outside a backend only passes them around.
type Buffer interface {
	// Device reports where the memory lives.
	Device() Device
	// Size is the buffer's length in bytes.
	Size() int
}

// Tensor is a dense, contiguous, row-major array of one dtype in a Buffer.
// Several tensors may view the same buffer at different offsets (see Rows
// and Reshape); a view never owns its buffer.
type Tensor struct {
	buf   Buffer
	off   int // byte offset of element 0 within buf
	shape Shape
	dtype DType
}

// NewTensor returns a tensor of the given dtype and shape over buf starting
// at byte offset off. It panics if the tensor does not fit in buf, or if off
// is not a multiple of the dtype's size: backends hand out aligned buffers
// (64 bytes on the CPU, 256 on a GPU), and a GPU faults on an element load
// from an address that is not a multiple of the element's size.
func NewTensor(buf Buffer, off int, dt DType, shape ...int) *Tensor {
	for _, d := range shape {
		if d < 0 {
			panic(fmt.Sprintf("engine: negative dimension in shape %v", Shape(shape)))
		}
	}
	t := &Tensor{buf: buf, off: off, shape: append(Shape(nil), shape...), dtype: dt}
	if off < 0 || off+t.Bytes() > buf.Size() {
		panic(fmt.Sprintf("engine: tensor %v %v at offset %d does not fit in a %d-byte buffer", dt, t.shape, off, buf.Size()))
	}
	if !aligned(off, dt) {
		panic(fmt.Sprintf("engine: tensor %v %v at byte offset %d: the offset is not a multiple of the %d-byte %v element", dt, t.shape, off, dt.Size(), dt))
	}
	return t
}

// aligned reports whether byte offset off is a multiple of dt's element size.
func aligned(off int, dt DType) bool { return off%dt.Size() == 0 }

// Buffer returns the buffer the tensor views.
func (t *Tensor) Buffer() Buffer { return t.buf }

// Offset returns the byte offset of the tensor's first element in its buffer.
func (t *Tensor) Offset() int { return t.off }

// Shape returns the tensor's shape. The caller must not modify it.
func (t *Tensor) Shape() Shape { return t.shape }

// DType returns the element type.
func (t *Tensor) DType() DType { return t.dtype }

// Device reports where the tensor's memory lives.
func (t *Tensor) Device() Device { return t.buf.Device() }

// Rank returns the number of dimensions.
func (t *Tensor) Rank() int { return len(t.shape) }

// Dim returns the extent of dimension i; negative i counts from the end.
func (t *Tensor) Dim(i int) int {
	if i < 0 {
		i += len(t.shape)
	}
	return t.shape[i]
}

// Numel returns the number of elements.
func (t *Tensor) Numel() int { return t.shape.Numel() }

// Bytes returns the size of the tensor's data in bytes.
func (t *Tensor) Bytes() int { return t.shape.Numel() * t.dtype.Size() }

// String describes the tensor, e.g. "bf16[4, 128] on cpu".
func (t *Tensor) String() string {
	return fmt.Sprintf("%v%v on %v", t.dtype, t.shape, t.Device())
}

// Rows returns a view of rows [lo, hi) along dimension 0.
func (t *Tensor) Rows(lo, hi int) *Tensor {
	if len(t.shape) == 0 || lo < 0 || hi < lo || hi > t.shape[0] {
		panic(fmt.Sprintf("engine: Rows(%d, %d) of tensor with shape %v", lo, hi, t.shape))
	}
	rowBytes := t.Bytes()
	if t.shape[0] > 0 {
		rowBytes /= t.shape[0]
	} else {
		rowBytes = 0
	}
	s := append(Shape(nil), t.shape...)
	s[0] = hi - lo
	return &Tensor{buf: t.buf, off: t.off + lo*rowBytes, shape: s, dtype: t.dtype}
}

// Reshape returns a view with a new shape of the same element count. One
// dimension may be -1, meaning whatever makes the counts agree.
func (t *Tensor) Reshape(shape ...int) *Tensor {
	s := append(Shape(nil), shape...)
	infer, known := -1, 1
	for i, d := range s {
		if d == -1 {
			if infer >= 0 {
				panic(fmt.Sprintf("engine: Reshape %v of %v has two -1 dimensions", s, t.shape))
			}
			infer = i
			continue
		}
		known *= d
	}
	if infer >= 0 && known > 0 {
		s[infer] = t.Numel() / known
	}
	if s.Numel() != t.Numel() {
		panic(fmt.Sprintf("engine: cannot reshape %v (%d elements) to %v", t.shape, t.Numel(), Shape(shape)))
	}
	return &Tensor{buf: t.buf, off: t.off, shape: s, dtype: t.dtype}
}

// MustShape panics, naming the op, when t's shape differs from want. It is
// how ops check their arguments: a wrong shape is a programmer's mistake.
func MustShape(op, name string, t *Tensor, want ...int) {
	if !t.shape.Equal(want) {
		panic(fmt.Sprintf("engine: %s: %s has shape %v, want %v", op, name, t.shape, Shape(want)))
	}
}

// MustDType panics, naming the op, when t's dtype is none of want.
func MustDType(op, name string, t *Tensor, want ...DType) {
	for _, d := range want {
		if t.dtype == d {
			return
		}
	}
	panic(fmt.Sprintf("engine: %s: %s has dtype %v, want one of %v", op, name, t.dtype, want))
}

// MustSameShape panics, naming the op and both shapes, when a and b differ.
func MustSameShape(op string, a, b *Tensor) {
	if !a.shape.Equal(b.shape) {
		panic(fmt.Sprintf("engine: %s: shape mismatch: %v vs %v", op, a.shape, b.shape))
	}
}

// Stacked returns the tensor whose consecutive row blocks ts are — a view
// of their buffer, [Σ rows, …] — when they lie end to end in one buffer in
// that order, with one dtype and row shape; otherwise nil.
func Stacked(ts ...*Tensor) *Tensor {
	if len(ts) == 0 || ts[0] == nil || ts[0].Rank() == 0 {
		return nil
	}
	first := ts[0]
	off := first.off
	rows := 0
	for _, t := range ts {
		if t == nil || t.buf != first.buf || t.dtype != first.dtype || t.Rank() != first.Rank() ||
			!t.shape[1:].Equal(first.shape[1:]) || t.off != off {
			return nil
		}
		off += t.Bytes()
		rows += t.shape[0]
	}
	shape := append(Shape{rows}, first.shape[1:]...)
	return &Tensor{buf: first.buf, off: first.off, shape: shape, dtype: first.dtype}
}
