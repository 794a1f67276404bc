package safetensors_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/safetensors"
)

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestShardedRoundTrip(t *testing.T) {
	tensors := sampleTensors() // data sizes 24, 4, 0, 16, 3, 8
	tests := []struct {
		max    int64
		shards [][]string // tensor names per shard
	}{
		{28, [][]string{{"model.embed_tokens.weight", "scalar", "empty"}, {"ids <&> ü", "flags", "f64"}}},
		{10, [][]string{{"model.embed_tokens.weight"}, {"scalar", "empty"}, {"ids <&> ü"}, {"flags"}, {"f64"}}},
		{1 << 20, [][]string{{"model.embed_tokens.weight", "scalar", "empty", "ids <&> ü", "flags", "f64"}}},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		if err := safetensors.WriteSharded(dir, tensors, map[string]string{"format": "pt"}, tt.max); err != nil {
			t.Fatal(err)
		}
		want := []string{safetensors.IndexName}
		for k := range tt.shards {
			want = append(want, safetensors.ShardName(k+1, len(tt.shards)))
		}
		slices.Sort(want)
		if got := listDir(t, dir); !reflect.DeepEqual(got, want) {
			t.Errorf("max %d: files %q, want %q", tt.max, got, want)
		}
		var idx struct {
			Metadata  map[string]any
			WeightMap map[string]string `json:"weight_map"`
		}
		js, _ := os.ReadFile(filepath.Join(dir, safetensors.IndexName))
		if err := json.Unmarshal(js, &idx); err != nil {
			t.Fatal(err)
		}
		if idx.Metadata["total_size"] != float64(55) || idx.Metadata["format"] != "pt" {
			t.Errorf("max %d: index metadata %v, want total_size 55 and format pt", tt.max, idx.Metadata)
		}
		for k, names := range tt.shards {
			for _, n := range names {
				if got := idx.WeightMap[n]; got != safetensors.ShardName(k+1, len(tt.shards)) {
					t.Errorf("max %d: weight_map[%q] = %q, want shard %d", tt.max, n, got, k+1)
				}
			}
		}
		for _, path := range []string{dir, filepath.Join(dir, safetensors.IndexName)} {
			s, err := safetensors.OpenIndex(path)
			if err != nil {
				t.Fatal(err)
			}
			checkTensors(t, s, tensors)
			if len(s.Shards) != len(tt.shards) {
				t.Errorf("max %d: %d shards open, want %d", tt.max, len(s.Shards), len(tt.shards))
			}
			if got := s.Location("f64"); !strings.HasSuffix(got, safetensors.ShardName(len(tt.shards), len(tt.shards))) {
				t.Errorf("Location(f64) = %q, want the last shard", got)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
		}
		r, err := safetensors.OpenModel(dir)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := r.(*safetensors.Sharded); !ok {
			t.Errorf("OpenModel of a sharded directory gave a %T", r)
		}
		checkTensors(t, r, tensors)
		r.Close()
	}
}

// TestWriteModel checks the switch between one file and shards, and that
// each save removes the other layout's files.
func TestWriteModel(t *testing.T) {
	dir := t.TempDir()
	tensors := sampleTensors()
	other := filepath.Join(dir, "config.json")
	os.WriteFile(other, []byte("{}"), 0o644)
	os.WriteFile(filepath.Join(dir, safetensors.ShardName(7, 9)), nil, 0o644) // from an older save

	if err := safetensors.WriteModel(dir, tensors, nil, 30); err != nil {
		t.Fatal(err)
	}
	want := []string{"config.json", safetensors.ShardName(1, 2), safetensors.ShardName(2, 2), safetensors.IndexName}
	if got := listDir(t, dir); !reflect.DeepEqual(got, want) {
		t.Errorf("sharded save: files %q, want %q", got, want)
	}
	if err := safetensors.WriteModel(dir, tensors, nil, 0); err != nil {
		t.Fatal(err)
	}
	want = []string{"config.json", safetensors.SingleName}
	if got := listDir(t, dir); !reflect.DeepEqual(got, want) {
		t.Errorf("single save: files %q, want %q", got, want)
	}
	for _, path := range []string{dir, filepath.Join(dir, safetensors.SingleName)} {
		r, err := safetensors.OpenModel(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := r.(*safetensors.File); !ok {
			t.Errorf("OpenModel(%s) gave a %T, want a *File", filepath.Base(path), r)
		}
		checkTensors(t, r, tensors)
		r.Close()
	}
	if err := safetensors.WriteSharded(dir, tensors, nil, 30); err != nil {
		t.Fatal(err)
	}
	if got := listDir(t, dir); slices.Contains(got, safetensors.SingleName) {
		t.Errorf("WriteSharded left %s, which loaders would read instead: %q", safetensors.SingleName, got)
	}
	if _, err := safetensors.OpenModel(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no model.safetensors") {
		t.Errorf("OpenModel of an empty directory: %v", err)
	}
	if err := safetensors.WriteSharded(dir, tensors, nil, 0); err == nil {
		t.Error("WriteSharded with shard size 0 succeeded")
	}
}

func TestIndexErrors(t *testing.T) {
	base := t.TempDir()
	one := []safetensors.Tensor{{Name: "a", DType: safetensors.U8, Shape: []int64{2}, Data: []byte{1, 2}}}
	tests := []struct {
		name  string
		index string
		want  string
	}{
		{"malformed", `{"weight_map":`, "JSON"},
		{"trailing", `{"weight_map":{"a":"s.safetensors"}} {}`, "JSON"},
		{"not an object", `[]`, "want an object"},
		{"no weight_map", `{"metadata":{}}`, "no weight_map"},
		{"empty weight_map", `{"weight_map":{}}`, "weight_map is empty"},
		{"weight_map values", `{"weight_map":{"a":1}}`, "a JSON number, want a string"},
		{"parent dir", `{"weight_map":{"a":"../s.safetensors"}}`, `tensor "a" to "../s.safetensors", which is not a file name`},
		{"absolute", `{"weight_map":{"a":"/s.safetensors"}}`, "not a file name"},
		{"missing shard", `{"weight_map":{"a":"gone.safetensors"}}`, "gone.safetensors: no such file"},
		{"missing tensor", `{"weight_map":{"a":"s.safetensors","b":"s.safetensors"}}`, `maps tensors their shards do not hold: "b" (in s.safetensors)`},
		{"corrupt shard", `{"weight_map":{"a":"bad.safetensors"}}`, "bad.safetensors: file is 3 bytes"},
	}
	for i, tt := range tests {
		dir := filepath.Join(base, strings.ReplaceAll(tt.name, " ", "_"))
		os.Mkdir(dir, 0o755)
		if err := safetensors.WriteFile(filepath.Join(dir, "s.safetensors"), one, nil); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "bad.safetensors"), []byte("bad"), 0o644)
		os.WriteFile(filepath.Join(dir, safetensors.IndexName), []byte(tt.index), 0o644)
		s, err := safetensors.OpenIndex(dir)
		if err == nil {
			t.Errorf("%d %s: OpenIndex succeeded with %q", i, tt.name, s.Names())
			s.Close()
			continue
		}
		if !strings.HasPrefix(err.Error(), "safetensors: ") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %q, want one containing %q", tt.name, err, tt.want)
		}
		if _, err := safetensors.OpenModel(dir); err == nil {
			t.Errorf("%s: OpenModel succeeded", tt.name)
		}
	}
}
