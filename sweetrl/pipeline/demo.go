package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/internal/jsonerr"
	"github.com/turnwise/turnwise/internal/outfile"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/sweetrl/rl"
	"github.com/turnwise/turnwise/tokenizer"
)

// LRs are the peak learning rates of the demo's adapters, one per method.
type LRs struct {
	Critic, Actor, DPO, RFT float64
}

// DefaultLRs are the learning rates the demo uses unless told otherwise:
// those a selection run (Config.Select) chose on the keys family's
// validation split with seed 1 (see docs/sweetrl.md).
var DefaultLRs = LRs{Critic: 1e-4, Actor: 1e-4, DPO: 1e-4, RFT: 5e-4}

// Grid returns the candidate learning rates of each method for Select.
func Grid() map[string][]float64 {
	return map[string][]float64{
		"critic": {3e-5, 1e-4, 5e-4},
		"actor":  {3e-5, 1e-4, 5e-4},
		"mtdpo":  {3e-5, 1e-4, 5e-4},
		"rft":    {1e-4, 5e-4, 1e-3},
	}
}

// Config of Run.
type Config struct {
	Family    string // a built-in family's name (LookupFamily)
	Model     llama.Config
	Backend   engine.Backend
	Recompute bool
	OutDir    string // where the models, rollouts, episodes and results.json go
	// From is an earlier run's directory whose supervised model and
	// rollouts are reused (they must have been made with the same family,
	// seed, task counts, steps and episodes per task); "": make them.
	From string
	// SFTOnly runs the supervised start alone and evaluates it on the
	// held-out tasks (the "SFT start" row of a whole run, on the same tasks
	// and sampling seeds): no rollouts and no other method.
	SFTOnly bool
	// PrepareOnly makes the supervised start and the rollouts (the stages
	// a later run reuses with From) and stops.
	PrepareOnly bool
	Seed        uint64

	SFTTasks, SFTSteps int
	RLTasks            int // tasks the policy plays for RL, validation tasks included
	ValTasks           int // of the RL tasks, the last ValTasks are the validation split
	K                  int // rollouts per RL task
	TestTasks          int
	EvalSeeds          int // test episodes per task
	ValSeeds           int // validation episodes per task (learning-rate selection)
	CheckTasks         int // tasks of the critic check
	Rank               int // LoRA rank of every adapter
	// Targets are the projections every adapter adapts
	// (llama.ParseLoRATargets); nil: every projection.
	Targets []string

	Candidates   int
	DataFraction float64
	CriticEpochs int // the critic trains this many epochs and keeps its best on validation (CriticSelect)
	Score        rl.CriticScore
	Baseline     rl.AdvantageBaseline
	NLLSequence  bool

	LR     LRs
	Select bool // choose each method's learning rate on the validation split from Grid
	// SelectCritic chooses only the critics' learning rates from Grid (by
	// validation pair accuracy, which costs no episodes); the policies keep
	// LR.
	SelectCritic bool
	// CriticSelect is how each critic's epoch (and, with Select or
	// SelectCritic, its learning rate) is kept on the validation split.
	CriticSelect CriticSelect
	// Ablations adds the ablation rows: SWEET-RL with the other critic
	// score, with the other advantage baseline, and with the value-head
	// critic (and, on the keys family, RunFamilies runs the budget family
	// too).
	Ablations bool
	// Settings, at 2 or more, is the equal tuning budget: every method —
	// rejection fine-tuning, multi-turn DPO, each critic and each actor —
	// validates that many settings of its knobs (Settings, Spaces) on the
	// same validation tasks and keeps the best; each critic is then judged
	// after its last epoch, its epochs being a knob. Below 2 each policy
	// keeps its configured learning rate (or, with Select, the best of
	// Grid's) and each critic its best epoch of CriticEpochs.
	Settings int
	// EpochSelect validates every tuned policy — rejection fine-tuning,
	// multi-turn DPO and every actor — after each of its epochs (the
	// critics always are): a setting's result is its best epoch, by
	// validation success then pass rate, whose weights it keeps, its
	// epochs being the most it trains. Rejection fine-tuning's epoch e
	// ends at step round(e·steps/epochs) of the whole run. False judges
	// each setting after its last epoch.
	EpochSelect bool
	// Diagnostics adds the rows that locate the bottleneck: critic-guided
	// best-of-N on the SFT policy, an actor trained on candidates ranked
	// by the family's exact value (where it has one), the critic without
	// the training-time information with its actor, and an RPO-style actor.
	Diagnostics bool
	BestOfN     int // samples per turn of the best-of-N diagnostic
	// CheckValues is how many of the critic's and the actor's pairs (and
	// held-out tasks of advantages) go to ArithFile, for an independent
	// check of the arithmetic; 0: none.
	CheckValues int

	Log io.Writer
}

// Row is one line of the demo's table.
type Row struct {
	Method  string      `json:"method"`
	Summary *rl.Summary `json:"summary,omitempty"`
	Health  *Health     `json:"health,omitempty"`
	LR      float64     `json:"lr,omitempty"`
	// Setting is the method's chosen setting.
	Setting *Setting `json:"setting,omitempty"`
	// TrainLoss is the method's training loss over its kept epoch (the
	// last, without Config.EpochSelect; preference methods): a DPO loss
	// near 0 is over-optimisation's sign.
	TrainLoss float64 `json:"train_loss,omitempty"`
	// ChosenLogRatio and RejectedLogRatio are a preference method's kept
	// epoch's (the last, without Config.EpochSelect) mean log-ratios log π/π_ref of the chosen and the rejected
	// sides (nats): a falling chosen log-ratio is likelihood displacement.
	ChosenLogRatio   *float64 `json:"chosen_logratio,omitempty"`
	RejectedLogRatio *float64 `json:"rejected_logratio,omitempty"`
	Skipped          string   `json:"skipped,omitempty"`
	Note             string   `json:"note,omitempty"` // what a diagnostic row is
	// Outcomes holds each held-out episode's success, '1' or '0', seed
	// after seed (episode s·tasks + i is task i's with sampling seed s):
	// every method plays the same tasks with the same sampling seeds, so
	// two rows' outcomes pair up for the paired tests (Compare).
	Outcomes string `json:"outcomes,omitempty"`
}

// CriticReport is what the demo measured of one critic.
type CriticReport struct {
	Name  string        `json:"name"`
	LR    float64       `json:"lr"`
	Epoch int           `json:"epoch"` // the epoch kept
	Val   rl.PairEval   `json:"validation"`
	Check []CheckResult `json:"check"` // on held-out (test) tasks
	// Baseline is the advantage baseline of Check (that of the actor the
	// critic ranks for); "" for the value head.
	Baseline string `json:"baseline,omitempty"`
	Chosen   string `json:"chosen"`
	// Setting is the critic's chosen setting under Config.Settings.
	Setting *Setting `json:"setting,omitempty"`
}

// Result is what Run measured.
type Result struct {
	Family string `json:"family"`
	Seed   uint64 `json:"seed"`
	// EpochSelect is Config.EpochSelect: whether each policy kept its
	// best epoch on validation. A study combines only runs that agree.
	EpochSelect bool `json:"epoch_select"`
	// Machine is what the numbers depend on beyond the seed and the
	// commit: the backend, its thread count and OpenBLAS's GEMM kernels.
	Machine string         `json:"machine"`
	Rows    []Row          `json:"rows"`
	Critics []CriticReport `json:"critics"`
	Choices []string       `json:"choices"` // what was chosen on validation, and why
}

// manifest records how the reusable stages were made.
type manifest struct {
	Family   string `json:"family"`
	Seed     uint64 `json:"seed"`
	SFTTasks int    `json:"sft_tasks"`
	SFTSteps int    `json:"sft_steps"`
	RLTasks  int    `json:"rl_tasks"`
	K        int    `json:"k"`
	Threads  int    `json:"threads"`
}

const manifestFile = "stages.json"

// runner holds a run's state.
type runner struct {
	c       Config
	f       Family
	ctx     context.Context
	m       *llama.Model
	tok     tokenizer.Tokenizer
	pol     *rl.Sampler
	start   time.Time
	phase   int
	res     Result
	rlTrain []sweetrl.Trajectory // rollouts of the RL tasks outside the validation split
	rlVal   []sweetrl.Trajectory // rollouts of the validation tasks
	cands   *rl.TurnCandidates   // the actor's candidates, once sampled
	val     []sweetrl.Task
	test    []sweetrl.Task
	arith   ArithValues // what goes to ArithFile
	// validator, when set, replaces validate (a test's validation).
	validator func(label string, ad *llama.Adapter) (rl.Summary, Health, error)
}

const (
	maxNew      = 48
	batchTokens = 4096
)

// Run runs the demo: supervised start, rollouts, critics, actors,
// baselines, evaluation on held-out tasks, and the table.
func Run(ctx context.Context, c Config) (*Result, error) {
	f, err := LookupFamily(c.Family)
	if err != nil {
		return nil, err
	}
	if c.ValTasks <= 0 || c.ValTasks >= c.RLTasks {
		return nil, fmt.Errorf("%d validation tasks out of %d RL tasks: want at least one of each", c.ValTasks, c.RLTasks)
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	r := &runner{c: c, f: f, ctx: ctx, tok: tokenizer.Bytes{}, start: time.Now(), res: Result{Family: f.Name, Seed: c.Seed, EpochSelect: c.EpochSelect, Machine: Machine(c.Backend)}}
	if err := outfile.CheckDir(c.OutDir); err != nil {
		return nil, err
	}
	train, test := f.Split(c.Seed, c.SFTTasks+c.RLTasks, c.TestTasks)
	r.test = test
	if c.SFTOnly {
		if c.From != "" {
			return nil, errors.New("the supervised start alone makes its model: it reuses none (From)")
		}
		if err := r.supervised(train[:c.SFTTasks]); err != nil {
			return nil, err
		}
		return &r.res, r.evaluate([]row{{name: "SFT start"}})
	}
	trajs, err := r.prepare(train)
	if err != nil || c.PrepareOnly {
		return &r.res, err
	}
	rlSet := train[c.SFTTasks:]
	r.val = rlSet[len(rlSet)-c.ValTasks:]
	isVal := map[string]bool{}
	for _, t := range r.val {
		isVal[t.ProblemDescription+"\x00"+t.GroundTruth] = true
	}
	for _, t := range trajs {
		if isVal[t.Task.ProblemDescription+"\x00"+t.Task.GroundTruth] {
			r.rlVal = append(r.rlVal, t)
		} else {
			r.rlTrain = append(r.rlTrain, t)
		}
	}
	r.logf("machine: %s (the table repeats where these, the seed and the code agree)", r.res.Machine)
	r.logf("validation split: %d of the %d RL tasks (%d rollouts) held out from training; %d test tasks never used for a choice",
		len(r.val), len(rlSet), len(r.rlVal), len(test))
	if err := r.methods(); err != nil {
		return nil, err
	}
	return &r.res, nil
}

func (r *runner) logf(format string, a ...any) { fmt.Fprintf(r.c.Log, format+"\n", a...) }

func (r *runner) header(format string, a ...any) {
	r.phase++
	fmt.Fprintf(r.c.Log, "\n[%d %s] %s\n", r.phase, clock(time.Since(r.start)), fmt.Sprintf(format, a...))
}

// clock writes d as m:ss.
func clock(d time.Duration) string {
	s := int(d.Round(time.Second) / time.Second)
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

// Machine describes what a run's numbers depend on beyond its seed and
// the code: the backend, and for the CPU backend its thread count and the
// CPU core whose kernels OpenBLAS chose (GEMM sums differ in their last bits
// between cores, and between one OpenBLAS thread and several).
func Machine(b engine.Backend) string {
	s := b.Name()
	if t, ok := b.(interface{ Threads() int }); ok {
		s += fmt.Sprintf(", %d threads", t.Threads())
	}
	if k, ok := b.(interface{ BLASCore() string }); ok {
		s += ", OpenBLAS core " + k.BLASCore()
	}
	return s
}

func (r *runner) manifest() manifest {
	threads := 0
	if t, ok := r.c.Backend.(interface{ Threads() int }); ok {
		threads = t.Threads()
	}
	return manifest{Family: r.f.Name, Seed: r.c.Seed, SFTTasks: r.c.SFTTasks, SFTSteps: r.c.SFTSteps, RLTasks: r.c.RLTasks, K: r.c.K, Threads: threads}
}

// prepare makes (or, with From, loads) the supervised model and the
// rollouts of the RL tasks.
func (r *runner) prepare(train []sweetrl.Task) ([]sweetrl.Trajectory, error) {
	c := r.c
	want := r.manifest()
	if c.From != "" {
		raw, err := os.ReadFile(filepath.Join(c.From, manifestFile))
		if err != nil {
			return nil, fmt.Errorf("--from %s: %w (a directory written by train demo)", c.From, err)
		}
		var got manifest
		if err := json.Unmarshal(raw, &got); err != nil {
			return nil, fmt.Errorf("--from %s: %s: %w", c.From, manifestFile, jsonerr.Reword(err))
		}
		made := got                      // the stages this run takes over were made with its thread count
		got.Threads, want.Threads = 0, 0 // the thread count changes the numbers, not the setting
		if got != want {
			return nil, fmt.Errorf("--from %s: made with %+v, this run asks for %+v", c.From, got, want)
		}
		r.header("reusing %s: its supervised model and rollouts", c.From)
		m, err := llama.LoadHF(c.Backend, filepath.Join(c.From, "sft"), engine.F32)
		if err != nil {
			return nil, fmt.Errorf("--from %s: %w", c.From, err)
		}
		m.Recompute = c.Recompute
		r.m = m
		trajs, err := sweetrl.LoadTrajectories(filepath.Join(c.From, "rollouts.jsonl.zst"))
		if err != nil {
			return nil, fmt.Errorf("--from %s: %w", c.From, err)
		}
		r.newSampler()
		r.logf("rollouts: %d episodes, mean reward %.3f, success %.3f", len(trajs), sweetrl.MeanReward(trajs), sweetrl.SuccessRate(trajs))
		if filepath.Clean(c.From) != filepath.Clean(c.OutDir) { // the run's directory holds every stage it used
			if err := m.SaveHF(filepath.Join(c.OutDir, "sft")); err != nil {
				return nil, err
			}
			if err := copyFile(filepath.Join(c.From, "rollouts.jsonl.zst"), filepath.Join(c.OutDir, "rollouts.jsonl.zst")); err != nil {
				return nil, err
			}
		}
		return trajs, r.writeManifest(made)
	}

	if err := r.supervised(train[:c.SFTTasks]); err != nil {
		return nil, err
	}

	var rollTasks []sweetrl.Task
	for _, t := range train[c.SFTTasks:] {
		for range c.K {
			rollTasks = append(rollTasks, t)
		}
	}
	r.header("rollouts: %d episodes (%d tasks × %d) of the SFT policy at temperature 1", len(rollTasks), c.RLTasks, c.K)
	r.newSampler()
	trajs, err := rl.RunEpisodes(r.ctx, rollTasks, r.pol, r.f.Sim, rl.RolloutOptions{Protocol: r.f.Protocol, Progress: c.Log, Label: "episodes"})
	if err != nil {
		return nil, err
	}
	if _, err := rl.Score(r.ctx, r.f.Scorer, trajs); err != nil {
		return nil, err
	}
	rollPath := filepath.Join(c.OutDir, "rollouts.jsonl.zst")
	if err := sweetrl.SaveTrajectories(rollPath, trajs); err != nil {
		return nil, err
	}
	// What follows reads the rollouts back as a run with --from does: the
	// file holds each byte of a reply that is not UTF-8 as U+FFFD (JSON
	// strings are text), so the sampled replies themselves would give
	// other tokens to every later stage.
	if trajs, err = sweetrl.LoadTrajectories(rollPath); err != nil {
		return nil, err
	}
	r.logf("rollouts: mean reward %.3f, success %.3f", sweetrl.MeanReward(trajs), sweetrl.SuccessRate(trajs))
	r.newSampler() // the rollouts advanced it; what follows starts as a run with --from does
	return trajs, r.writeManifest(want)
}

// supervised trains the supervised start from scratch on one scripted
// dialogue of each of tasks and saves it in OutDir/sft.
func (r *runner) supervised(tasks []sweetrl.Task) error {
	c := r.c
	scripted := r.f.Scripted(tasks, 1, c.Seed)
	r.header("supervised start: %d scripted dialogues of the %s family (mean reward %.2f, success %.3f), a byte-level model from scratch",
		len(scripted), r.f.Name, sweetrl.MeanReward(scripted), sweetrl.SuccessRate(scripted))
	m, err := llama.NewRandom(c.Backend, c.Model, engine.F32, 0.02, c.Seed)
	if err != nil {
		return err
	}
	m.Recompute = c.Recompute
	r.m = m
	ex, err := rl.Examples(r.tok, r.f.Protocol.System, scripted)
	if err != nil {
		return err
	}
	if err := rl.SupervisedFT(m, nil, ex, rl.SFTOptions{Steps: c.SFTSteps, BatchTokens: 2048, MaxLen: 256, LR: 3e-3, Seed: c.Seed}, c.Log); err != nil {
		return err
	}
	return m.SaveHF(filepath.Join(c.OutDir, "sft"))
}

func (r *runner) writeManifest(mf manifest) error {
	js, err := json.MarshalIndent(mf, "", "  ")
	if err != nil {
		return err
	}
	return outfile.WriteFile(filepath.Join(r.c.OutDir, manifestFile), append(js, '\n'), 0o644)
}

// newSampler makes the SFT policy's sampler (temperature 1), seeded afresh
// so that what follows does not depend on whether the rollouts were made
// or reused.
func (r *runner) newSampler() {
	r.pol = &rl.Sampler{Model: r.m, Tok: r.tok, Sample: engine.SampleParams{Temperature: rl.RefTemperature, TopP: 1}, MaxNew: maxNew, MaxBatch: 256, Seed: r.c.Seed}
}

// prefOptions are the reference's preference options at learning rate lr.
func (r *runner) prefOptions(label string, epochs int, nll float64, lr float64) rl.PrefOptions {
	o := rl.ReferencePrefOptions()
	o.Epochs, o.NLLCoef, o.LR, o.NLLSequence = epochs, nll, lr, r.c.NLLSequence
	o.BatchTokens, o.Seed, o.Progress, o.Label = batchTokens, r.c.Seed, r.c.Log, label
	return o
}

// lrs returns the learning rates to try for a method: the grid with
// Select (or, for the critic, SelectCritic), else the configured one.
func (r *runner) lrs(method string, configured float64) []float64 {
	if r.c.Select || (method == "critic" && r.c.SelectCritic) {
		return Grid()[method]
	}
	return []float64{configured}
}

// adapterSeed gives each method's adapter its own seed.
func (r *runner) adapterSeed(method string) uint64 {
	var h uint64 = 1469598103934665603
	for _, c := range []byte(method) {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return r.c.Seed ^ h
}

// copyFile copies the file src to dst (written whole, see outfile).
func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return outfile.WriteFile(dst, b, 0o644)
}

// RunFamilies runs the demo (Run) and, with c.Ablations on the keys family, the
// budget family too, in OutDir/budget after a heading on c.Log (reusing
// From/budget when that earlier run made one).
func RunFamilies(ctx context.Context, c Config) error {
	if _, err := Run(ctx, c); err != nil || !c.Ablations || c.Family != "keys" {
		return err
	}
	fmt.Fprintf(c.Log, "\n=== the budget family ===\n")
	c.Family, c.OutDir = "budget", filepath.Join(c.OutDir, "budget")
	if c.From != "" {
		c.From = filepath.Join(c.From, "budget")
		if !fileExists(filepath.Join(c.From, "stages.json")) {
			c.From = "" // that run had no budget family: make its stages
		}
	}
	_, err := Run(ctx, c)
	return err
}
