package gguf

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
)

// File is a parsed GGUF file. Its metadata and tensor descriptions are plain
// Go values that stay valid after Close; the byte slices TensorData returns
// point into the file's memory mapping and are valid only until Close.
type File struct {
	// Name is the path the file was opened from, used in error messages
	// ("" for a file parsed from memory).
	Name string
	// Version is the format version, 2 or 3.
	Version uint32
	// Meta holds the metadata values by key.
	Meta map[string]any
	// Keys lists the metadata keys in the order they appear in the file.
	Keys []string
	// Tensors describes the tensors in the order they appear in the file.
	Tensors []TensorInfo
	// Alignment is the alignment of the data section and tensor offsets.
	Alignment int64
	// DataOffset is the absolute file offset where the data section
	// starts. In a file without tensors it may lie past the end.
	DataOffset int64

	data   []byte       // the whole file
	unmap  func() error // releases data; nil for parsed memory
	closed bool
	index  map[string]int // tensor name -> index in Tensors
}

// Open opens and parses the GGUF file at path. It maps the file into memory
// where the platform allows it (otherwise it reads it); call Close to release
// it.
func Open(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	if st.IsDir() {
		return nil, fmt.Errorf("gguf: %s is a directory, not a GGUF file (a Hugging Face directory loads with --hf)", path)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("gguf: %s is not a regular file (%s)", path, st.Mode().Type())
	}
	size := st.Size()
	if size < headerSize {
		return nil, fmt.Errorf("gguf: %s: file is %d bytes, too short for a GGUF header (%d bytes)", path, size, headerSize)
	}
	if int64(int(size)) != size {
		return nil, fmt.Errorf("gguf: %s: file of %d bytes is too large for this platform", path, size)
	}
	data, unmap, err := mapFile(fd, int(size))
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: %w", path, err)
	}
	f, err := parse(path, data)
	if err != nil {
		unmap()
		return nil, err
	}
	f.unmap = unmap
	return f, nil
}

// Parse parses a GGUF file held in memory. The returned File's tensor data
// aliases data, which must not be modified while the File is in use.
func Parse(data []byte) (*File, error) {
	return parse("", data)
}

// Close releases the file's memory mapping. Slices returned by TensorData
// must not be used afterwards. Closing twice is harmless.
func (f *File) Close() error {
	if f.closed {
		return nil
	}
	f.closed = true
	f.data = nil
	if f.unmap != nil {
		if err := f.unmap(); err != nil {
			return fmt.Errorf("gguf: %s: unmapping: %w", f.Name, err)
		}
	}
	return nil
}

// Tensor returns the description of the named tensor.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	i, ok := f.index[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Tensors[i], true
}

// TensorData returns the bytes of the named tensor, little-endian as stored,
// and its description. The slice aliases the file's read-only mapping: it
// must not be modified, and it is valid only until Close.
func (f *File) TensorData(name string) ([]byte, TensorInfo, error) {
	i, ok := f.index[name]
	if !ok {
		return nil, TensorInfo{}, fmt.Errorf("gguf: %s: no tensor named %q", f.label(), name)
	}
	if f.closed {
		return nil, TensorInfo{}, fmt.Errorf("gguf: %s: reading tensor %q: file is closed", f.label(), name)
	}
	t := f.Tensors[i]
	start := f.DataOffset + int64(t.Offset)
	return f.data[start : start+t.Size : start+t.Size], t, nil
}

// label names the file in error messages.
func (f *File) label() string {
	if f.Name == "" {
		return "(memory)"
	}
	return f.Name
}

// headerSize is the size of the fixed header: magic, version, tensor count
// and metadata count.
const headerSize = 4 + 4 + 8 + 8

// decoder reads little-endian values from a byte slice, checking every read
// against its length.
type decoder struct {
	b   []byte
	off int
}

var errTruncated = errors.New("unexpected end of file")

func (d *decoder) remaining() int { return len(d.b) - d.off }

func (d *decoder) bytes(n int) ([]byte, error) {
	if n < 0 || n > d.remaining() {
		return nil, errTruncated
	}
	p := d.b[d.off : d.off+n]
	d.off += n
	return p, nil
}

func (d *decoder) u8() (uint8, error) {
	p, err := d.bytes(1)
	if err != nil {
		return 0, err
	}
	return p[0], nil
}

func (d *decoder) u16() (uint16, error) {
	p, err := d.bytes(2)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint16(p), nil
}

func (d *decoder) u32() (uint32, error) {
	p, err := d.bytes(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(p), nil
}

func (d *decoder) u64() (uint64, error) {
	p, err := d.bytes(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(p), nil
}

// count reads a uint64 count of items that each take at least minSize bytes,
// and checks that that many items can fit in what is left of the file.
func (d *decoder) count(minSize int) (int, error) {
	n, err := d.u64()
	if err != nil {
		return 0, err
	}
	if n > uint64(d.remaining()/minSize) {
		return 0, fmt.Errorf("count %d exceeds what the remaining %d bytes can hold", n, d.remaining())
	}
	return int(n), nil
}

func (d *decoder) str() (string, error) {
	n, err := d.u64()
	if err != nil {
		return "", err
	}
	if n > uint64(d.remaining()) {
		return "", fmt.Errorf("string length %d exceeds the remaining %d bytes", n, d.remaining())
	}
	p, _ := d.bytes(int(n))
	return string(p), nil
}

// parse parses a whole GGUF file held in data; name labels error messages.
func parse(name string, data []byte) (*File, error) {
	f := &File{Name: name, data: data}
	d := &decoder{b: data}
	fail := func(what string, err error) (*File, error) {
		return nil, fmt.Errorf("gguf: %s: %s at offset %d: %w", f.label(), what, d.off, err)
	}
	if len(data) < headerSize {
		return nil, fmt.Errorf("gguf: %s: file is %d bytes, too short for a GGUF header (%d bytes)", f.label(), len(data), headerSize)
	}
	if string(data[:4]) != Magic {
		return nil, fmt.Errorf("gguf: %s: bad magic %q, want %q: not a GGUF file", f.label(), data[:4], Magic)
	}
	d.off = 4
	f.Version, _ = d.u32()
	switch {
	case f.Version == 2 || f.Version == 3:
	case f.Version == 1:
		return nil, fmt.Errorf("gguf: %s: GGUF version 1 is not supported (only 2 and 3)", f.label())
	case f.Version&0xffff == 0 && f.Version != 0:
		return nil, fmt.Errorf("gguf: %s: big-endian GGUF files are not supported", f.label())
	default:
		return nil, fmt.Errorf("gguf: %s: unsupported GGUF version %d (want 2 or 3)", f.label(), f.Version)
	}
	nTensors64, _ := d.u64()
	nKV64, _ := d.u64()
	// A metadata pair takes at least 8+4+1 bytes, a tensor description at
	// least 8+4+8+4+8.
	if nKV64 > uint64(d.remaining()/13) {
		return nil, fmt.Errorf("gguf: %s: header claims %d metadata pairs, more than the %d-byte file can hold", f.label(), nKV64, len(data))
	}
	if nTensors64 > uint64(d.remaining()/32) {
		return nil, fmt.Errorf("gguf: %s: header claims %d tensors, more than the %d-byte file can hold", f.label(), nTensors64, len(data))
	}
	nKV, nTensors := int(nKV64), int(nTensors64)

	f.Meta = make(map[string]any, nKV)
	f.Keys = make([]string, 0, nKV)
	for i := range nKV {
		key, err := d.str()
		if err != nil {
			return fail(fmt.Sprintf("reading metadata key %d", i), err)
		}
		if _, dup := f.Meta[key]; dup {
			return fail("reading metadata", fmt.Errorf("duplicate key %q", key))
		}
		t, err := d.u32()
		if err != nil {
			return fail(fmt.Sprintf("reading the type of metadata key %q", key), err)
		}
		v, err := d.value(ValueType(t), 0)
		if err != nil {
			return fail(fmt.Sprintf("reading metadata key %q", key), err)
		}
		f.Meta[key] = v
		f.Keys = append(f.Keys, key)
	}

	f.Alignment = DefaultAlignment
	if v, ok := f.Meta[AlignmentKey]; ok {
		a, ok := v.(uint32)
		if !ok {
			return nil, fmt.Errorf("gguf: %s: metadata key %q has type %s, want uint32", f.label(), AlignmentKey, typeName(v))
		}
		if !isPow2(uint64(a)) {
			return nil, fmt.Errorf("gguf: %s: metadata key %q is %d, want a power of two", f.label(), AlignmentKey, a)
		}
		f.Alignment = int64(a)
	}

	f.Tensors = make([]TensorInfo, 0, nTensors)
	f.index = make(map[string]int, nTensors)
	for i := range nTensors {
		t, err := d.tensorInfo()
		if err != nil {
			return fail(fmt.Sprintf("reading tensor description %d", i), err)
		}
		if _, dup := f.index[t.Name]; dup {
			return fail("reading tensor descriptions", fmt.Errorf("duplicate tensor name %q", t.Name))
		}
		f.index[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}

	f.DataOffset = alignUp(int64(d.off), f.Alignment)
	dataSize := int64(len(data)) - f.DataOffset
	for _, t := range f.Tensors {
		if t.Offset%uint64(f.Alignment) != 0 {
			return nil, fmt.Errorf("gguf: %s: tensor %q: offset %d is not a multiple of the alignment %d", f.label(), t.Name, t.Offset, f.Alignment)
		}
		if dataSize < 0 || t.Offset > uint64(dataSize) || uint64(t.Size) > uint64(dataSize)-t.Offset {
			return nil, fmt.Errorf("gguf: %s: tensor %q: data [%d, +%d) runs past the end of the file (data section holds %d bytes)", f.label(), t.Name, t.Offset, t.Size, max(dataSize, 0))
		}
	}
	if err := checkDisjoint(f.Tensors); err != nil {
		return nil, fmt.Errorf("gguf: %s: %w", f.label(), err)
	}
	return f, nil
}

// checkDisjoint checks that no two tensors' data overlap, so that the bytes
// the tensors claim add up to no more than the file holds: a small file
// cannot describe many large tensors over the same bytes.
func checkDisjoint(ts []TensorInfo) error {
	order := make([]int, len(ts))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(ts[a].Offset, ts[b].Offset), cmp.Compare(ts[a].Size, ts[b].Size))
	})
	var end uint64 // the furthest end so far, of tensor last
	last := ""
	for _, i := range order {
		t := ts[i]
		if t.Size == 0 {
			continue
		}
		if t.Offset < end {
			return fmt.Errorf("tensor %q: data [%d, +%d) overlaps tensor %q, which ends at %d", t.Name, t.Offset, t.Size, last, end)
		}
		end, last = t.Offset+uint64(t.Size), t.Name
	}
	return nil
}

func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }

func (d *decoder) tensorInfo() (TensorInfo, error) {
	var t TensorInfo
	var err error
	if t.Name, err = d.str(); err != nil {
		return t, fmt.Errorf("name: %w", err)
	}
	nd, err := d.u32()
	if err != nil {
		return t, fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	if nd == 0 || nd > MaxDims {
		return t, fmt.Errorf("tensor %q has %d dimensions, want 1 to %d", t.Name, nd, MaxDims)
	}
	t.Dims = make([]uint64, nd)
	for j := range t.Dims {
		if t.Dims[j], err = d.u64(); err != nil {
			return t, fmt.Errorf("tensor %q: %w", t.Name, err)
		}
	}
	typ, err := d.u32()
	if err != nil {
		return t, fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	t.Type = TensorType(typ)
	if t.Offset, err = d.u64(); err != nil {
		return t, fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	if t.Size, err = tensorSize(t.Type, t.Dims); err != nil {
		return t, fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	return t, nil
}

// value reads one metadata value of type t.
func (d *decoder) value(t ValueType, depth int) (any, error) {
	switch t {
	case TypeUint8:
		return d.u8()
	case TypeInt8:
		v, err := d.u8()
		return int8(v), err
	case TypeUint16:
		return d.u16()
	case TypeInt16:
		v, err := d.u16()
		return int16(v), err
	case TypeUint32:
		return d.u32()
	case TypeInt32:
		v, err := d.u32()
		return int32(v), err
	case TypeFloat32:
		v, err := d.u32()
		return math.Float32frombits(v), err
	case TypeBool:
		v, err := d.u8()
		return v != 0, err
	case TypeString:
		return d.str()
	case TypeUint64:
		return d.u64()
	case TypeInt64:
		v, err := d.u64()
		return int64(v), err
	case TypeFloat64:
		v, err := d.u64()
		return math.Float64frombits(v), err
	case TypeArray:
		return d.array(depth)
	}
	return nil, fmt.Errorf("unknown value type %d", uint32(t))
}

// array reads an array value: element type, count, elements.
func (d *decoder) array(depth int) (any, error) {
	if depth >= maxArrayDepth {
		return nil, fmt.Errorf("arrays nested more than %d deep", maxArrayDepth)
	}
	et, err := d.u32()
	if err != nil {
		return nil, err
	}
	t := ValueType(et)
	minSize := t.scalarSize()
	switch t {
	case TypeString:
		minSize = 8
	case TypeArray:
		minSize = 12
	}
	if minSize == 0 {
		return nil, fmt.Errorf("array of unknown value type %d", et)
	}
	n, err := d.count(minSize)
	if err != nil {
		return nil, fmt.Errorf("array of %s: %w", t, err)
	}
	switch t {
	case TypeUint8:
		return scalars(d, n, 1, func(p []byte) uint8 { return p[0] }), nil
	case TypeInt8:
		return scalars(d, n, 1, func(p []byte) int8 { return int8(p[0]) }), nil
	case TypeBool:
		return scalars(d, n, 1, func(p []byte) bool { return p[0] != 0 }), nil
	case TypeUint16:
		return scalars(d, n, 2, binary.LittleEndian.Uint16), nil
	case TypeInt16:
		return scalars(d, n, 2, func(p []byte) int16 { return int16(binary.LittleEndian.Uint16(p)) }), nil
	case TypeUint32:
		return scalars(d, n, 4, binary.LittleEndian.Uint32), nil
	case TypeInt32:
		return scalars(d, n, 4, func(p []byte) int32 { return int32(binary.LittleEndian.Uint32(p)) }), nil
	case TypeFloat32:
		return scalars(d, n, 4, func(p []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(p)) }), nil
	case TypeUint64:
		return scalars(d, n, 8, binary.LittleEndian.Uint64), nil
	case TypeInt64:
		return scalars(d, n, 8, func(p []byte) int64 { return int64(binary.LittleEndian.Uint64(p)) }), nil
	case TypeFloat64:
		return scalars(d, n, 8, func(p []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(p)) }), nil
	case TypeString:
		s := make([]string, n)
		for i := range s {
			if s[i], err = d.str(); err != nil {
				return nil, fmt.Errorf("array element %d: %w", i, err)
			}
		}
		return s, nil
	default: // TypeArray
		a := make([]any, n)
		for i := range a {
			if a[i], err = d.array(depth + 1); err != nil {
				return nil, fmt.Errorf("array element %d: %w", i, err)
			}
		}
		return a, nil
	}
}

// scalars decodes n fixed-size elements of size bytes each; the caller has
// checked that they fit.
func scalars[T any](d *decoder, n, size int, get func([]byte) T) []T {
	out := make([]T, n)
	p, _ := d.bytes(n * size)
	for i := range out {
		out[i] = get(p[i*size:])
	}
	return out
}
