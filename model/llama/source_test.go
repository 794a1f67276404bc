package llama

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/tokenizer"
)

func TestSource(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 1})
	for _, s := range []Source{{}, {GGUF: "a.gguf", Preset: "tiny"}, {HF: "d", Preset: "tiny"}} {
		if _, err := s.Config(); !errors.Is(err, errSource) {
			t.Errorf("%+v: Config error %v, want the one-model error", s, err)
		}
		if _, err := s.Load(b, engine.F32, 1); !errors.Is(err, errSource) {
			t.Errorf("%+v: Load error %v, want the one-model error", s, err)
		}
	}
	want, err := Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	src := Source{Preset: "tiny"}
	c, err := src.Config()
	if err != nil || c.Dim != want.Dim || c.Layers != want.Layers {
		t.Fatalf("Config of the tiny preset: %+v, %v", c, err)
	}
	m1, err := src.Load(b, engine.F32, 7)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := NewRandom(b, want, engine.F32, 0.02, 7)
	if err != nil {
		t.Fatal(err)
	}
	w1, w2 := engine.ToF32(b, m1.Weights.Embed), engine.ToF32(b, m2.Weights.Embed)
	for i := range w1 {
		if w1[i] != w2[i] {
			t.Fatalf("a preset's weights differ from NewRandom's with the same seed at %d", i)
		}
	}
	if _, err := (Source{GGUF: "/nonexistent/x.gguf"}).Config(); err == nil {
		t.Error("a missing GGUF file gave a configuration")
	}
}

func TestCheckVocab(t *testing.T) {
	c := Config{Vocab: 258}
	for n, ok := range map[int]bool{100: true, 258: true, 259: false} {
		if err := c.CheckVocab(n); (err == nil) != ok {
			t.Errorf("CheckVocab(%d) with a vocabulary of 258: %v", n, err)
		}
	}
}

func TestSourceName(t *testing.T) {
	for s, want := range map[Source]string{
		{HF: "/models/Llama-3.1-8B-Instruct/"}: "Llama-3.1-8B-Instruct",
		{GGUF: "dir/stories260K.gguf"}:         "stories260K",
		{Preset: "tiny"}:                       "tiny",
	} {
		if got := s.Name(); got != want {
			t.Errorf("%+v: Name() = %q, want %q", s, got, want)
		}
	}
}

func TestSourceTokenizer(t *testing.T) {
	if _, err := (Source{Preset: "tiny"}).Tokenizer(""); !errors.Is(err, ErrNoTokenizer) {
		t.Errorf("a preset's tokenizer: %v, want ErrNoTokenizer", err)
	}
	dir := t.TempDir()
	if _, err := (Source{HF: dir}).Tokenizer(""); err == nil || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Errorf("a directory without tokenizer.json gave %v, want an error naming it", err)
	}
	if tok, err := (Source{Preset: "tiny"}).Tokenizer("bytes"); err != nil || !tokenizer.ByteChat(tok) {
		t.Errorf(`Tokenizer("bytes") = %T, %v; want the byte tokenizer`, tok, err)
	}
	// A model trained from scratch on bytes, saved without a tokenizer.json.
	c := Config{Dim: 16, Layers: 1, Heads: 2, KVHeads: 1, HeadDim: 8, FFN: 32, Vocab: 258,
		NormEps: 1e-5, RopeTheta: 10000, MaxSeqLen: 32, BOS: tokenizer.BytesBOS, EOS: []int32{tokenizer.BytesEOS}}
	m, err := NewRandom(cpu.New(cpu.Options{Threads: 1}), c, engine.F32, 0.02, 1)
	if err != nil {
		t.Fatal(err)
	}
	byteDir := filepath.Join(dir, "bytes-model")
	if err := m.SaveHF(byteDir); err != nil {
		t.Fatal(err)
	}
	if tok, err := (Source{HF: byteDir}).Tokenizer(""); err != nil || !tokenizer.ByteChat(tok) {
		t.Errorf("a byte-level model without tokenizer.json: %T, %v; want the byte tokenizer", tok, err)
	}
	bad := filepath.Join(dir, "bad.gguf")
	if err := os.WriteFile(bad, []byte("GGUF\x03"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTokenizer(bad); err == nil || !strings.Contains(err.Error(), "bad.gguf") {
		t.Errorf("a truncated GGUF file gave %v, want an error naming it", err)
	}
}

// TestAdapterBaseSource checks how an adapter's directory leads to its
// base: a local directory or file it names, and a clear error for a base
// it does not name or that is not on this machine.
func TestAdapterBaseSource(t *testing.T) {
	dir := t.TempDir()
	baseDir, baseFile := filepath.Join(dir, "base"), filepath.Join(dir, "base.gguf")
	if err := os.Mkdir(baseDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(baseFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		base string
		want Source
		err  string
	}{
		{base: baseDir, want: Source{HF: baseDir}},
		{base: baseFile, want: Source{GGUF: baseFile}},
		{base: "", err: "names no base_model_name_or_path"},
		{base: "meta-llama/Llama-3.1-8B", err: `on "meta-llama/Llama-3.1-8B"`},
	}
	for _, tc := range tests {
		ad := filepath.Join(t.TempDir(), "adapter")
		if err := os.Mkdir(ad, 0o755); err != nil {
			t.Fatal(err)
		}
		cfg := fmt.Sprintf(`{"peft_type": "LORA", "r": 4, "base_model_name_or_path": %q}`, tc.base)
		if err := os.WriteFile(filepath.Join(ad, "adapter_config.json"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		if !IsAdapterDir(ad) || IsAdapterDir(baseDir) {
			t.Errorf("IsAdapterDir: %v for an adapter, %v for a model directory", IsAdapterDir(ad), IsAdapterDir(baseDir))
		}
		got, err := AdapterBaseSource(ad)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), ad) {
				t.Errorf("base %q: error %v, want one naming the adapter and %q", tc.base, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("base %q: %+v, %v; want %+v", tc.base, got, err, tc.want)
		}
	}
}
