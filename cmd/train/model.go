package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/internal/flagcheck"
	"github.com/turnwise/turnwise/model/llama"
)

// modelFlags are the flags that say which model to load and where to run it,
// shared by the subcommands that need a model.
type modelFlags struct {
	llama.Source
	adapter string
	dtype   string
	seed    uint64
	backendFlags
}

// register adds the flags of a subcommand that runs a model: which model
// (registerSource) and the backend's flags; trainers add --recompute with
// registerRecompute.
func (m *modelFlags) register(fs *pflag.FlagSet) {
	m.registerSource(fs)
	fs.StringVar(&m.adapter, "adapter", "", "apply a LoRA adapter directory in PEFT's layout (adapter_config.json + adapter_model.safetensors)")
	fs.StringVar(&m.dtype, "dtype", "f32", "weight and activation dtype: f32 or bf16")
	fs.Uint64Var(&m.seed, "seed", 1, "seed of random weights (--preset) and of sampling")
	m.backendFlags.register(fs)
}

// registerSource adds the flags that name a model, for the subcommands
// that read its architecture only.
func (m *modelFlags) registerSource(fs *pflag.FlagSet) {
	fs.StringVar(&m.GGUF, "gguf", "", "load a llama-architecture GGUF checkpoint (F32, F16 or BF16)")
	fs.StringVar(&m.HF, "hf", "", "load a Hugging Face checkpoint directory (config.json + safetensors)")
	fs.StringVar(&m.Preset, "preset", "", "build a preset architecture with random weights: "+strings.Join(llama.PresetNames(), ", "))
}

// errOneModel is the error of flags that name no model or several.
var errOneModel = errors.New("name exactly one model: --gguf FILE, --hf DIR or --preset NAME")

// config returns the architecture the flags name without loading weights.
func (m *modelFlags) config() (llama.Config, error) {
	if m.Named() != 1 {
		return llama.Config{}, errOneModel
	}
	return m.Config()
}

// load opens the backend, loads (or builds) the model and, with --adapter,
// its LoRA adapter (nil otherwise). --hf naming a PEFT adapter's directory
// loads the base model its adapter_config.json names, with the adapter.
func (m *modelFlags) load() (*llama.Model, *llama.Adapter, error) {
	if m.Named() == 1 && m.HF != "" && llama.IsAdapterDir(m.HF) {
		// --hf ADAPTER: the adapter on the base it names, as PEFT's
		// AutoPeftModel loads it.
		if m.adapter != "" {
			return nil, nil, fmt.Errorf("--hf %s is a PEFT adapter and --adapter %s names another", m.HF, m.adapter)
		}
		base, err := llama.AdapterBaseSource(m.HF)
		if err != nil {
			return nil, nil, err
		}
		m.Source, m.adapter = base, m.HF
	}
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

// loadBase opens the backend and loads (or builds) the model, with the
// backend flags' model options set.
func (m *modelFlags) loadBase() (*llama.Model, error) {
	if m.Named() != 1 {
		return nil, errOneModel
	}

	dt, err := engine.ParseDType(m.dtype)
	if err != nil || (dt != engine.F32 && dt != engine.BF16) {
		return nil, fmt.Errorf("--dtype %q: want f32 or bf16", m.dtype)
	}
	b, err := m.open()
	if err != nil {
		return nil, err
	}
	mod, err := m.Load(b, dt, m.seed)
	if err != nil {
		return nil, err
	}
	m.apply(mod)
	return mod, nil
}

// runInfo implements "train info": a model's architecture and parameter
// counts.
func runInfo(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("info", stderr)
	var mf modelFlags
	mf.registerSource(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	c, err := mf.config()
	if err != nil {
		return err
	}
	return c.Describe(stdout)
}

// runPlan implements "train plan": the memory a training or inference job
// needs.
func runPlan(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("plan", stderr)
	var mf modelFlags
	mf.registerSource(fs)
	batch := fs.Int("batch", 1, "sequences per step")
	seq := fs.Int("seq", 8192, "tokens per sequence")
	rank := fs.Int("lora-rank", 0, "LoRA rank (0: full fine-tuning)")
	targets := registerLoRATargets(fs)
	recompute := fs.Bool("recompute", false, "recompute activations per layer in the backward (the trainers' --recompute)")
	infer := fs.Bool("inference", false, "plan generation (weights, KV cache, a prefill of every token) instead of training")
	wdt := fs.String("dtype", "bf16", "dtype of the weights and activations: bf16 or f32")
	flagcheck.Alias(fs, "weight-dtype", "dtype")
	asJSON := fs.Bool("json", false, "print the plan as JSON (see --help)")
	ranks := fs.Int("ranks", 1, "data-parallel ranks (GPUs) the job runs on; the plan is per rank")
	zero := fs.Int("zero", 0, "ZeRO stage: 1 shards the f32 master weights and Adam moments across --ranks (--zero 1 of sft, critic, actor, mtdpo, rft)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *ranks < 1 || *zero < 0 || *zero > 1 {
		return fmt.Errorf("--ranks %d --zero %d: want ≥ 1 ranks and stage 0 or 1", *ranks, *zero)
	}
	c, err := mf.config()
	if err != nil {
		return err
	}
	dt, err := engine.ParseDType(*wdt)
	if err != nil || (dt != engine.BF16 && dt != engine.F32) {
		return fmt.Errorf("--dtype %q: want bf16 or f32", *wdt)
	}
	o := llama.PlanOptions{Batch: *batch, SeqLen: *seq, WeightBytes: dt.Size(), Recompute: *recompute && !*infer, Inference: *infer, Ranks: *ranks, Zero: *zero}
	if *rank > 0 {
		lc := llama.LoRAFor(*rank, targets.Targets())
		o.LoRA = &lc
	}
	p, err := c.Plan(o)
	if err != nil {
		return err
	}
	if *asJSON {
		return p.WriteJSON(stdout, c, o)
	}
	fmt.Fprintf(stdout, "%s, %d × %d tokens, %v weights%s%s\n\n", o.Title(), *batch, *seq, dt, map[bool]string{true: ", recomputation"}[o.Recompute], o.PerRank())
	return p.Write(stdout)
}
