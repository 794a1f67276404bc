package main

import (
	_ "embed"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/turnwise/turnwise/data"
	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/internal/flagcheck"
	"github.com/turnwise/turnwise/internal/recipe"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/optim"
	"github.com/turnwise/turnwise/tokenizer"
	"github.com/turnwise/turnwise/trainer"
)

// tinyCorpus is the built-in training data: short regular stories
// (scripts/tiny_corpus.py writes it), so that `train sft` with no flags
// trains a small byte-level model from scratch in a few minutes on a CPU.
//
//go:embed corpus/tiny.txt
var tinyCorpus string

// builtinConfig is the model `train sft` trains from scratch by default.
var builtinConfig = llama.Config{Dim: 128, Layers: 4, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 384, Vocab: 258,
	NormEps: 1e-5, RopeTheta: 10000, MaxSeqLen: 256, BOS: tokenizer.BytesBOS, EOS: []int32{tokenizer.BytesEOS}}

// runSFT implements "train sft".
func runSFT(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("sft", stderr)
	var mf modelFlags
	mf.register(fs)
	mf.registerRecompute(fs)
	dataPath := fs.String("data", "", "training data: .jsonl or plain text (default: the built-in corpus)")
	var format data.Format
	fs.Var(&format, "data-format", "the rows of --data: auto (told by the first row's keys), messages, text, prompt-completion or sharegpt; any but auto reads the file as JSONL whatever its name")
	skipBad := fs.Bool("skip-bad-lines", false, "skip malformed JSONL lines (counted) instead of stopping")
	tokPath := fs.String("tokenizer", "", "tokenizer (default: the model's own; bytes when training from scratch)")
	steps := fs.Int("steps", 400, "optimizer steps (0 with --epochs)")
	var epochs epochsValue
	fs.Var(&epochs, "epochs", "passes over the training examples: the run takes the steps they need instead of --steps (default: --steps decides)")
	batchTokens := fs.Int("batch-tokens", 1024, "tokens per packed micro-batch")
	micro := fs.Int("micro-batches", 1, "micro-batches accumulated per step")
	lr := fs.Float64("lr", 0, fmt.Sprintf("peak learning rate (0: %g from scratch, %g fine-tuning every weight of a pretrained model, %g for LoRA; see above)", scratchLR, fullFineTuneLR, loraFineTuneLR))
	warmup := flagcheck.NewWarmup(0.05)
	fs.Var(warmup, "warmup", "fraction of the steps spent warming up")
	minRatio := fs.Float64("min-lr-ratio", 0.1, "the cosine schedule's floor, as a fraction of --lr")
	wd := fs.Float64("weight-decay", 0.01, "AdamW weight decay")
	clip := fs.Float64("clip", 1, "clip the global gradient norm to this (0: off)")
	rank := fs.Int("lora-rank", 0, "train a LoRA adapter of this rank on a frozen base (0: full fine-tuning); at most the smallest dimension of the projections it adapts")
	alpha := fs.Float64("lora-alpha", llama.PEFTDefaultAlpha, "LoRA α: a fresh adapter's update is scaled by α/rank (PEFT's default; 0: 2·rank, the scale of 2 of the RL trainers)")
	dropout := fs.Float64("lora-dropout", 0, "LoRA dropout: the probability of zeroing each input element of a fresh adapter, in training steps only (PEFT's lora_dropout; kept ones are scaled by 1/(1−p))")
	targets := registerLoRATargets(fs)
	evalFrac := fs.Float64("eval-fraction", 0.05, "fraction of examples held out for evaluation")
	evalEvery := fs.Int("eval-every", 100, "steps between evaluations (0: never)")
	runDir := fs.String("out", "runs/sft", "directory for checkpoints, metrics.jsonl and the final model")
	ckEvery := fs.Int("checkpoint-every", 100, "steps between checkpoints")
	keep := fs.Int("keep", 3, "checkpoints kept")
	resume := fs.Bool("resume", true, "continue from the newest valid checkpoint in --out (false: refuse a run directory that has one)")
	force := fs.Bool("force", false, "resume even though --out's config.yaml records other settings (it is then replaced)")
	prompt := fs.String("prompt", "Mia went to", "text to continue after training (empty: no generation)")
	maxNew := fs.Int("max-new", 120, "tokens to generate after training")
	peak := fs.Float64("peak-tflops", 0, "one device's peak TFLOP/s, for the MFU in metrics.jsonl (the GPU's bf16 data-sheet peak, or the CPU GEMM rate train bench measures; 0: no MFU)")
	zero := fs.Int("zero", 0, "ZeRO stage under train launch: 1 shards the optimizer's moments and f32 master weights across the ranks; 0 keeps them whole on every rank")
	overlap := fs.Bool("overlap-reduce", false, "under train launch on CPU ranks (without --zero 1): all-reduce each layer's gradients while the backward goes on")
	flagcheck.Alias(fs, "run-dir", "out")
	if err := parse(fs, args); err != nil {
		return err
	}
	if epochs.n > 0 && *steps != 0 && fs.Changed("steps") {
		return fmt.Errorf("--epochs %d and --steps %d both say how long the run is: give one (--steps 0 with --epochs)", epochs.n, *steps)
	}
	if epochs.n > 0 {
		*steps = 0
		fs.Set("steps", "0") // recorded in config.yaml as the run used it
	} else if *steps == 0 {
		return errors.New("--steps 0: give a number of steps, or --epochs N")
	}
	warmupSteps, notice := warmup.Steps(*steps)
	if notice != "" {
		fmt.Fprintln(stderr, notice)
	}
	if targets.Chosen() && (*rank == 0 || mf.adapter != "") {
		return errors.New("--lora-targets chooses the projections of a fresh adapter: give it with --lora-rank N, without --adapter")
	}
	if (fs.Changed("lora-alpha") || fs.Changed("lora-dropout")) && (*rank == 0 || mf.adapter != "") {
		return errors.New("--lora-alpha and --lora-dropout shape a fresh adapter: give them with --lora-rank N, without --adapter (whose adapter_config.json says its own)")
	}
	if *dataPath == "" && fs.Changed("data-format") {
		return errors.New("--data-format says the format of --data: give it with --data FILE")
	}
	// No model named: the built-in one, from scratch. --preset stays empty,
	// so that the run's config.yaml, given back as --config, says the same.
	builtin := mf.Named() == 0
	var err error
	if *lr == 0 {
		*lr = defaultLR(builtin || mf.Preset != "", *rank > 0 || mf.adapter != "")
		fs.Set("lr", strconv.FormatFloat(*lr, 'g', -1, 64)) // recorded in config.yaml as used
	}
	// The model's architecture, read before anything loads: a missing
	// model or a rank it cannot take stops the run here.
	c := builtinConfig
	if !builtin {
		if c, err = mf.config(); err != nil {
			return err
		}
	}
	if *rank > 0 {
		if err := c.CheckLoRARank(sftLoRA(*rank, targets, *alpha, *dropout)); err != nil {
			return fmt.Errorf("--lora-rank %d: %w", *rank, err)
		}
	}
	var job member
	if err = job.enter(&mf.backendFlags, &stdout); err != nil {
		return err
	}

	// The model and its tokenizer.
	var (
		m   *llama.Model
		ad  *llama.Adapter
		tok tokenizer.Tokenizer
	)
	if builtin {
		b, err := mf.open()
		if err != nil {
			return err
		}
		if m, err = llama.NewRandom(b, builtinConfig, engine.F32, 0.02, mf.seed); err != nil {
			return err
		}
		mf.apply(m)
		tok = tokenizer.Bytes{}
	} else {
		if m, ad, err = mf.load(); err != nil {
			return err
		}
		if tok, err = modelTokenizer(&mf, *tokPath); err != nil {
			if mf.Preset == "" {
				return err
			}
			tok = tokenizer.Bytes{} // a preset trained from scratch
		}
	}
	if err := m.Config.CheckVocab(tok.VocabSize()); err != nil {
		return err
	}
	if *rank > 0 && ad == nil {
		if ad, err = m.NewAdapter(sftLoRA(*rank, targets, *alpha, *dropout), mf.seed); err != nil {
			return err
		}
	}

	// The data.
	examples, err := loadExamples(*dataPath, data.ReadOptions{SkipBadLines: *skipBad, Format: format}, tok, stderr)
	if err != nil {
		return err
	}
	ctx, stop := interruptible(stderr)
	err = trainer.RunSFTContext(ctx, trainer.SFTJob{Model: m, Adapter: ad, Rank: *rank, Examples: examples, EvalFraction: *evalFrac,
		BatchTokens: *batchTokens, Seed: mf.seed, Resume: *resume, Log: stdout, Flags: recipe.Values(fs), Force: *force,
		Epochs: epochs.n, WarmupSteps: func(n int) int { s, _ := warmup.Steps(n); return s },
		Join: func(b engine.Backend) (engine.Communicator, func(), error) { return joinJob(b, job.rank) },
		Config: trainer.Config{
			Steps: *steps, MicroBatches: *micro, EvalEvery: *evalEvery, EvalBatches: 2,
			CheckpointEvery: *ckEvery, KeepCheckpoints: *keep, RunDir: *runDir, Compress: true, Zero: *zero, OverlapReduce: *overlap, PeakFLOPS: *peak * 1e12,
			DropoutSeed: mf.seed,
			Schedule:    optim.Schedule{Peak: *lr, Warmup: warmupSteps, Total: *steps, Cosine: true, MinRatio: *minRatio},
			AdamW:       optim.AdamWConfig{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: float32(*wd), MaxGradNorm: float32(*clip)},
		}})
	stop()
	if err != nil {
		return err
	}
	if *prompt == "" {
		return nil
	}
	ids := append([]int32{m.Config.BOS}, tok.Encode(*prompt, tokenizer.EncodeOptions{})...)
	if *maxNew, err = m.Config.FitMaxNew(len(ids), *maxNew, stdout); err != nil {
		return err
	}
	text, err := m.Greedy(tok, ids, *maxNew, ad)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\ngreedy continuation of %q:\n%s%s\n", *prompt, *prompt, text)
	return nil
}

// The peak learning rates of train sft when --lr is not given (see
// defaultLR).
const (
	scratchLR      = 3e-3
	fullFineTuneLR = 2e-5
	loraFineTuneLR = 2e-4
)

// defaultLR returns train sft's learning rate for a run that starts from
// random weights (scratch) or from a pretrained model, training every
// weight or a LoRA adapter: the rates fine-tuning recipes use for a
// pretrained model, far below from-scratch training's so as not to undo
// pretraining, and ten times higher for LoRA's small, zero-started update.
func defaultLR(scratch, lora bool) float64 {
	switch {
	case scratch:
		return scratchLR
	case lora:
		return loraFineTuneLR
	}
	return fullFineTuneLR
}

// sftLoRA is the adapter train sft trains: rank r on the projections
// targets chose, scaled by alpha/r (alpha 0: 2r), with dropout on its
// input.
func sftLoRA(r int, targets *loraTargets, alpha, dropout float64) llama.LoRAConfig {
	lc := llama.LoRAFor(r, targets.Targets())
	if alpha != 0 {
		lc.Alpha = float32(alpha)
	}
	lc.Dropout = float32(dropout)
	return lc
}

// loadExamples reads and tokenizes the training data: the built-in corpus,
// or the file at path (data.LoadExamples).
func loadExamples(path string, opts data.ReadOptions, tok tokenizer.Tokenizer, stderr io.Writer) ([]data.Example, error) {
	if path == "" {
		docs, err := data.ReadText(strings.NewReader(tinyCorpus), "built-in corpus")
		return data.TextExamples(tok, docs), err
	}
	ex, skipped, err := data.LoadExamples(path, tok, opts)
	if len(skipped) > 0 {
		fmt.Fprintf(stderr, "skipped %d malformed lines (first: %v)\n", len(skipped), &skipped[0])
	}
	if errors.Is(err, data.ErrUnknownFormat) {
		err = fmt.Errorf("%w (or name the format with --data-format)", err)
	}
	return ex, err
}
