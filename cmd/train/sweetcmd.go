package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/turnwise/turnwise/dist"
	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/internal/outfile"
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

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// trainFlags are the optimisation flags of the trainers.
type trainFlags struct {
	rank                 int
	full                 bool
	lr                   float64
	epochs, batch        int
	beta, nll            float64
	batchTokens, maxLen  int
	warmup, minRatio, wd float64
	clip                 float64
	losses               string
	comm                 engine.Communicator // the data-parallel job's (nil: one process)
}

// register adds the flags with the given defaults of epochs and NLL
// coefficient (negative: no --nll flag); every other default is the
// reference's (sweetrl/rl/reference.go).
func (t *trainFlags) register(fs *pflag.FlagSet, epochs int, nll float64) {
	fs.IntVar(&t.rank, "lora-rank", 16, "rank of the trained LoRA adapter (alpha = 2·rank, every projection)")
	fs.BoolVar(&t.full, "full", false, "fine-tune every weight instead of a LoRA adapter (the reference's setting)")
	fs.Float64Var(&t.lr, "lr", 0, fmt.Sprintf("peak learning rate (0: the reference's %g with --full, %g for LoRA)", rl.RefLR, rl.LoRALR))
	fs.IntVar(&t.epochs, "epochs", epochs, "passes over the data")
	fs.IntVar(&t.batch, "batch", rl.RefPairsPerStep, "pairs per optimizer step")
	fs.Float64Var(&t.beta, "beta", rl.RefBeta, "β of the preference loss")
	if nll >= 0 {
		fs.Float64Var(&t.nll, "nll", nll, "coefficient of the NLL term on the chosen side")
	}
	fs.IntVar(&t.batchTokens, "batch-tokens", 8192, "tokens per forward pass at most (whole pairs)")
	fs.IntVar(&t.maxLen, "max-len", 8192, "drop pairs with a side longer than this many tokens")
	fs.Float64Var(&t.warmup, "warmup", rl.RefWarmupFrac, "fraction of the steps spent warming up")
	fs.Float64Var(&t.minRatio, "min-lr-ratio", rl.RefMinLRRatio, "the cosine schedule's floor, as a fraction of --lr")
	fs.Float64Var(&t.wd, "weight-decay", rl.RefWeightDecay, "AdamW weight decay")
	fs.Float64Var(&t.clip, "clip", rl.RefMaxGradNorm, "clip the global gradient norm to this (0: off)")
	fs.StringVar(&t.losses, "losses", "", "also write each optimizer step's loss to this file, a line \"step loss\" per step")
}

// writeLosses writes st's per-step losses to --losses, if named, on rank 0.
func (t *trainFlags) writeLosses(st rl.PrefStats) error {
	if t.losses == "" || (t.comm != nil && t.comm.Rank() != 0) {
		return nil
	}
	var b []byte
	for i, l := range st.Losses {
		b = fmt.Appendf(b, "%d %.17g\n", i+1, l)
	}
	if err := os.WriteFile(t.losses, b, 0o644); err != nil {
		return fmt.Errorf("--losses: %w", err)
	}
	return nil
}

func (t *trainFlags) learningRate() float64 {
	switch {
	case t.lr > 0:
		return t.lr
	case t.full:
		return rl.RefLR
	}
	return rl.LoRALR
}

// prefOptions are the reference's preference options (rl.ReferencePrefOptions)
// as the flags change them.
func (t *trainFlags) prefOptions(seed uint64, out io.Writer, label string) rl.PrefOptions {
	o := rl.ReferencePrefOptions()
	o.Beta, o.NLLCoef, o.Epochs, o.PairsPerStep, o.BatchTokens = t.beta, t.nll, t.epochs, t.batch, t.batchTokens
	o.LR, o.WarmupFrac, o.MinLRRatio, o.Seed, o.Progress, o.Label = t.learningRate(), t.warmup, t.minRatio, seed, out, label
	o.AdamW.WeightDecay, o.AdamW.MaxGradNorm = float32(t.wd), float32(t.clip)
	o.Comm = t.comm
	return o
}

// trained returns what a trainer updates: the adapter given with --adapter,
// a fresh one of --lora-rank, or nil (every weight) with --full.
func (t *trainFlags) trained(m *llama.Model, ad *llama.Adapter, seed uint64) (*llama.Adapter, error) {
	switch {
	case t.full && ad != nil:
		return nil, errors.New("--full fine-tunes the base model: merge the --adapter first or drop --full")
	case t.full:
		return nil, nil
	case ad != nil:
		return ad, nil
	case t.rank <= 0:
		return nil, fmt.Errorf("--lora-rank %d: want a positive rank (or --full)", t.rank)
	}
	return m.NewAdapter(llama.LoRAEvery(t.rank), seed)
}

// filterPairs drops pairs with a side longer than maxLen tokens, saying so.
func filterPairs(pairs []rl.PrefPair, maxLen int, out io.Writer) []rl.PrefPair {
	kept, dropped := rl.DropLong(pairs, maxLen)
	if dropped > 0 {
		fmt.Fprintf(out, "dropped %d pairs longer than %d tokens\n", dropped, maxLen)
	}
	return kept
}

// save writes what was trained (llama.Model.Save) and says where.
func save(m *llama.Model, ad *llama.Adapter, dir string, out io.Writer) error {
	err := m.Save(ad, dir)
	if err == nil {
		fmt.Fprintf(out, "saved to %s\n", dir)
	}
	return err
}

// loadTrajectories reads a trajectory file and says what it holds.
func loadTrajectories(path string, out io.Writer) ([]sweetrl.Trajectory, error) {
	if path == "" {
		return nil, errors.New("name the trajectories with --trajectories FILE (train rollout writes them)")
	}
	trajs, err := sweetrl.LoadTrajectories(path)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "%s: %d trajectories of %d tasks, mean reward %.3f, success %.3f\n",
		path, len(trajs), len(rl.GroupByTask(trajs)), sweetrl.MeanReward(trajs), sweetrl.SuccessRate(trajs))
	return trajs, nil
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
	// The data-parallel job this process is a rank of (train launch,
	// torchrun, Slurm): a nil comm when alone.
	rank  dist.Rank
	comm  engine.Communicator
	leave func()
}

// newTrajJob registers the shared flags of subcommand name, with its
// default epochs and NLL coefficient (negative: no --nll).
func newTrajJob(name string, stderr io.Writer, epochs int, nll float64, what, out string) *trajJob {
	j := &trajJob{fs: newFlags(name, stderr)}
	j.pf.register(j.fs)
	j.pf.registerRecompute(j.fs)
	j.ef.register(j.fs)
	j.tf.register(j.fs, epochs, nll)
	j.path = j.fs.String("trajectories", "", what)
	j.out = j.fs.String("out", "", out)
	return j
}

// load parses args and loads the trajectories and the model.
func (j *trajJob) load(args []string, stdout io.Writer) error {
	if err := j.fs.Parse(args); err != nil {
		return err
	}
	j.leave = func() {}
	var err error
	if j.rank, err = dist.FromEnv(os.Getenv); err != nil {
		return err
	}
	// A rank uses the GPU of its LOCAL_RANK; rank 0 reports.
	j.pf.device = j.rank.LocalRank
	stdout = j.report(stdout)
	if *j.out == "" {
		return errors.New("name the output directory with --out DIR")
	}
	if err := outfile.CheckDir(*j.out); err != nil {
		return err
	}
	if j.proto, err = j.ef.protocol(); err != nil {
		return err
	}
	if j.trajs, err = loadTrajectories(*j.path, stdout); err != nil {
		return err
	}
	if j.m, j.ad, j.tok, err = j.pf.load(); err != nil {
		return err
	}
	j.comm, j.leave, err = joinJob(j.m.Backend(), j.rank)
	j.tf.comm = j.comm
	return err
}

// report returns stdout on rank 0, where a job reports, and io.Discard on
// the other ranks.
func (j *trajJob) report(stdout io.Writer) io.Writer {
	if j.rank.Rank != 0 {
		return io.Discard
	}
	return stdout
}

// save saves ad (nil: every weight of m) to dir on rank 0, and has every
// rank wait for it, so that the ranks leave together.
func (j *trajJob) save(m *llama.Model, ad *llama.Adapter, dir string, out io.Writer) error {
	if j.rank.Rank == 0 {
		if err := save(m, ad, dir, out); err != nil {
			return err
		}
	}
	if j.comm != nil {
		return j.comm.Barrier()
	}
	return nil
}

// episodeJob is what the subcommands that play episodes (rollout, eval)
// share: the agent's and the episodes' flags and, once loaded, the agent's
// model, the family's rules and tasks, the simulator and the scorer.
type episodeJob struct {
	fs     *pflag.FlagSet
	pf     policyFlags
	ef     envFlags
	temp   float64
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
	// The data-parallel job this process is a rank of (train launch,
	// torchrun, Slurm): a nil comm when alone.
	rank  dist.Rank
	comm  engine.Communicator
	leave func()
}

// newEpisodeJob registers the shared flags of subcommand name.
func newEpisodeJob(name string, stderr io.Writer) *episodeJob {
	j := &episodeJob{fs: newFlags(name, stderr)}
	j.pf.register(j.fs)
	j.ef.register(j.fs)
	j.fs.Float64Var(&j.temp, "temperature", rl.RefTemperature, "the agent's sampling temperature")
	j.fs.IntVar(&j.maxNew, "max-new", rl.RefMaxNew, "tokens per agent turn at most")
	return j
}

// load parses args, runs check (the subcommand's own flag checks), and
// loads everything playing episodes needs (heldOut: the demo family's
// held-out tasks).
func (j *episodeJob) load(args []string, heldOut bool, check func() error, stdout io.Writer) (err error) {
	if err := j.fs.Parse(args); err != nil {
		return err
	}
	if err := check(); err != nil {
		return err
	}
	j.leave = func() {}
	if j.rank, err = dist.FromEnv(os.Getenv); err != nil {
		return err
	}
	// A rank uses the GPU of its LOCAL_RANK; rank 0 reports.
	j.pf.device = j.rank.LocalRank
	if j.rank.Rank != 0 {
		stdout = io.Discard
	}
	if j.proto, err = j.ef.protocol(); err != nil {
		return err
	}
	if j.tasks, err = j.ef.tasks(heldOut); err != nil {
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
	if j.scorer, j.desc, err = j.ef.newScorer(); err != nil {
		return err
	}
	j.maxNew, err = fitMaxNew(j.m.Config, 0, j.maxNew, stdout)
	return err
}

// runRollout implements "train rollout".
func runRollout(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	j := newEpisodeJob("rollout", stderr)
	k := j.fs.Int("k", 8, "episodes per task")
	maxBatch := j.fs.Int("max-batch", 64, "agent turns generated together at most")
	out := j.fs.String("out", "", "trajectories file to write (.jsonl, or .jsonl.zst); it grows as FILE.partial until every episode is in")
	cont := j.fs.Bool("continue", false, "continue the FILE.partial an interrupted run with the same flags left")
	chunk := j.fs.Int("chunk", 256, "episodes played, scored and appended to the file at a time (keep it when continuing)")
	err := j.load(args, false, func() error {
		if *out == "" || *k <= 0 {
			return fmt.Errorf("want --out FILE and a positive --k (got %q, %d)", *out, *k)
		}
		return nil
	}, stdout)
	if err != nil {
		return err
	}
	defer j.leave()
	if j.rank.Rank != 0 {
		stdout = io.Discard
	}
	var all []sweetrl.Task
	for _, t := range j.tasks {
		for range *k {
			all = append(all, t)
		}
	}
	fmt.Fprintf(stdout, "%d episodes (%d tasks × %d); scoring with %s\n", len(all), len(j.tasks), *k, j.desc)
	agent := func(c int) rl.BatchAgent {
		return &rl.Sampler{Model: j.m, Adapter: j.ad, Tok: j.tok, Sample: engine.SampleParams{Temperature: float32(j.temp), TopP: 1},
			MaxNew: j.maxNew, MaxBatch: *maxBatch, Seed: rl.ChunkSeed(j.pf.seed, c)}
	}
	trajs, err := rl.RolloutToFile(context.Background(), all, agent, j.sim, j.scorer,
		rl.RolloutOptions{Protocol: j.proto, SimWorkers: j.ef.simWorkers, Progress: stdout, Label: "episodes"},
		rl.FileRolloutOptions{Path: *out, Continue: *cont, Chunk: *chunk, Log: stdout, Comm: j.comm, Backend: j.m.Backend()})
	if err != nil {
		return err
	}
	if j.comm != nil {
		// Rank 0 has written the file and serves the store: the ranks
		// leave together.
		if err := j.comm.Barrier(); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "wrote %s: mean reward %.3f, success %.3f\n", *out, sweetrl.MeanReward(trajs), sweetrl.SuccessRate(trajs))
	reportSimulator(stdout, j.hs)
	return nil
}

// reportSimulator says how many simulator calls failed, if any.
func reportSimulator(w io.Writer, hs *sweetrl.HTTPSimulator) {
	if hs != nil && hs.Failures() > 0 {
		fmt.Fprintf(w, "the simulator failed %d times (replied %q); last error: %v\n", hs.Failures(), sweetrl.NoResponse, hs.LastError())
	}
}

// runCritic implements "train critic".
func runCritic(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	j := newTrajJob("critic", stderr, rl.RefCriticEpochs, -1, "scored trajectories (train rollout)",
		"directory for the critic (a PEFT adapter, or a Hugging Face checkpoint with --full)")
	head := j.fs.String("head", "logprob", "logprob: the reference's critic, mean log-probability of the agent's turns against a frozen reference; scalar: the value-head ablation, a scalar head on the last hidden state")
	scoreFlag := j.fs.String("critic-score", "turn", "turn: the paper's score (Eq. 2–3), the sum over agent turns of each turn's mean log-ratio; trajectory: the released code's, one mean over all agent tokens")
	if err := j.load(args, stdout); err != nil {
		return err
	}
	defer j.leave()
	stdout = j.report(stdout)
	if *head != "logprob" && *head != "scalar" {
		return fmt.Errorf("--head %q: want logprob or scalar", *head)
	}
	kind, err := rl.ParseCriticScore(*scoreFlag)
	if err != nil {
		return fmt.Errorf("--critic-score: %w", err)
	}
	m, ad, tf, pf, path, out := j.m, j.ad, j.tf, j.pf, j.path, j.out
	pairs, err := rl.CriticPairs(j.tok, j.proto.System, j.trajs, kind)
	if err != nil {
		return fmt.Errorf("%s: %w", *path, err)
	}
	pairs = filterPairs(pairs, tf.maxLen, stdout)
	critic, err := tf.trained(m, ad, pf.seed)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "critic (%s head, %s score): Bradley–Terry on %d trajectory pairs, %s\n", *head, kind, len(pairs), what(critic, tf))
	var st rl.PrefStats
	var v *rl.ValueHead
	if *head == "scalar" {
		if v, err = rl.NewValueHead(m); err != nil {
			return err
		}
		st, err = rl.TrainValueCritic(m, critic, v, pairs, tf.prefOptions(pf.seed, stdout, "critic step"))
	} else {
		st, err = rl.TrainPreferences(m, critic, pairs, tf.prefOptions(pf.seed, stdout, "critic step"))
	}
	if err != nil {
		return err
	}
	reportPref(stdout, st)
	if err := tf.writeLosses(st); err != nil {
		return err
	}
	if err := j.save(m, critic, *out, stdout); err != nil {
		return err
	}
	if v != nil && j.rank.Rank == 0 {
		return v.Save(m.Backend(), filepath.Join(*out, rl.ValueHeadFile))
	}
	return nil
}

func what(ad *llama.Adapter, tf trainFlags) string {
	if ad == nil {
		return fmt.Sprintf("every weight, lr %g", tf.learningRate())
	}
	return fmt.Sprintf("LoRA r=%d, lr %g", ad.Config.Rank, tf.learningRate())
}

// runActor implements "train actor".
func runActor(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	j := newTrajJob("actor", stderr, rl.RefActorEpochs, rl.RefActorNLL, "scored trajectories (train rollout) whose agent turns are the training states",
		"directory for the actor (a PEFT adapter, or a Hugging Face checkpoint with --full)")
	fs := j.fs
	criticAd := fs.String("critic", "", "the critic: a PEFT adapter directory over the same base model (train critic)")
	criticHF := fs.String("critic-hf", "", "the critic: a whole Hugging Face checkpoint (train critic --full)")
	candidates := fs.Int("candidates", rl.RefCandidates, "candidates sampled per turn")
	perTurn := fs.Int("pairs-per-turn", rl.RefPairsPerTurn, "pairs formed per turn")
	fraction := fs.Float64("data-fraction", rl.RefDataFraction, "fraction of the agent turns used")
	temp := fs.Float32("temperature", rl.RefTemperature, "sampling temperature of the candidates")
	maxNew := fs.Int("max-new", rl.RefMaxNew, "tokens per candidate at most")
	baseline := fs.String("advantage-baseline", "reference", "what a candidate's critic score is compared with: reference (the paper's Eq. 3: the critic's frozen reference, with the ground truth) or policy (the released code: the sampling policy, without it)")
	nllScope := fs.String("nll-scope", "sequence", "the NLL term's tokens: sequence (the reference: the whole chosen sequence, context included) or reply")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (*criticAd == "") == (*criticHF == "") {
		return errors.New("name the critic with exactly one of --critic DIR and --critic-hf DIR")
	}
	bl, err := rl.ParseAdvantageBaseline(*baseline)
	if err != nil {
		return fmt.Errorf("--advantage-baseline: %w", err)
	}
	seqNLL, err := parseNLLScope(*nllScope)
	if err != nil {
		return err
	}
	if err := j.load(nil, stdout); err != nil {
		return err
	}
	defer j.leave()
	stdout = j.report(stdout)
	m, ad, tok, tf, pf, proto, trajs, out := j.m, j.ad, j.tok, j.tf, j.pf, j.proto, j.trajs, j.out
	if *maxNew, err = fitMaxNew(m.Config, 0, *maxNew, stdout); err != nil {
		return err
	}
	// The critic was trained over the policy's base model: that base, with
	// the policy's adapter if any, is its frozen reference.
	critic := rl.Critic{Model: m, Baseline: bl, RefModel: m, RefAdapter: ad}
	criticDir := *criticAd
	if *criticAd != "" {
		if critic.Adapter, err = m.LoadPEFT(*criticAd); err != nil {
			return err
		}
	} else {
		criticDir = *criticHF
		cf := pf.modelFlags
		cf.Source, cf.adapter = llama.Source{HF: *criticHF}, ""
		if critic.Model, err = cf.loadBase(); err != nil {
			return fmt.Errorf("critic: %w", err)
		}
	}
	if hp, err := critic.LoadHead(criticDir); err != nil {
		return err
	} else if hp != "" {
		fmt.Fprintf(stdout, "the critic has a scalar value head (%s): candidates are ranked by its value\n", hp)
	}
	pol := &rl.Sampler{Model: m, Adapter: ad, Tok: tok, Sample: engine.SampleParams{Temperature: *temp, TopP: 1}, MaxNew: *maxNew, Seed: pf.seed}
	pairs, st, err := rl.ActorPairs(trajs, pol, critic, rl.ActorOptions{Protocol: proto, Candidates: *candidates, PairsPerTurn: *perTurn,
		DataFraction: *fraction, BatchTokens: tf.batchTokens, Seed: pf.seed, Progress: stdout})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d turns, %d candidates, %d pairs (%d identical pairs dropped), mean advantage spread %.4f\n",
		st.Turns, st.Candidates, st.Pairs, st.TiedPairs, st.MeanSpread)
	pairs = filterPairs(pairs, tf.maxLen, stdout)
	actor, err := tf.trained(m, ad, pf.seed+1)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "actor: turn-wise DPO with NLL %g over the %s, %s\n", tf.nll, *nllScope, what(actor, tf))
	po := tf.prefOptions(pf.seed, stdout, "actor step")
	po.NLLSequence = seqNLL
	ps, err := rl.TrainPreferences(m, actor, pairs, po)
	if err != nil {
		return err
	}
	reportPref(stdout, ps)
	if err := tf.writeLosses(ps); err != nil {
		return err
	}
	return j.save(m, actor, *out, stdout)
}

// runMTDPO implements "train mtdpo".
func runMTDPO(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	j := newTrajJob("mtdpo", stderr, 1, -1, "scored trajectories (train rollout)",
		"directory for the policy (a PEFT adapter, or a Hugging Face checkpoint with --full)")
	if err := j.load(args, stdout); err != nil {
		return err
	}
	defer j.leave()
	stdout = j.report(stdout)
	pairs, err := rl.TrajectoryPairs(j.tok, j.proto.System, j.trajs)
	if err != nil {
		return fmt.Errorf("%s: %w", *j.path, err)
	}
	pairs = filterPairs(pairs, j.tf.maxLen, stdout)
	pol, err := j.tf.trained(j.m, j.ad, j.pf.seed)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "multi-turn DPO on %d trajectory pairs, %s\n", len(pairs), what(pol, j.tf))
	st, err := rl.TrainPreferences(j.m, pol, pairs, j.tf.prefOptions(j.pf.seed, stdout, "DPO step"))
	if err != nil {
		return err
	}
	reportPref(stdout, st)
	if err := j.tf.writeLosses(st); err != nil {
		return err
	}
	return j.save(j.m, pol, *j.out, stdout)
}

// runRFT implements "train rft".
func runRFT(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	j := newTrajJob("rft", stderr, 2, -1, "scored trajectories (train rollout); the successful ones are trained on",
		"directory for the policy (a PEFT adapter, or a Hugging Face checkpoint with --full)")
	if err := j.load(args, stdout); err != nil {
		return err
	}
	defer j.leave()
	stdout = j.report(stdout)
	ex, err := rl.RFTExamples(j.tok, j.proto.System, j.trajs)
	if err != nil {
		return fmt.Errorf("%s: %w", *j.path, err)
	}
	if len(ex) == 0 {
		return fmt.Errorf("%s: no successful trajectory (reward 1) to train on", *j.path)
	}
	pol, err := j.tf.trained(j.m, j.ad, j.pf.seed)
	if err != nil {
		return err
	}
	tokens := 0
	for _, e := range ex {
		tokens += len(e.IDs)
	}
	tf := j.tf
	steps := max(1, tf.epochs*tokens/tf.batchTokens)
	fmt.Fprintf(stdout, "rejection fine-tuning on %d successful trajectories (%d tokens), %d steps, %s\n", len(ex), tokens, steps, what(pol, tf))
	o := rl.SFTOptions{Steps: steps, BatchTokens: tf.batchTokens, MaxLen: min(tf.maxLen, j.m.Config.MaxSeqLen), LR: tf.learningRate(), Seed: j.pf.seed, Comm: j.comm}
	if err := rl.SupervisedFT(j.m, pol, ex, o, stdout); err != nil {
		return err
	}
	return j.save(j.m, pol, *j.out, stdout)
}

// parseNLLScope parses --nll-scope: sequence (true) or reply (false).
func parseNLLScope(v string) (bool, error) {
	switch v {
	case "sequence":
		return true, nil
	case "reply":
		return false, nil
	}
	return false, fmt.Errorf("--nll-scope %q: want sequence (the reference's) or reply", v)
}

// reportPref prints how a preference run went.
func reportPref(w io.Writer, st rl.PrefStats) { fmt.Fprintln(w, st) }

// runEval implements "train eval".
func runEval(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	j := newEpisodeJob("eval", stderr)
	seeds := j.fs.Int("seeds", 1, "episodes per task, each with its own sampling seed")
	out := j.fs.String("out", "", "also write the episodes to this trajectories file")
	err := j.load(args, true, func() error {
		if *out == "" {
			return nil
		}
		return outfile.CheckDir(filepath.Dir(*out))
	}, stdout)
	if err != nil {
		return err
	}
	defer j.leave()
	if j.rank.Rank != 0 {
		stdout = io.Discard
	}
	fmt.Fprintf(stdout, "%d tasks × %d seeds; scoring with %s\n", len(j.tasks), *seeds, j.desc)
	s, eps, err := rl.Evaluate(context.Background(), j.m, j.ad, j.tok, j.proto, j.tasks, j.sim, j.scorer,
		rl.EvalOptions{Seeds: *seeds, Temperature: j.temp, MaxNew: j.maxNew, Seed: j.pf.seed, SimWorkers: j.ef.simWorkers, Label: "eval",
			Comm: j.comm, Backend: j.m.Backend()}, stdout)
	if err != nil {
		return err
	}
	if *out != "" && j.rank.Rank == 0 {
		if err := sweetrl.SaveTrajectories(*out, eps); err != nil {
			return err
		}
	}
	fmt.Fprintln(stdout, s)
	reportSimulator(stdout, j.hs)
	return nil
}
