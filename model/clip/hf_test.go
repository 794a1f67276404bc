package clip

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/safetensors"
)

// vitB32Config is the vision part of openai/clip-vit-base-patch32's
// config.json (its other fields omitted).
const vitB32Config = `{
  "architectures": ["CLIPModel"],
  "model_type": "clip",
  "projection_dim": 512,
  "text_config": {"hidden_size": 512, "model_type": "clip_text_model"},
  "vision_config": {
    "hidden_act": "quick_gelu", "hidden_size": 768, "image_size": 224, "intermediate_size": 3072,
    "layer_norm_eps": 1e-05, "model_type": "clip_vision_model", "num_attention_heads": 12,
    "num_channels": 3, "num_hidden_layers": 12, "patch_size": 32, "projection_dim": 512
  }
}`

func TestParseConfig(t *testing.T) {
	small := Config{Hidden: 64, FFN: 128, Layers: 2, Heads: 4, Patch: 32, ImageSize: 224, Projection: 32, NormEps: 1e-5}
	for _, tc := range []struct {
		name, json string
		want       Config
		err        string // a substring of the error; "" for none
	}{
		{"ViT-B/32", vitB32Config, ViTB32, ""},
		{"defaults", `{"model_type": "clip", "vision_config": {}}`, ViTB32, ""},
		{"vision model", `{"model_type": "clip_vision_model", "hidden_size": 64, "intermediate_size": 128,
			"num_hidden_layers": 2, "num_attention_heads": 4, "projection_dim": 32}`, small, ""},
		{"no model_type", `{}`, Config{}, "model_type is missing"},
		{"llama", `{"model_type": "llama"}`, Config{}, `model_type is "llama"`},
		{"no vision_config", `{"model_type": "clip"}`, Config{}, "vision_config is missing"},
		{"gelu", `{"model_type": "clip", "vision_config": {"hidden_act": "gelu"}}`, Config{}, `vision_config.hidden_act is "gelu"`},
		{"heads", `{"model_type": "clip", "vision_config": {"num_attention_heads": 7}}`, Config{}, "vision_config.hidden_size = 768 is not a multiple of vision_config.num_attention_heads = 7"},
		{"patch", `{"model_type": "clip", "vision_config": {"patch_size": 30}}`, Config{}, "vision_config.image_size = 224 is not a multiple"},
		{"projection", `{"model_type": "clip", "projection_dim": 0, "vision_config": {}}`, Config{}, "projection_dim = 0, must be positive"},
		{"layers", `{"model_type": "clip", "vision_config": {"num_hidden_layers": -1}}`, Config{}, "vision_config.num_hidden_layers = -1"},
		{"eps", `{"model_type": "clip", "vision_config": {"layer_norm_eps": 0}}`, Config{}, "layer_norm_eps = 0"},
		{"channels", `{"model_type": "clip", "vision_config": {"num_channels": 1}}`, Config{}, "num_channels = 1"},
		{"type", `{"model_type": "clip", "vision_config": {"hidden_size": "768"}}`, Config{}, "vision_config.hidden_size is a JSON string"},
		{"syntax", `{"model_type": `, Config{}, "malformed JSON"},
		{"image size", `{"model_type": "clip", "vision_config": {"image_size": 8192, "patch_size": 32}}`, Config{}, "vision_config.image_size = 8192 exceeds 4096"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseConfig([]byte(tc.json))
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			case tc.err == "" && got != tc.want:
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// copyCheckpoint writes the golden checkpoint into a new directory with
// edit applied to its tensors (nil: unchanged) and config.json replaced by
// cfg when not empty, and returns the directory.
func copyCheckpoint(t *testing.T, cfg string, edit func(ts []safetensors.Tensor) []safetensors.Tensor) string {
	t.Helper()
	dir := t.TempDir()
	f, err := safetensors.Open(filepath.Join(testdataDir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ts []safetensors.Tensor
	for _, name := range f.Names() {
		data, info, err := f.Data(name)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, safetensors.Tensor{Name: name, DType: info.DType, Shape: info.Shape, Data: append([]byte(nil), data...)})
	}
	if edit != nil {
		ts = edit(ts)
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), ts, nil); err != nil {
		t.Fatal(err)
	}
	if cfg == "" {
		raw, err := os.ReadFile(filepath.Join(testdataDir, ConfigName))
		if err != nil {
			t.Fatal(err)
		}
		cfg = string(raw)
	}
	if err := os.WriteFile(filepath.Join(dir, ConfigName), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// without drops the tensor named name.
func without(name string) func([]safetensors.Tensor) []safetensors.Tensor {
	return func(ts []safetensors.Tensor) []safetensors.Tensor {
		var out []safetensors.Tensor
		for _, x := range ts {
			if x.Name != name {
				out = append(out, x)
			}
		}
		return out
	}
}

// reshaped gives the tensor named name a new shape and zero data.
func reshaped(name string, dt safetensors.DType, shape ...int64) func([]safetensors.Tensor) []safetensors.Tensor {
	return func(ts []safetensors.Tensor) []safetensors.Tensor {
		for i := range ts {
			if ts[i].Name == name {
				n := int64(dt.Size())
				for _, d := range shape {
					n *= d
				}
				ts[i] = safetensors.Tensor{Name: name, DType: dt, Shape: shape, Data: make([]byte, n)}
			}
		}
		return ts
	}
}

func TestLoadErrors(t *testing.T) {
	b := cpu.New(cpu.Options{})
	small := `{"model_type": "clip", "projection_dim": 32, "vision_config": {"hidden_size": 64,
		"intermediate_size": 128, "num_attention_heads": 4, "num_hidden_layers": %s}}`
	for _, tc := range []struct {
		name string
		dir  func(t *testing.T) string
		err  []string // substrings of the error
	}{
		{"no directory given", func(*testing.T) string { return "" },
			[]string{"no CLIP weights directory given", "without them there is no metric"}},
		{"absent directory", func(t *testing.T) string { return filepath.Join(t.TempDir(), "clip") },
			[]string{"CLIP weights directory", "no such file", "without them there is no metric"}},
		{"no config", func(t *testing.T) string { return t.TempDir() }, []string{"config.json"}},
		{"no weights", func(t *testing.T) string {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, ConfigName), []byte(vitB32Config), 0o644)
			return dir
		}, []string{"no model.safetensors"}},
		{"missing tensor", func(t *testing.T) string {
			return copyCheckpoint(t, "", without("vision_model.encoder.layers.1.mlp.fc2.bias"))
		}, []string{"tensor vision_model.encoder.layers.1.mlp.fc2.bias is missing", "needs one of shape [64]"}},
		{"wrong shape", func(t *testing.T) string {
			return copyCheckpoint(t, "", reshaped("vision_model.encoder.layers.0.mlp.fc1.weight", safetensors.F32, 96, 64))
		}, []string{"model.safetensors: tensor vision_model.encoder.layers.0.mlp.fc1.weight has shape [96, 64]", "intermediate_size gives 128 where the tensor has 96"}},
		{"patch rank", func(t *testing.T) string {
			return copyCheckpoint(t, "", reshaped("vision_model.embeddings.patch_embedding.weight", safetensors.F16, 64, 3072))
		}, []string{"patch_embedding.weight has shape [64, 3072]", "needs [64, 3, 32, 32]"}},
		{"integer weights", func(t *testing.T) string {
			return copyCheckpoint(t, "", reshaped("visual_projection.weight", safetensors.I32, 32, 64))
		}, []string{"visual_projection.weight is stored as I32"}},
		{"more layers than stored", func(t *testing.T) string {
			return copyCheckpoint(t, strings.Replace(small, "%s", "1000000000", 1), nil)
		}, []string{"num_hidden_layers = 1000000000", "hold 2 encoder layers"}},
		{"wider than stored", func(t *testing.T) string {
			return copyCheckpoint(t, strings.Replace(strings.Replace(small, "%s", "2", 1), `"hidden_size": 64`, `"hidden_size": 640`, 1), nil)
		}, []string{"hidden_size gives 640"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Load(b, tc.dir(t))
			if err == nil {
				m.Close()
				t.Fatal("no error")
			}
			for _, s := range tc.err {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

// TestLoadWidensHalf checks that the F16 patch weights of the golden file
// load as their exact f32 values.
func TestLoadWidensHalf(t *testing.T) {
	b := cpu.New(cpu.Options{})
	m, err := Load(b, testdataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	f, err := safetensors.Open(filepath.Join(testdataDir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, info, err := f.Data("vision_model.embeddings.patch_embedding.weight")
	if err != nil || info.DType != safetensors.F16 {
		t.Fatalf("golden patch weights: %v, %v", info, err)
	}
	got := engine.ToF32(b, m.Weights.PatchEmbed)
	for i := range got {
		h := binary.LittleEndian.Uint16(data[2*i:])
		if want := engine.F16ToF32(h); math.Float32bits(got[i]) != math.Float32bits(want) {
			t.Fatalf("element %d: %g, want %g", i, got[i], want)
		}
	}
}

func TestNewRandom(t *testing.T) {
	b := cpu.New(cpu.Options{})
	if _, err := NewRandom(b, Config{Hidden: 64, FFN: 128, Layers: 1, Heads: 5, Patch: 32, ImageSize: 224, Projection: 8, NormEps: 1e-5}, 1); err == nil {
		t.Error("NewRandom with 64 wide and 5 heads: no error")
	}
	c := Config{Hidden: 32, FFN: 64, Layers: 1, Heads: 2, Patch: 16, ImageSize: 64, Projection: 8, NormEps: 1e-5}
	m, err := NewRandom(b, c, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	img := make(Pixels, 3*64*64)
	for i := range img {
		img[i] = float32(i%7) - 3
	}
	e := m.EmbedPixels([]Pixels{img, img})
	if len(e) != 2 || len(e[0]) != 8 {
		t.Fatalf("embeddings %d×%d, want 2×8", len(e), len(e[0]))
	}
	for j := range e[0] {
		if math.IsNaN(float64(e[0][j])) || e[0][j] != e[1][j] {
			t.Fatalf("element %d: %g and %g for one image twice", j, e[0][j], e[1][j])
		}
	}
}

// TestSaveHFRoundTrip saves a random tower and loads it back: the same
// configuration, and the same embeddings bit for bit.
func TestSaveHFRoundTrip(t *testing.T) {
	b := cpu.New(cpu.Options{})
	c := Config{Hidden: 32, FFN: 64, Layers: 2, Heads: 2, Patch: 16, ImageSize: 64, Projection: 8, NormEps: 1e-5}
	m, err := NewRandom(b, c, 7)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	dir := filepath.Join(t.TempDir(), "clip")
	if err := m.SaveHF(dir); err != nil {
		t.Fatal(err)
	}
	got, err := Load(b, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	if got.Config != c {
		t.Errorf("config %+v, want %+v", got.Config, c)
	}
	img := make(Pixels, 3*64*64)
	for i := range img {
		img[i] = float32(i%11)/5 - 1
	}
	want, have := m.EmbedPixels([]Pixels{img})[0], got.EmbedPixels([]Pixels{img})[0]
	for j := range want {
		if math.Float32bits(want[j]) != math.Float32bits(have[j]) {
			t.Fatalf("element %d: %g after a round trip, want %g", j, have[j], want[j])
		}
	}
}
