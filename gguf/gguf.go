// Package gguf reads and writes GGUF files, the single-file model format of
// ggml and llama.cpp: a header, typed metadata key/value pairs, tensor
// descriptions, and an aligned data section holding the tensors.
//
// Open maps a file into memory and validates its structure: every length and
// count is checked against the file size before anything is allocated, so a
// corrupt or lying header gives an error, never a panic or a huge allocation;
// and no two tensors' data may overlap, so the tensors of a file never claim
// more bytes than it holds.
// Tensor data is handed out as byte slices into the mapping, without copying.
//
// Versions 2 and 3 of the format are read (they differ only in that version 3
// may be big-endian, which is not supported); Write produces version 3.
//
// Metadata values are held as Go values: the scalar types uint8, int8,
// uint16, int16, uint32, int32, uint64, int64, float32, float64, bool and
// string; arrays as slices of those ([]uint32, []string, ...); and arrays of
// arrays as []any whose elements are such slices.
package gguf

import (
	"errors"
	"fmt"
)

// Magic is the four bytes every GGUF file starts with.
const Magic = "GGUF"

// DefaultAlignment is the alignment of the data section and of tensor
// offsets when the metadata has no general.alignment key.
const DefaultAlignment = 32

// AlignmentKey is the metadata key that overrides DefaultAlignment.
const AlignmentKey = "general.alignment"

// MaxDims is the largest number of dimensions a tensor may have.
const MaxDims = 4

// maxArrayDepth bounds the nesting of arrays of arrays.
const maxArrayDepth = 8

// ErrKeyNotFound is returned, wrapped, by the metadata getters when the key
// is absent, so that callers can tell an optional key from a malformed one
// with errors.Is.
var ErrKeyNotFound = errors.New("metadata key not found")

// TensorInfo describes one tensor of a file.
type TensorInfo struct {
	// Name is the tensor's name, unique within the file.
	Name string
	// Dims are the tensor's dimensions in ggml order: Dims[0] varies
	// fastest (it is the row length of a matrix).
	Dims []uint64
	// Type is the element type.
	Type TensorType
	// Offset is where the tensor's data starts, relative to the start of
	// the data section; it is a multiple of the file's alignment.
	Offset uint64
	// Size is the number of bytes the tensor's data takes.
	Size int64
}

// Elements returns the number of elements of the tensor, the product of its
// dimensions.
func (t TensorInfo) Elements() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= int64(d)
	}
	return n
}

// String returns a short description such as "blk.0.attn_q.weight F32 [64 64]".
func (t TensorInfo) String() string {
	return fmt.Sprintf("%s %v %v", t.Name, t.Type, t.Dims)
}

// tensorSize returns the number of bytes a tensor of type typ and the given
// dimensions takes, checking that the dimensions fit the type's blocks and
// that nothing overflows.
func tensorSize(typ TensorType, dims []uint64) (int64, error) {
	l, ok := tensorLayouts[typ]
	if !ok {
		return 0, fmt.Errorf("unknown tensor type %d", uint32(typ))
	}
	if len(dims) == 0 || len(dims) > MaxDims {
		return 0, fmt.Errorf("%d dimensions, want 1 to %d", len(dims), MaxDims)
	}
	const limit = 1 << 62
	n := uint64(1)
	for _, d := range dims {
		if d > limit {
			return 0, fmt.Errorf("dimension %d too large", d)
		}
		if d != 0 && n > limit/d {
			return 0, fmt.Errorf("dimensions %v overflow", dims)
		}
		n *= d
	}
	if dims[0]%uint64(l.blockSize) != 0 {
		return 0, fmt.Errorf("first dimension %d is not a multiple of the %s block size %d", dims[0], l.name, l.blockSize)
	}
	blocks := n / uint64(l.blockSize)
	if blocks > limit/uint64(l.typeSize) {
		return 0, fmt.Errorf("dimensions %v overflow", dims)
	}
	return int64(blocks * uint64(l.typeSize)), nil
}

func isPow2(n uint64) bool { return n != 0 && n&(n-1) == 0 }
