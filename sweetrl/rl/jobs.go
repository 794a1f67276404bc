package rl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/internal/outfile"
	"github.com/turnwise/turnwise/internal/recipe"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/tokenizer"
	"github.com/turnwise/turnwise/trainer"
)

// The jobs of the pipeline's trainers: each one step of SWEET-RL (critic,
// actor) or a baseline (multi-turn DPO, rejection fine-tuning) from a
// trajectory file to a saved model, saying what it does on Log.

// Target says what a trainer updates and at which peak learning rate.
type Target struct {
	Full bool // fine-tune every weight instead of a LoRA adapter
	Rank int  // rank of a fresh LoRA adapter
	// Alpha scales a fresh adapter's update by Alpha/Rank; 0: 2·Rank (a
	// scale of 2, which LoRALR was chosen with).
	Alpha float32
	// Dropout is a fresh adapter's dropout on its input
	// (llama.LoRAConfig.Dropout), applied by the supervised trainer (rft);
	// the preference trainers train without dropout, as TRL's DPO trainer
	// does by default.
	Dropout float32
	LR      float64 // peak learning rate; 0: RefLR with Full, LoRALR for LoRA
	// Targets are the projections a fresh adapter adapts
	// (llama.ParseLoRATargets); nil: every projection. Setting them with
	// Full or a given adapter is an error.
	Targets []string
}

// LearningRate returns the peak learning rate: LR, or the reference's
// default for full fine-tuning or LoRA.
func (t Target) LearningRate() float64 {
	switch {
	case t.LR > 0:
		return t.LR
	case t.Full:
		return RefLR
	}
	return LoRALR
}

// Trained returns what a trainer updates: the given adapter ad, a fresh one
// of Rank (initialised from seed), or nil (every weight) with Full.
func (t Target) Trained(m *llama.Model, ad *llama.Adapter, seed uint64) (*llama.Adapter, error) {
	switch {
	case t.Targets != nil && t.Full:
		return nil, errors.New("--lora-targets chooses a fresh adapter's projections: drop it or --full")
	case t.Targets != nil && ad != nil:
		return nil, errors.New("--lora-targets chooses a fresh adapter's projections; the --adapter keeps its own: drop one")
	case (t.Alpha != 0 || t.Dropout != 0) && (t.Full || ad != nil):
		return nil, errors.New("--lora-alpha and --lora-dropout shape a fresh adapter: drop them with --full or --adapter")
	case t.Full && ad != nil:
		return nil, errors.New("--full fine-tunes the base model: merge the --adapter first or drop --full")
	case t.Full:
		return nil, nil
	case ad != nil:
		return ad, nil
	case t.Rank <= 0:
		return nil, fmt.Errorf("--lora-rank %d: want a positive rank (or --full)", t.Rank)
	}
	lc := llama.LoRAFor(t.Rank, t.Targets)
	if t.Alpha != 0 {
		lc.Alpha = t.Alpha
	}
	lc.Dropout = t.Dropout
	return m.NewAdapter(lc, seed)
}

// Describe says in words what is trained (ad, as Trained returned it).
func (t Target) Describe(ad *llama.Adapter) string {
	if ad == nil {
		return fmt.Sprintf("every weight, lr %g", t.LearningRate())
	}
	return fmt.Sprintf("LoRA r=%d on %s, lr %g", ad.Config.Rank, strings.Join(ad.Config.Targets, ","), t.LearningRate())
}

// Job is what every trainer job shares: the model and the adapter it was
// given, the trajectories it trains on (read from Path), the episodes'
// rules, what is trained, and where it goes.
type Job struct {
	Model    *llama.Model
	Adapter  *llama.Adapter // the model's adapter; nil: none
	Tok      tokenizer.Tokenizer
	Protocol sweetrl.Protocol
	Rules    Rules // the task family's pairs and imitated trajectories
	Trajs    []sweetrl.Trajectory
	Path     string // the trajectory file, for errors
	Target   Target
	MaxLen   int         // drop pairs with a side longer than this many tokens
	Seed     uint64      // seed of a fresh adapter
	Pref     PrefOptions // the preference trainers' options
	Out      string      // the directory the trained model, metrics.jsonl and the event file go to
	Losses   string      // also write each optimizer step's loss to this file ("": none)
	Log      io.Writer
	// Comm, when it joins several ranks (train launch, torchrun, Slurm),
	// trains data parallel; rank 0 alone writes. nil: one process.
	Comm engine.Communicator
	// Flags are the command's resolved flags (recipe.Values), saved in Out
	// as config.yaml when the run starts; a run directory whose saved
	// flags differ in a key other than MayChange is refused unless Force.
	// nil: none.
	Flags map[string]string
	Force bool
	// Checkpoints are the trainer's periodic checkpoints (the run
	// directory is Out in the commands); a run directory holding one is
	// resumed from it with Resume, and refused without.
	Checkpoints Checkpoints
	Resume      bool
}

// MayChange are the flags of the RL trainers that a resumed run may change
// without --force: where and how fast it runs and what it reports, the
// epochs (training longer), and the pairs per step and tokens per forward
// pass, which a resume with another number of ranks changes to keep the
// batch (see trainer.SFTMayChange).
var MayChange = append([]string{"batch", "batch-tokens"}, RFTMayChange...)

// RFTMayChange are the flags rft's resume may change without --force:
// MayChange but --batch-tokens, which is rft's batch (the packer's
// position in a checkpoint counts its batches), and --batch, which rft
// does not use.
var RFTMayChange = []string{"epochs", "backend", "gemm", "threads", "recompute", "checkpoint-every", "keep",
	"resume", "force", "out", "losses", "peak-tflops", "zero", "sim-url", "sim-key-env", "sim-retries", "sim-workers", "python", "workers"}

// begin checks the run directory before anything is trained: its saved
// configuration against Flags (saving them there; a difference in a key
// other than mayChange is refused unless Force), and that it holds no
// checkpoint unless the run resumes.
func (j *Job) begin(mayChange []string) error {
	if c := j.Checkpoints; c.Every < 0 || (c.RunDir != "" && c.Keep < 1) {
		return fmt.Errorf("--checkpoint-every %d, --keep %d: want a checkpoint interval ≥ 0 (0: the last step alone) and at least 1 checkpoint kept", c.Every, c.Keep)
	}
	if j.Flags != nil {
		if err := outfile.CheckDir(j.Out); err != nil {
			return err
		}
		if err := recipe.CheckRun(filepath.Join(j.Out, trainer.ConfigName), j.Flags, j.Force, mayChange...); err != nil {
			return err
		}
	}
	return trainer.RefuseResume(j.Checkpoints.RunDir, j.Resume, "--out")
}

// filter drops pairs with a side longer than MaxLen tokens, saying so.
func (j *Job) filter(pairs []PrefPair) []PrefPair {
	kept, dropped := DropLong(pairs, j.MaxLen)
	if dropped > 0 {
		fmt.Fprintf(j.Log, "dropped %d pairs longer than %d tokens\n", dropped, j.MaxLen)
	}
	return kept
}

// prepare takes the pairs a pair former made of the trajectories (err: its
// error, wrapped with the file's name), drops the long ones (filter) and
// returns them with what is trained (Target.Trained).
func (j *Job) prepare(pairs []PrefPair, err error) ([]PrefPair, *llama.Adapter, error) {
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", j.Path, err)
	}
	pairs = j.filter(pairs)
	ad, err := j.Target.Trained(j.Model, j.Adapter, j.Seed)
	return pairs, ad, err
}

// rank0 reports whether this process writes: rank 0 of Comm, or alone.
func (j *Job) rank0() bool { return j.Comm == nil || j.Comm.Rank() == 0 }

// save writes what was trained (llama.Model.Save) and says where, on rank
// 0, and has every rank wait for it, so that the ranks leave together.
func (j *Job) save(ad *llama.Adapter) error {
	if j.rank0() {
		if err := j.Model.Save(ad, j.Out); err != nil {
			return err
		}
		fmt.Fprintf(j.Log, "saved to %s\n", j.Out)
	}
	if j.Comm != nil {
		return j.Comm.Barrier()
	}
	return nil
}

// writeLosses writes st's per-step losses to the file Losses names, if
// any, a line "step loss" per step, on rank 0.
func (j *Job) writeLosses(st PrefStats) error {
	if j.Losses == "" || !j.rank0() {
		return nil
	}
	var b []byte
	for i, l := range st.Losses {
		b = fmt.Appendf(b, "%d %.17g\n", i+1, l)
	}
	if err := os.WriteFile(j.Losses, b, 0o644); err != nil {
		return fmt.Errorf("--losses: %w", err)
	}
	return nil
}

// pref trains ad on pairs with Pref (label: the progress lines' label),
// reports how it went and saves the result; a run that ctx stops, or that
// diverges, saves nothing (TrainPreferencesContext).
func (j *Job) pref(ctx context.Context, ad *llama.Adapter, pairs []PrefPair, label string, seqNLL bool) error {
	o := j.Pref
	o.Label, o.NLLSequence, o.MetricsDir, o.Comm, o.Checkpoints = label, seqNLL, j.Out, j.Comm, j.Checkpoints
	st, err := TrainPreferencesContext(ctx, j.Model, ad, pairs, o)
	if err != nil {
		return err
	}
	fmt.Fprintln(j.Log, st)
	if err := j.writeLosses(st); err != nil {
		return err
	}
	return j.save(ad)
}

// TrainCritic trains the critic on the job's trajectory pairs: with head
// "logprob" the reference's critic (CriticPairs scored by score, which
// ParseCriticScore parses), with "scalar" the value-head ablation, whose
// head is saved beside the adapter as ValueHeadFile. A run whose loss
// stays NaN or infinite stops with an error wrapping trainer.ErrDiverged
// and naming the step, and saves no critic.
func TrainCritic(j Job, head, score string) error {
	return TrainCriticContext(context.Background(), j, head, score)
}

// TrainCriticContext is TrainCritic, stopping early when ctx is cancelled:
// the step under way is finished and checkpointed, the error wraps
// trainer.ErrInterrupted and names the checkpoint, and the critic is not
// saved.
func TrainCriticContext(ctx context.Context, j Job, head, score string) error {
	if head != "logprob" && head != "scalar" {
		return fmt.Errorf("--head %q: want logprob or scalar", head)
	}
	kind, err := ParseCriticScore(score)
	if err != nil {
		return fmt.Errorf("--critic-score: %w", err)
	}
	if err := j.begin(MayChange); err != nil {
		return err
	}
	pairs, critic, err := j.prepare(j.Rules.CriticPairs(j.Tok, j.Protocol.System, j.Trajs, kind))
	if err != nil {
		return err
	}
	fmt.Fprintf(j.Log, "critic (%s head, %s score): Bradley–Terry on %d trajectory pairs, %s\n", head, kind, len(pairs), j.Target.Describe(critic))
	if head == "logprob" {
		return j.pref(ctx, critic, pairs, "critic step", j.Pref.NLLSequence)
	}
	v, err := NewValueHead(j.Model)
	if err != nil {
		return err
	}
	o := j.Pref
	o.Label, o.MetricsDir, o.Comm, o.Checkpoints = "critic step", j.Out, j.Comm, j.Checkpoints
	st, err := TrainValueCriticContext(ctx, j.Model, critic, v, pairs, o)
	if err != nil {
		return err
	}
	fmt.Fprintln(j.Log, st)
	if err := j.writeLosses(st); err != nil {
		return err
	}
	if err := j.save(critic); err != nil || !j.rank0() {
		return err
	}
	return v.Save(j.Model.Backend(), filepath.Join(j.Out, ValueHeadFile))
}

// ActorJob is the actor's own part of its job: how candidates are sampled
// and paired, and the NLL term's scope.
type ActorJob struct {
	Critic       Critic
	Temperature  float32
	TopP         float32 // nucleus sampling mass of the candidates (0 or 1: off)
	TopK         int     // candidates draw among the TopK most likely tokens (0: off), before TopP
	MaxNew       int
	Candidates   int
	PairsPerTurn int
	DataFraction float64
	NLLSequence  bool // the NLL term over the whole chosen sequence (false: the reply)
}

// TrainActor samples candidates of every agent turn with the job's model,
// pairs them by a.Critic's advantage (ActorPairs) and trains the actor on
// them with turn-wise DPO. A run whose loss stays NaN or infinite stops
// with an error wrapping trainer.ErrDiverged and naming the step, and saves
// no actor.
func TrainActor(j Job, a ActorJob) error { return TrainActorContext(context.Background(), j, a) }

// TrainActorContext is TrainActor, stopping early when ctx is cancelled as
// TrainCriticContext does. The candidates are sampled and paired before the
// first step, and the pairs saved in the run directory (PairsFile): a ctx
// cancelled while they are sampled stops the run after its first step.
func TrainActorContext(ctx context.Context, j Job, a ActorJob) error {
	if err := j.begin(MayChange); err != nil {
		return err
	}
	pairs, err := j.actorPairs(a)
	if err != nil {
		return err
	}
	pairs = j.filter(pairs)
	actor, err := j.Target.Trained(j.Model, j.Adapter, j.Seed+1)
	if err != nil {
		return err
	}
	scope := "reply"
	if a.NLLSequence {
		scope = "sequence"
	}
	fmt.Fprintf(j.Log, "actor: turn-wise DPO with NLL %g over the %s, %s\n", j.Pref.NLLCoef, scope, j.Target.Describe(actor))
	return j.pref(ctx, actor, pairs, "actor step", a.NLLSequence)
}

// actorPairs samples candidates of every agent turn with the job's model and
// pairs them by a.Critic's advantage (ActorPairs), saving the pairs in the
// run directory (PairsFile, on rank 0); a resumed run (Resume without
// Force) reads them from there when an earlier run saved them.
func (j *Job) actorPairs(a ActorJob) ([]PrefPair, error) {
	path := filepath.Join(j.Out, PairsFile)
	if j.Resume && !j.Force && j.Checkpoints.RunDir != "" {
		pairs, err := LoadPairs(path)
		if err == nil {
			fmt.Fprintf(j.Log, "%s: %d pairs an earlier run formed\n", path, len(pairs))
			return pairs, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	pol := &Sampler{Model: j.Model, Adapter: j.Adapter, Tok: j.Tok, Sample: engine.SampleParams{Temperature: a.Temperature, TopP: a.TopP, TopK: a.TopK},
		MaxNew: a.MaxNew, Seed: j.Seed}
	pairs, st, err := ActorPairs(j.Trajs, pol, a.Critic, ActorOptions{Protocol: j.Protocol, Candidates: a.Candidates, PairsPerTurn: a.PairsPerTurn,
		DataFraction: a.DataFraction, BatchTokens: j.Pref.BatchTokens, Seed: j.Seed, Progress: j.Log, Comm: j.Comm, Backend: j.Model.Backend()})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(j.Log, "%d turns, %d candidates, %d pairs (%d identical pairs dropped), mean advantage spread %.4f\n",
		st.Turns, st.Candidates, st.Pairs, st.TiedPairs, st.MeanSpread)
	if j.Checkpoints.RunDir != "" && j.rank0() {
		if err := SavePairs(path, pairs); err != nil {
			return nil, err
		}
	}
	return pairs, nil
}

// TrainMTDPO trains the multi-turn DPO baseline on the job's trajectory
// pairs (TrajectoryPairs). A run whose loss stays NaN or infinite stops
// with an error wrapping trainer.ErrDiverged and naming the step, and saves
// no policy.
func TrainMTDPO(j Job) error { return TrainMTDPOContext(context.Background(), j) }

// TrainMTDPOContext is TrainMTDPO, stopping early when ctx is cancelled as
// TrainCriticContext does.
func TrainMTDPOContext(ctx context.Context, j Job) error {
	if err := j.begin(MayChange); err != nil {
		return err
	}
	pairs, pol, err := j.prepare(j.Rules.TrajectoryPairs(j.Tok, j.Protocol.System, j.Trajs))
	if err != nil {
		return err
	}
	fmt.Fprintf(j.Log, "multi-turn DPO on %d trajectory pairs, %s\n", len(pairs), j.Target.Describe(pol))
	return j.pref(ctx, pol, pairs, "DPO step", j.Pref.NLLSequence)
}

// TrainRFT fine-tunes on the job's successful trajectories, or those its
// Rules imitate (rejection fine-tuning: RFTExamples, SupervisedFT) for
// epochs passes over their tokens, Pref.BatchTokens a step, with Pref's
// warm-up, floor and AdamW.
func TrainRFT(j Job, epochs int) error { return TrainRFTContext(context.Background(), j, epochs) }

// TrainRFTContext is TrainRFT, stopping early when ctx is cancelled
// (SupervisedFTContext): the policy is then not saved.
func TrainRFTContext(ctx context.Context, j Job, epochs int) error {
	if err := j.begin(RFTMayChange); err != nil {
		return err
	}
	ex, what, err := j.Rules.RFTExamples(j.Tok, j.Protocol.System, j.Trajs)
	if err != nil {
		return fmt.Errorf("%s: %w", j.Path, err)
	}
	if len(ex) == 0 {
		return fmt.Errorf("%s: no trajectory to train on (rejection fine-tuning imitates the %s)", j.Path, what)
	}
	pol, err := j.Target.Trained(j.Model, j.Adapter, j.Seed)
	if err != nil {
		return err
	}
	tokens := 0
	for _, e := range ex {
		tokens += len(e.IDs)
	}
	bt := j.Pref.BatchTokens
	steps := max(1, epochs*tokens/bt)
	fmt.Fprintf(j.Log, "rejection fine-tuning on %d %s: %d tokens, %d steps, %s\n", len(ex), what, tokens, steps, j.Target.Describe(pol))
	o := SFTOptions{Steps: steps, BatchTokens: bt, MaxLen: min(j.MaxLen, j.Model.Config.MaxSeqLen), LR: j.Target.LearningRate(), Seed: j.Seed,
		MetricsDir: j.Out, PeakFLOPS: j.Pref.PeakFLOPS, Comm: j.Comm, Zero: j.Pref.Zero, OverlapReduce: j.Pref.OverlapReduce, Checkpoints: j.Checkpoints,
		Tuning: &SFTTuning{WarmupFrac: j.Pref.WarmupFrac, MinLRRatio: j.Pref.MinLRRatio, AdamW: j.Pref.AdamW}}
	if err := SupervisedFTContext(ctx, j.Model, pol, ex, o, j.Log); err != nil {
		return err
	}
	return j.save(pol)
}

// Episodes is what playing episodes takes: the agent (a model, its
// adapter and tokenizer, sampled at Temperature), the tasks, the
// simulator and the scorer, and where to say what happens.
type Episodes struct {
	Model       *llama.Model
	Adapter     *llama.Adapter // nil: the base model
	Tok         tokenizer.Tokenizer
	Protocol    sweetrl.Protocol
	Tasks       []sweetrl.Task
	Sim         sweetrl.Simulator
	HTTP        *sweetrl.HTTPSimulator // Sim, when it is the HTTP one: its failures are reported
	Scorer      sweetrl.Scorer
	ScorerName  string // which scorer, in words
	Temperature float64
	TopP        float64 // nucleus sampling mass (0 or 1: off)
	TopK        int     // draws among the TopK most likely tokens (0: off), before TopP
	MaxNew      int     // tokens per agent turn at most
	Seed        uint64
	SimWorkers  int // simulator replies computed at once
	Log         io.Writer
	// Comm, when it joins several ranks (train launch, torchrun, Slurm),
	// splits the episodes across them; rank 0 alone writes. nil: one
	// process.
	Comm engine.Communicator
}

// ReportSimulator says on Log how many simulator calls failed, if any.
func (e *Episodes) ReportSimulator() {
	if hs := e.HTTP; hs != nil && hs.Failures() > 0 {
		fmt.Fprintf(e.Log, "the simulator failed %d times (replied %q); last error: %v\n", hs.Failures(), sweetrl.NoResponse, hs.LastError())
	}
}

// RolloutJob plays k episodes of every task, in the order f.Order says,
// maxBatch agent turns generated together at most, and writes them,
// scored, to the trajectory file f names (RolloutToFile).
func RolloutJob(ctx context.Context, e Episodes, k, maxBatch int, f FileRolloutOptions) error {
	all := f.Order.Episodes(e.Tasks, k)
	fmt.Fprintf(e.Log, "%d episodes (%d tasks × %d); scoring with %s\n", len(all), len(e.Tasks), k, e.ScorerName)
	agent := func(c int) BatchAgent {
		return &Sampler{Model: e.Model, Adapter: e.Adapter, Tok: e.Tok, Sample: engine.SampleParams{Temperature: float32(e.Temperature), TopP: float32(e.TopP), TopK: e.TopK},
			MaxNew: e.MaxNew, MaxBatch: maxBatch, Seed: ChunkSeed(e.Seed, c)}
	}
	f.Log, f.Comm, f.Backend = e.Log, e.Comm, e.Model.Backend()
	trajs, err := RolloutToFile(ctx, all, agent, e.Sim, e.Scorer,
		RolloutOptions{Protocol: e.Protocol, SimWorkers: e.SimWorkers, Progress: e.Log, Label: "episodes"}, f)
	if err != nil {
		return err
	}
	if e.Comm != nil {
		// Rank 0 has written the file and serves the store: the ranks
		// leave together.
		if err := e.Comm.Barrier(); err != nil {
			return err
		}
	}
	fmt.Fprintf(e.Log, "wrote %s: mean reward %.3f, success %.3f\n", f.Path, sweetrl.MeanReward(trajs), sweetrl.SuccessRate(trajs))
	e.ReportSimulator()
	return nil
}

// EvalJob plays seeds episodes of every task (Evaluate), writes them to
// the trajectory file out unless it is "", prints the summary and returns
// it (EvalResult.Name names what played).
func EvalJob(ctx context.Context, e Episodes, seeds int, out string) (EvalResult, error) {
	s, _, err := EvalEpisodes(ctx, e, seeds, out)
	if err != nil {
		return EvalResult{}, err
	}
	fmt.Fprintln(e.Log, s)
	e.ReportSimulator()
	return e.Result(s, seeds, out), nil
}

// Result is the EvalResult of a summary s of seeds episodes a task, played
// as e says (out: the file they were written to, if any).
func (e *Episodes) Result(s Summary, seeds int, out string) EvalResult {
	r := EvalResult{Tasks: s.Tasks, Episodes: s.Episodes, Seeds: max(seeds, 1), PassRate: s.PassRate, PassCI95: s.PassCI,
		Success: s.Success, SuccessCI95: s.SuccessCI, Successes: int(math.Round(s.Success * float64(s.Episodes))),
		Scorer: e.ScorerName, Temperature: e.Temperature, TopP: e.TopP, TopK: e.TopK, MaxNew: e.MaxNew, Seed: e.Seed, Trajectories: out}
	if e.HTTP != nil {
		r.SimulatorFailures = e.HTTP.Failures()
	}
	return r
}

// EvalResult is what EvalJob measured, as train eval --json prints it:
// rates are fractions, each with the half-width of its 95% confidence
// interval over tasks (Summary); the pass rate is the mean reward (for
// ColBench backend tasks the fraction of unit tests passed, for frontend
// tasks the CLIP cosine).
type EvalResult struct {
	Method            string  `json:"method"`            // what played: the adapter's directory, or the model's name
	Model             string  `json:"model"`             // the base model's name
	Adapter           string  `json:"adapter,omitempty"` // the adapter's directory, if any
	Tasks             int     `json:"tasks"`
	Episodes          int     `json:"episodes"`
	Seeds             int     `json:"seeds"` // episodes per task
	PassRate          float64 `json:"pass_rate"`
	PassCI95          float64 `json:"pass_ci95"`
	Success           float64 `json:"success"`
	SuccessCI95       float64 `json:"success_ci95"`
	Successes         int     `json:"successes"` // episodes with reward 1
	SimulatorFailures int64   `json:"simulator_failures"`
	Scorer            string  `json:"scorer"`
	Temperature       float64 `json:"temperature"`
	TopP              float64 `json:"top_p,omitempty"` // nucleus sampling mass, when on
	TopK              int     `json:"top_k,omitempty"` // the tokens top-k keeps, when on
	MaxNew            int     `json:"max_new"`
	Seed              uint64  `json:"seed"`
	Trajectories      string  `json:"trajectories,omitempty"` // the episodes' file, if written
}

// Name sets what played: the base model and the adapter ("" for none);
// the method is named by the adapter, or else by the model.
func (r *EvalResult) Name(model, adapter string) {
	r.Model, r.Adapter, r.Method = model, adapter, model
	if adapter != "" {
		r.Method = adapter
	}
}

// WriteJSON writes r as one indented JSON object and a newline.
func (r EvalResult) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// EvalEpisodes is EvalJob without its report: it plays seeds episodes of
// every task, writes them to the trajectory file out unless it is "", and
// returns their summary and the scored episodes (every rank gets them all).
func EvalEpisodes(ctx context.Context, e Episodes, seeds int, out string) (Summary, []sweetrl.Trajectory, error) {
	fmt.Fprintf(e.Log, "%d tasks × %d seeds; scoring with %s\n", len(e.Tasks), seeds, e.ScorerName)
	s, eps, err := Evaluate(ctx, e.Model, e.Adapter, e.Tok, e.Protocol, e.Tasks, e.Sim, e.Scorer,
		EvalOptions{Seeds: seeds, Temperature: e.Temperature, TopP: e.TopP, TopK: e.TopK, MaxNew: e.MaxNew, Seed: e.Seed, SimWorkers: e.SimWorkers, Label: "eval",
			Comm: e.Comm, Backend: e.Model.Backend()}, e.Log)
	if err != nil {
		return Summary{}, nil, err
	}
	if out != "" && (e.Comm == nil || e.Comm.Rank() == 0) {
		if err := sweetrl.SaveTrajectories(out, eps); err != nil {
			return Summary{}, nil, err
		}
	}
	return s, eps, nil
}

// LoadJobTrajectories reads a trajectory file and says on w what it holds;
// an empty path is an error asking for one.
func LoadJobTrajectories(path string, w io.Writer) ([]sweetrl.Trajectory, error) {
	if path == "" {
		return nil, errors.New("name the trajectories with --trajectories FILE (train rollout writes them)")
	}
	trajs, err := sweetrl.LoadTrajectories(path)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "%s: %d trajectories of %d tasks, mean reward %.3f, success %.3f\n",
		path, len(trajs), len(GroupByTask(trajs)), sweetrl.MeanReward(trajs), sweetrl.SuccessRate(trajs))
	return trajs, nil
}
