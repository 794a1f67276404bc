package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/gguf"
	"github.com/turnwise/turnwise/model/llama"
)

// modelFlags are the flags that say which model to load and where to run it,
// shared by the subcommands that need a model.
type modelFlags struct {
	gguf, hf, preset string
	adapter          string
	dtype, backend   string
	threads          int
	seed             uint64
}

func (m *modelFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&m.gguf, "gguf", "", "load a llama-architecture GGUF checkpoint (F32, F16 or BF16)")
	fs.StringVar(&m.hf, "hf", "", "load a Hugging Face checkpoint directory (config.json + safetensors)")
	fs.StringVar(&m.adapter, "adapter", "", "apply a LoRA adapter directory in PEFT's layout (adapter_config.json + adapter_model.safetensors)")
	fs.StringVar(&m.preset, "preset", "", "build a preset architecture with random weights: "+strings.Join(llama.PresetNames(), ", "))
	fs.StringVar(&m.dtype, "dtype", "f32", "weight and activation dtype: f32 or bf16")
	fs.StringVar(&m.backend, "backend", "cpu", "cpu, or cuda (in a binary built with -tags cuda or cudaemu)")
	fs.IntVar(&m.threads, "threads", 0, "CPU threads (0: one per core)")
	fs.Uint64Var(&m.seed, "seed", 1, "seed of random weights (--preset) and of sampling")
}

// config returns the architecture the flags name without loading weights.
func (m *modelFlags) config() (llama.Config, error) {
	switch {
	case m.count() != 1:
		return llama.Config{}, errors.New("name exactly one model: --gguf FILE, --hf DIR or --preset NAME")
	case m.preset != "":
		return llama.Preset(m.preset)
	case m.hf != "":
		return llama.LoadHFConfig(filepath.Join(m.hf, "config.json"))
	}
	f, err := gguf.Open(m.gguf)
	if err != nil {
		return llama.Config{}, err
	}
	defer f.Close()
	return llama.ConfigFromGGUF(f)
}

func (m *modelFlags) count() int {
	n := 0
	for _, s := range []string{m.gguf, m.hf, m.preset} {
		if s != "" {
			n++
		}
	}
	return n
}

// load opens the backend, loads (or builds) the model and, with --adapter,
// its LoRA adapter (nil otherwise).
func (m *modelFlags) load() (*llama.Model, *llama.Adapter, error) {
	mod, err := m.loadBase()
	if err != nil || m.adapter == "" {
		return mod, nil, err
	}
	ad, err := mod.LoadPEFT(m.adapter)
	if err != nil {
		return nil, nil, err
	}
	return mod, ad, nil
}

func (m *modelFlags) loadBase() (*llama.Model, error) {
	if m.count() != 1 {
		return nil, errors.New("name exactly one model: --gguf FILE, --hf DIR or --preset NAME")
	}
	dt, err := engine.ParseDType(m.dtype)
	if err != nil || (dt != engine.F32 && dt != engine.BF16) {
		return nil, fmt.Errorf("--dtype %q: want f32 or bf16", m.dtype)
	}
	b, err := openBackend(m.backend, m.threads)
	if err != nil {
		return nil, err
	}
	switch {
	case m.gguf != "":
		return llama.LoadGGUF(b, m.gguf, dt)
	case m.hf != "":
		return llama.LoadHF(b, m.hf, dt)
	}
	c, err := llama.Preset(m.preset)
	if err != nil {
		return nil, err
	}
	return llama.NewRandom(b, c, dt, 0.02, m.seed)
}

// runInfo implements "train info": a model's architecture and parameter
// counts.
func runInfo(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("info", stderr)
	var mf modelFlags
	mf.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := mf.config()
	if err != nil {
		return err
	}
	w := stdout
	fmt.Fprintf(w, "dim %d, layers %d, heads %d, kv heads %d (GQA %d:1), head dim %d, ffn %d, vocab %d\n",
		c.Dim, c.Layers, c.Heads, c.KVHeads, c.Heads/c.KVHeads, c.HeadDim, c.FFN, c.Vocab)
	fmt.Fprintf(w, "RMSNorm eps %g, RoPE θ %g", c.NormEps, c.RopeTheta)
	if s := c.RopeScale; s != nil {
		fmt.Fprintf(w, " with llama3 scaling (factor %g, low %g, high %g, original context %d)", s.Factor, s.LowFreqFactor, s.HighFreqFactor, s.OriginalContext)
	}
	fmt.Fprintf(w, ", tied embeddings %v, max sequence %d\n", c.TiedEmbed, c.MaxSeqLen)
	fmt.Fprintf(w, "parameters: %d (%.2f B); %.2f GB in bf16\n", c.Params(), float64(c.Params())/1e9, float64(2*c.Params())/1e9)
	for _, r := range []int{8, 16, 64} {
		n, err := c.LoRAParams(llama.LoRAConfig{Rank: r, Targets: llama.AllProjections})
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "LoRA r=%d on %s: %d parameters (%.2f M)\n", r, strings.Join(llama.AllProjections, ","), n, float64(n)/1e6)
	}
	return nil
}

// runPlan implements "train plan": the memory a training or inference job
// needs.
func runPlan(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("plan", stderr)
	var mf modelFlags
	mf.register(fs)
	batch := fs.Int("batch", 1, "sequences per step")
	seq := fs.Int("seq", 8192, "tokens per sequence")
	rank := fs.Int("lora-rank", 0, "LoRA rank (0: full fine-tuning)")
	targets := fs.String("lora-targets", strings.Join(llama.AllProjections, ","), "projections LoRA adapts")
	recompute := fs.Bool("recompute", false, "recompute activations per layer in the backward")
	infer := fs.Bool("inference", false, "plan generation (weights and KV cache) instead of training")
	wdt := fs.String("weight-dtype", "bf16", "dtype of the weights: bf16 or f32")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := mf.config()
	if err != nil {
		return err
	}
	dt, err := engine.ParseDType(*wdt)
	if err != nil || !dt.IsFloat() {
		return fmt.Errorf("--weight-dtype %q: want bf16 or f32", *wdt)
	}
	o := llama.PlanOptions{Batch: *batch, SeqLen: *seq, WeightBytes: dt.Size(), Recompute: *recompute, Inference: *infer}
	mode := "full fine-tuning"
	if *rank > 0 {
		o.LoRA = &llama.LoRAConfig{Rank: *rank, Targets: strings.Split(*targets, ",")}
		mode = fmt.Sprintf("LoRA r=%d", *rank)
	}
	if *infer {
		mode = "inference"
	}
	p, err := c.Plan(o)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s, %d × %d tokens, %v weights%s\n\n", mode, *batch, *seq, dt, map[bool]string{true: ", recomputation"}[*recompute])
	return p.Write(stdout)
}
