// Package safetensors reads and writes the Hugging Face safetensors format,
// single files and sharded checkpoints.
//
// A safetensors file is an 8-byte little-endian header length N, N bytes of
// UTF-8 JSON, then the tensor data. The JSON object maps each tensor name to
// its dtype, shape and [begin, end) byte range relative to the start of the
// data; the optional key "__metadata__" maps strings to strings. Tensors are
// stored row-major and little-endian, and their ranges tile the data exactly:
// no gaps, no overlaps, nothing after the last tensor.
//
// Open maps a file into memory and checks every field of its header before
// using it: a corrupt or lying header gives an error naming the file and the
// tensor, never a panic or an allocation larger than the file. Tensor data is
// handed out as byte slices into the mapping, without copying.
//
// A sharded checkpoint is a directory of files named
// model-00001-of-00004.safetensors and so on, with an index,
// model.safetensors.index.json, mapping every tensor name to its file.
// OpenIndex reads one; OpenModel accepts either layout. Both implement
// Reader.
package safetensors

import (
	"fmt"
	"slices"
)

// DType is an element type as the header spells it ("BF16", "F32", ...).
type DType string

// The element types of the format. All are stored little-endian.
const (
	BOOL   DType = "BOOL"    // one byte, 0 or 1
	U8     DType = "U8"      // unsigned 8-bit integer
	I8     DType = "I8"      // signed 8-bit integer
	F8E5M2 DType = "F8_E5M2" // 8-bit float, 5 exponent bits
	F8E4M3 DType = "F8_E4M3" // 8-bit float, 4 exponent bits
	F8E8M0 DType = "F8_E8M0" // 8-bit power-of-two scale
	I16    DType = "I16"     // signed 16-bit integer
	U16    DType = "U16"     // unsigned 16-bit integer
	F16    DType = "F16"     // IEEE-754 binary16
	BF16   DType = "BF16"    // bfloat16
	I32    DType = "I32"     // signed 32-bit integer
	U32    DType = "U32"     // unsigned 32-bit integer
	F32    DType = "F32"     // IEEE-754 binary32
	F64    DType = "F64"     // IEEE-754 binary64
	I64    DType = "I64"     // signed 64-bit integer
	U64    DType = "U64"     // unsigned 64-bit integer
	C64    DType = "C64"     // complex: two binary32
)

// Size returns the number of bytes of one element, or 0 for a dtype this
// package does not know (sub-byte types such as F4 included).
func (d DType) Size() int {
	switch d {
	case BOOL, U8, I8, F8E5M2, F8E4M3, F8E8M0:
		return 1
	case I16, U16, F16, BF16:
		return 2
	case I32, U32, F32:
		return 4
	case F64, I64, U64, C64:
		return 8
	}
	return 0
}

// MetadataKey is the header key that holds the file's string metadata
// rather than a tensor.
const MetadataKey = "__metadata__"

// MaxHeaderSize is the largest header this package reads or writes, in
// bytes; larger lengths are taken for corruption.
const MaxHeaderSize = 100_000_000

// IndexName is the file name of a sharded checkpoint's index, and
// SingleName that of an unsharded checkpoint, inside a model directory.
const (
	IndexName  = "model.safetensors.index.json"
	SingleName = "model.safetensors"
)

// DefaultMaxShardBytes is the shard size WriteModel uses when given none:
// 5 GB, as Hugging Face's save_pretrained does.
const DefaultMaxShardBytes = 5_000_000_000

// TensorInfo describes one tensor.
type TensorInfo struct {
	// DType is the element type.
	DType DType
	// Shape lists the dimensions, outermost first; an empty shape is a
	// scalar.
	Shape []int64
	// Size is the number of bytes of data.
	Size int64
}

// Elements returns the number of elements, the product of the dimensions.
func (t TensorInfo) Elements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// String returns a short description such as "BF16[4096 4096]".
func (t TensorInfo) String() string {
	return fmt.Sprintf("%s%v", t.DType, t.Shape)
}

func (t TensorInfo) clone() TensorInfo {
	t.Shape = slices.Clone(t.Shape)
	return t
}

// Reader is a set of named tensors: one file (*File) or a sharded
// checkpoint (*Sharded).
type Reader interface {
	// Names lists the tensors in storage order.
	Names() []string
	// Info describes the named tensor; ok is false when there is none.
	Info(name string) (info TensorInfo, ok bool)
	// Data returns the named tensor's bytes as stored (little-endian,
	// row-major) and its description. The slice aliases read-only memory:
	// it must not be modified, and it is valid only until Close.
	Data(name string) ([]byte, TensorInfo, error)
	// Location names the file that holds the named tensor, for messages
	// ("" when there is no such tensor).
	Location(name string) string
	// Close releases the memory the tensors' data lives in.
	Close() error
}

// elements returns the product of shape, checking that no dimension is
// negative and that the product times elemSize stays below 2⁶².
func elements(shape []int64, elemSize int) (int64, error) {
	const limit = 1 << 62
	n := int64(1)
	for i, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("shape %v: dimension %d is negative", shape, i)
		}
		if d != 0 && n > limit/d {
			return 0, fmt.Errorf("shape %v overflows", shape)
		}
		n *= d
	}
	if n > limit/int64(elemSize) {
		return 0, fmt.Errorf("shape %v overflows", shape)
	}
	return n, nil
}
