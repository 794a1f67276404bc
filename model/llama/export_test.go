package llama_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/export"
	"github.com/turnwise/turnwise/gguf"
	"github.com/turnwise/turnwise/internal/testdata"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/tokenizer"
)

// The tests of package export are here, beside the model tests whose
// helpers they share (tinyConfig, logProbs, randomizeB, sameWeights).

// TestExportRoundTrip exports a model, with and without a LoRA adapter
// merged, as a Hugging Face directory and as a GGUF file in each dtype,
// loads the export back and checks that every weight is the original
// (merged) weight rounded to the dtype, and that the log-probabilities
// match: exactly in f32, within the dtype's rounding otherwise.
func TestExportRoundTrip(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	type want struct {
		weights map[string][]float32
		logp    []float32
	}
	bt := tinyBatch(rand.New(rand.NewPCG(2, 2)), 37)
	for _, tied := range []bool{false, true} {
		base, err := llama.NewRandom(b, tinyConfig(tied), engine.F32, 0.5, 6)
		if err != nil {
			t.Fatal(err)
		}
		root := t.TempDir()
		baseDir := filepath.Join(root, "base")
		if err := base.SaveHF(baseDir); err != nil {
			t.Fatal(err)
		}
		ad, err := base.NewAdapter(llama.LoRAConfig{Rank: 4, Alpha: 8, Targets: []string{"q", "k", "v", "o", "up"}}, 7)
		if err != nil {
			t.Fatal(err)
		}
		randomizeB(b, ad, rand.New(rand.NewPCG(1, 1)))
		ad.Base = baseDir
		adDir := filepath.Join(root, "adapter")
		if err := base.SavePEFT(ad, adDir); err != nil {
			t.Fatal(err)
		}
		withAdapter := logProbs(t, base, bt, ad)
		snapshot := func(m *llama.Model) want {
			w := want{weights: map[string][]float32{}, logp: logProbs(t, m, bt, nil)}
			m.Weights.Each(func(name string, x *engine.Tensor) { w.weights[name] = engine.ToF32(b, x) })
			return w
		}
		full := snapshot(base)
		base.Merge(ad)
		merged := snapshot(base)
		for i := range withAdapter {
			if math.Abs(float64(withAdapter[i]-merged.logp[i])) > 1e-4 {
				t.Fatalf("merging changed token %d: %v with the adapter, %v merged", i, withAdapter[i], merged.logp[i])
			}
		}
		for _, tc := range []struct {
			name    string
			opt     export.Options
			want    want
			changed bool // the adapter changes outputs
		}{
			{"full", export.Options{From: baseDir}, full, false},
			{"lora", export.Options{From: baseDir, Adapter: adDir}, merged, true},
			{"adapter-dir", export.Options{From: adDir}, merged, true},
		} {
			for _, format := range []string{"hf", "gguf"} {
				for _, dt := range []engine.DType{engine.F32, engine.F16, engine.BF16} {
					name := fmt.Sprintf("tied=%v/%s/%s/%v", tied, tc.name, format, dt)
					t.Run(name, func(t *testing.T) {
						o := tc.opt
						o.Format, o.DType = format, dt
						o.Out = filepath.Join(t.TempDir(), "out")
						if format == "gguf" {
							o.Out += ".gguf"
						}
						if err := export.Write(b, o); err != nil {
							t.Fatal(err)
						}
						src := llama.Source{HF: o.Out}
						if format == "gguf" {
							src = llama.Source{GGUF: o.Out}
						}
						m, err := src.Load(b, engine.F32, 0)
						if err != nil {
							t.Fatal(err)
						}
						m.Weights.Each(func(name string, x *engine.Tensor) {
							got, orig := engine.ToF32(b, x), tc.want.weights[name]
							// A GGUF keeps 1-D tensors F32 (llama.cpp's
							// converter does): exact, whatever dt.
							want := dt
							if format == "gguf" && x.Rank() == 1 {
								want = engine.F32
							}
							for i := range got {
								if got[i] != want.Round(orig[i]) {
									t.Fatalf("%s[%d] = %v, want %v rounded to %v", name, i, got[i], orig[i], want)
								}
							}
						})
						if format == "gguf" {
							checkGGUFTypes(t, o.Out, dt)
						}
						tol := map[engine.DType]float64{engine.F32: 0, engine.F16: 0.01, engine.BF16: 0.1}[dt]
						got := logProbs(t, m, bt, nil)
						for i := range got {
							if d := math.Abs(float64(got[i] - tc.want.logp[i])); d > tol {
								t.Fatalf("token %d: log-probability %v, want %v (within %v)", i, got[i], tc.want.logp[i], tol)
							}
						}
						if tc.changed && format == "hf" && dt == engine.F32 {
							if same(got, full.logp) {
								t.Error("the merged export computes what the base does")
							}
						}
						if format == "hf" {
							if _, err := os.Stat(filepath.Join(o.Out, "generation_config.json")); err != nil {
								t.Error(err)
							}
						}
					})
				}
			}
		}
	}
}

// checkGGUFTypes fails unless the GGUF file at path stores its 1-D tensors
// as F32 and the others in dt.
func checkGGUFTypes(t *testing.T, path string, dt engine.DType) {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	types := map[engine.DType]gguf.TensorType{engine.F32: gguf.TypeF32, engine.F16: gguf.TypeF16, engine.BF16: gguf.TypeBF16}
	for _, x := range f.Tensors {
		want := types[dt]
		if len(x.Dims) == 1 {
			want = gguf.TypeF32
		}
		if x.Type != want {
			t.Errorf("%s: %s of shape %v stored as type %v, want %v", path, x.Name, x.Dims, x.Type, want)
		}
	}
}

func same(a, b []float32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestExportErrors(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 1})
	m, err := llama.NewRandom(b, tinyConfig(false), engine.F32, 0.5, 6)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "base")
	if err := m.SaveHF(dir); err != nil {
		t.Fatal(err)
	}
	noBase := filepath.Join(t.TempDir(), "adapter")
	ad, err := m.NewAdapter(llama.LoRAConfig{Rank: 2, Alpha: 4, Targets: []string{"q"}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SavePEFT(ad, noBase); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	for _, tc := range []struct {
		opt  export.Options
		want string
	}{
		{export.Options{From: dir, Out: out, Format: "onnx", DType: engine.F32}, `format "onnx"`},
		{export.Options{From: dir, Format: "hf", DType: engine.F32}, "no output"},
		{export.Options{From: filepath.Join(dir, "absent"), Out: out, Format: "hf", DType: engine.F32}, "absent"},
		{export.Options{From: noBase, Out: out, Format: "hf", DType: engine.F32}, "base_model_name_or_path is empty"},
		{export.Options{From: noBase, Adapter: noBase, Out: out, Format: "hf", DType: engine.F32}, "is an adapter"},
		{export.Options{From: dir, Out: out, Format: "hf", DType: engine.I32}, "cannot be saved"},
	} {
		err := export.Write(b, tc.opt)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Export(%+v) = %v, want an error containing %q", tc.opt, err, tc.want)
		}
	}
	big := func(target string) {
		m.Weights.Each(func(name string, x *engine.Tensor) {
			if name == target {
				v := engine.ToF32(b, x)
				v[3] = 1e5 // beyond f16's range
				engine.SetF32(b, x, v)
			}
		})
	}
	// A 1-D tensor stays F32 in a GGUF: a norm weight beyond f16's range
	// is written; a matrix's is refused.
	big("model.norm.weight")
	if err := m.SaveGGUF(filepath.Join(t.TempDir(), "norm.gguf"), engine.F16, nil); err != nil {
		t.Errorf("SaveGGUF in f16 of a norm weight of 1e5 (kept F32): %v", err)
	}
	big("model.layers.0.mlp.down_proj.weight")
	if err := m.SaveGGUF(filepath.Join(t.TempDir(), "big.gguf"), engine.F16, nil); err == nil || !strings.Contains(err.Error(), "overflows f16") {
		t.Errorf("SaveGGUF in f16 of a weight of 1e5: %v, want a refusal", err)
	}
	if err := m.SaveHFAs(filepath.Join(t.TempDir(), "big"), engine.F16); err == nil || !strings.Contains(err.Error(), "overflows f16") {
		t.Errorf("SaveHFAs in f16 of a weight of 1e5: %v, want a refusal", err)
	}
	if err := m.SaveGGUF(filepath.Join(t.TempDir(), "big.gguf"), engine.BF16, nil); err != nil {
		t.Errorf("SaveGGUF in bf16 of a weight of 1e5: %v", err)
	}
}

// ropeScaledConfig is a tiny model with Llama 3.1's RoPE scaling whose
// frequencies fall in all three bands of the rule at the positions of
// tinyBatch: θ 100 and an original context of 64 make the wavelengths of
// its 8 frequency pairs 6.3, 11, 20, 35, 63, 112, 199 and 353, against
// band edges of 16 and 64.
func ropeScaledConfig() llama.Config {
	return llama.Config{Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 48, Vocab: 37,
		NormEps: 1e-5, RopeTheta: 100, MaxSeqLen: 64, BOS: 1, EOS: []int32{2},
		RopeScale: &engine.RoPEScaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 64}}
}

// llama3Divisors computes, as llama.cpp's converter does, the factors by
// which Llama 3.1's scaling divides each RoPE frequency of c.
func llama3Divisors(c llama.Config) []float64 {
	s := c.RopeScale
	var out []float64
	for j := 0; j < c.HeadDim/2; j++ {
		freq := 1 / math.Pow(c.RopeTheta, float64(2*j)/float64(c.HeadDim))
		wave := 2 * math.Pi / freq
		lo, hi := float64(s.OriginalContext)/s.LowFreqFactor, float64(s.OriginalContext)/s.HighFreqFactor
		switch {
		case wave < hi:
			out = append(out, 1)
		case wave > lo:
			out = append(out, s.Factor)
		default:
			smooth := (float64(s.OriginalContext)/wave - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
			out = append(out, 1/((1-smooth)/s.Factor+smooth))
		}
	}
	return out
}

// rewriteGGUF writes a copy of the GGUF file src, its metadata and tensors
// changed by edit, and returns the copy's path.
func rewriteGGUF(t *testing.T, src string, edit func(meta map[string]any, tensors []gguf.Tensor)) string {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	meta := map[string]any{}
	for k, v := range f.Meta {
		if k != gguf.AlignmentKey {
			meta[k] = v
		}
	}
	var tensors []gguf.Tensor
	for _, x := range f.Tensors {
		data, _, err := f.TensorData(x.Name)
		if err != nil {
			t.Fatal(err)
		}
		tensors = append(tensors, gguf.Tensor{Name: x.Name, Dims: x.Dims, Type: x.Type, Data: append([]byte{}, data...)})
	}
	edit(meta, tensors)
	var buf bytes.Buffer
	if err := gguf.Write(&buf, meta, tensors); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "edited.gguf")
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestExportRoPEScaling exports a model with Llama 3.1's RoPE scaling to
// GGUF and checks the rope_freqs.weight tensor llama.cpp reads (F32, the
// per-frequency divisors), that the file loads back as the same model
// (same configuration, bit-identical log-probabilities), that exporting
// it back to Hugging Face keeps rope_scaling, that a file without
// turnwise's parameter keys (as llama.cpp's converter writes it) has the
// parameters recovered from the factors, and that factors which disagree
// with the parameters are refused.
func TestExportRoPEScaling(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	c := ropeScaledConfig()
	m, err := llama.NewRandom(b, c, engine.F32, 0.5, 3)
	if err != nil {
		t.Fatal(err)
	}
	bt := tinyBatch(rand.New(rand.NewPCG(3, 3)), c.Vocab)
	want := logProbs(t, m, bt, nil)
	dir := t.TempDir()
	hf, file := filepath.Join(dir, "hf"), filepath.Join(dir, "m.gguf")
	if err := m.SaveHF(hf); err != nil {
		t.Fatal(err)
	}
	if err := export.Write(b, export.Options{From: hf, Out: file, Format: "gguf", DType: engine.F16}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	info, ok := f.Tensor("rope_freqs.weight")
	if !ok || info.Type != gguf.TypeF32 || len(info.Dims) != 1 || info.Dims[0] != uint64(c.HeadDim/2) {
		t.Fatalf("rope_freqs.weight: %+v (present %v), want F32 of [%d]", info, ok, c.HeadDim/2)
	}
	data, _, err := f.TensorData("rope_freqs.weight")
	if err != nil {
		t.Fatal(err)
	}
	bands := map[string]bool{}
	for j, d := range llama3Divisors(c) {
		got := math.Float32frombits(binary.LittleEndian.Uint32(data[4*j:]))
		if math.Abs(float64(got)-d) > 1e-6*d {
			t.Errorf("rope_freqs.weight[%d] = %v, want %v", j, got, d)
		}
		switch d {
		case 1:
			bands["high frequencies"] = true
		case c.RopeScale.Factor:
			bands["low frequencies"] = true
		default:
			bands["between"] = true
		}
	}
	f.Close()
	if len(bands) != 3 {
		t.Fatalf("the divisors fall in bands %v; the test needs all three", bands)
	}

	if err := export.Write(b, export.Options{From: hf, Out: filepath.Join(dir, "f32.gguf"), Format: "gguf", DType: engine.F32}); err != nil {
		t.Fatal(err)
	}
	back, err := llama.Source{GGUF: filepath.Join(dir, "f32.gguf")}.Load(b, engine.F32, 0)
	if err != nil {
		t.Fatal(err)
	}
	if back.Config.RopeScale == nil || *back.Config.RopeScale != *c.RopeScale {
		t.Fatalf("loaded RoPE scaling %+v, want %+v", back.Config.RopeScale, *c.RopeScale)
	}
	if got := logProbs(t, back, bt, nil); !same(got, want) {
		t.Errorf("log-probabilities of the GGUF export %v, want %v", got, want)
	}

	hfBack := filepath.Join(dir, "hf-back")
	if err := export.Write(b, export.Options{From: file, Out: hfBack, Format: "hf", DType: engine.F32}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(hfBack, llama.HFConfigName))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		RopeScaling map[string]any `json:"rope_scaling"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	wantRope := map[string]any{"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64.0}
	if fmt.Sprint(cfg.RopeScaling) != fmt.Sprint(wantRope) {
		t.Errorf("HF→GGUF→HF rope_scaling %v, want %v", cfg.RopeScaling, wantRope)
	}

	stripped := rewriteGGUF(t, file, func(meta map[string]any, _ []gguf.Tensor) {
		for k := range meta {
			if strings.HasPrefix(k, "turnwise.") {
				delete(meta, k)
			}
		}
	})
	if got, err := (llama.Source{GGUF: stripped}).Config(); err != nil {
		t.Error(err)
	} else if got.RopeScale == nil || *got.RopeScale != *c.RopeScale {
		t.Errorf("RoPE scaling recovered from rope_freqs.weight alone: %+v, want %+v", got.RopeScale, *c.RopeScale)
	}

	for _, tc := range []struct {
		name string
		keep func(k string) bool
	}{{"with parameters", func(string) bool { return true }}, {"without parameters", func(k string) bool { return !strings.HasPrefix(k, "turnwise.") }}} {
		bad := rewriteGGUF(t, file, func(meta map[string]any, tensors []gguf.Tensor) {
			for k := range meta {
				if !tc.keep(k) {
					delete(meta, k)
				}
			}
			for _, x := range tensors {
				if x.Name == "rope_freqs.weight" {
					binary.LittleEndian.PutUint32(x.Data[4*3:], math.Float32bits(1.5*math.Float32frombits(binary.LittleEndian.Uint32(x.Data[4*3:]))))
				}
			}
		})
		if _, err := (llama.Source{GGUF: bad}).Config(); err == nil || !strings.Contains(err.Error(), "rope_freqs.weight[") {
			t.Errorf("%s: a rope_freqs.weight that breaks the rule: %v, want an error naming the tensor", tc.name, err)
		}
	}
}

// TestSaveCopiesTokenizerFiles checks that Save of a whole model read from
// a Hugging Face directory carries the directory's tokenizer files along,
// adds the Llama 3.1 chat template to a tokenizer_config.json that lacks
// one (keeping one that has it), and writes a generation_config.json of
// the BOS and EOS ids when the source has none.
func TestSaveCopiesTokenizerFiles(t *testing.T) {
	tokJSON, err := os.ReadFile(testdata.Path(t, "llama3", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	b := cpu.New(cpu.Options{Threads: 1})
	m, err := llama.NewRandom(b, tinyConfig(false), engine.F32, 0.5, 6)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, config string
		keeps        bool // the source's tokenizer_config.json is kept as it is
	}{
		{"no-config", "", false},
		{"no-template", `{"model_max_length": 131072}`, false},
		{"template", `{"chat_template": "{{ x }}"}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := filepath.Join(t.TempDir(), "src")
			if err := m.SaveHF(src); err != nil {
				t.Fatal(err)
			}
			files := map[string]string{"tokenizer.json": string(tokJSON)}
			if tc.config != "" {
				files["tokenizer_config.json"] = tc.config
			}
			for name, body := range files {
				if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			loaded, err := llama.LoadHF(b, src, engine.F32)
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "out")
			if err := loaded.Save(nil, out); err != nil {
				t.Fatal(err)
			}
			if got, err := os.ReadFile(filepath.Join(out, "tokenizer.json")); err != nil || !bytes.Equal(got, tokJSON) {
				t.Errorf("tokenizer.json not copied: %v", err)
			}
			raw, err := os.ReadFile(filepath.Join(out, "tokenizer_config.json"))
			if err != nil {
				t.Fatal(err)
			}
			if tc.keeps {
				if string(raw) != tc.config {
					t.Errorf("tokenizer_config.json %s, want the source's %s", raw, tc.config)
				}
			} else {
				var cfg map[string]any
				if err := json.Unmarshal(raw, &cfg); err != nil || cfg["chat_template"] != tokenizer.ChatTemplate || cfg["eos_token"] != tokenizer.EOTID {
					t.Errorf("tokenizer_config.json lacks the chat template: %s (%v)", raw, err)
				}
				if tc.config != "" && cfg["model_max_length"] != 131072.0 {
					t.Errorf("tokenizer_config.json lost the source's keys: %s", raw)
				}
			}
			gen, err := os.ReadFile(filepath.Join(out, "generation_config.json"))
			if err != nil || !strings.Contains(string(gen), `"bos_token_id": 1`) || !strings.Contains(string(gen), `"eos_token_id": 2`) {
				t.Errorf("generation_config.json: %s, %v", gen, err)
			}
		})
	}
}

// TestExportStories260K exports a released GGUF model (stories260K) as
// GGUF and as a Hugging Face directory: the GGUF export carries the
// tokenizer over and, in f32, holds the same weights bit for bit and
// decodes the documented greedy story; the f16 directory holds every
// weight rounded to f16.
func TestExportStories260K(t *testing.T) {
	path := testdata.Path(t, "stories260K", "stories260K.gguf")
	b := cpu.New(cpu.Options{Threads: 2})
	orig, err := llama.LoadGGUF(b, path, engine.F32)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "stories.gguf")
	if err := export.Write(b, export.Options{From: path, Out: out, Format: "gguf", DType: engine.F32}); err != nil {
		t.Fatal(err)
	}
	back, err := llama.LoadGGUF(b, out, engine.F32)
	if err != nil {
		t.Fatal(err)
	}
	sameWeights(t, orig, back)
	tok, err := llama.LoadTokenizer(out)
	if err != nil {
		t.Fatalf("the export's tokenizer: %v", err)
	}
	gen, err := back.Generate([][]int32{{back.Config.BOS}}, llama.GenerateOptions{MaxNew: 80, Stop: back.Config.EOS})
	if err != nil {
		t.Fatal(err)
	}
	if text, err := tok.Decode(gen[0].Tokens); err != nil || !strings.HasPrefix(text, storiesText) {
		t.Errorf("greedy decoding of the export: %q, %v; want %q…", text, err, storiesText)
	}

	dir := filepath.Join(t.TempDir(), "stories-hf")
	if err := export.Write(b, export.Options{From: path, Out: dir, Format: "hf", DType: engine.F16}); err != nil {
		t.Fatal(err)
	}
	hf, err := llama.LoadHF(b, dir, engine.F32)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]float32{}
	orig.Weights.Each(func(name string, x *engine.Tensor) { want[name] = engine.ToF32(b, x) })
	hf.Weights.Each(func(name string, x *engine.Tensor) {
		got := engine.ToF32(b, x)
		for i := range got {
			if got[i] != engine.RoundF16(want[name][i]) {
				t.Fatalf("%s[%d] = %v, want %v rounded to f16", name, i, got[i], want[name][i])
			}
		}
	})
}

// generateText encodes prompt with the tokenizer of the model src names,
// continues it greedily with that model, and returns the text of the
// continuation: what a user of src alone gets.
func generateText(t *testing.T, b engine.Backend, src llama.Source, prompt string) string {
	t.Helper()
	m, err := src.Load(b, engine.F32, 0)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := src.Tokenizer("")
	if err != nil {
		t.Fatalf("the tokenizer of %+v: %v", src, err)
	}
	gen, err := m.Generate([][]int32{tok.Encode(prompt, tokenizer.EncodeOptions{AddBOS: true})}, llama.GenerateOptions{MaxNew: 24})
	if err != nil {
		t.Fatal(err)
	}
	text, err := tok.Decode(gen[0].Tokens)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// sameIDs fails t unless got encodes sample texts as want does.
func sameIDs(t *testing.T, what string, got, want tokenizer.Tokenizer) {
	t.Helper()
	for _, text := range []string{"Hello, world!\n  x = f(y)", "héllo wörld 日本語 🙂", "<bos><|eot_id|> \xff"} {
		g, w := got.Encode(text, tokenizer.EncodeOptions{AddBOS: true}), want.Encode(text, tokenizer.EncodeOptions{AddBOS: true})
		if fmt.Sprint(g) != fmt.Sprint(w) {
			t.Errorf("%s encodes %q as %v, the source's tokenizer as %v", what, text, g, w)
		}
	}
}

// TestExportTokenizers checks that every export carries its tokenizer: a
// model trained on bytes (a Hugging Face directory without tokenizer.json)
// exported to GGUF has the byte tokenizer's tokenizer.ggml.* keys, from
// which the GGUF alone generates the text the source does; exported to a
// Hugging Face directory, directly or from that GGUF, it has tokenizer
// files that load as the byte tokenizer. With the Llama 3 tokenizer (from
// the shared test data), the GGUF's metadata and the tokenizer.json made
// back from it encode as the source's tokenizer.json does.
func TestExportTokenizers(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	c := tinyConfig(false)
	c.Vocab, c.BOS, c.EOS = 258, tokenizer.BytesBOS, []int32{tokenizer.BytesEOS}
	m, err := llama.NewRandom(b, c, engine.F32, 0.5, 8)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	hf := filepath.Join(dir, "bytes-model")
	if err := m.SaveHF(hf); err != nil {
		t.Fatal(err)
	}
	const prompt = "u>Hello there<eos>a>"
	want := generateText(t, b, llama.Source{HF: hf}, prompt)

	file := filepath.Join(dir, "bytes.gguf")
	if err := export.Write(b, export.Options{From: hf, Out: file, Format: "gguf", DType: engine.F32}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	for key, check := range map[string]func(v any) bool{
		"tokenizer.ggml.model":        func(v any) bool { return v == "gpt2" },
		"tokenizer.ggml.tokens":       func(v any) bool { s, _ := v.([]string); return len(s) == 258 && s[32] == "Ġ" && s[256] == "<bos>" },
		"tokenizer.ggml.token_type":   func(v any) bool { s, _ := v.([]int32); return len(s) == 258 && s[0] == 1 && s[257] == 3 },
		"tokenizer.ggml.merges":       func(v any) bool { s, ok := v.([]string); return ok && len(s) == 0 },
		"tokenizer.ggml.bos_token_id": func(v any) bool { return v == uint32(256) },
		"tokenizer.ggml.eos_token_id": func(v any) bool { return v == uint32(257) },
		"tokenizer.chat_template":     func(v any) bool { return v == tokenizer.ByteChatTemplate },
	} {
		if v, ok := f.Meta[key]; !ok || !check(v) {
			t.Errorf("%s: %s = %#v (present %v)", file, key, v, ok)
		}
	}
	f.Close()
	if got := generateText(t, b, llama.Source{GGUF: file}, prompt); got != want {
		t.Errorf("the GGUF export alone generates %q, the source %q", got, want)
	}

	for name, from := range map[string]string{"from the directory": hf, "from the GGUF": file} {
		out := filepath.Join(t.TempDir(), "hf")
		if err := export.Write(b, export.Options{From: from, Out: out, Format: "hf", DType: engine.F32}); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"} {
			if _, err := os.Stat(filepath.Join(out, name)); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		tok, err := llama.LoadTokenizer(filepath.Join(out, "tokenizer.json"))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := tok.(tokenizer.Bytes); !ok {
			t.Errorf("%s: the exported tokenizer.json loads as a %T, want the byte tokenizer", name, tok)
		}
		if got := generateText(t, b, llama.Source{HF: out}, prompt); got != want {
			t.Errorf("%s: the export generates %q, the source %q", name, got, want)
		}
	}

	// The Llama 3 tokenizer: HF → GGUF → HF.
	src, err := tokenizer.LoadJSON(testdata.Path(t, "llama3", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	c.Vocab, c.BOS, c.EOS = src.VocabSize(), src.BOS(), src.EOS()
	m3, err := llama.NewRandom(b, c, engine.F32, 0.5, 9)
	if err != nil {
		t.Fatal(err)
	}
	hf3 := filepath.Join(dir, "llama3-model")
	if err := m3.SaveHF(hf3); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(testdata.Path(t, "llama3", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hf3, "tokenizer.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	file3, back3 := filepath.Join(dir, "llama3.gguf"), filepath.Join(dir, "llama3-back")
	if err := export.Write(b, export.Options{From: hf3, Out: file3, Format: "gguf", DType: engine.BF16}); err != nil {
		t.Fatal(err)
	}
	if err := export.Write(b, export.Options{From: file3, Out: back3, Format: "hf", DType: engine.BF16}); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{file3, filepath.Join(back3, "tokenizer.json")} {
		tok, err := llama.LoadTokenizer(path)
		if err != nil {
			t.Fatal(err)
		}
		sameIDs(t, path, tok, src)
	}
}

// TestExportSentencePieceTokenizer exports a GGUF model whose vocabulary
// is SentencePiece (stories260K) to a Hugging Face directory: it carries
// tokenizer files, whose tokenizer.json loads as a SentencePiece that
// encodes as the GGUF's and with which the directory generates the text
// the GGUF does; exported back to GGUF, the directory's tokenizer becomes
// tokenizer.ggml.* keys that encode as the original's too.
func TestExportSentencePieceTokenizer(t *testing.T) {
	path := testdata.Path(t, "stories260K", "stories260K.gguf")
	b := cpu.New(cpu.Options{Threads: 2})
	src, err := llama.LoadTokenizer(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	hf, back := filepath.Join(dir, "hf"), filepath.Join(dir, "back.gguf")
	if err := export.Write(b, export.Options{From: path, Out: hf, Format: "hf", DType: engine.F32}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"} {
		if _, err := os.Stat(filepath.Join(hf, name)); err != nil {
			t.Errorf("the export has no %s: %v", name, err)
		}
	}
	tok, err := llama.LoadTokenizer(filepath.Join(hf, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tok.(*tokenizer.SentencePiece); !ok {
		t.Errorf("the exported tokenizer.json loads as a %T, want a SentencePiece", tok)
	}
	if tok.VocabSize() != src.VocabSize() || tok.BOS() != src.BOS() || fmt.Sprint(tok.EOS()) != fmt.Sprint(src.EOS()) {
		t.Errorf("the exported tokenizer has %d tokens, BOS %d, EOS %v; the GGUF's %d, %d, %v", tok.VocabSize(), tok.BOS(), tok.EOS(), src.VocabSize(), src.BOS(), src.EOS())
	}
	sameIDs(t, "the exported tokenizer.json", tok, src)
	const prompt = "Once upon a time, there was a"
	want := generateText(t, b, llama.Source{GGUF: path}, prompt)
	if got := generateText(t, b, llama.Source{HF: hf}, prompt); got != want {
		t.Errorf("the Hugging Face export generates %q, the GGUF %q", got, want)
	}

	if err := export.Write(b, export.Options{From: hf, Out: back, Format: "gguf", DType: engine.F32}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(back)
	if err != nil {
		t.Fatal(err)
	}
	model := f.Meta["tokenizer.ggml.model"]
	f.Close()
	if model != "llama" {
		t.Errorf("the GGUF made from the export has tokenizer.ggml.model %v, want llama", model)
	}
	tokBack, err := llama.LoadTokenizer(back)
	if err != nil {
		t.Fatal(err)
	}
	sameIDs(t, back, tokBack, src)
	if got := generateText(t, b, llama.Source{GGUF: back}, prompt); got != want {
		t.Errorf("the GGUF made from the Hugging Face export generates %q, the original %q", got, want)
	}
}

// hfJSModules returns the node_modules directory where
// scripts/setup-exportcheck.sh installs Hugging Face's JavaScript GGUF
// reader and tokenizers, or skips t when node or the packages are absent.
func hfJSModules(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed (scripts/setup.sh installs it)")
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := wd
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		if filepath.Dir(root) == root {
			t.Fatalf("no go.mod above %s", wd)
		}
		root = filepath.Dir(root)
	}
	modules := filepath.Join(root, "build", "exportcheck", "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "@huggingface", "tokenizers")); err != nil {
		t.Skip("@huggingface/gguf and @huggingface/tokenizers are not installed: run scripts/setup-exportcheck.sh")
	}
	return modules
}

// hfJSResult is what scripts/exportcheck/check.cjs prints.
type hfJSResult struct {
	Metadata map[string]any `json:"metadata"`
	Tensors  []struct {
		Name  string `json:"name"`
		Shape []int  `json:"shape"`
		DType int    `json:"dtype"`
	} `json:"tensors"`
	IDs      [][]int32 `json:"ids"`
	Decoded  []string  `json:"decoded"`
	Rendered [][]int32 `json:"rendered"`
}

// loadInHFJS loads the GGUF file (if any) and the Hugging Face directory's
// tokenizer in Hugging Face's JavaScript libraries and returns what they
// read; the tokenizer encodes texts, and rendered chats as
// apply_chat_template does (adding no special tokens).
func loadInHFJS(t *testing.T, modules, file, dir string, texts, rendered []string) hfJSResult {
	t.Helper()
	req, err := json.Marshal(map[string]any{"gguf": file, "hf": dir, "texts": texts, "rendered": rendered})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", filepath.Join("..", "..", "scripts", "exportcheck", "check.cjs"), modules)
	cmd.Stdin = bytes.NewReader(req)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("loading the exports in node: %v\n%s", err, stderr.String())
	}
	var res hfJSResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("check.cjs printed %.200q: %v", out, err)
	}
	return res
}

// TestExportLoadsInHFJS loads exports in Hugging Face's JavaScript GGUF
// reader and tokenizers (installed by scripts/setup-exportcheck.sh; the
// test is skipped without them): a RoPE-scaled model trained on bytes
// exported to an f16 GGUF, whose metadata, tokenizer keys and tensors
// (rope_freqs.weight F32 of head_dim/2) they read as written; the Hugging
// Face directory exported from that GGUF, whose tokenizer.json encodes
// sample texts to the byte tokenizer's ids, BOS first, and decodes them
// back; the tokenizer.json exported from stories260K's SentencePiece
// vocabulary, which encodes texts with leading and repeated spaces, digits,
// special-token text and characters that fall back to bytes as turnwise
// does and decodes them back; and, with the shared Llama 3 tokenizer, the
// tokenizer.json made from a GGUF's Llama 3 vocabulary, which encodes as
// turnwise's does.
func TestExportLoadsInHFJS(t *testing.T) {
	modules := hfJSModules(t)
	b := cpu.New(cpu.Options{Threads: 2})
	c := ropeScaledConfig()
	c.Vocab, c.BOS, c.EOS = 258, tokenizer.BytesBOS, []int32{tokenizer.BytesEOS}
	m, err := llama.NewRandom(b, c, engine.F32, 0.5, 4)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src, file, hf := filepath.Join(dir, "src"), filepath.Join(dir, "m.gguf"), filepath.Join(dir, "hf")
	if err := m.SaveHF(src); err != nil {
		t.Fatal(err)
	}
	if err := export.Write(b, export.Options{From: src, Out: file, Format: "gguf", DType: engine.F16}); err != nil {
		t.Fatal(err)
	}
	if err := export.Write(b, export.Options{From: file, Out: hf, Format: "hf", DType: engine.F32}); err != nil {
		t.Fatal(err)
	}
	texts := []string{"Hello, world!", "  two  spaces\tand a tab\n", "héllo 日本 🙂", ""}
	chat := []tokenizer.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: " Hi there\n"}, {Role: "assistant", Content: "Hello!"}, {Role: "user", Content: "2+2?"}}
	chatOpts := tokenizer.ChatOptions{AddGenerationPrompt: true}
	rendered, err := tokenizer.RenderByteChat(chat, chatOpts)
	if err != nil {
		t.Fatal(err)
	}
	res := loadInHFJS(t, modules, file, hf, texts, []string{rendered})
	for key, want := range map[string]any{
		"general.architecture":        "llama",
		"llama.rope.dimension_count":  float64(c.HeadDim),
		"tokenizer.ggml.model":        "gpt2",
		"tokenizer.ggml.pre":          "default",
		"tokenizer.ggml.bos_token_id": float64(256),
		"tokenizer.ggml.eos_token_id": float64(257),
		"tokenizer.ggml.tokens":       map[string]any{"length": 258.0, "head": []any{"\u0100", "\u0101", "\u0102", "\u0103"}, "at256": []any{"<bos>", "<eos>"}},
		"tokenizer.ggml.merges":       map[string]any{"length": 0.0, "head": []any{}, "at256": []any{}},
		"tokenizer.chat_template":     tokenizer.ByteChatTemplate,
	} {
		if got := res.Metadata[key]; !reflect.DeepEqual(got, want) {
			t.Errorf("the GGUF reader reads %s = %#v, want %#v", key, got, want)
		}
	}
	const ggmlF32, ggmlF16 = 0, 1
	types := map[string]int{}
	for _, x := range res.Tensors {
		types[x.Name] = x.DType
		if x.Name == "rope_freqs.weight" && (len(x.Shape) != 1 || x.Shape[0] != c.HeadDim/2) {
			t.Errorf("rope_freqs.weight has shape %v, want [%d]", x.Shape, c.HeadDim/2)
		}
	}
	if dt, ok := types["rope_freqs.weight"]; !ok || dt != ggmlF32 {
		t.Errorf("rope_freqs.weight: present %v, type %d, want F32 (%d)", ok, dt, ggmlF32)
	}
	if dt := types["token_embd.weight"]; dt != ggmlF16 {
		t.Errorf("token_embd.weight has type %d, want F16 (%d)", dt, ggmlF16)
	}
	for i, text := range texts {
		want := tokenizer.Bytes{}.Encode(text, tokenizer.EncodeOptions{AddBOS: true})
		if fmt.Sprint(res.IDs[i]) != fmt.Sprint(want) {
			t.Errorf("tokenizers.js encodes %q as %v, the byte tokenizer as %v", text, res.IDs[i], want)
		}
		if res.Decoded[i] != text {
			t.Errorf("tokenizers.js decodes %q as %q", text, res.Decoded[i])
		}
	}
	// The chat template renders <bos> and <eos> as text, which the HF
	// tools read as the special tokens (as apply_chat_template needs).
	if want, _, err := tokenizer.EncodeChat(tokenizer.Bytes{}, chat, chatOpts); err != nil {
		t.Fatal(err)
	} else if fmt.Sprint(res.Rendered[0]) != fmt.Sprint(want) {
		t.Errorf("tokenizers.js encodes the rendered byte chat %q as %v, EncodeChat as %v", rendered, res.Rendered[0], want)
	}

	// A SentencePiece vocabulary (stories260K), GGUF → HF. Hugging Face's
	// tools read special-token text as the token, as turnwise does with
	// AllowSpecial.
	t.Run("sentencepiece", func(t *testing.T) {
		path := testdata.Path(t, "stories260K", "stories260K.gguf")
		sp, err := llama.LoadTokenizer(path)
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "stories")
		if err := export.Write(b, export.Options{From: path, Out: out, Format: "hf", DType: engine.F32}); err != nil {
			t.Fatal(err)
		}
		texts := []string{
			"Once upon a time, there was a little girl named Lily.", " one leading space", "   three leading spaces",
			"two  spaces and a trailing one ", "digits 1234567890 and 3.14", "tab\tnewline\n\nend",
			"héllo wörld 日本 🙂 – ½", "", "The end.</s>Then <s>more", storiesText,
		}
		// And texts drawn from words, digits, characters without a token
		// and runs of spaces.
		r := rand.New(rand.NewPCG(27, 2))
		parts := strings.Fields("the a and was Lily Tim once upon time big red ball said she . , ! ? 1 23 456 é ü 日 🙂 \t \n")
		parts = append(parts, " ", "  ", "   ")
		for range 200 {
			var text strings.Builder
			for range r.IntN(30) {
				text.WriteString(parts[r.IntN(len(parts))])
				if r.IntN(3) > 0 {
					text.WriteByte(' ')
				}
			}
			texts = append(texts, text.String())
		}
		res := loadInHFJS(t, modules, "", out, texts, nil)
		for i, text := range texts {
			want := sp.Encode(text, tokenizer.EncodeOptions{AddBOS: true, AllowSpecial: true})
			if fmt.Sprint(res.IDs[i]) != fmt.Sprint(want) {
				t.Errorf("tokenizers.js encodes %q with the SentencePiece tokenizer.json as %v, turnwise as %v", text, res.IDs[i], want)
			}
			if !strings.Contains(text, "</s>") && res.Decoded[i] != text {
				t.Errorf("tokenizers.js decodes %q as %q", text, res.Decoded[i])
			}
		}
	})

	// The Llama 3 vocabulary, HF → GGUF → HF: some seconds of JSON.
	if testing.Short() {
		t.Skip("the Llama 3 vocabulary's part is skipped in -short mode")
	}
	bpe, err := tokenizer.LoadJSON(testdata.Path(t, "llama3", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	meta, err := tokenizer.GGUFMetadata(bpe)
	if err != nil {
		t.Fatal(err)
	}
	fromGGUF, err := tokenizer.FromGGUFMetadata(meta)
	if err != nil {
		t.Fatal(err)
	}
	hf3 := filepath.Join(dir, "llama3")
	if err := os.MkdirAll(hf3, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := llama.WriteTokenizerFiles(fromGGUF, hf3); err != nil {
		t.Fatal(err)
	}
	texts = append(texts, "I'm sure it's 12345 tokens, isn't it?\n\n\tdef f(x):\n        return x**2")
	if rendered, err = tokenizer.RenderChat(chat, chatOpts); err != nil {
		t.Fatal(err)
	}
	res = loadInHFJS(t, modules, "", hf3, texts, []string{rendered})
	for i, text := range texts {
		want := bpe.Encode(text, tokenizer.EncodeOptions{AddBOS: true})
		if fmt.Sprint(res.IDs[i]) != fmt.Sprint(want) {
			t.Errorf("tokenizers.js encodes %q with the Llama 3 tokenizer.json made from GGUF metadata as %v, turnwise as %v", text, res.IDs[i], want)
		}
	}
	if want, _, err := tokenizer.EncodeChat(bpe, chat, chatOpts); err != nil {
		t.Fatal(err)
	} else if fmt.Sprint(res.Rendered[0]) != fmt.Sprint(want) {
		t.Errorf("tokenizers.js encodes the rendered Llama 3.1 chat as %v, EncodeChat as %v", res.Rendered[0], want)
	}
}

// TestWriteTokenizerFilesNoHFForm checks that a tokenizer without a Hugging
// Face form (a SentencePiece vocabulary without byte tokens, which a
// Hugging Face BPE cannot encode with as turnwise does) writes nothing and
// says why, for the export to report, instead of passing silently.
func TestWriteTokenizerFilesNoHFForm(t *testing.T) {
	cfg := tokenizer.SentencePieceConfig{BOS: 1, EOS: 2, Unknown: 0,
		Tokens: []string{"<unk>", "<s>", "</s>", "▁", "a", "▁a"}, Scores: []float32{0, 0, 0, -10, -10, -1}}
	tok, err := tokenizer.NewSentencePiece(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	err = llama.WriteTokenizerFiles(tok, dir)
	if !errors.Is(err, tokenizer.ErrNoHFForm) || !strings.Contains(err.Error(), "byte") {
		t.Errorf("WriteTokenizerFiles: %v, want ErrNoHFForm saying which byte has no token", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("wrote %d files, want none", len(entries))
	}
}
