package safetensors_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/safetensors"
)

// raw assembles a file from a header and data, as the format lays it out.
func raw(hdr string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	b = append(b, hdr...)
	return append(b, data...)
}

// seq returns n bytes 0, 1, 2, ... (mod 251).
func seq(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}

func sampleTensors() []safetensors.Tensor {
	return []safetensors.Tensor{
		{Name: "model.embed_tokens.weight", DType: safetensors.BF16, Shape: []int64{3, 4}, Data: seq(24)},
		{Name: "scalar", DType: safetensors.F32, Shape: []int64{}, Data: seq(4)},
		{Name: "empty", DType: safetensors.F16, Shape: []int64{0, 5}, Data: []byte{}},
		{Name: "ids <&> ü", DType: safetensors.I64, Shape: []int64{2}, Data: seq(16)},
		{Name: "flags", DType: safetensors.BOOL, Shape: []int64{3}, Data: []byte{0, 1, 1}},
		{Name: "f64", DType: safetensors.F64, Shape: []int64{1, 1, 1}, Data: seq(8)},
	}
}

var sampleMeta = map[string]string{"format": "pt", `quote"and\slash`: "<tag> & ü"}

func encode(t testing.TB, tensors []safetensors.Tensor, meta map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, tensors, meta); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// checkTensors compares what r holds with want, bit for bit and in order.
func checkTensors(t *testing.T, r safetensors.Reader, want []safetensors.Tensor) {
	t.Helper()
	var names []string
	for _, w := range want {
		names = append(names, w.Name)
	}
	if got := r.Names(); !reflect.DeepEqual(got, names) {
		t.Errorf("Names() = %q, want %q", got, names)
	}
	for _, w := range want {
		data, info, err := r.Data(w.Name)
		if err != nil {
			t.Errorf("Data(%q): %v", w.Name, err)
			continue
		}
		if !bytes.Equal(data, w.Data) {
			t.Errorf("Data(%q) = %v, want %v", w.Name, data, w.Data)
		}
		wantInfo := safetensors.TensorInfo{DType: w.DType, Shape: w.Shape, Size: int64(len(w.Data))}
		if info.DType != wantInfo.DType || !slicesEqual(info.Shape, wantInfo.Shape) || info.Size != wantInfo.Size {
			t.Errorf("Data(%q) info = %v, want %v", w.Name, info, wantInfo)
		}
		if i2, ok := r.Info(w.Name); !ok || i2.DType != info.DType || !slicesEqual(i2.Shape, info.Shape) || i2.Size != info.Size {
			t.Errorf("Info(%q) = %v, %v; want %v", w.Name, i2, ok, info)
		}
		if r.Location(w.Name) == "" {
			t.Errorf("Location(%q) is empty", w.Name)
		}
	}
	if _, ok := r.Info("absent"); ok {
		t.Error(`Info("absent") found a tensor`)
	}
	if _, _, err := r.Data("absent"); err == nil || !strings.Contains(err.Error(), `"absent"`) {
		t.Errorf(`Data("absent") error = %v, want one naming the tensor`, err)
	}
}

// slicesEqual compares shapes, treating nil and empty alike.
func slicesEqual(a, b []int64) bool {
	return len(a) == len(b) && (len(a) == 0 || reflect.DeepEqual(a, b))
}

func TestWriteParseRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		tensors []safetensors.Tensor
		meta    map[string]string
	}{
		{"sample", sampleTensors(), sampleMeta},
		{"no metadata", sampleTensors()[:2], nil},
		{"empty file", nil, nil},
		{"metadata only", nil, map[string]string{"k": "v"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := encode(t, tt.tensors, tt.meta)
			n := binary.LittleEndian.Uint64(b)
			if n%8 != 0 {
				t.Errorf("header length %d is not a multiple of 8", n)
			}
			f, err := safetensors.Parse(b, "x.safetensors")
			if err != nil {
				t.Fatal(err)
			}
			checkTensors(t, f, tt.tensors)
			if len(tt.meta) == 0 && f.Metadata != nil || len(tt.meta) > 0 && !reflect.DeepEqual(f.Metadata, tt.meta) {
				t.Errorf("Metadata = %v, want %v", f.Metadata, tt.meta)
			}
			if f.HeaderSize != int64(n) {
				t.Errorf("HeaderSize = %d, want %d", f.HeaderSize, n)
			}
			// Writing what was read gives the same bytes.
			var again []safetensors.Tensor
			for _, name := range f.Names() {
				d, info, _ := f.Data(name)
				again = append(again, safetensors.Tensor{Name: name, DType: info.DType, Shape: info.Shape, Data: d})
			}
			if b2 := encode(t, again, f.Metadata); !bytes.Equal(b, b2) {
				t.Errorf("rewriting the parsed file changed it:\n%q\n%q", b, b2)
			}
		})
	}
}

// TestSpecLayout checks the byte layout against the format's description,
// built here by hand: the reader accepts a hand-made file with its tensors
// listed out of data order and the JSON spread over lines, and the writer
// produces exactly the expected bytes.
func TestSpecLayout(t *testing.T) {
	// Two tensors: "b" F32 [2] = {1.0, -2.5} at [0, 8), "a" BF16 [1, 2] =
	// {1.0, -2.0} at [8, 12).
	data := []byte{
		0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x20, 0xc0, // 1.0f, -2.5f
		0x80, 0x3f, 0x00, 0xc0, // bf16 1.0, -2.0
	}
	hdr := "{\n  \"a\": {\"shape\": [1, 2], \"dtype\": \"BF16\", \"data_offsets\": [8, 12]},\n" +
		"  \"__metadata__\": {\"format\": \"pt\"},\n  \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}\n}   "
	f, err := safetensors.Parse(raw(hdr, data), "hand.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Names(); !reflect.DeepEqual(got, []string{"b", "a"}) {
		t.Errorf("Names() = %q, want data order [b a]", got)
	}
	b, _, _ := f.Data("b")
	if x, y := math.Float32frombits(binary.LittleEndian.Uint32(b)), math.Float32frombits(binary.LittleEndian.Uint32(b[4:])); x != 1 || y != -2.5 {
		t.Errorf("b = %v, %v; want 1, -2.5", x, y)
	}
	a, info, _ := f.Data("a")
	if x, y := binary.LittleEndian.Uint16(a), binary.LittleEndian.Uint16(a[2:]); x != 0x3f80 || y != 0xc000 || info.DType != safetensors.BF16 {
		t.Errorf("a = %#x, %#x (%v); want bf16 0x3f80, 0xc000", x, y, info.DType)
	}
	if f.Metadata["format"] != "pt" {
		t.Errorf("Metadata = %v", f.Metadata)
	}

	// The writer's output, byte by byte: the length, the compact header
	// padded with spaces to a multiple of 8, then the data.
	wantHdr := `{"__metadata__":{"format":"pt"},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},` +
		`"a":{"dtype":"BF16","shape":[1,2],"data_offsets":[8,12]}}`
	for len(wantHdr)%8 != 0 {
		wantHdr += " "
	}
	got := encode(t, []safetensors.Tensor{
		{Name: "b", DType: "F32", Shape: []int64{2}, Data: data[:8]},
		{Name: "a", DType: "BF16", Shape: []int64{1, 2}, Data: data[8:]},
	}, map[string]string{"format": "pt"})
	if want := raw(wantHdr, data); !bytes.Equal(got, want) {
		t.Errorf("Write:\n got %q\nwant %q", got, want)
	}
}

func TestParseErrors(t *testing.T) {
	f32 := func(name string, begin, end int, shape string) string {
		return `"` + name + `":{"dtype":"F32","shape":` + shape + `,"data_offsets":[` + strconv.Itoa(begin) + `,` + strconv.Itoa(end) + `]}`
	}
	d8 := make([]byte, 8)
	tests := []struct {
		name string
		file []byte
		want string
	}{
		{"empty", nil, "0 bytes, too short"},
		{"seven bytes", make([]byte, 7), "7 bytes, too short"},
		{"huge header length", binary.LittleEndian.AppendUint64(nil, 1<<62), "exceeds the limit"},
		{"header past end", append(binary.LittleEndian.AppendUint64(nil, 100), "{}"...), "header length 100 exceeds the 2 bytes"},
		{"zero header", raw("", nil), "header length 0 is too short"},
		{"not an object", raw(`["a"]`, nil), "does not start with '{'"},
		{"leading space", raw(` {}`, nil), "does not start with '{'"},
		{"invalid utf-8", raw("{\"\xff\":1}", nil), "not valid UTF-8"},
		{"malformed", raw(`{"a":`, nil), "JSON"},
		{"missing colon", raw(`{"a" 1}`, nil), "malformed JSON"},
		{"unterminated", raw(`{"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]}`, d8[:4]), "JSON"},
		{"trailing garbage", raw(`{} x`, nil), "after the JSON object"},
		{"two objects", raw(`{}{}`, nil), "after the JSON object"},
		{"duplicate tensor", raw(`{`+f32("a", 0, 4, "[1]")+`,`+f32("a", 4, 8, "[1]")+`}`, d8), `duplicate tensor "a"`},
		{"duplicate metadata", raw(`{"__metadata__":{},"__metadata__":{}}`, nil), `duplicate key "__metadata__"`},
		{"metadata number", raw(`{"__metadata__":{"k":1}}`, nil), "must map strings to strings"},
		{"metadata array", raw(`{"__metadata__":[]}`, nil), "must map strings to strings"},
		{"entry not object", raw(`{"a":5}`, nil), `tensor "a": entry must be an object`},
		{"entry null", raw(`{"a":null}`, nil), `tensor "a": missing dtype`},
		{"missing dtype", raw(`{"a":{"shape":[1],"data_offsets":[0,4]}}`, d8[:4]), `tensor "a": missing dtype`},
		{"missing shape", raw(`{"a":{"dtype":"F32","data_offsets":[0,4]}}`, d8[:4]), `tensor "a": missing shape`},
		{"missing offsets", raw(`{"a":{"dtype":"F32","shape":[1]}}`, d8[:4]), `tensor "a": missing data_offsets`},
		{"dtype number", raw(`{"a":{"dtype":3,"shape":[1],"data_offsets":[0,4]}}`, d8[:4]), `tensor "a"`},
		{"unknown dtype", raw(`{"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,4]}}`, d8[:4]), `unknown or unsupported dtype "Q4"`},
		{"lower-case dtype", raw(`{"a":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}}`, d8[:4]), `dtype "f32"`},
		{"negative dim", raw(`{`+f32("a", 0, 4, "[-1]")+`}`, d8[:4]), "shape[0]: -1 is not a non-negative integer"},
		{"fractional dim", raw(`{`+f32("a", 0, 4, "[1.5]")+`}`, d8[:4]), "shape[0]: 1.5 is not"},
		{"exponent dim", raw(`{`+f32("a", 0, 4, "[1e0]")+`}`, d8[:4]), "shape[0]: 1e0 is not"},
		{"string dim", raw(`{`+f32("a", 0, 4, `["1"]`)+`}`, d8[:4]), `shape[0]: "1" is not`},
		{"huge dim", raw(`{`+f32("a", 0, 4, "[99999999999999999999]")+`}`, d8[:4]), "too large"},
		{"shape not array", raw(`{`+f32("a", 0, 4, `3`)+`}`, d8[:4]), `tensor "a": entry must be an object`},
		{"overflow", raw(`{`+f32("a", 0, 4, "[4294967296,4294967296]")+`}`, d8[:4]), "overflows"},
		{"offsets count", raw(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}}`, d8[:4]), "data_offsets has 1 elements, want 2"},
		{"negative offset", raw(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}}`, d8[:4]), "data_offsets[0]: -4 is not"},
		{"end before begin", raw(`{`+f32("a", 4, 0, "[0]")+`}`, d8[:4]), "end before they begin"},
		{"past end", raw(`{`+f32("a", 0, 8, "[2]")+`}`, d8[:4]), "run past the end of the data (4 bytes)"},
		{"huge offset", raw(`{`+f32("a", 1<<62, 1<<62+4, "[1]")+`}`, d8[:4]), "run past the end"},
		{"lying shape", raw(`{`+f32("a", 0, 4, "[2]")+`}`, d8[:4]), "span 4 bytes, but F32[2] needs 8"},
		{"overlap", raw(`{`+f32("a", 0, 8, "[2]")+`,`+f32("b", 4, 8, "[1]")+`}`, d8), `tensor "b": data [4, 8) overlaps tensor "a"`},
		{"same range", raw(`{`+f32("a", 0, 4, "[1]")+`,`+f32("b", 0, 4, "[1]")+`}`, d8[:4]), "overlaps"},
		{"empty inside another", raw(`{`+f32("a", 0, 8, "[2]")+`,`+f32("e", 4, 4, "[0]")+`}`, d8), `tensor "e"`},
		{"gap at start", raw(`{`+f32("a", 4, 8, "[1]")+`}`, d8), "gap of 4 bytes after the header"},
		{"gap between", raw(`{`+f32("a", 0, 4, "[1]")+`,`+f32("b", 6, 10, "[1]")+`}`, make([]byte, 10)), `tensor "b": data starts at 6, leaving a gap of 2 bytes after tensor "a"`},
		{"trailing data", raw(`{`+f32("a", 0, 4, "[1]")+`}`, d8), `4 bytes of data after tensor "a"`},
		{"data without tensors", raw(`{}`, d8), "8 bytes of data after the header"},
	}
	for _, tt := range tests {
		f, err := safetensors.Parse(tt.file, "")
		if err == nil {
			t.Errorf("%s: Parse succeeded with tensors %q, want an error containing %q", tt.name, f.Names(), tt.want)
			continue
		}
		const prefix = "safetensors: (memory): "
		if !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %q, want one starting %q and containing %q", tt.name, err, prefix, tt.want)
		}
	}
}

// TestTruncated parses every prefix of a valid file: all but the whole must
// fail cleanly.
func TestTruncated(t *testing.T) {
	b := encode(t, sampleTensors(), sampleMeta)
	for n := 0; n < len(b); n++ {
		if _, err := safetensors.Parse(b[:n], "t"); err == nil {
			t.Fatalf("a %d-byte prefix of a %d-byte file parsed", n, len(b))
		}
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	want := sampleTensors()
	if err := safetensors.WriteFile(path, want, sampleMeta); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("directory holds %d entries after WriteFile, want 1 (no temporary files)", len(ents))
	}
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	checkTensors(t, f, want)
	if f.Location(want[0].Name) != path {
		t.Errorf("Location = %q, want %q", f.Location(want[0].Name), path)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, _, err := f.Data(want[0].Name); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Data after Close: error %v, want one saying the file is closed", err)
	}

	short := filepath.Join(dir, "short.safetensors")
	os.WriteFile(short, []byte{1, 2, 3}, 0o644)
	lying := filepath.Join(dir, "lying.safetensors")
	os.WriteFile(lying, raw(`{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`, make([]byte, 8)), 0o644)
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "absent.safetensors"), "no such file"},
		{short, short + ": file is 3 bytes, too short"},
		{lying, lying + `: tensor "w": data_offsets [0, 16] run past the end`},
		{dir, "not a regular file"},
	} {
		if _, err := safetensors.Open(tc.path); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%s): error %v, want one containing %q", filepath.Base(tc.path), err, tc.want)
		}
	}
}

func TestWriteErrors(t *testing.T) {
	good := func() safetensors.Tensor {
		return safetensors.Tensor{Name: "a", DType: safetensors.F32, Shape: []int64{2}, Data: make([]byte, 8)}
	}
	with := func(f func(*safetensors.Tensor)) []safetensors.Tensor {
		x := good()
		f(&x)
		return []safetensors.Tensor{x}
	}
	loadErr := os.ErrPermission
	tests := []struct {
		name    string
		tensors []safetensors.Tensor
		meta    map[string]string
		want    string
	}{
		{"duplicate", []safetensors.Tensor{good(), good()}, nil, `duplicate tensor name "a"`},
		{"empty name", with(func(x *safetensors.Tensor) { x.Name = "" }), nil, "empty tensor name"},
		{"reserved name", with(func(x *safetensors.Tensor) { x.Name = "__metadata__" }), nil, "reserved"},
		{"bad utf-8 name", with(func(x *safetensors.Tensor) { x.Name = "\xff" }), nil, "not valid UTF-8"},
		{"bad utf-8 metadata", []safetensors.Tensor{good()}, map[string]string{"k": "\xfe"}, "not valid UTF-8"},
		{"unknown dtype", with(func(x *safetensors.Tensor) { x.DType = "F4" }), nil, `unknown dtype "F4"`},
		{"negative dim", with(func(x *safetensors.Tensor) { x.Shape = []int64{-2} }), nil, "negative"},
		{"short data", with(func(x *safetensors.Tensor) { x.Data = x.Data[:4] }), nil, "4 bytes of data, want 8"},
		{"no data", with(func(x *safetensors.Tensor) { x.Data = nil }), nil, "0 bytes of data, want 8"},
		{"load short", with(func(x *safetensors.Tensor) {
			x.Data = nil
			x.Load = func() ([]byte, error) { return make([]byte, 3), nil }
		}), nil, "Load gave 3 bytes, want 8"},
		{"load error", with(func(x *safetensors.Tensor) {
			x.Data = nil
			x.Load = func() ([]byte, error) { return nil, loadErr }
		}), nil, loadErr.Error()},
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "keep.safetensors")
	if err := safetensors.WriteFile(path, []safetensors.Tensor{good()}, nil); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	for _, tt := range tests {
		err := safetensors.Write(&bytes.Buffer{}, tt.tensors, tt.meta)
		if err == nil || !strings.HasPrefix(err.Error(), "safetensors: write: ") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Write error %v, want one containing %q", tt.name, err, tt.want)
		}
		err = safetensors.WriteFile(path, tt.tensors, tt.meta)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: WriteFile error %v, want one naming the file and containing %q", tt.name, err, tt.want)
		}
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Error("a failed WriteFile changed the existing file")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("failed writes left %d entries in the directory, want 1", len(ents))
	}
}

// TestLoad checks that Load supplies data lazily, once per tensor.
func TestLoad(t *testing.T) {
	calls := 0
	tensors := sampleTensors()
	lazy := make([]safetensors.Tensor, len(tensors))
	for i, x := range tensors {
		lazy[i] = x
		lazy[i].Data = nil
		lazy[i].Load = func() ([]byte, error) { calls++; return x.Data, nil }
	}
	if got, want := encode(t, lazy, nil), encode(t, tensors, nil); !bytes.Equal(got, want) {
		t.Error("writing through Load gave different bytes")
	}
	if calls != len(tensors) {
		t.Errorf("Load called %d times for %d tensors", calls, len(tensors))
	}
}

// FuzzOpen checks that no input makes Parse panic or allocate without
// bound, and that whatever parses writes back to the same bytes whenever it
// was written by Write in the first place, and to a file that parses again
// otherwise.
func FuzzOpen(f *testing.F) {
	valid := encode(f, sampleTensors(), sampleMeta)
	f.Add(valid)
	for _, n := range []int{0, 8, 9, 20, len(valid) / 2, len(valid) - 1} {
		f.Add(valid[:n])
	}
	f.Add(raw(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[0],"data_offsets":[4,4]}}`, make([]byte, 4)))
	f.Add(raw(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, make([]byte, 4)))
	f.Add(raw(`{"__metadata__":{"a":"b"},"x":{"dtype":"BOOL","shape":[],"data_offsets":[0,1]}}`, []byte{1}))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := safetensors.Parse(data, "fuzz")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "safetensors: fuzz: ") {
				t.Errorf("error %q lacks the prefix naming the file", err)
			}
			return
		}
		var tensors []safetensors.Tensor
		for _, name := range g.Names() {
			b, info, err := g.Data(name)
			if err != nil {
				t.Fatalf("Data(%q) of a parsed file: %v", name, err)
			}
			if int64(len(b)) != info.Size || info.Size != info.Elements()*int64(info.DType.Size()) {
				t.Fatalf("Data(%q): %d bytes, info %v size %d", name, len(b), info, info.Size)
			}
			tensors = append(tensors, safetensors.Tensor{Name: name, DType: info.DType, Shape: info.Shape, Data: b})
		}
		var w bytes.Buffer
		if err := safetensors.Write(&w, tensors, g.Metadata); err != nil {
			if name := firstEmptyName(tensors); name {
				return // the reader accepts an empty name, the writer does not
			}
			t.Fatalf("Write of a parsed file: %v", err)
		}
		h, err := safetensors.Parse(w.Bytes(), "again")
		if err != nil {
			t.Fatalf("Parse of a written file: %v", err)
		}
		if !reflect.DeepEqual(h.Names(), g.Names()) {
			t.Fatalf("names changed: %q → %q", g.Names(), h.Names())
		}
		var w2 bytes.Buffer
		safetensors.Write(&w2, tensors, h.Metadata)
		if !bytes.Equal(w.Bytes(), w2.Bytes()) {
			t.Fatal("writing a parsed written file changed its bytes")
		}
	})
}

func firstEmptyName(ts []safetensors.Tensor) bool {
	for _, t := range ts {
		if t.Name == "" {
			return true
		}
	}
	return false
}
