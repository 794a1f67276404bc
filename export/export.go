// Package export turns what a run trained — a model, an adapter on its
// base, or a step checkpoint — into a merged model others load: a Hugging
// Face directory or a GGUF file.
package export

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/turnwise/turnwise/checkpoint"
	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/gguf"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/safetensors"
	"github.com/turnwise/turnwise/tokenizer"
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
	// Force replaces an existing Out: a directory of files (no
	// subdirectories) or a file. Without it an existing non-empty Out is
	// refused. Either way the model is written beside Out first and moved
	// into place whole, so that Out holds exactly the new model's files and
	// a failed export leaves Out as it was.
	Force bool
	// Log receives notices: what the export could not carry (nil: none).
	Log io.Writer
}

// Write reads a model (and an adapter, merged into its weights in f32;
// or a full fine-tuning run's step checkpoint on the model it trained)
// onto b and writes it as a Hugging Face directory — config.json,
// safetensors, and the source directory's tokenizer files or a
// generation_config.json (llama.CopyTokenizerFiles), and for a source
// without tokenizer.json (a GGUF file, a model trained on bytes) tokenizer
// files made from its tokenizer (llama.WriteTokenizerFiles) — or as a GGUF
// file (llama.Model.SaveGGUF) with the tokenizer's metadata: a GGUF
// source's tokenizer.* keys as they are, any other source's tokenizer as
// tokenizer.GGUFMetadata writes it. Errors name the file at fault.
func Write(b engine.Backend, o Options) error {
	if o.Format != "hf" && o.Format != "gguf" {
		return fmt.Errorf("export: format %q, want hf or gguf", o.Format)
	}
	if o.Out == "" {
		return errors.New("export: no output named")
	}
	replace, err := checkOut(o.Out, o.Format, o.Force)
	if err != nil {
		return err
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
	src, err := llama.SourceAt(from)
	if err != nil {
		return fmt.Errorf("export: %w", err)
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
	// The tokenizer is written out where the source does not carry it in
	// the format written: a GGUF from a Hugging Face directory, a Hugging
	// Face directory from a GGUF file or from a directory without
	// tokenizer.json.
	var tok tokenizer.Tokenizer
	_, statErr := os.Stat(filepath.Join(src.HF, "tokenizer.json"))
	if o.Format == "gguf" && src.GGUF == "" || o.Format == "hf" && (src.GGUF != "" || statErr != nil) {
		if tok, err = sourceTokenizer(src, tokMeta); err != nil {
			return err
		}
	}
	if tok != nil && o.Format == "gguf" {
		if tokMeta, err = tokenizer.GGUFMetadata(tok); err != nil {
			return fmt.Errorf("export: %w", err)
		}
	}
	if adapter != "" {
		ad, err := m.LoadPEFT(adapter)
		if err != nil {
			return err
		}
		m.Merge(ad)
	}
	if err := os.MkdirAll(filepath.Dir(o.Out), 0o755); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	stage, err := os.MkdirTemp(filepath.Dir(o.Out), "."+filepath.Base(o.Out)+".export-")
	if err == nil {
		err = os.Chmod(stage, 0o755) // MkdirTemp's 0700 would become the export's
	}
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer os.RemoveAll(stage) // what is left of it after a failure
	written := stage
	if o.Format == "gguf" {
		written = filepath.Join(stage, filepath.Base(o.Out))
		err = m.SaveGGUF(written, o.DType, tokMeta)
	} else if err = m.SaveHFAs(stage, o.DType); err == nil {
		if err = llama.CopyTokenizerFiles(m.Config, src.HF, stage); err == nil && tok != nil {
			err = llama.WriteTokenizerFiles(tok, stage)
			if errors.Is(err, tokenizer.ErrNoHFForm) {
				// The export stands without them: say so, and how to load it.
				if o.Log != nil {
					fmt.Fprintf(o.Log, "export: no tokenizer files in %s (%v): load it with --tokenizer %s\n", o.Out, err, o.From)
				}
				err = nil
			}
		}
	}
	if err != nil {
		return err
	}
	return moveInto(written, o.Out, replace)
}

// sourceTokenizer returns the tokenizer of the model src names, nil when
// it carries none: a GGUF file without tokenizer metadata (meta holds its
// tokenizer.* keys), or a Hugging Face directory without tokenizer.json
// whose vocabulary is not the byte tokenizer's.
func sourceTokenizer(src llama.Source, meta map[string]any) (tokenizer.Tokenizer, error) {
	if _, ok := meta["tokenizer.ggml.model"]; src.GGUF != "" && !ok {
		return nil, nil
	}
	tok, err := src.Tokenizer("")
	if src.HF != "" && errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("export: the model's tokenizer: %w", err)
	}
	return tok, nil
}

// checkOut reports whether out exists and is to be replaced: a missing out
// or an empty directory (format hf) is written; an existing file (gguf) or
// a non-empty directory (hf) is refused unless force, and then only if
// it is a directory of plain files (not holding, or being, the working
// directory) or a file.
func checkOut(out, format string, force bool) (replace bool, err error) {
	st, err := os.Stat(out)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("export: %w", err)
	}
	if format == "gguf" {
		if st.IsDir() {
			return false, fmt.Errorf("export: %s is a directory; --format gguf writes a file", out)
		}
		if !force {
			return false, fmt.Errorf("export: %s exists; --force replaces it", out)
		}
		return true, nil
	}
	if !st.IsDir() {
		return false, fmt.Errorf("export: %s is a file; --format hf writes a directory", out)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		return false, fmt.Errorf("export: %w", err)
	}
	if len(entries) == 0 {
		return true, nil
	}
	if !force {
		names := make([]string, 0, 3)
		for _, e := range entries[:min(3, len(entries))] {
			names = append(names, e.Name())
		}
		more := ""
		if len(entries) > 3 {
			more = ", …"
		}
		return false, fmt.Errorf("export: %s is not empty (%s%s); --force replaces its contents with the new model's files", out, strings.Join(names, ", "), more)
	}
	for _, e := range entries {
		if e.IsDir() {
			return false, fmt.Errorf("export: %s holds a directory (%s), so it is not a model directory; not replacing it", out, e.Name())
		}
	}
	abs, err1 := filepath.Abs(out)
	wd, err2 := os.Getwd()
	if err1 != nil || err2 != nil {
		return false, fmt.Errorf("export: %s: cannot tell whether it holds the working directory", out)
	}
	if rel, err := filepath.Rel(abs, wd); err == nil && (rel == "." || !strings.HasPrefix(rel, "..")) {
		return false, fmt.Errorf("export: %s is or holds the working directory; not replacing it", out)
	}
	return true, nil
}

// moveInto moves the export written at from to out: out itself, when
// replace, is first moved aside and removed once the new one is in place.
func moveInto(from, out string, replace bool) error {
	old := ""
	if replace {
		old = filepath.Join(filepath.Dir(out), "."+filepath.Base(out)+".replaced")
		if err := os.RemoveAll(old); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		if err := os.Rename(out, old); err != nil {
			return fmt.Errorf("export: moving the old %s aside: %w", out, err)
		}
	}
	if err := os.Rename(from, out); err != nil {
		if old != "" {
			os.Rename(old, out) // put the old one back
		}
		return fmt.Errorf("export: %w", err)
	}
	if old != "" {
		if err := os.RemoveAll(old); err != nil {
			return fmt.Errorf("export: the new model is in %s, but removing the old one (%s): %w", out, old, err)
		}
	}
	return nil
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
