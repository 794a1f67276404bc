package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/turnwise/turnwise/internal/outfile"
	"github.com/turnwise/turnwise/internal/recipe"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/sweetrl/rl"
	"github.com/turnwise/turnwise/tokenizer"
)

// The SWEET-RL subcommands, each one step of the pipeline with its data in
// files: rollout → critic → actor, the baselines rft and mtdpo, and eval.
// train demo runs them all in one process on the built-in task family.

// policyFlags name a model, its adapter and its tokenizer.
type policyFlags struct {
	modelFlags
	tok string
}

func (p *policyFlags) register(fs *pflag.FlagSet) {
	p.modelFlags.register(fs)
	fs.StringVar(&p.tok, "tokenizer", "", `tokenizer file, or "bytes" (default: the model's own; bytes for a byte-level model)`)
}

// load returns the model, its adapter (nil without --adapter) and its
// tokenizer.
func (p *policyFlags) load() (*llama.Model, *llama.Adapter, tokenizer.Tokenizer, error) {
	m, ad, err := p.modelFlags.load()
	if err != nil {
		return nil, nil, nil, err
	}
	tok, err := modelTokenizer(&p.modelFlags, p.tok)
	if err != nil {
		return nil, nil, nil, err
	}
	return m, ad, tok, m.Config.CheckVocab(tok.VocabSize())
}

// trainFlags are the optimisation flags of the trainers.
type trainFlags struct {
	rank                       int
	alpha, dropout             float64
	full                       bool
	lr                         float64
	epochs, batch              int
	beta, nll                  float64
	batchTokens, maxLen        int
	warmup, minRatio, wd, clip float64
	peakTFLOPS                 float64
	losses                     string
	zero                       int
	overlap                    bool
	targets                    *loraTargets
	ckEvery, keep              int
	resume, force              bool
}

// register adds the flags with the given defaults of epochs and NLL
// coefficient (negative: no --nll flag); pref adds those of the
// preference trainers (--beta, --batch of pairs, --losses). Every other
// default is the reference's (sweetrl/rl/reference.go).
func (t *trainFlags) register(fs *pflag.FlagSet, epochs int, nll float64, pref bool) {
	fs.IntVar(&t.rank, "lora-rank", 16, "rank of the trained LoRA adapter")
	fs.Float64Var(&t.alpha, "lora-alpha", 0, "LoRA α: a fresh adapter's update is scaled by α/rank (0: 2·rank, the scale of 2 the LoRA learning rate was chosen with)")
	if !pref {
		fs.Float64Var(&t.dropout, "lora-dropout", 0, "LoRA dropout: the probability of zeroing each input element of a fresh adapter, in training steps only (PEFT's lora_dropout)")
	}
	t.targets = registerLoRATargets(fs)
	fs.BoolVar(&t.full, "full", false, "fine-tune every weight instead of a LoRA adapter (the reference's setting)")
	fs.Float64Var(&t.lr, "lr", 0, fmt.Sprintf("peak learning rate (0: the reference's %g with --full, %g for LoRA)", rl.RefLR, rl.LoRALR))
	fs.IntVar(&t.epochs, "epochs", epochs, "passes over the data")
	if pref {
		fs.IntVar(&t.batch, "batch", rl.RefPairsPerStep, "pairs per optimizer step")
		fs.Float64Var(&t.beta, "beta", rl.RefBeta, "β of the preference loss")
		fs.StringVar(&t.losses, "losses", "", "also write each optimizer step's loss to this file, a line \"step loss\" per step")
		fs.IntVar(&t.batchTokens, "batch-tokens", 8192, "tokens per forward pass at most (whole pairs)")
		fs.IntVar(&t.maxLen, "max-len", 8192, "drop pairs with a side longer than this many tokens")
	} else {
		fs.IntVar(&t.batchTokens, "batch-tokens", 8192, "tokens per optimizer step (packed)")
		fs.IntVar(&t.maxLen, "max-len", 8192, "tokens of a trajectory kept at most")
	}
	if nll >= 0 {
		fs.Float64Var(&t.nll, "nll", nll, "coefficient of the NLL term on the chosen side")
	}
	fs.Float64Var(&t.warmup, "warmup", rl.RefWarmupFrac, "fraction of the steps spent warming up")
	fs.Float64Var(&t.minRatio, "min-lr-ratio", rl.RefMinLRRatio, "the cosine schedule's floor, as a fraction of --lr")
	fs.Float64Var(&t.wd, "weight-decay", rl.RefWeightDecay, "AdamW weight decay")
	fs.Float64Var(&t.clip, "clip", rl.RefMaxGradNorm, "clip the global gradient norm to this (0: off)")
	fs.Float64Var(&t.peakTFLOPS, "peak-tflops", 0, "the device's peak TFLOP/s, for the MFU in --out's metrics.jsonl: the GPU's bf16 data-sheet peak (989.4 for an H100 SXM), or the CPU GEMM rate train bench measures (0: no MFU)")
	fs.IntVar(&t.zero, "zero", 0, "ZeRO stage under train launch: 1 shards the optimizer's moments and f32 master weights across the ranks; 0 keeps them whole on every rank")
	fs.BoolVar(&t.overlap, "overlap-reduce", false, "under train launch on CPU ranks (without --zero 1): all-reduce each layer's gradients while the backward goes on")
	fs.IntVar(&t.ckEvery, "checkpoint-every", rl.CheckpointDefaults.Every, "steps between checkpoints in --out (the last step is always saved)")
	fs.IntVar(&t.keep, "keep", rl.CheckpointDefaults.Keep, "checkpoints kept")
	fs.BoolVar(&t.resume, "resume", true, "continue from the newest valid checkpoint in --out (false: refuse an --out that has one)")
	fs.BoolVar(&t.force, "force", false, "resume even though --out's config.yaml records other settings (it is then replaced)")
}

// checkpoints are the trainer's checkpoints in the run directory out.
func (t *trainFlags) checkpoints(out string) rl.Checkpoints {
	c := rl.CheckpointDefaults
	c.RunDir, c.Every, c.Keep = out, t.ckEvery, t.keep
	return c
}

// target says what the flags train.
func (t *trainFlags) target() rl.Target {
	return rl.Target{Full: t.full, Rank: t.rank, Alpha: float32(t.alpha), Dropout: float32(t.dropout), LR: t.lr, Targets: t.targets.Targets()}
}

// prefOptions are the reference's preference options (rl.ReferencePrefOptions)
// as the flags change them.
func (t *trainFlags) prefOptions(seed uint64, out io.Writer) rl.PrefOptions {
	o := rl.ReferencePrefOptions()
	o.Beta, o.NLLCoef, o.Epochs, o.PairsPerStep, o.BatchTokens = t.beta, t.nll, t.epochs, t.batch, t.batchTokens
	o.LR, o.WarmupFrac, o.MinLRRatio, o.Seed, o.Progress = t.target().LearningRate(), t.warmup, t.minRatio, seed, out
	o.AdamW.WeightDecay, o.AdamW.MaxGradNorm = float32(t.wd), float32(t.clip)
	o.PeakFLOPS, o.Zero, o.OverlapReduce = t.peakTFLOPS*1e12, t.zero, t.overlap
	return o
}

// trajJob is what the trainers on a trajectory file share: their flags,
// the episode rules, the trajectories and the model.
type trajJob struct {
	fs        *pflag.FlagSet
	pf        policyFlags
	ef        envFlags
	tf        trainFlags
	path, out *string
	proto     sweetrl.Protocol
	trajs     []sweetrl.Trajectory
	m         *llama.Model
	ad        *llama.Adapter
	tok       tokenizer.Tokenizer
	member
}

// newTrajJob registers the shared flags of subcommand name, with its
// default epochs and NLL coefficient (negative: no --nll) and, with pref,
// the preference trainers' flags.
func newTrajJob(name string, stderr io.Writer, epochs int, nll float64, pref bool, what, out string) *trajJob {
	j := &trajJob{fs: newFlags(name, stderr)}
	j.pf.register(j.fs)
	j.pf.registerRecompute(j.fs)
	j.ef.registerFamily(j.fs)
	j.tf.register(j.fs, epochs, nll, pref)
	j.path = j.fs.String("trajectories", "", what)
	j.out = j.fs.String("out", "", out)
	return j
}

// load parses args, enters the job (silencing *stdout on ranks other than
// 0) and loads the trajectories and the model.
func (j *trajJob) load(args []string, stdout *io.Writer) error {
	if err := parse(j.fs, args); err != nil {
		return err
	}
	if *j.out == "" {
		return errors.New("name the output directory with --out DIR")
	}
	if err := outfile.CheckDir(*j.out); err != nil {
		return err
	}
	err := j.enter(&j.pf.backendFlags, stdout)
	if err != nil {
		return err
	}
	if j.proto, err = j.ef.Protocol(); err != nil {
		return err
	}
	if j.trajs, err = rl.LoadJobTrajectories(*j.path, *stdout); err != nil {
		return err
	}
	if j.m, j.ad, j.tok, err = j.pf.load(); err != nil {
		return err
	}
	j.comm, j.leave, err = joinJob(j.m.Backend(), j.rank)
	return err
}

// job is the library's view of the loaded job (rl.Job).
func (j *trajJob) job(stdout io.Writer) rl.Job {
	return rl.Job{Model: j.m, Adapter: j.ad, Tok: j.tok, Protocol: j.proto, Rules: j.ef.Rules(), Trajs: j.trajs, Path: *j.path, Target: j.tf.target(),
		MaxLen: j.tf.maxLen, Seed: j.pf.seed, Pref: j.tf.prefOptions(j.pf.seed, stdout), Out: *j.out, Log: stdout, Flags: recipe.Values(j.fs), Losses: j.tf.losses, Comm: j.comm,
		Checkpoints: j.tf.checkpoints(*j.out), Resume: j.tf.resume, Force: j.tf.force}
}

// episodeJob is what the subcommands that play episodes (rollout, eval)
// share: the agent's and the episodes' flags and, once loaded, the agent's
// model, the family's rules and tasks, the simulator and the scorer.
type episodeJob struct {
	fs     *pflag.FlagSet
	pf     policyFlags
	ef     envFlags
	temp   float64
	topP   float64
	topK   int
	maxNew int
	m      *llama.Model
	ad     *llama.Adapter
	tok    tokenizer.Tokenizer
	proto  sweetrl.Protocol
	tasks  []sweetrl.Task
	sim    sweetrl.Simulator
	hs     *sweetrl.HTTPSimulator // the simulator, when it is the HTTP one
	scorer sweetrl.Scorer
	desc   string // which scorer, in words
	member
}

// newEpisodeJob registers the shared flags of subcommand name.
func newEpisodeJob(name string, stderr io.Writer) *episodeJob {
	j := &episodeJob{fs: newFlags(name, stderr)}
	j.pf.register(j.fs)
	j.ef.register(j.fs)
	j.ef.registerScoring(j.fs)
	j.fs.Float64Var(&j.temp, "temperature", rl.RefTemperature, "the agent's sampling temperature (1, as the paper samples rollouts and evaluations; 0: greedy)")
	j.fs.Float64Var(&j.topP, "top-p", 1, "the agent's nucleus sampling mass (1: off)")
	j.fs.IntVar(&j.topK, "top-k", 0, "the agent draws among its k most likely tokens, before --top-p (0: off)")
	j.fs.IntVar(&j.maxNew, "max-new", rl.RefMaxNew, "tokens per agent turn at most")
	return j
}

// load parses args, runs check (the subcommand's own flag checks), and
// loads everything playing episodes needs (heldOut: the demo family's
// held-out tasks), having entered the job (silencing *stdout on ranks
// other than 0). What the env opened (a browser, CLIP) is closed on an
// error; otherwise the caller closes it with ef.Close.
func (j *episodeJob) load(args []string, heldOut bool, check func() error, stdout *io.Writer) (err error) {
	if err := parse(j.fs, args); err != nil {
		return err
	}
	if err := check(); err != nil {
		return err
	}
	if err := j.ef.checkScorer(); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			j.ef.Close()
		}
	}()
	if err := j.enter(&j.pf.backendFlags, stdout); err != nil {
		return err
	}
	if j.proto, err = j.ef.Protocol(); err != nil {
		return err
	}
	if j.tasks, err = j.ef.tasks(heldOut); err != nil {
		return err
	}
	if err := j.ef.checkSimulator(context.Background()); err != nil {
		return err
	}
	if j.m, j.ad, j.tok, err = j.pf.load(); err != nil {
		return err
	}
	if j.comm, j.leave, err = joinJob(j.m.Backend(), j.rank); err != nil {
		return err
	}
	if j.sim, j.hs, err = j.ef.newSimulator(&j.pf, j.m, j.tok); err != nil {
		return err
	}
	if j.scorer, j.desc, err = j.ef.NewScorer(context.Background(), j.m.Backend()); err != nil {
		return err
	}
	j.maxNew, err = j.m.Config.FitMaxNew(0, j.maxNew, *stdout)
	return err
}

// episodes is the library's view of the loaded job (rl.Episodes).
func (j *episodeJob) episodes(stdout io.Writer) rl.Episodes {
	return rl.Episodes{Model: j.m, Adapter: j.ad, Tok: j.tok, Protocol: j.proto, Tasks: j.tasks, Sim: j.sim, HTTP: j.hs, Scorer: j.scorer,
		ScorerName: j.desc, Temperature: j.temp, TopP: j.topP, TopK: j.topK, MaxNew: j.maxNew, Seed: j.pf.seed, SimWorkers: j.ef.simWorkers, Log: stdout, Comm: j.comm}
}

// runRollout implements "train rollout".
func runRollout(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	j := newEpisodeJob("rollout", stderr)
	k := j.fs.Int("k", 8, "episodes per task")
	maxBatch := j.fs.Int("max-batch", 64, "agent turns generated together at most")
	out := j.fs.String("out", "", "trajectories file to write (.jsonl, or .jsonl.zst); it grows as FILE.partial until every episode is in")
	cont := j.fs.Bool("continue", false, "continue the FILE.partial an interrupted run with the same flags left")
	chunk := j.fs.Int("chunk", 256, "episodes played together, their agent turns generated in batches; each is scored and appended to the file as it ends (keep it when continuing)")
	order := j.fs.String("order", "task", "order of the episodes in --out: task (the k episodes of each task together) or reference (every task once, then every task again: the layout the reference's scripts expect)")
	var ord rl.RolloutOrder
	err := j.load(args, false, func() error {
		if *out == "" || *k <= 0 {
			return fmt.Errorf("want --out FILE and a positive --k (got %q, %d)", *out, *k)
		}
		var err error
		ord, err = rl.ParseRolloutOrder(*order)
		return err
	}, &stdout)
	if err != nil {
		return err
	}
	defer j.ef.Close()
	defer j.leave()
	return rl.RolloutJob(context.Background(), j.episodes(stdout), *k, *maxBatch, rl.FileRolloutOptions{Path: *out, Continue: *cont, Chunk: *chunk, Order: ord})
}

// runCritic implements "train critic".
func runCritic(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	j := newTrajJob("critic", stderr, rl.RefCriticEpochs, -1, true, "scored trajectories (train rollout)",
		"directory for the critic (a PEFT adapter, or a Hugging Face checkpoint with --full)")
	head := j.fs.String("head", "logprob", "logprob: the reference's critic, mean log-probability of the agent's turns against a frozen reference; scalar: the value-head ablation, a scalar head on the last hidden state")
	scoreFlag := j.fs.String("critic-score", "turn", "turn: the paper's score (Eq. 2–3), the sum over agent turns of each turn's mean log-ratio; trajectory: the released code's, one mean over all agent tokens")
	if err := j.load(args, &stdout); err != nil {
		return err
	}
	defer j.leave()
	ctx, stop := interruptible(stderr)
	defer stop()
	return rl.TrainCriticContext(ctx, j.job(stdout), *head, *scoreFlag)
}

// runActor implements "train actor".
func runActor(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	j := newTrajJob("actor", stderr, rl.RefActorEpochs, rl.RefActorNLL, true, "scored trajectories (train rollout) whose agent turns are the training states",
		"directory for the actor (a PEFT adapter, or a Hugging Face checkpoint with --full)")
	fs := j.fs
	criticAd := fs.String("critic", "", "the critic: a PEFT adapter directory over the same base model (train critic)")
	criticHF := fs.String("critic-hf", "", "the critic: a whole Hugging Face checkpoint (train critic --full)")
	candidates := fs.Int("candidates", rl.RefCandidates, "candidates sampled per turn")
	perTurn := fs.Int("pairs-per-turn", rl.RefPairsPerTurn, "pairs formed per turn")
	fraction := fs.Float64("data-fraction", rl.RefDataFraction, "fraction of the agent turns used")
	temp := fs.Float32("temperature", rl.RefTemperature, "sampling temperature of the candidates (1, as the reference samples them)")
	topP := fs.Float32("top-p", 1, "nucleus sampling mass of the candidates (1: off)")
	topK := fs.Int("top-k", 0, "candidates draw among the k most likely tokens, before --top-p (0: off)")
	maxNew := fs.Int("max-new", rl.RefMaxNew, "tokens per candidate at most")
	baseline := fs.String("advantage-baseline", "reference", "what a candidate's critic score is compared with: reference (the paper's Eq. 3: the critic's frozen reference, with the ground truth) or policy (the released code: the sampling policy, without it)")
	nllScope := fs.String("nll-scope", "sequence", "the NLL term's tokens: sequence (the reference: the whole chosen sequence, context included) or reply")
	if err := parse(fs, args); err != nil {
		return err
	}
	if (*criticAd == "") == (*criticHF == "") {
		return errors.New("name the critic with exactly one of --critic DIR and --critic-hf DIR")
	}
	bl, err := rl.ParseAdvantageBaseline(*baseline)
	if err != nil {
		return fmt.Errorf("--advantage-baseline: %w", err)
	}
	seqNLL, err := rl.ParseNLLScope(*nllScope)
	if err != nil {
		return err
	}
	if err := j.load(nil, &stdout); err != nil {
		return err
	}
	defer j.leave()
	m, ad, pf := j.m, j.ad, j.pf
	if *maxNew, err = m.Config.FitMaxNew(0, *maxNew, stdout); err != nil {
		return err
	}
	critic, err := rl.LoadCritic(m, ad, *criticAd, *criticHF, bl, func() (*llama.Model, error) {
		cf := pf.modelFlags
		cf.Source, cf.adapter = llama.Source{HF: *criticHF}, ""
		return cf.loadBase()
	}, stdout)
	if err != nil {
		return err
	}
	ctx, stop := interruptible(stderr)
	defer stop()
	return rl.TrainActorContext(ctx, j.job(stdout), rl.ActorJob{Critic: critic, Temperature: *temp, TopP: *topP, TopK: *topK, MaxNew: *maxNew, Candidates: *candidates,
		PairsPerTurn: *perTurn, DataFraction: *fraction, NLLSequence: seqNLL})
}

// runMTDPO implements "train mtdpo".
func runMTDPO(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	j := newTrajJob("mtdpo", stderr, 1, -1, true, "scored trajectories (train rollout)",
		"directory for the policy (a PEFT adapter, or a Hugging Face checkpoint with --full)")
	if err := j.load(args, &stdout); err != nil {
		return err
	}
	defer j.leave()
	ctx, stop := interruptible(stderr)
	defer stop()
	return rl.TrainMTDPOContext(ctx, j.job(stdout))
}

// runRFT implements "train rft".
func runRFT(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	j := newTrajJob("rft", stderr, 2, -1, false, "scored trajectories (train rollout); the successful ones are trained on",
		"directory for the policy (a PEFT adapter, or a Hugging Face checkpoint with --full)")
	if err := j.load(args, &stdout); err != nil {
		return err
	}
	defer j.leave()
	ctx, stop := interruptible(stderr)
	defer stop()
	return rl.TrainRFTContext(ctx, j.job(stdout), j.tf.epochs)
}

// runEval implements "train eval".
func runEval(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	j := newEpisodeJob("eval", stderr)
	seeds := j.fs.Int("seeds", 1, "episodes per task, each with its own sampling seed")
	out := j.fs.String("out", "", "also write the episodes to this trajectories file")
	against := j.fs.String("against", "", "frontend: another method's episodes of the same tasks (train eval --out, one a task): print the win rate against them")
	margin := j.fs.Float64("tie-margin", 0, "frontend: cosines within this of each other tie in the win rate")
	asJSON := j.fs.Bool("json", false, "print the result as one JSON object (method, model, adapter, tasks, episodes, seeds, pass_rate, pass_ci95, success, success_ci95, successes, simulator_failures, …) on standard output; progress goes to standard error")
	log := stdout
	err := j.load(args, true, func() error {
		if *asJSON {
			log = stderr
		}
		if *against != "" && (j.ef.Family != "frontend" || *seeds != 1) {
			return errors.New("--against compares one episode of each frontend task: use it with --env frontend and --seeds 1")
		}
		if *out == "" {
			return nil
		}
		return outfile.CheckDir(filepath.Dir(*out))
	}, &log)
	if err != nil {
		return err
	}
	defer j.ef.Close()
	defer j.leave()
	r, err := j.ef.EvalJob(context.Background(), j.episodes(log), *seeds, *out, *against, *margin)
	if err != nil || !*asJSON || j.rank.Rank != 0 {
		return err
	}
	r.Name(j.pf.Name(), j.pf.adapter)
	return r.WriteJSON(stdout)
}
