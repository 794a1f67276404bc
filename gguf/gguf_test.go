package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/internal/testdata"
)

// sampleMeta holds one value of every metadata type, arrays of each, and an
// array of arrays.
func sampleMeta() map[string]any {
	return map[string]any{
		"u8": uint8(200), "i8": int8(-100), "u16": uint16(60000), "i16": int16(-30000),
		"u32": uint32(4000000000), "i32": int32(-2000000000), "f32": float32(1.5),
		"bool": true, "str": "héllo", "u64": uint64(1 << 63), "i64": int64(-1 << 62),
		"f64":  math.Pi,
		"a.u8": []uint8{1, 2}, "a.i8": []int8{-1}, "a.u16": []uint16{7}, "a.i16": []int16{-7},
		"a.u32": []uint32{1, 2, 3}, "a.i32": []int32{-1, 2}, "a.f32": []float32{0.5, -2},
		"a.bool": []bool{true, false}, "a.str": []string{"a", "", "ccc"},
		"a.u64": []uint64{9}, "a.i64": []int64{-9}, "a.f64": []float64{2.5},
		"a.empty":  []string{},
		"a.nested": []any{[]uint32{1, 2}, []string{"x"}, []any{[]int8{3}}},
	}
}

// sampleTensors holds a tensor of each unquantized type and a quantized one.
func sampleTensors() []Tensor {
	f32 := make([]byte, 4*6)
	for i := range 6 {
		binary.LittleEndian.PutUint32(f32[4*i:], math.Float32bits(float32(i)+0.25))
	}
	return []Tensor{
		{Name: "a.f32", Dims: []uint64{3, 2}, Type: TypeF32, Data: f32},
		{Name: "b.f16", Dims: []uint64{5}, Type: TypeF16, Data: bytes.Repeat([]byte{0x00, 0x3c}, 5)},
		{Name: "c.bf16", Dims: []uint64{2, 1, 1, 1}, Type: TypeBF16, Data: []byte{0x80, 0x3f, 0x00, 0x40}},
		{Name: "d.q8_0", Dims: []uint64{32, 2}, Type: TypeQ8_0, Data: bytes.Repeat([]byte{7}, 68)},
	}
}

func encode(t testing.TB, meta map[string]any, tensors []Tensor) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, meta, tensors); err != nil {
		t.Fatalf("Write: %v", err)
	}
	return buf.Bytes()
}

func TestWriteParseRoundTrip(t *testing.T) {
	for _, align := range []uint32{0, 1, 64} {
		meta := sampleMeta()
		want := int64(DefaultAlignment)
		if align != 0 {
			meta[AlignmentKey] = align
			want = int64(align)
		}
		tensors := sampleTensors()
		f, err := Parse(encode(t, meta, tensors))
		if err != nil {
			t.Fatalf("align %d: Parse: %v", align, err)
		}
		if f.Version != 3 || f.Alignment != want || f.DataOffset%want != 0 {
			t.Errorf("align %d: version %d, alignment %d, data offset %d", align, f.Version, f.Alignment, f.DataOffset)
		}
		if !reflect.DeepEqual(f.Meta, meta) {
			t.Errorf("align %d: metadata differs:\n got %v\nwant %v", align, f.Meta, meta)
		}
		if len(f.Keys) != len(meta) {
			t.Errorf("align %d: %d keys, want %d", align, len(f.Keys), len(meta))
		}
		if len(f.Tensors) != len(tensors) {
			t.Fatalf("align %d: %d tensors, want %d", align, len(f.Tensors), len(tensors))
		}
		for i, wt := range tensors {
			data, info, err := f.TensorData(wt.Name)
			if err != nil {
				t.Fatalf("align %d: TensorData(%q): %v", align, wt.Name, err)
			}
			if info.Name != wt.Name || info.Type != wt.Type || !reflect.DeepEqual(info.Dims, wt.Dims) || f.Tensors[i].Name != wt.Name {
				t.Errorf("align %d: tensor %d is %v, want %s %v %v", align, i, info, wt.Name, wt.Type, wt.Dims)
			}
			if !bytes.Equal(data, wt.Data) {
				t.Errorf("align %d: tensor %q data differs", align, wt.Name)
			}
			if info.Offset%uint64(want) != 0 {
				t.Errorf("align %d: tensor %q offset %d not aligned", align, wt.Name, info.Offset)
			}
		}
	}
}

func TestTensorInfo(t *testing.T) {
	f, err := Parse(encode(t, nil, sampleTensors()))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		elements int64
		size     int64
		str      string
	}{
		{"a.f32", 6, 24, "a.f32 F32 [3 2]"},
		{"b.f16", 5, 10, "b.f16 F16 [5]"},
		{"c.bf16", 2, 4, "c.bf16 BF16 [2 1 1 1]"},
		{"d.q8_0", 64, 68, "d.q8_0 Q8_0 [32 2]"},
	}
	for _, tt := range tests {
		info, ok := f.Tensor(tt.name)
		if !ok {
			t.Fatalf("Tensor(%q) not found", tt.name)
		}
		if info.Elements() != tt.elements || info.Size != tt.size || info.String() != tt.str {
			t.Errorf("%s: elements %d size %d string %q, want %d %d %q", tt.name, info.Elements(), info.Size, info.String(), tt.elements, tt.size, tt.str)
		}
	}
	if _, ok := f.Tensor("nope"); ok {
		t.Error("Tensor(nope) found")
	}
	if _, _, err := f.TensorData("nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("TensorData(nope) error = %v, want one naming the tensor", err)
	}
}

func TestGetters(t *testing.T) {
	f, err := Parse(encode(t, sampleMeta(), nil))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		get     func() (any, error)
		want    any
		wantErr string
	}{
		{"String", func() (any, error) { return f.String("str") }, "héllo", ""},
		{"Uint32", func() (any, error) { return f.Uint32("u32") }, uint32(4000000000), ""},
		{"Uint64", func() (any, error) { return f.Uint64("u64") }, uint64(1 << 63), ""},
		{"Float32", func() (any, error) { return f.Float32("f32") }, float32(1.5), ""},
		{"Bool", func() (any, error) { return f.Bool("bool") }, true, ""},
		{"Strings", func() (any, error) { return f.Strings("a.str") }, []string{"a", "", "ccc"}, ""},
		{"Float32s", func() (any, error) { return f.Float32s("a.f32") }, []float32{0.5, -2}, ""},
		{"Int32s", func() (any, error) { return f.Int32s("a.i32") }, []int32{-1, 2}, ""},
		{"Int from int16", func() (any, error) { return f.Int("i16") }, int64(-30000), ""},
		{"Int from uint32", func() (any, error) { return f.Int("u32") }, int64(4000000000), ""},
		{"Int from huge uint64", func() (any, error) { return f.Int("u64") }, int64(0), `"u64": value 9223372036854775808 does not fit`},
		{"Int from string", func() (any, error) { return f.Int("str") }, int64(0), `"str" has type string, want an integer`},
		{"wrong scalar type", func() (any, error) { return f.Uint32("i32") }, uint32(0), `"i32" has type int32, want uint32`},
		{"wrong array type", func() (any, error) { return f.Strings("a.u32") }, []string(nil), `"a.u32" has type array of uint32, want array of string`},
		{"scalar for array", func() (any, error) { return f.Float32s("f32") }, []float32(nil), `"f32" has type float32, want array of float32`},
		{"missing", func() (any, error) { return f.String("missing.key") }, "", `"missing.key": metadata key not found`},
	}
	for _, tt := range tests {
		got, err := tt.get()
		if tt.wantErr == "" {
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("%s: got %v, %v; want %v", tt.name, got, err, tt.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.wantErr)
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: got %v with an error, want the zero value", tt.name, got)
		}
	}
	if _, err := f.Int("missing"); !errors.Is(err, ErrKeyNotFound) {
		t.Errorf("Int(missing) error %v does not wrap ErrKeyNotFound", err)
	}
}

// header builds the start of a GGUF file: magic, version and counts.
func header(version uint32, nTensors, nKV uint64) []byte {
	b := []byte(Magic)
	b = binary.LittleEndian.AppendUint32(b, version)
	b = binary.LittleEndian.AppendUint64(b, nTensors)
	return binary.LittleEndian.AppendUint64(b, nKV)
}

func appendStr(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

// kv appends a metadata pair whose value is already encoded.
func kv(b []byte, key string, typ ValueType, value ...byte) []byte {
	b = appendStr(b, key)
	b = binary.LittleEndian.AppendUint32(b, uint32(typ))
	return append(b, value...)
}

// tensorDesc appends a tensor description.
func tensorDesc(b []byte, name string, dims []uint64, typ TensorType, offset uint64) []byte {
	b = appendStr(b, name)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(dims)))
	for _, d := range dims {
		b = binary.LittleEndian.AppendUint64(b, d)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(typ))
	return binary.LittleEndian.AppendUint64(b, offset)
}

func u64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
func u32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestParseErrors(t *testing.T) {
	pad := make([]byte, 64)
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "too short for a GGUF header"},
		{"bad magic", cat([]byte("GGML"), make([]byte, 20)), "not a GGUF file"},
		{"version 1", header(1, 0, 0), "version 1 is not supported"},
		{"big endian", header(3<<24, 0, 0), "big-endian"},
		{"version 9", header(9, 0, 0), "unsupported GGUF version 9"},
		{"huge kv count", header(3, 0, 1<<62), "claims 4611686018427387904 metadata pairs"},
		{"huge tensor count", header(3, 1<<40, 0), "claims 1099511627776 tensors"},
		{"huge key length", cat(header(3, 0, 1), u64(1<<60), pad), "string length 1152921504606846976 exceeds"},
		{"huge string value", kv(header(3, 0, 1), "k", TypeString, cat(u64(1<<50), pad)...), `metadata key "k"`},
		{"huge array", kv(header(3, 0, 1), "k", TypeArray, cat(u32(uint32(TypeUint32)), u64(1<<40), pad)...), "count 1099511627776 exceeds"},
		{"huge string array", kv(header(3, 0, 1), "k", TypeArray, cat(u32(uint32(TypeString)), u64(20), pad[:100/8])...), "count 20 exceeds"},
		{"unknown value type", kv(header(3, 0, 1), "k", 13, pad...), "unknown value type 13"},
		{"unknown array type", kv(header(3, 0, 1), "k", TypeArray, cat(u32(77), u64(1), pad)...), "array of unknown value type 77"},
		{"duplicate key", kv(kv(header(3, 0, 2), "k", TypeUint8, 1), "k", TypeUint8, 2), `duplicate key "k"`},
		{"truncated value", kv(header(3, 0, 1), "k", TypeUint64, 1, 2, 3), "unexpected end of file"},
		{"alignment type", kv(header(3, 0, 1), AlignmentKey, TypeUint64, u64(32)...), "has type uint64, want uint32"},
		{"alignment not power of two", kv(header(3, 0, 1), AlignmentKey, TypeUint32, u32(24)...), "is 24, want a power of two"},
		{"alignment zero", kv(header(3, 0, 1), AlignmentKey, TypeUint32, u32(0)...), "is 0, want a power of two"},
		{"too many dims", cat(tensorDesc(header(3, 1, 0), "t", []uint64{1, 1, 1, 1, 1}, TypeF32, 0), pad), `tensor "t" has 5 dimensions`},
		{"zero dims", cat(tensorDesc(header(3, 1, 0), "t", nil, TypeF32, 0), pad), `tensor "t" has 0 dimensions`},
		{"unknown tensor type", cat(tensorDesc(header(3, 1, 0), "t", []uint64{4}, 99, 0), pad), "unknown tensor type 99"},
		{"block mismatch", cat(tensorDesc(header(3, 1, 0), "t", []uint64{16}, TypeQ8_0, 0), pad), "not a multiple of the Q8_0 block size 32"},
		{"dims overflow", cat(tensorDesc(header(3, 1, 0), "t", []uint64{1 << 40, 1 << 40}, TypeF32, 0), pad), "overflow"},
		{"misaligned offset", cat(tensorDesc(header(3, 1, 0), "t", []uint64{1}, TypeF32, 4), pad), "offset 4 is not a multiple of the alignment 32"},
		{"data past end", cat(tensorDesc(header(3, 1, 0), "t", []uint64{1000}, TypeF32, 0), pad), `tensor "t": data [0, +4000) runs past the end`},
		{"offset past end", cat(tensorDesc(header(3, 1, 0), "t", []uint64{1}, TypeF32, 1<<60), pad), "runs past the end"},
		{"duplicate tensor", cat(tensorDesc(tensorDesc(header(3, 2, 0), "t", []uint64{1}, TypeF32, 0), "t", []uint64{1}, TypeF32, 32), pad), `duplicate tensor name "t"`},
		{"overlapping tensors", cat(tensorDesc(tensorDesc(header(3, 2, 0), "t", []uint64{16}, TypeF32, 0), "u", []uint64{8}, TypeF32, 32), pad, pad), `tensor "u": data [32, +32) overlaps tensor "t", which ends at 64`},
		{"aliased tensors", cat(tensorDesc(tensorDesc(header(3, 2, 0), "t", []uint64{8}, TypeF32, 0), "u", []uint64{8}, TypeF32, 0), pad), `tensor "u": data [0, +32) overlaps tensor "t"`},
		{"overlap past an empty tensor", cat(tensorDesc(tensorDesc(tensorDesc(header(3, 3, 0), "t", []uint64{16}, TypeF32, 0), "e", []uint64{0}, TypeF32, 32), "u", []uint64{8}, TypeF32, 32), pad, pad), `tensor "u": data [32, +32) overlaps tensor "t"`},
		{"nested too deep", kv(header(3, 0, 1), "k", TypeArray, bytes.Repeat(cat(u32(uint32(TypeArray)), u64(1)), 20)...), "nested more than 8 deep"},
	}
	for _, tt := range tests {
		f, err := Parse(tt.data)
		if err == nil {
			t.Errorf("%s: Parse succeeded with %d tensors, want an error containing %q", tt.name, len(f.Tensors), tt.want)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "gguf: (memory): ") {
			t.Errorf("%s: error %q, want one starting %q and containing %q", tt.name, err, "gguf: (memory): ", tt.want)
		}
	}
}

// TestEmptyTensorsMayShareOffsets checks that the overlap check leaves
// tensors without data alone, wherever they point.
func TestEmptyTensorsMayShareOffsets(t *testing.T) {
	pad := make([]byte, 128)
	data := cat(tensorDesc(tensorDesc(tensorDesc(header(3, 3, 0), "t", []uint64{16}, TypeF32, 0), "e", []uint64{0}, TypeF32, 32), "u", []uint64{8}, TypeF32, 64), pad)
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Tensors) != 3 {
		t.Errorf("%d tensors, want 3", len(f.Tensors))
	}
}

func TestParseVersion2(t *testing.T) {
	data := encode(t, map[string]any{"k": "v"}, nil)
	binary.LittleEndian.PutUint32(data[4:], 2)
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 2 || f.Meta["k"] != "v" {
		t.Errorf("version %d, meta %v", f.Version, f.Meta)
	}
}

func TestHugeAlignmentWithoutTensors(t *testing.T) {
	data := encode(t, map[string]any{AlignmentKey: uint32(1 << 31)}, nil)
	if len(data) > 1024 {
		t.Fatalf("a file without tensors took %d bytes: the writer padded for the alignment", len(data))
	}
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if f.Alignment != 1<<31 || f.DataOffset != 1<<31 {
		t.Errorf("alignment %d, data offset %d", f.Alignment, f.DataOffset)
	}
}

func TestTruncated(t *testing.T) {
	data := encode(t, sampleMeta(), sampleTensors())
	for n := range len(data) {
		if _, err := Parse(data[:n]); err == nil {
			t.Errorf("Parse of the first %d of %d bytes succeeded", n, len(data))
		}
	}
}

func TestWriteErrors(t *testing.T) {
	tests := []struct {
		name    string
		meta    map[string]any
		tensors []Tensor
		want    string
	}{
		{"bad go type", map[string]any{"k": 3}, nil, `"k": unsupported Go type int`},
		{"bad nested", map[string]any{"k": []any{"x"}}, nil, "element 0 of an array of arrays is a string"},
		{"bad alignment", map[string]any{AlignmentKey: uint32(3)}, nil, "power of two"},
		{"data length", nil, []Tensor{{Name: "t", Dims: []uint64{2}, Type: TypeF32, Data: make([]byte, 4)}}, `"t": 4 bytes of data, want 8`},
		{"duplicate", nil, []Tensor{{Name: "t", Dims: []uint64{1}, Type: TypeI8, Data: []byte{1}}, {Name: "t", Dims: []uint64{1}, Type: TypeI8, Data: []byte{1}}}, `duplicate tensor name "t"`},
		{"unknown type", nil, []Tensor{{Name: "t", Dims: []uint64{1}, Type: 99, Data: []byte{1}}}, "unknown tensor type 99"},
	}
	for _, tt := range tests {
		err := Write(new(bytes.Buffer), tt.meta, tt.tensors)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.want)
		}
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.gguf")
	data := encode(t, sampleMeta(), sampleTensors())
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := f.TensorData("a.f32")
	if err != nil || !bytes.Equal(got, sampleTensors()[0].Data) {
		t.Errorf("TensorData(a.f32) = %v, %v", got, err)
	}
	s, err := f.String("str")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if s != "héllo" || err != nil {
		t.Errorf("String(str) = %q, %v", s, err)
	}
	if _, _, err := f.TensorData("a.f32"); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("TensorData after Close: %v, want a closed-file error", err)
	}

	short := filepath.Join(dir, "short.gguf")
	if err := os.WriteFile(short, data[:10], 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.gguf")
	if err := os.WriteFile(bad, data[:len(data)-1], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(dir, "missing.gguf"), short, bad} {
		if _, err := Open(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("Open(%s) error %v, want one naming the file", p, err)
		}
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), dir+" is a directory") {
		t.Errorf("Open(a directory) error %v, want one saying it is a directory", err)
	}
}

// TestStories260K reads a real checkpoint converted by llama.cpp's tools.
func TestStories260K(t *testing.T) {
	path := testdata.Path(t, "stories260K", "stories260K.gguf")
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if arch, err := f.String("general.architecture"); err != nil || arch != "llama" {
		t.Errorf("general.architecture = %q, %v", arch, err)
	}
	for key, want := range map[string]uint32{
		"llama.embedding_length": 64, "llama.block_count": 5, "llama.attention.head_count": 8,
		"llama.attention.head_count_kv": 4, "llama.feed_forward_length": 172, "tokenizer.ggml.bos_token_id": 1,
	} {
		if got, err := f.Uint32(key); err != nil || got != want {
			t.Errorf("%s = %d, %v; want %d", key, got, err, want)
		}
	}
	toks, err := f.Strings("tokenizer.ggml.tokens")
	if err != nil || len(toks) != 512 || toks[1] != "<s>" || toks[13] != "<0x0A>" {
		t.Errorf("tokens: %d, %v", len(toks), err)
	}
	if s, err := f.Float32s("tokenizer.ggml.scores"); err != nil || len(s) != 512 {
		t.Errorf("scores: %d, %v", len(s), err)
	}
	if s, err := f.Int32s("tokenizer.ggml.token_type"); err != nil || len(s) != 512 || s[1] != 3 || s[3] != 6 {
		t.Errorf("token types: %v, %v", s[:4], err)
	}
	if len(f.Tensors) != 48 {
		t.Errorf("%d tensors, want 48", len(f.Tensors))
	}
	data, info, err := f.TensorData("token_embd.weight")
	if err != nil {
		t.Fatal(err)
	}
	if info.Type != TypeF32 || !reflect.DeepEqual(info.Dims, []uint64{64, 512}) || len(data) != 64*512*4 {
		t.Errorf("token_embd.weight: %v, %d bytes", info, len(data))
	}

	// Writing it back gives a file that parses to the same content.
	var tensors []Tensor
	for _, ti := range f.Tensors {
		b, _, err := f.TensorData(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		tensors = append(tensors, Tensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: b})
	}
	g, err := Parse(encode(t, f.Meta, tensors))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g.Meta, f.Meta) {
		t.Error("metadata differs after a write and read")
	}
	for _, ti := range f.Tensors {
		a, _, _ := f.TensorData(ti.Name)
		b, _, err := g.TensorData(ti.Name)
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("tensor %s differs after a write and read (%v)", ti.Name, err)
		}
	}
}

// FuzzRead checks that no input makes Parse panic or allocate without
// bound, and that whatever parses writes back to a file that parses to the
// same bytes again.
func FuzzRead(f *testing.F) {
	valid := encode(f, sampleMeta(), sampleTensors())
	f.Add(valid)
	for _, n := range []int{0, 4, 23, 24, 40, len(valid) / 2, len(valid) - 1} {
		f.Add(valid[:n])
	}
	f.Add(encode(f, map[string]any{AlignmentKey: uint32(8), "x": []any{[]any{}}}, sampleTensors()[:1]))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := Parse(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "gguf: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
			return
		}
		var tensors []Tensor
		for _, ti := range g.Tensors {
			b, info, err := g.TensorData(ti.Name)
			if err != nil {
				t.Fatalf("TensorData(%q) of a parsed file: %v", ti.Name, err)
			}
			if int64(len(b)) != info.Size {
				t.Fatalf("TensorData(%q): %d bytes, want %d", ti.Name, len(b), info.Size)
			}
			tensors = append(tensors, Tensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: b})
		}
		var w1, w2 bytes.Buffer
		if err := Write(&w1, g.Meta, tensors); err != nil {
			t.Fatalf("Write of a parsed file: %v", err)
		}
		h, err := Parse(w1.Bytes())
		if err != nil {
			t.Fatalf("Parse of a written file: %v", err)
		}
		var tensors2 []Tensor
		for _, ti := range h.Tensors {
			b, _, _ := h.TensorData(ti.Name)
			tensors2 = append(tensors2, Tensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: b})
		}
		if err := Write(&w2, h.Meta, tensors2); err != nil {
			t.Fatalf("second Write: %v", err)
		}
		if !bytes.Equal(w1.Bytes(), w2.Bytes()) {
			t.Fatal("writing a parsed written file changed its bytes")
		}
	})
}
