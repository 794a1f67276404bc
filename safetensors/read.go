package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/turnwise/turnwise/internal/jsonerr"
)

// File is one parsed safetensors file. Its metadata and tensor descriptions
// are plain Go values that stay valid after Close; the byte slices Data
// returns point into the file's memory mapping and are valid only until
// Close. Its methods may be called from several goroutines at once, except
// Close, which must not overlap them.
type File struct {
	// Name is the path the file was opened from, or the name given to
	// Parse; it labels error messages.
	Name string
	// Metadata holds the header's "__metadata__" strings (nil when absent).
	Metadata map[string]string
	// HeaderSize is the header's length in bytes (N); the data starts at
	// byte 8+N of the file.
	HeaderSize int64

	buf     []byte // the whole file
	unmap   func() error
	closed  bool
	names   []string // in data order
	tensors map[string]entry
}

// entry locates one tensor in a file.
type entry struct {
	info  TensorInfo
	begin int64 // within the data section
	order int   // position in the header, to break ties between empty tensors
}

// Open opens and validates the safetensors file at path. It maps the file
// into memory where the platform allows (otherwise it reads it); call Close
// to release it. The file must not be truncated while it is open.
func Open(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	size := st.Size()
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("safetensors: %s: not a regular file", path)
	}
	if size < 8 {
		return nil, fmt.Errorf("safetensors: %s: file is %d bytes, too short for the 8-byte header length", path, size)
	}
	if int64(int(size)) != size {
		return nil, fmt.Errorf("safetensors: %s: file of %d bytes is too large for this platform", path, size)
	}
	buf, unmap, err := mapFile(fd, int(size))
	if err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w", path, err)
	}
	f, err := parse(path, buf)
	if err != nil {
		unmap()
		return nil, err
	}
	f.unmap = unmap
	return f, nil
}

// readFile reads size bytes of fd, for platforms or file systems without
// memory mapping.
func readFile(fd *os.File, size int) ([]byte, func() error, error) {
	buf := make([]byte, size)
	if _, err := io.ReadFull(io.NewSectionReader(fd, 0, int64(size)), buf); err != nil {
		return nil, nil, fmt.Errorf("reading %d bytes: %w", size, err)
	}
	return buf, func() error { return nil }, nil
}

// Parse parses and validates a safetensors file held in memory; name labels
// error messages ("" gives "(memory)"). The File's tensor data aliases data,
// which must not be modified while the File is in use.
func Parse(data []byte, name string) (*File, error) {
	return parse(name, data)
}

// Names lists the tensors in the order of their data.
func (f *File) Names() []string { return slices.Clone(f.names) }

// Info describes the named tensor.
func (f *File) Info(name string) (TensorInfo, bool) {
	e, ok := f.tensors[name]
	if !ok {
		return TensorInfo{}, false
	}
	return e.info.clone(), true
}

// Data returns the named tensor's bytes and description. The slice aliases
// the file's read-only mapping: it must not be modified, and it is valid only
// until Close.
func (f *File) Data(name string) ([]byte, TensorInfo, error) {
	e, ok := f.tensors[name]
	if !ok {
		return nil, TensorInfo{}, fmt.Errorf("safetensors: %s: no tensor named %q", f.label(), name)
	}
	if f.closed {
		return nil, TensorInfo{}, fmt.Errorf("safetensors: %s: reading tensor %q: file is closed", f.label(), name)
	}
	start := 8 + f.HeaderSize + e.begin
	end := start + e.info.Size
	return f.buf[start:end:end], e.info.clone(), nil
}

// Location returns the file's name when it holds the named tensor.
func (f *File) Location(name string) string {
	if _, ok := f.tensors[name]; !ok {
		return ""
	}
	return f.label()
}

// Close releases the file's memory mapping. Slices returned by Data must
// not be used afterwards. Closing twice is harmless.
func (f *File) Close() error {
	if f.closed {
		return nil
	}
	f.closed = true
	f.buf = nil
	if f.unmap != nil {
		if err := f.unmap(); err != nil {
			return fmt.Errorf("safetensors: %s: unmapping: %w", f.label(), err)
		}
	}
	return nil
}

// label names the file in error messages.
func (f *File) label() string { return label(f.Name) }

func label(name string) string {
	if name == "" {
		return "(memory)"
	}
	return name
}

// rawEntry is a tensor's header entry as JSON gives it; pointers tell absent
// fields from empty ones, and numbers stay raw so that parseCount can insist
// on non-negative integers.
type rawEntry struct {
	DType   *string            `json:"dtype"`
	Shape   *[]json.RawMessage `json:"shape"`
	Offsets *[]json.RawMessage `json:"data_offsets"`
}

// parse validates buf, a whole safetensors file, and indexes its tensors.
func parse(name string, buf []byte) (*File, error) {
	f := &File{Name: name, buf: buf}
	fail := func(format string, args ...any) (*File, error) {
		return nil, fmt.Errorf("safetensors: %s: "+format, append([]any{f.label()}, args...)...)
	}
	if len(buf) < 8 {
		return fail("file is %d bytes, too short for the 8-byte header length", len(buf))
	}
	n := binary.LittleEndian.Uint64(buf)
	avail := uint64(len(buf) - 8)
	switch {
	case n > MaxHeaderSize:
		return fail("header length %d exceeds the limit of %d bytes", n, MaxHeaderSize)
	case n > avail:
		return fail("header length %d exceeds the %d bytes that follow it", n, avail)
	case n < 2:
		return fail("header length %d is too short for a JSON object", n)
	}
	f.HeaderSize = int64(n)
	hdr := buf[8 : 8+n]
	dataLen := int64(avail - n)
	if hdr[0] != '{' {
		return fail("header does not start with '{' (byte 0x%02x)", hdr[0])
	}
	if !utf8.Valid(hdr) {
		return fail("header is not valid UTF-8")
	}

	dec := json.NewDecoder(bytes.NewReader(hdr))
	if _, err := dec.Token(); err != nil { // the '{' checked above
		return fail("header: %v", err)
	}
	f.tensors = make(map[string]entry)
	seenMeta := false
	var order []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fail("header: %v", jsonerr.Reword(err))
		}
		key, ok := tok.(string)
		if !ok { // the decoder only yields strings as object keys
			return fail("header: object key %v is not a string", tok)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fail("header: value of %q: %v", key, jsonerr.Reword(err))
		}
		if key == MetadataKey {
			if seenMeta {
				return fail("header: duplicate key %q", key)
			}
			seenMeta = true
			if err := json.Unmarshal(raw, &f.Metadata); err != nil {
				return fail("header: %s must map strings to strings: %v", MetadataKey, jsonerr.Reword(err))
			}
			continue
		}
		if _, dup := f.tensors[key]; dup {
			return fail("header: duplicate tensor %q", key)
		}
		e, err := parseEntry(raw, dataLen)
		if err != nil {
			return fail("tensor %q: %v", key, err)
		}
		e.order = len(order)
		f.tensors[key] = e
		order = append(order, key)
	}
	if _, err := dec.Token(); err != nil { // '}'
		return fail("header: %v", jsonerr.Reword(err))
	}
	if tok, err := dec.Token(); err != io.EOF {
		if err != nil {
			return fail("header: after the JSON object: %v", jsonerr.Reword(err))
		}
		return fail("header: unexpected %v after the JSON object", tok)
	}

	// The tensors must tile the data section: sorted by offset, each starts
	// where the previous one ended, and the last ends at the end of the file.
	slices.SortFunc(order, func(a, b string) int {
		ea, eb := f.tensors[a], f.tensors[b]
		if ea.begin != eb.begin {
			return cmpInt(ea.begin, eb.begin)
		}
		if ea.info.Size != eb.info.Size { // empty tensors first
			return cmpInt(ea.info.Size, eb.info.Size)
		}
		return ea.order - eb.order
	})
	var pos int64
	prev := ""
	for _, k := range order {
		e := f.tensors[k]
		switch {
		case e.begin < pos:
			return fail("tensor %q: data [%d, %d) overlaps tensor %q, which ends at %d", k, e.begin, e.begin+e.info.Size, prev, pos)
		case e.begin > pos:
			return fail("tensor %q: data starts at %d, leaving a gap of %d bytes after %s", k, e.begin, e.begin-pos, after(prev))
		}
		pos = e.begin + e.info.Size
		prev = k
	}
	if pos != dataLen {
		return fail("%d bytes of data after %s, which should end the file", dataLen-pos, after(prev))
	}
	f.names = order
	return f, nil
}

// after describes the end of the previous tensor for gap messages.
func after(prev string) string {
	if prev == "" {
		return "the header"
	}
	return fmt.Sprintf("tensor %q", prev)
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// parseEntry checks one tensor's header entry against the dtype's size and
// the data section's length.
func parseEntry(raw json.RawMessage, dataLen int64) (entry, error) {
	var r rawEntry
	if err := json.Unmarshal(raw, &r); err != nil {
		return entry{}, fmt.Errorf("entry must be an object with dtype, shape and data_offsets: %v", jsonerr.Reword(err))
	}
	switch {
	case r.DType == nil:
		return entry{}, errors.New("missing dtype")
	case r.Shape == nil:
		return entry{}, errors.New("missing shape")
	case r.Offsets == nil:
		return entry{}, errors.New("missing data_offsets")
	}
	dt := DType(*r.DType)
	size := dt.Size()
	if size == 0 {
		return entry{}, fmt.Errorf("unknown or unsupported dtype %q", *r.DType)
	}
	shape := make([]int64, len(*r.Shape))
	for i, v := range *r.Shape {
		d, err := parseCount(v)
		if err != nil {
			return entry{}, fmt.Errorf("shape[%d]: %v", i, err)
		}
		shape[i] = d
	}
	if len(*r.Offsets) != 2 {
		return entry{}, fmt.Errorf("data_offsets has %d elements, want 2", len(*r.Offsets))
	}
	begin, err := parseCount((*r.Offsets)[0])
	if err != nil {
		return entry{}, fmt.Errorf("data_offsets[0]: %v", err)
	}
	end, err := parseCount((*r.Offsets)[1])
	if err != nil {
		return entry{}, fmt.Errorf("data_offsets[1]: %v", err)
	}
	n, err := elements(shape, size)
	if err != nil {
		return entry{}, err
	}
	nbytes := n * int64(size)
	switch {
	case end < begin:
		return entry{}, fmt.Errorf("data_offsets [%d, %d] end before they begin", begin, end)
	case end > dataLen:
		return entry{}, fmt.Errorf("data_offsets [%d, %d] run past the end of the data (%d bytes)", begin, end, dataLen)
	case end-begin != nbytes:
		return entry{}, fmt.Errorf("data_offsets [%d, %d] span %d bytes, but %s%v needs %d", begin, end, end-begin, dt, shape, nbytes)
	}
	return entry{info: TensorInfo{DType: dt, Shape: shape, Size: nbytes}, begin: begin}, nil
}

// parseCount parses a JSON number that must be a non-negative integer
// fitting an int64.
func parseCount(raw json.RawMessage) (int64, error) {
	s := string(raw)
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, fmt.Errorf("%.40s is not a non-negative integer", s)
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Errorf("%.40s is too large", s)
		}
		return 0, fmt.Errorf("%.40s is not a non-negative integer", s)
	}
	return v, nil
}
