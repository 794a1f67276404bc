package llama

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/gguf"
)

// Source names a model: exactly one of a GGUF file, a Hugging Face
// checkpoint directory, or a preset architecture (Preset) with random
// weights.
type Source struct {
	GGUF   string // a llama-architecture GGUF file (F32, F16 or BF16 tensors)
	HF     string // a Hugging Face checkpoint directory (config.json + safetensors)
	Preset string // a preset's name
}

// errSource is the error of a Source that names no model or several.
var errSource = errors.New("name exactly one model: a GGUF file, a Hugging Face directory or a preset")

// Named returns how many models s names (exactly one is valid).
func (s Source) Named() int {
	n := 0
	for _, v := range []string{s.GGUF, s.HF, s.Preset} {
		if v != "" {
			n++
		}
	}
	return n
}

// Config returns the architecture s names, without loading weights.
func (s Source) Config() (Config, error) {
	switch {
	case s.Named() != 1:
		return Config{}, errSource
	case s.Preset != "":
		return Preset(s.Preset)
	case s.HF != "":
		return LoadHFConfig(filepath.Join(s.HF, HFConfigName))
	}
	f, err := gguf.Open(s.GGUF)
	if err != nil {
		return Config{}, err
	}
	defer f.Close()
	return ConfigFromGGUF(f)
}

// Load loads the model s names onto b with weights and activations in dt
// (LoadGGUF, LoadHF), or builds a preset with weights drawn from N(0, 0.02²)
// by seed (NewRandom).
func (s Source) Load(b engine.Backend, dt engine.DType, seed uint64) (*Model, error) {
	switch {
	case s.Named() != 1:
		return nil, errSource
	case s.GGUF != "":
		return LoadGGUF(b, s.GGUF, dt)
	case s.HF != "":
		return LoadHF(b, s.HF, dt)
	}
	c, err := Preset(s.Preset)
	if err != nil {
		return nil, err
	}
	return NewRandom(b, c, dt, 0.02, seed)
}

// Name is the model's name: its directory's or file's base name (without
// the file's extension), or the preset's.
func (s Source) Name() string {
	switch {
	case s.HF != "":
		return filepath.Base(filepath.Clean(s.HF))
	case s.GGUF != "":
		return strings.TrimSuffix(filepath.Base(s.GGUF), filepath.Ext(s.GGUF))
	}
	return s.Preset
}

// SourceAt returns the Source of a model at path: a Hugging Face directory,
// or else a GGUF file.
func SourceAt(path string) (Source, error) {
	st, err := os.Stat(path)
	if err != nil {
		return Source{}, err
	}
	if st.IsDir() {
		return Source{HF: path}, nil
	}
	return Source{GGUF: path}, nil
}

// AdapterBaseSource returns the Source of the base model that the PEFT
// adapter in dir names (adapter_config.json's base_model_name_or_path),
// which must be a local model: a name on a model hub is an error saying
// how to name the base.
func AdapterBaseSource(dir string) (Source, error) {
	base, err := AdapterBase(dir)
	if err != nil {
		return Source{}, err
	}
	cfg := filepath.Join(dir, "adapter_config.json")
	if base == "" {
		return Source{}, fmt.Errorf("%s is a PEFT adapter whose %s names no base_model_name_or_path: give its base model with the adapter (--adapter %s)", dir, cfg, dir)
	}
	s, err := SourceAt(base)
	if err != nil {
		return Source{}, fmt.Errorf("%s is a PEFT adapter on %q (%s), which is not a model on this machine: give its base model with the adapter (--adapter %s): %w", dir, base, cfg, dir, err)
	}
	return s, nil
}

// IsAdapterDir reports whether dir holds a PEFT adapter
// (adapter_config.json) rather than a model (config.json).
func IsAdapterDir(dir string) bool {
	_, errA := os.Stat(filepath.Join(dir, "adapter_config.json"))
	_, errM := os.Stat(filepath.Join(dir, HFConfigName))
	return errA == nil && errM != nil
}
