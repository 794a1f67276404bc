package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"sort"
)

// Tensor is a tensor to write: its description and its data.
type Tensor struct {
	// Name is the tensor's name; names must be unique.
	Name string
	// Dims are the dimensions in ggml order (Dims[0] varies fastest).
	Dims []uint64
	// Type is the element type.
	Type TensorType
	// Data holds the tensor's bytes, little-endian; its length must match
	// the type and dimensions.
	Data []byte
}

// Write writes a version 3 GGUF file holding meta and tensors to w. Metadata
// keys are written in sorted order, tensors in the order given, each tensor's
// data aligned to general.alignment from meta (a uint32) or DefaultAlignment.
// Metadata values must be of the Go types listed in the package comment.
func Write(w io.Writer, meta map[string]any, tensors []Tensor) error {
	align := int64(DefaultAlignment)
	if v, ok := meta[AlignmentKey]; ok {
		a, ok := v.(uint32)
		if !ok || !isPow2(uint64(a)) {
			return fmt.Errorf("gguf: write: %q must be a uint32 power of two, got %v (%s)", AlignmentKey, v, typeName(v))
		}
		align = int64(a)
	}
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)

	offsets := make([]int64, len(tensors))
	seen := make(map[string]bool, len(tensors))
	var next int64
	for i, t := range tensors {
		size, err := tensorSize(t.Type, t.Dims)
		if err != nil {
			return fmt.Errorf("gguf: write: tensor %q: %w", t.Name, err)
		}
		if int64(len(t.Data)) != size {
			return fmt.Errorf("gguf: write: tensor %q: %d bytes of data, want %d for %v %v", t.Name, len(t.Data), size, t.Type, t.Dims)
		}
		if seen[t.Name] {
			return fmt.Errorf("gguf: write: duplicate tensor name %q", t.Name)
		}
		seen[t.Name] = true
		offsets[i] = next
		next = alignUp(next+size, align)
	}

	e := &encoder{w: bufio.NewWriter(w)}
	e.raw([]byte(Magic))
	e.u32(3)
	e.u64(uint64(len(tensors)))
	e.u64(uint64(len(keys)))
	for _, k := range keys {
		e.str(k)
		if err := e.value(meta[k], 0, true); err != nil {
			return fmt.Errorf("gguf: write: metadata key %q: %w", k, err)
		}
	}
	for i, t := range tensors {
		e.str(t.Name)
		e.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			e.u64(d)
		}
		e.u32(uint32(t.Type))
		e.u64(uint64(offsets[i]))
	}
	if len(tensors) > 0 {
		// Without tensors there is no data section to align, and a huge
		// alignment would only write zeros.
		e.pad(align)
	}
	start := e.n
	for i, t := range tensors {
		e.pad64(start + offsets[i])
		e.raw(t.Data)
	}
	if e.err == nil {
		e.err = e.w.Flush()
	}
	if e.err != nil {
		return fmt.Errorf("gguf: write: %w", e.err)
	}
	return nil
}

// encoder writes little-endian values, remembering the first error and the
// number of bytes written.
type encoder struct {
	w   *bufio.Writer
	n   int64
	err error
	buf [8]byte
}

func (e *encoder) raw(p []byte) {
	if e.err != nil {
		return
	}
	var n int
	n, e.err = e.w.Write(p)
	e.n += int64(n)
}

func (e *encoder) u8(v uint8) { e.buf[0] = v; e.raw(e.buf[:1]) }
func (e *encoder) u16(v uint16) {
	binary.LittleEndian.PutUint16(e.buf[:], v)
	e.raw(e.buf[:2])
}
func (e *encoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.buf[:], v)
	e.raw(e.buf[:4])
}
func (e *encoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.buf[:], v)
	e.raw(e.buf[:8])
}
func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	e.raw([]byte(s))
}

// pad writes zeros up to the next multiple of align.
func (e *encoder) pad(align int64) { e.pad64(alignUp(e.n, align)) }

// pad64 writes zeros until n bytes have been written.
func (e *encoder) pad64(n int64) {
	for e.n < n && e.err == nil {
		e.u8(0)
	}
}

// value writes v, preceded by its type tag when tagged is set.
func (e *encoder) value(v any, depth int, tagged bool) error {
	t, elem, ok := valueTypeOf(v)
	if !ok {
		return fmt.Errorf("unsupported Go type %T", v)
	}
	if tagged {
		e.u32(uint32(t))
	}
	switch x := v.(type) {
	case uint8:
		e.u8(x)
	case int8:
		e.u8(uint8(x))
	case uint16:
		e.u16(x)
	case int16:
		e.u16(uint16(x))
	case uint32:
		e.u32(x)
	case int32:
		e.u32(uint32(x))
	case float32:
		e.u32(math.Float32bits(x))
	case bool:
		if x {
			e.u8(1)
		} else {
			e.u8(0)
		}
	case string:
		e.str(x)
	case uint64:
		e.u64(x)
	case int64:
		e.u64(uint64(x))
	case float64:
		e.u64(math.Float64bits(x))
	case []any:
		if depth+1 >= maxArrayDepth {
			return fmt.Errorf("arrays nested more than %d deep", maxArrayDepth)
		}
		e.u32(uint32(elem))
		e.u64(uint64(len(x)))
		for i, a := range x {
			if at, _, _ := valueTypeOf(a); at != TypeArray {
				return fmt.Errorf("element %d of an array of arrays is a %T", i, a)
			}
			if err := e.value(a, depth+1, false); err != nil {
				return fmt.Errorf("element %d: %w", i, err)
			}
		}
	case []uint8:
		e.u32(uint32(elem))
		writeSlice(e, x, e.u8)
	case []int8:
		e.u32(uint32(elem))
		writeSlice(e, x, func(v int8) { e.u8(uint8(v)) })
	case []uint16:
		e.u32(uint32(elem))
		writeSlice(e, x, e.u16)
	case []int16:
		e.u32(uint32(elem))
		writeSlice(e, x, func(v int16) { e.u16(uint16(v)) })
	case []uint32:
		e.u32(uint32(elem))
		writeSlice(e, x, e.u32)
	case []int32:
		e.u32(uint32(elem))
		writeSlice(e, x, func(v int32) { e.u32(uint32(v)) })
	case []float32:
		e.u32(uint32(elem))
		writeSlice(e, x, func(v float32) { e.u32(math.Float32bits(v)) })
	case []bool:
		e.u32(uint32(elem))
		writeSlice(e, x, func(v bool) {
			if v {
				e.u8(1)
			} else {
				e.u8(0)
			}
		})
	case []string:
		e.u32(uint32(elem))
		writeSlice(e, x, e.str)
	case []uint64:
		e.u32(uint32(elem))
		writeSlice(e, x, e.u64)
	case []int64:
		e.u32(uint32(elem))
		writeSlice(e, x, func(v int64) { e.u64(uint64(v)) })
	case []float64:
		e.u32(uint32(elem))
		writeSlice(e, x, func(v float64) { e.u64(math.Float64bits(v)) })
	}
	return nil
}

// writeSlice writes the length of s and then each element with put.
func writeSlice[T any](e *encoder, s []T, put func(T)) {
	e.u64(uint64(len(s)))
	for _, v := range s {
		put(v)
	}
}
