package safetensors

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/turnwise/turnwise/internal/outfile"
)

// Tensor is a tensor to write.
type Tensor struct {
	// Name is the tensor's name: non-empty, valid UTF-8, unique, and not
	// "__metadata__".
	Name string
	// DType is the element type.
	DType DType
	// Shape lists the dimensions, outermost first.
	Shape []int64
	// Data holds the tensor's bytes, little-endian and row-major; its
	// length must match the dtype and shape.
	Data []byte
	// Load, when Data is nil, supplies the bytes instead: it is called
	// once, when the writer reaches the tensor, so that a checkpoint can be
	// written from device memory without holding it all on the host.
	Load func() ([]byte, error)
}

// size returns the number of bytes t's data takes, checking its fields.
func (t *Tensor) size() (int64, error) {
	switch {
	case t.Name == "":
		return 0, errors.New("empty tensor name")
	case t.Name == MetadataKey:
		return 0, fmt.Errorf("tensor name %q is reserved", t.Name)
	case !utf8.ValidString(t.Name):
		return 0, fmt.Errorf("tensor name %q is not valid UTF-8", t.Name)
	}
	es := t.DType.Size()
	if es == 0 {
		return 0, fmt.Errorf("tensor %q: unknown dtype %q", t.Name, t.DType)
	}
	n, err := elements(t.Shape, es)
	if err != nil {
		return 0, fmt.Errorf("tensor %q: %v", t.Name, err)
	}
	size := n * int64(es)
	if t.Data != nil && int64(len(t.Data)) != size {
		return 0, fmt.Errorf("tensor %q: %d bytes of data, want %d for %s%v", t.Name, len(t.Data), size, t.DType, t.Shape)
	}
	return size, nil
}

// data returns t's bytes, calling Load when Data is nil.
func (t *Tensor) data(size int64) ([]byte, error) {
	if t.Data != nil || t.Load == nil {
		if int64(len(t.Data)) != size {
			return nil, fmt.Errorf("tensor %q: %d bytes of data, want %d", t.Name, len(t.Data), size)
		}
		return t.Data, nil
	}
	b, err := t.Load()
	if err != nil {
		return nil, fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	if int64(len(b)) != size {
		return nil, fmt.Errorf("tensor %q: Load gave %d bytes, want %d for %s%v", t.Name, len(b), size, t.DType, t.Shape)
	}
	return b, nil
}

// header returns the JSON header for tensors and metadata, padded with
// spaces to a multiple of 8 bytes, and each tensor's data size.
func header(tensors []Tensor, metadata map[string]string) ([]byte, []int64, error) {
	sizes := make([]int64, len(tensors))
	seen := make(map[string]bool, len(tensors))
	for i := range tensors {
		t := &tensors[i]
		size, err := t.size()
		if err != nil {
			return nil, nil, err
		}
		if seen[t.Name] {
			return nil, nil, fmt.Errorf("duplicate tensor name %q", t.Name)
		}
		seen[t.Name] = true
		sizes[i] = size
	}
	var h bytes.Buffer
	h.WriteByte('{')
	if len(metadata) > 0 {
		keys := make([]string, 0, len(metadata))
		for k, v := range metadata {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				return nil, nil, fmt.Errorf("metadata %q: not valid UTF-8", k)
			}
			keys = append(keys, k)
		}
		slices.Sort(keys)
		appendString(&h, MetadataKey)
		h.WriteString(":{")
		for i, k := range keys {
			if i > 0 {
				h.WriteByte(',')
			}
			appendString(&h, k)
			h.WriteByte(':')
			appendString(&h, metadata[k])
		}
		h.WriteByte('}')
	}
	var off int64
	for i, t := range tensors {
		if i > 0 || len(metadata) > 0 {
			h.WriteByte(',')
		}
		appendString(&h, t.Name)
		h.WriteString(`:{"dtype":`)
		appendString(&h, string(t.DType))
		h.WriteString(`,"shape":[`)
		for j, d := range t.Shape {
			if j > 0 {
				h.WriteByte(',')
			}
			h.WriteString(strconv.FormatInt(d, 10))
		}
		fmt.Fprintf(&h, `],"data_offsets":[%d,%d]}`, off, off+sizes[i])
		off += sizes[i]
	}
	h.WriteByte('}')
	for h.Len()%8 != 0 {
		h.WriteByte(' ')
	}
	if h.Len() > MaxHeaderSize {
		return nil, nil, fmt.Errorf("header of %d bytes exceeds the limit of %d", h.Len(), MaxHeaderSize)
	}
	return h.Bytes(), sizes, nil
}

// appendString appends s as a JSON string, leaving <, > and & unescaped.
func appendString(b *bytes.Buffer, s string) {
	e := json.NewEncoder(b)
	e.SetEscapeHTML(false)
	// Encoding a string cannot fail; drop the newline Encode adds.
	e.Encode(s)
	b.Truncate(b.Len() - 1)
}

// Write writes a safetensors file holding tensors, in the order given with
// contiguous data, and metadata (omitted when empty) to w. The header lists
// "__metadata__" first, then the tensors in order, and is padded with spaces
// to a multiple of 8 bytes so that the data starts aligned.
func Write(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	if err := write(w, tensors, metadata); err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	return nil
}

func write(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	h, sizes, err := header(tensors, metadata)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	bw.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(h))))
	bw.Write(h)
	for i := range tensors {
		b, err := tensors[i].data(sizes[i])
		if err != nil {
			return err
		}
		if _, err := bw.Write(b); err != nil {
			return fmt.Errorf("tensor %q: %w", tensors[i].Name, err)
		}
	}
	return bw.Flush()
}

// WriteFile writes a safetensors file to path atomically: into a temporary
// file in the same directory, synced to disk, then renamed over path. On
// error path is left as it was.
func WriteFile(path string, tensors []Tensor, metadata map[string]string) error {
	return writeAtomic(path, func(w io.Writer) error { return write(w, tensors, metadata) })
}

// writeAtomic creates path with the bytes fill writes, through a synced
// temporary file renamed into place.
func writeAtomic(path string, fill func(io.Writer) error) error {
	if err := outfile.Write(path, 0o644, fill); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	return nil
}

// ShardName returns the file name of shard k (1-based) of n, as Hugging
// Face names them: model-00001-of-00004.safetensors.
func ShardName(k, n int) string {
	return fmt.Sprintf("model-%05d-of-%05d.safetensors", k, n)
}

// isShardName reports whether name has the form ShardName gives.
func isShardName(name string) bool {
	const form = "model-#####-of-#####.safetensors"
	if len(name) != len(form) {
		return false
	}
	for i := 0; i < len(form); i++ {
		if form[i] == '#' && (name[i] < '0' || name[i] > '9') || form[i] != '#' && name[i] != form[i] {
			return false
		}
	}
	return true
}

// WriteSharded writes tensors to dir as a sharded checkpoint: shards named
// by ShardName, each holding consecutive tensors (in the order given) whose
// data totals at most maxShardBytes — a tensor larger than that gets a shard
// of its own — and every one carrying metadata; then the index,
// model.safetensors.index.json, whose "metadata" holds metadata and
// "total_size" (the data bytes of all shards) and whose "weight_map" maps
// every tensor to its shard. Each file is written atomically. Files of an
// earlier save that would be read instead of or alongside the new ones
// (model.safetensors, and shards this call did not write) are then removed.
func WriteSharded(dir string, tensors []Tensor, metadata map[string]string, maxShardBytes int64) error {
	if maxShardBytes <= 0 {
		return fmt.Errorf("safetensors: write %s: shard size %d must be positive", dir, maxShardBytes)
	}
	_, sizes, err := header(tensors, metadata)
	if err != nil {
		return fmt.Errorf("safetensors: write %s: %w", dir, err)
	}
	var groups [][]Tensor
	var cur, total int64
	for i, t := range tensors {
		if len(groups) == 0 || (cur+sizes[i] > maxShardBytes && cur > 0) {
			groups = append(groups, nil)
			cur = 0
		}
		g := &groups[len(groups)-1]
		*g = append(*g, t)
		cur += sizes[i]
		total += sizes[i]
	}
	if len(groups) == 0 {
		groups = append(groups, nil) // an empty checkpoint is one empty shard
	}
	if len(groups) > 99999 {
		return fmt.Errorf("safetensors: write %s: %d shards exceed the 5-digit file names", dir, len(groups))
	}
	idx := struct {
		Metadata  map[string]any    `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}{map[string]any{}, make(map[string]string, len(tensors))}
	for k, v := range metadata {
		idx.Metadata[k] = v
	}
	idx.Metadata["total_size"] = total
	keep := map[string]bool{IndexName: true}
	for k, g := range groups {
		name := ShardName(k+1, len(groups))
		keep[name] = true
		if err := WriteFile(filepath.Join(dir, name), g, metadata); err != nil {
			return err
		}
		for _, t := range g {
			idx.WeightMap[t.Name] = name
		}
	}
	js, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return fmt.Errorf("safetensors: write %s: index: %w", dir, err)
	}
	js = append(js, '\n')
	if err := writeAtomic(filepath.Join(dir, IndexName), func(w io.Writer) error {
		_, err := w.Write(js)
		return err
	}); err != nil {
		return err
	}
	return removeStale(dir, keep)
}

// WriteModel writes a checkpoint to dir the way Hugging Face's
// save_pretrained does: a single model.safetensors when the tensors' data
// totals at most maxShardBytes, otherwise shards and an index as
// WriteSharded writes them. maxShardBytes ≤ 0 means DefaultMaxShardBytes.
// Files of an earlier save of the other layout are removed.
func WriteModel(dir string, tensors []Tensor, metadata map[string]string, maxShardBytes int64) error {
	if maxShardBytes <= 0 {
		maxShardBytes = DefaultMaxShardBytes
	}
	_, sizes, err := header(tensors, metadata)
	if err != nil {
		return fmt.Errorf("safetensors: write %s: %w", dir, err)
	}
	var total int64
	for _, s := range sizes {
		total += s
	}
	if total > maxShardBytes {
		return WriteSharded(dir, tensors, metadata, maxShardBytes)
	}
	if err := WriteFile(filepath.Join(dir, SingleName), tensors, metadata); err != nil {
		return err
	}
	return removeStale(dir, map[string]bool{SingleName: true})
}

// removeStale removes the checkpoint files in dir (model.safetensors, its
// index, and shards) that keep does not list.
func removeStale(dir string, keep map[string]bool) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	for _, e := range ents {
		n := e.Name()
		if keep[n] || !e.Type().IsRegular() {
			continue
		}
		if n == SingleName || n == IndexName || isShardName(n) {
			if err := os.Remove(filepath.Join(dir, n)); err != nil {
				return fmt.Errorf("safetensors: removing a file of an earlier save: %w", err)
			}
		}
	}
	return nil
}
