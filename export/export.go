// Package export turns what a run trained — a model, an adapter on its
// base, or a step checkpoint — into a merged model others load: a Hugging
// Face directory or a GGUF file.
package export

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/turnwise/turnwise/checkpoint"
	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/gguf"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/safetensors"
)

// Options says what Write reads and writes.
type Options struct {
	// From is the model: a Hugging Face directory, a GGUF file, a PEFT
	// adapter directory (adapter_config.json) whose base_model_name_or_path
	// names the base unless Base does, or a full fine-tuning run's step
	// checkpoint (manifest.json), whose architecture Base gives.
	From string
	// Base names the base model of an adapter given as From, overriding
	// the adapter's own base_model_name_or_path, or the model a step
	// checkpoint's run trained (its weights are replaced by the
	// checkpoint's, in the checkpoint's dtype).
	Base string
	// Adapter is a PEFT adapter directory merged into From ("": none).
	Adapter string
	// Out is the directory (Format "hf") or file (Format "gguf") written.
	Out string
	// Format is "hf" or "gguf".
	Format string
	// DType is the dtype of the weights written: f32, f16 or bf16.
	DType engine.DType
}

// Write reads a model (and an adapter, merged into its weights in f32;
// or a full fine-tuning run's step checkpoint on the model it trained)
// onto b and writes it as a Hugging Face directory — config.json,
// safetensors, and the source directory's tokenizer files or a
// generation_config.json (llama.CopyTokenizerFiles) — or as a GGUF file
// (llama.Model.SaveGGUF, with a GGUF source's tokenizer metadata). Errors
// name the file at fault.
func Write(b engine.Backend, o Options) error {
	if o.Format != "hf" && o.Format != "gguf" {
		return fmt.Errorf("export: format %q, want hf or gguf", o.Format)
	}
	if o.Out == "" {
		return errors.New("export: no output named")
	}
	from, adapter := o.From, o.Adapter
	if _, err := os.Stat(filepath.Join(from, "adapter_config.json")); err == nil {
		if adapter != "" {
			return fmt.Errorf("export: %s is an adapter and an adapter (%s) is named too", from, adapter)
		}
		adapter, from = from, o.Base
		if from == "" {
			base, err := llama.AdapterBase(adapter)
			if err != nil {
				return err
			}
			if from = base; from == "" {
				return fmt.Errorf("%s: base_model_name_or_path is empty; name the base model", filepath.Join(adapter, "adapter_config.json"))
			}
		}
	}
	ckpt, dt := "", engine.F32
	if _, err := os.Stat(filepath.Join(from, checkpoint.ManifestName)); err == nil {
		if o.Base == "" {
			return fmt.Errorf("export: %s is a step checkpoint, which holds weights without their architecture; name the model the run trained (--base)", from)
		}
		ckpt, from = from, o.Base
		if dt, err = checkpointDType(ckpt); err != nil {
			return err
		}
	}
	src := llama.Source{HF: from}
	if st, err := os.Stat(from); err != nil {
		return fmt.Errorf("export: %w", err)
	} else if !st.IsDir() {
		src = llama.Source{GGUF: from}
	}
	m, err := src.Load(b, dt, 0)
	if err != nil {
		return err
	}
	if ckpt != "" {
		ws := checkpoint.Tensors{}
		m.Weights.Each(func(name string, t *engine.Tensor) { ws[name] = t })
		if err := checkpoint.Load(ckpt, b, map[string]checkpoint.Tensors{"model": ws}, nil, nil); err != nil {
			return fmt.Errorf("export: %w (a LoRA run's step checkpoint holds its adapter without the adapter's configuration: export the run's final adapter directory instead)", err)
		}
	}
	var tokMeta map[string]any // a GGUF source's tokenizer
	if src.GGUF != "" {
		f, err := gguf.Open(src.GGUF)
		if err != nil {
			return err
		}
		tokMeta = map[string]any{}
		for k, v := range f.Meta {
			if strings.HasPrefix(k, "tokenizer.") {
				tokMeta[k] = v
			}
		}
		f.Close()
	}
	if adapter != "" {
		ad, err := m.LoadPEFT(adapter)
		if err != nil {
			return err
		}
		m.Merge(ad)
	}
	if o.Format == "gguf" {
		return m.SaveGGUF(o.Out, o.DType, tokMeta)
	}
	if err := m.SaveHFAs(o.Out, o.DType); err != nil {
		return err
	}
	return llama.CopyTokenizerFiles(m.Config, src.HF, o.Out)
}

// checkpointDType returns the dtype of the weights in the step checkpoint
// dir (its model.safetensors), which the model must be loaded in to take
// them.
func checkpointDType(dir string) (engine.DType, error) {
	path := filepath.Join(dir, "model.safetensors")
	f, err := safetensors.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	names := f.Names()
	if len(names) == 0 {
		return 0, fmt.Errorf("%s: no tensors", path)
	}
	info, _ := f.Info(names[0])
	dt, err := engine.ParseDType(strings.ToLower(string(info.DType)))
	if err != nil || !dt.IsFloat() {
		return 0, fmt.Errorf("%s: tensor %s is %s, want F32, F16 or BF16", path, names[0], info.DType)
	}
	return dt, nil
}
