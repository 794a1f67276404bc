package llama_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/safetensors"
)

func mustPreset(t *testing.T, name string) llama.Config {
	t.Helper()
	c, err := llama.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPresets(t *testing.T) {
	params := map[string]int64{
		"llama-3.1-8b": 8_030_261_248,
		"llama-3.2-1b": 1_235_814_400,
		"ref24M":       24_407_712,
		"tiny":         156_480,
	}
	names := llama.PresetNames()
	if !slices.Contains(names, "tiny") || len(names) != 4 {
		t.Errorf("PresetNames() = %q", names)
	}
	for _, name := range names {
		c := mustPreset(t, name)
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if want, ok := params[name]; ok && c.Params() != want {
			t.Errorf("%s: Params() = %d, want %d", name, c.Params(), want)
		}
	}
	// Each call returns its own slices and scaling.
	a := mustPreset(t, "llama-3.1-8b")
	a.EOS[0], a.RopeScale.Factor = 7, 1
	if b := mustPreset(t, "llama-3.1-8b"); b.EOS[0] != 128001 || b.RopeScale.Factor != 8 {
		t.Error("changing one preset's EOS or RoPE scaling changed the next")
	}
	if _, err := llama.Preset("llama-9"); err == nil || !strings.Contains(err.Error(), `"llama-9"`) {
		t.Errorf("unknown preset: error %v", err)
	}
}

// config8B is Llama-3.1-8B's config.json as published.
const config8B = `{
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 128000,
  "eos_token_id": [128001, 128008, 128009],
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 14336,
  "max_position_embeddings": 131072,
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
    "rope_type": "llama3"
  },
  "rope_theta": 500000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.43.0.dev0",
  "use_cache": true,
  "vocab_size": 128256
}`

// config1B is Llama-3.2-1B's config.json as published (head_dim given,
// embeddings tied).
const config1B = `{
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "head_dim": 64,
  "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8, "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
    "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256
}`

// smallConfig returns a config.json for a small model with extra fields
// merged in (JSON object members, without braces).
func smallConfig(extra string) string {
	s := `"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
  "intermediate_size": 172, "vocab_size": 512`
	if extra != "" {
		s += ", " + extra
	}
	return "{" + s + "}"
}

func TestLoadHFConfig(t *testing.T) {
	// The defaults LlamaConfig gives the optional fields.
	defaults := llama.Config{Dim: 64, Layers: 2, Heads: 4, KVHeads: 4, HeadDim: 16, FFN: 172, Vocab: 512,
		NormEps: 1e-6, RopeTheta: 10000, MaxSeqLen: 2048, BOS: 1, EOS: []int32{2}}
	with := func(f func(*llama.Config)) llama.Config {
		c := defaults
		f(&c)
		return c
	}
	llama3 := &engine.RoPEScaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}
	good := []struct {
		name string
		json string
		want llama.Config
	}{
		{"llama-3.1-8b", config8B, mustPreset(t, "llama-3.1-8b")},
		{"llama-3.2-1b", config1B, mustPreset(t, "llama-3.2-1b")},
		{"defaults", smallConfig(""), defaults},
		{"nulls take defaults", smallConfig(`"head_dim": null, "rope_scaling": null, "bos_token_id": null, "eos_token_id": null`), defaults},
		{"gqa and head_dim", smallConfig(`"num_key_value_heads": 2, "head_dim": 32`), with(func(c *llama.Config) { c.KVHeads, c.HeadDim = 2, 32 })},
		{"eos int", smallConfig(`"eos_token_id": 7, "bos_token_id": 0`), with(func(c *llama.Config) { c.EOS, c.BOS = []int32{7}, 0 })},
		{"tied", smallConfig(`"tie_word_embeddings": true, "max_position_embeddings": 128`), with(func(c *llama.Config) { c.TiedEmbed, c.MaxSeqLen = true, 128 })},
		{"eps and theta", smallConfig(`"rms_norm_eps": 1e-5, "rope_theta": 500000`), with(func(c *llama.Config) { c.NormEps, c.RopeTheta = 1e-5, 500000 })},
		{"rope default", smallConfig(`"rope_scaling": {"rope_type": "default"}`), defaults},
		{"rope older key", smallConfig(`"rope_scaling": {"type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 8192}`),
			with(func(c *llama.Config) { c.RopeScale = llama3 })},
		{"rope_parameters", smallConfig(`"rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 8192}`),
			with(func(c *llama.Config) { c.RopeScale, c.RopeTheta = llama3, 500000 })},
		{"rope_parameters plain", smallConfig(`"rope_parameters": {"rope_type": "default", "rope_theta": 20000}`), with(func(c *llama.Config) { c.RopeTheta = 20000 })},
	}
	dir := t.TempDir()
	for i, tt := range good {
		path := filepath.Join(dir, fmt.Sprintf("good%d.json", i))
		os.WriteFile(path, []byte(tt.json), 0o644)
		got, err := llama.LoadHFConfig(path)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s:\n got %+v (rope %+v)\nwant %+v (rope %+v)", tt.name, got, got.RopeScale, tt.want, tt.want.RopeScale)
		}
	}

	bad := []struct {
		name, json, want string
	}{
		{"not json", `{"hidden_size": 64,`, "malformed JSON"},
		{"array", `[]`, "want an object"},
		{"no model_type", `{"hidden_size": 64}`, "model_type is missing"},
		{"mistral", `{"model_type": "mistral"}`, `model_type is "mistral", want "llama"`},
		{"missing hidden_size", `{"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 8, "vocab_size": 9}`, "hidden_size is missing"},
		{"missing several", `{"model_type": "llama"}`, "num_hidden_layers is missing"},
		{"string size", smallConfig(`"hidden_size": "64"`), "hidden_size is a JSON string, want an integer"},
		{"float size", smallConfig(`"hidden_size": 64.5`), "hidden_size is a JSON number 64.5, want an integer"},
		{"zero layers", smallConfig(`"num_hidden_layers": 0`), "num_hidden_layers = 0, must be positive"},
		{"negative kv", smallConfig(`"num_key_value_heads": -2`), "num_key_value_heads = -2"},
		{"gqa mismatch", smallConfig(`"num_key_value_heads": 3`), "num_attention_heads = 4 is not a multiple of num_key_value_heads = 3"},
		{"odd head_dim", smallConfig(`"head_dim": 15`), "must be even"},
		{"eps zero", smallConfig(`"rms_norm_eps": 0`), "rms_norm_eps = 0"},
		{"theta negative", smallConfig(`"rope_theta": -1`), "rope_theta = -1"},
		{"rope yarn", smallConfig(`"rope_scaling": {"rope_type": "yarn", "factor": 4}`), `rope_scaling.rope_type is "yarn"; only "llama3"`},
		{"rope linear", smallConfig(`"rope_scaling": {"type": "linear", "factor": 2}`), `"linear"`},
		{"rope no type", smallConfig(`"rope_scaling": {"factor": 2}`), "rope_scaling has no rope_type"},
		{"rope no factor", smallConfig(`"rope_scaling": {"rope_type": "llama3", "low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 8192}`), "rope_scaling.factor is missing"},
		{"rope no original", smallConfig(`"rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4}`), "original_max_position_embeddings is missing"},
		{"rope bad band", smallConfig(`"rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 4, "high_freq_factor": 4, "original_max_position_embeddings": 8192}`), "must exceed low_freq_factor"},
		{"rope zero factor", smallConfig(`"rope_scaling": {"rope_type": "llama3", "factor": 0, "low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 8192}`), "rope_scaling.factor = 0"},
		{"rope string", smallConfig(`"rope_scaling": "llama3"`), "rope_scaling is a JSON string, want an object"},
		{"eos outside", smallConfig(`"eos_token_id": [2, 512]`), "eos_token_id 512 is outside the vocabulary of 512"},
		{"eos string", smallConfig(`"eos_token_id": "2"`), "want an integer or a list of integers"},
		{"bos outside", smallConfig(`"bos_token_id": -1`), "bos_token_id = -1"},
		{"gelu", smallConfig(`"hidden_act": "gelu"`), `hidden_act is "gelu"`},
		{"attention bias", smallConfig(`"attention_bias": true`), "attention_bias is true"},
		{"mlp bias", smallConfig(`"mlp_bias": true`), "mlp_bias is true"},
		{"max positions", smallConfig(`"max_position_embeddings": 0`), "max_position_embeddings = 0"},
		{"bos huge", smallConfig(`"bos_token_id": 4294967296`), "bos_token_id = 4294967296 is not a token id"},
		{"bos outside vocab", smallConfig(`"bos_token_id": 600`), "bos_token_id = 600 is outside the vocabulary of 512"},
		{"eos huge", smallConfig(`"eos_token_id": [2, 4294967298]`), "eos_token_id 4294967298 is not a token id"},
		// Sizes above the limits, each alone: errors before anything is
		// allocated, naming the field.
		{"layers 1e9", smallConfig(`"num_hidden_layers": 1000000000`), "num_hidden_layers = 1000000000 exceeds the limit of 1024"},
		{"vocab 2e9", smallConfig(`"vocab_size": 2000000000`), "vocab_size = 2000000000 exceeds the limit of 16777216"},
		{"ffn 1e9", smallConfig(`"intermediate_size": 1000000000`), "intermediate_size = 1000000000 exceeds the limit of 1048576"},
		{"head_dim 2^30", smallConfig(`"head_dim": 1073741824`), "head_dim = 1073741824 exceeds the limit of 4096"},
		{"hidden 2^40", smallConfig(`"hidden_size": 1099511627776`), "hidden_size = 1099511627776 exceeds the limit of 65536"},
		{"heads 2^62", smallConfig(`"num_attention_heads": 4611686018427387904, "num_key_value_heads": 4`), "num_attention_heads = 4611686018427387904 exceeds the limit of 1024"},
		{"kv heads max int", smallConfig(`"num_key_value_heads": 9223372036854775807`), "num_key_value_heads = 9223372036854775807 exceeds the limit"},
		{"context 2^31", smallConfig(`"max_position_embeddings": 2147483648`), "max_position_embeddings = 2147483648 exceeds the limit of 16777216"},
		{"layers past int64", smallConfig(`"num_hidden_layers": 9223372036854775808`), "num_hidden_layers is a JSON number 9223372036854775808, want an integer"},
	}
	for i, tt := range bad {
		path := filepath.Join(dir, fmt.Sprintf("bad%d.json", i))
		os.WriteFile(path, []byte(tt.json), 0o644)
		c, err := llama.LoadHFConfig(path)
		if err == nil {
			t.Errorf("%s: parsed as %+v, want an error containing %q", tt.name, c, tt.want)
			continue
		}
		if !strings.HasPrefix(err.Error(), path+": ") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %q, want one naming the file and containing %q", tt.name, err, tt.want)
		}
	}
	if _, err := llama.LoadHFConfig(filepath.Join(dir, "absent.json")); err == nil {
		t.Error("LoadHFConfig of a missing file succeeded")
	}
}

// newTiny returns the "tiny" preset with random weights of dtype dt.
func newTiny(t *testing.T, b engine.Backend, tied bool, dt engine.DType) *llama.Model {
	t.Helper()
	c := mustPreset(t, "tiny")
	c.TiedEmbed = tied
	m, err := llama.NewRandom(b, c, dt, 0.5, 11)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// sameWeights fails t unless a and b hold bit-identical weights.
func sameWeights(t *testing.T, a, b *llama.Model) {
	t.Helper()
	want := map[string][]byte{}
	a.Weights.Each(func(name string, x *engine.Tensor) {
		raw := make([]byte, x.Bytes())
		a.Backend().Download(raw, x)
		want[name] = raw
	})
	n := 0
	b.Weights.Each(func(name string, x *engine.Tensor) {
		n++
		if x.DType() != a.DType() {
			t.Errorf("%s: dtype %v, want %v", name, x.DType(), a.DType())
			return
		}
		raw := make([]byte, x.Bytes())
		b.Backend().Download(raw, x)
		if !bytes.Equal(raw, want[name]) {
			t.Errorf("%s differs after the round trip", name)
		}
	})
	if n != len(want) {
		t.Errorf("%d weight tensors, want %d", n, len(want))
	}
}

func TestSaveLoadHF(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	for _, tc := range []struct {
		tied bool
		dt   engine.DType
	}{{false, engine.F32}, {true, engine.F32}, {false, engine.BF16}, {true, engine.F16}} {
		t.Run(fmt.Sprintf("tied=%v/%v", tc.tied, tc.dt), func(t *testing.T) {
			c := mustPreset(t, "tiny")
			c.TiedEmbed = tc.tied
			if tc.tied { // and Llama 3.1's RoPE
				c.RopeTheta = 500000
				c.RopeScale = &engine.RoPEScaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}
			}
			m, err := llama.NewRandom(b, c, tc.dt, 0.5, 11)
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "out")
			if err := m.SaveHF(dir); err != nil {
				t.Fatal(err)
			}
			if got := listFiles(t, dir); !reflect.DeepEqual(got, []string{"config.json", "model.safetensors"}) {
				t.Errorf("saved files %q", got)
			}
			js, _ := os.ReadFile(filepath.Join(dir, "config.json"))
			for _, want := range []string{`"model_type": "llama"`, `"rms_norm_eps": 1e-05`, `"eos_token_id": 2,`} {
				if !strings.Contains(string(js), want) {
					t.Errorf("config.json lacks %s:\n%s", want, js)
				}
			}
			if tc.tied && (!strings.Contains(string(js), `"rope_theta": 500000.0`) || !strings.Contains(string(js), `"factor": 8.0`)) {
				t.Errorf("config.json does not write θ and the scaling factor as floats:\n%s", js)
			}
			f, err := safetensors.Open(filepath.Join(dir, "model.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			_, hasHead := f.Info("lm_head.weight")
			info, _ := f.Info("model.embed_tokens.weight")
			if hasHead == tc.tied || f.Metadata["format"] != "pt" || len(f.Names()) != 3+9*m.Config.Layers-boolInt(tc.tied) {
				t.Errorf("saved tensors %q, metadata %v", f.Names(), f.Metadata)
			}
			if want := map[engine.DType]safetensors.DType{engine.F32: "F32", engine.BF16: "BF16", engine.F16: "F16"}[tc.dt]; info.DType != want {
				t.Errorf("saved dtype %v, want %v", info.DType, want)
			}
			f.Close()

			got, err := llama.LoadHF(b, dir, tc.dt)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Config, m.Config) {
				t.Errorf("config after the round trip:\n got %+v\nwant %+v", got.Config, m.Config)
			}
			sameWeights(t, m, got)
			if tc.tied && got.Weights.Head != got.Weights.Embed {
				t.Error("a tied model loaded with a separate classifier")
			}
			if tc.dt == engine.F32 {
				sameGeneration(t, m, got)
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func listFiles(t *testing.T, dir string) []string {
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

// sameGeneration checks that a and b continue prompts greedily with the
// same tokens and log-probabilities.
func sameGeneration(t *testing.T, a, b *llama.Model) {
	t.Helper()
	prompts := [][]int32{{1, 17, 42}, {1, 300}}
	opt := llama.GenerateOptions{MaxNew: 6}
	ga, err := a.Generate(prompts, opt)
	if err != nil {
		t.Fatal(err)
	}
	gb, err := b.Generate(prompts, opt)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ga, gb) {
		t.Errorf("generations differ:\nsaved  %+v\nloaded %+v", ga, gb)
	}
	if len(ga[0].Tokens) != opt.MaxNew {
		t.Errorf("generated %d tokens, want %d", len(ga[0].Tokens), opt.MaxNew)
	}
}

// rewrite reads the checkpoint in src, lets edit change its tensors, and
// writes them with src's config to a new directory, sharded when maxShard
// is positive.
func rewrite(t *testing.T, src string, maxShard int64, edit func([]safetensors.Tensor) []safetensors.Tensor) string {
	t.Helper()
	r, err := safetensors.OpenModel(src)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var ts []safetensors.Tensor
	for _, name := range r.Names() {
		data, info, err := r.Data(name)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, safetensors.Tensor{Name: name, DType: info.DType, Shape: info.Shape, Data: data})
	}
	if edit != nil {
		ts = edit(ts)
	}
	dst := t.TempDir()
	if maxShard > 0 {
		err = safetensors.WriteSharded(dst, ts, map[string]string{"format": "pt"}, maxShard)
	} else {
		err = safetensors.WriteFile(filepath.Join(dst, "model.safetensors"), ts, map[string]string{"format": "pt"})
	}
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestLoadHFSharded(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	m := newTiny(t, b, false, engine.F32)
	src := t.TempDir()
	if err := m.SaveHF(src); err != nil {
		t.Fatal(err)
	}
	dir := rewrite(t, src, 100_000, nil)
	files := listFiles(t, dir)
	if !slices.Contains(files, "model.safetensors.index.json") || len(files) < 4 {
		t.Fatalf("sharded checkpoint holds %q, want several shards and an index", files)
	}
	got, err := llama.LoadHF(b, dir, engine.F32)
	if err != nil {
		t.Fatal(err)
	}
	sameWeights(t, m, got)
	sameGeneration(t, m, got)
}

// TestLoadHFConvert loads checkpoints into another dtype: bf16 and f16
// widen to f32 exactly, f32 rounds to bf16 to nearest even. Each is loaded
// twice, the second time with every tensor's data at an odd offset.
func TestLoadHFConvert(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	pad := func(ts []safetensors.Tensor) []safetensors.Tensor {
		return append([]safetensors.Tensor{{Name: "pad", DType: "U8", Shape: []int64{1}, Data: []byte{0}}}, ts...)
	}
	for _, tc := range []struct{ saved, loaded engine.DType }{
		{engine.BF16, engine.F32}, {engine.F16, engine.F32}, {engine.F32, engine.BF16},
		{engine.F32, engine.F16}, {engine.BF16, engine.F16}, {engine.F16, engine.BF16},
	} {
		m := newTiny(t, b, false, tc.saved)
		dir := t.TempDir()
		if err := m.SaveHF(dir); err != nil {
			t.Fatal(err)
		}
		want := map[string][]float32{}
		m.Weights.Each(func(name string, x *engine.Tensor) { want[name] = engine.ToF32(b, x) })
		for _, d := range []string{dir, rewrite(t, dir, 0, pad)} {
			got, err := llama.LoadHF(b, d, tc.loaded)
			if err != nil {
				t.Fatal(err)
			}
			got.Weights.Each(func(name string, x *engine.Tensor) {
				if x.DType() != tc.loaded {
					t.Fatalf("%v→%v: %s has dtype %v", tc.saved, tc.loaded, name, x.DType())
				}
				g := engine.ToF32(b, x)
				for i, v := range want[name] {
					if r := tc.loaded.Round(v); g[i] != r {
						t.Fatalf("%v→%v: %s[%d] = %g, want %g", tc.saved, tc.loaded, name, i, g[i], r)
					}
				}
			})
		}
	}
}

func TestLoadHFErrors(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	m := newTiny(t, b, false, engine.BF16)
	src := t.TempDir()
	if err := m.SaveHF(src); err != nil {
		t.Fatal(err)
	}
	const q = "model.layers.1.self_attn.q_proj.weight"
	edit := func(name string, f func(*safetensors.Tensor)) func([]safetensors.Tensor) []safetensors.Tensor {
		return func(ts []safetensors.Tensor) []safetensors.Tensor {
			for i := range ts {
				if ts[i].Name == name {
					f(&ts[i])
				}
			}
			return ts
		}
	}
	drop := func(name string) func([]safetensors.Tensor) []safetensors.Tensor {
		return func(ts []safetensors.Tensor) []safetensors.Tensor {
			return slices.DeleteFunc(ts, func(x safetensors.Tensor) bool { return x.Name == name })
		}
	}
	tests := []struct {
		name string
		edit func([]safetensors.Tensor) []safetensors.Tensor
		want string
	}{
		{"missing tensor", drop(q), "tensor " + q + " is missing (the configuration needs one of shape [64, 64])"},
		{"missing head", drop("lm_head.weight"), "tensor lm_head.weight is missing"},
		{"transposed", edit(q, func(x *safetensors.Tensor) { x.Shape = []int64{64, 64, 1} }), "tensor " + q + " has shape [64, 64, 1], the configuration needs [64, 64]"},
		{"wrong shape", edit("model.norm.weight", func(x *safetensors.Tensor) { x.Shape = []int64{32}; x.Data = x.Data[:64] }), "tensor model.norm.weight has shape [32], the configuration needs [64]"},
		{"i32", edit(q, func(x *safetensors.Tensor) { x.DType = "I32"; x.Data = make([]byte, 64*64*4) }), "tensor " + q + ": stored as I32"},
		{"bad dtype", edit(q, func(x *safetensors.Tensor) { x.DType = "I16" }), "tensor " + q + ": stored as I16; only F32, F16 and BF16"},
		{"f64", edit("model.norm.weight", func(x *safetensors.Tensor) { x.DType = "F64"; x.Data = make([]byte, 64*8) }), "tensor model.norm.weight: stored as F64"},
	}
	for _, tt := range tests {
		dir := rewrite(t, src, 0, tt.edit)
		_, err := llama.LoadHF(b, dir, engine.BF16)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), dir) {
			t.Errorf("%s: error %v, want one naming the directory and containing %q", tt.name, err, tt.want)
		}
	}

	// Extra tensors are ignored; a tied model ignores a stored classifier.
	extra := rewrite(t, src, 0, func(ts []safetensors.Tensor) []safetensors.Tensor {
		return append(ts, safetensors.Tensor{Name: "model.layers.0.self_attn.rotary_emb.inv_freq", DType: "F32", Shape: []int64{8}, Data: make([]byte, 32)})
	})
	got, err := llama.LoadHF(b, extra, engine.BF16)
	if err != nil {
		t.Fatalf("checkpoint with an extra tensor: %v", err)
	}
	sameWeights(t, m, got)
	cfg := filepath.Join(extra, "config.json")
	js, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, bytes.Replace(js, []byte(`"tie_word_embeddings": false`), []byte(`"tie_word_embeddings": true`), 1), 0o644)
	got, err = llama.LoadHF(b, extra, engine.BF16)
	if err != nil {
		t.Fatalf("tied config with a stored lm_head: %v", err)
	}
	if !got.Config.TiedEmbed || got.Weights.Head != got.Weights.Embed {
		t.Error("tie_word_embeddings true loaded an untied model")
	}

	for _, tc := range []struct {
		name, dir string
		dt        engine.DType
		want      string
	}{
		{"no config", t.TempDir(), engine.F32, "config.json"},
		{"i32 model", src, engine.I32, "weights of dtype i32 are not supported"},
	} {
		if _, err := llama.LoadHF(b, tc.dir, tc.dt); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	noWeights := t.TempDir()
	os.WriteFile(filepath.Join(noWeights, "config.json"), js, 0o644)
	if _, err := llama.LoadHF(b, noWeights, engine.F32); err == nil || !strings.Contains(err.Error(), "no model.safetensors") {
		t.Errorf("no weights: error %v", err)
	}
}
