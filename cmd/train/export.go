package main

import (
	"fmt"
	"io"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/export"
)

// runExport turns a model, or an adapter on its base, into a merged
// Hugging Face directory or a GGUF file (export.Write), on the CPU.
func runExport(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("export", stderr)
	var o export.Options
	fs.StringVar(&o.From, "from", "", "the model: a Hugging Face directory, a GGUF file, a PEFT adapter directory (its base from adapter_config.json or --base), or a full fine-tuning run's step-N checkpoint (with --base)")
	fs.StringVar(&o.Base, "base", "", "the base model of an adapter given as --from (default: the adapter's base_model_name_or_path), or the model a step checkpoint's run trained")
	fs.StringVar(&o.Adapter, "adapter", "", "a PEFT adapter directory to merge into --from")
	fs.StringVar(&o.Out, "out", "", "the directory (--format hf) or file (--format gguf) to write")
	fs.StringVar(&o.Format, "format", "hf", "hf (config.json, safetensors, tokenizer and generation files) or gguf (with the tokenizer's metadata)")
	dtype := fs.String("dtype", "f32", "dtype of the weights written: f32, f16 or bf16")
	fs.BoolVar(&o.Force, "force", false, "replace an existing --out (a directory of files, or a file); without it a non-empty --out is refused")
	if err := parse(fs, args); err != nil {
		return err
	}
	if o.From == "" || o.Out == "" {
		return fmt.Errorf("name the model (--from) and the output (--out)")
	}
	dt, err := engine.ParseDType(*dtype)
	if err != nil || !dt.IsFloat() {
		return fmt.Errorf("--dtype %q: want f32, f16 or bf16", *dtype)
	}
	o.DType, o.Log = dt, stderr
	if err := export.Write(cpu.New(cpu.Options{}), o); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s (%s, %v)\n", o.Out, o.Format, dt)
	return nil
}
