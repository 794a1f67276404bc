package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/turnwise/turnwise/internal/jsonerr"
)

// maxIndexSize bounds the index file this package reads.
const maxIndexSize = MaxHeaderSize

// Sharded is a checkpoint split over several safetensors files in one
// directory, tied together by an index. Only the tensors the index maps are
// visible, each read from the shard the index names.
type Sharded struct {
	// Index is the path of the index file.
	Index string
	// Metadata is the index's "metadata" object (Hugging Face records
	// "total_size" there), with JSON numbers as float64.
	Metadata map[string]any
	// Shards are the shard files, in file name order.
	Shards []*File

	names []string
	where map[string]*File
}

// indexJSON is the layout of model.safetensors.index.json.
type indexJSON struct {
	Metadata  map[string]any    `json:"metadata"`
	WeightMap map[string]string `json:"weight_map"`
}

// OpenIndex opens a sharded checkpoint: dir is the directory holding
// model.safetensors.index.json, or the path of an index file. Each shard the
// index names is opened once and validated, and every tensor the index maps
// must be present in its shard. Call Close to release the shards.
func OpenIndex(dir string) (*Sharded, error) {
	path := dir
	if st, err := os.Stat(dir); err == nil && st.IsDir() {
		path = filepath.Join(dir, IndexName)
	}
	fail := func(format string, args ...any) (*Sharded, error) {
		return nil, fmt.Errorf("safetensors: %s: "+format, append([]any{path}, args...)...)
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	if st.Size() > maxIndexSize {
		return fail("index of %d bytes exceeds the limit of %d", st.Size(), maxIndexSize)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	var idx indexJSON
	if err := json.Unmarshal(raw, &idx); err != nil {
		return fail("index: %v", jsonerr.Reword(err))
	}
	if idx.WeightMap == nil {
		return fail("index has no weight_map")
	}
	if len(idx.WeightMap) == 0 {
		return fail("index's weight_map is empty")
	}
	var files []string
	for tensor, file := range idx.WeightMap {
		if !isPlainName(file) {
			return fail("weight_map maps tensor %q to %q, which is not a file name in the index's directory", tensor, file)
		}
		files = append(files, file)
	}
	slices.Sort(files)
	files = slices.Compact(files)

	s := &Sharded{Index: path, Metadata: idx.Metadata, where: make(map[string]*File, len(idx.WeightMap))}
	byName := make(map[string]*File, len(files))
	for _, file := range files {
		f, err := Open(filepath.Join(filepath.Dir(path), file))
		if err != nil {
			s.Close()
			return nil, err // names the shard
		}
		s.Shards = append(s.Shards, f)
		byName[file] = f
	}
	for _, f := range s.Shards {
		for _, name := range f.names {
			if byName[idx.WeightMap[name]] == f {
				s.names = append(s.names, name)
				s.where[name] = f
			}
		}
	}
	if len(s.names) != len(idx.WeightMap) {
		var missing []string
		for tensor, file := range idx.WeightMap {
			if _, ok := s.where[tensor]; !ok {
				missing = append(missing, fmt.Sprintf("%q (in %s)", tensor, file))
			}
		}
		slices.Sort(missing)
		s.Close()
		more := ""
		if len(missing) > 5 {
			more = fmt.Sprintf(" and %d more", len(missing)-5)
			missing = missing[:5]
		}
		return fail("the index maps tensors their shards do not hold: %s%s", strings.Join(missing, ", "), more)
	}
	return s, nil
}

// isPlainName reports whether name is a file name without directories.
func isPlainName(name string) bool {
	return name != "" && name != "." && name != ".." && filepath.Base(name) == name &&
		!strings.ContainsAny(name, `/\`) && filepath.IsLocal(name)
}

// Names lists the mapped tensors, shard by shard in file name order and in
// data order within a shard.
func (s *Sharded) Names() []string { return slices.Clone(s.names) }

// Info describes the named tensor.
func (s *Sharded) Info(name string) (TensorInfo, bool) {
	f, ok := s.where[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Info(name)
}

// Data returns the named tensor's bytes, from its shard's mapping (valid
// until Close), and its description.
func (s *Sharded) Data(name string) ([]byte, TensorInfo, error) {
	f, ok := s.where[name]
	if !ok {
		return nil, TensorInfo{}, fmt.Errorf("safetensors: %s: the index maps no tensor named %q", s.Index, name)
	}
	return f.Data(name)
}

// Location returns the path of the shard that holds the named tensor.
func (s *Sharded) Location(name string) string {
	if f, ok := s.where[name]; ok {
		return f.label()
	}
	return ""
}

// Close closes every shard. Closing twice is harmless.
func (s *Sharded) Close() error {
	var errs []error
	for _, f := range s.Shards {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}

// OpenModel opens a checkpoint in any of the layouts Hugging Face uses: path
// is a .safetensors file, an index file, or a directory holding either
// model.safetensors or model.safetensors.index.json (the single file wins
// when both are present, as in Hugging Face's loader).
func OpenModel(path string) (Reader, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	var r Reader
	switch single, index := filepath.Join(path, SingleName), filepath.Join(path, IndexName); {
	case !st.IsDir() && strings.HasSuffix(path, ".json"):
		r, err = OpenIndex(path)
	case !st.IsDir():
		r, err = Open(path)
	case exists(single):
		r, err = Open(single)
	case exists(index):
		r, err = OpenIndex(index)
	default:
		return nil, fmt.Errorf("safetensors: %s: no %s or %s in the directory", path, SingleName, IndexName)
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
