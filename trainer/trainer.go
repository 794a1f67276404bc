// Package trainer trains a model's weights or its LoRA adapter. It holds
//
//   - Params (params.go): what every trainer of the project trains — the
//     parameters registered with one AdamW, the model's gradient buffers
//     as views of the optimizer's, and the one place a loss gradient is
//     uploaded to the device — used by the supervised Trainer here and by
//     sweetrl/rl's preference and value-head trainers;
//   - Trainer (trainer.go): supervised fine-tuning, which feeds packed
//     batches (data.Packer) to the model, accumulates micro-batches into one
//     optimizer step, evaluates on held-out batches, writes metrics and a
//     progress line, and checkpoints so that a killed run resumes exactly
//     where it was. With Config.Comm it is one rank of a data-parallel job
//     (dataparallel.go), whose gradient all-reduce may overlap the backward
//     (overlap.go);
//   - RunSFT (sft.go): one supervised run on examples as `train sft` makes
//     it: split, packed, trained, checkpointed and resumed.
//   - Guard (guard.go): how every trainer ends a step — a run whose loss
//     stays NaN or infinite stops (ErrDiverged), one whose context was
//     cancelled checkpoints the step and stops (ErrInterrupted) — and the
//     check that keeps non-finite weights out of checkpoints and final
//     models (Params.CheckFinite).
package trainer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/turnwise/turnwise/checkpoint"
	"github.com/turnwise/turnwise/data"
	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/internal/outfile"
	"github.com/turnwise/turnwise/metrics"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/optim"
)

// Config controls a run.
type Config struct {
	Steps           int            // optimizer steps in the run
	MicroBatches    int            // packed batches accumulated per step (≥ 1)
	Schedule        optim.Schedule // learning rate per step
	AdamW           optim.AdamWConfig
	EvalEvery       int    // steps between evaluations (0: never)
	EvalBatches     int    // held-out batches per evaluation
	CheckpointEvery int    // steps between checkpoints (0: only at the end)
	KeepCheckpoints int    // checkpoints kept (≥ 1)
	RunDir          string // checkpoints and metrics.jsonl go here ("" : none)
	Compress        bool   // zstd-compress optimizer state in checkpoints
	// MetricsDir, when RunDir is empty, is where metrics.jsonl and the
	// TensorBoard event file go without checkpoints ("": none).
	MetricsDir string
	// PeakFLOPS is one device's peak FLOP/s for the MFU the metrics record
	// (see metrics.MeterOptions.PeakFLOPS); 0 leaves MFU out.
	PeakFLOPS float64
	// DropoutSeed seeds the dropout masks of an adapter with dropout
	// (llama.LoRAConfig.Dropout): each micro-batch's are drawn from it, the
	// step, the micro-batch and the rank (llama.Batch.DropoutSeed), so that
	// a resumed run draws the masks an uninterrupted one does.
	DropoutSeed uint64

	// Comm, when not nil, makes the run one rank of a data-parallel job
	// (see dataParallel): nil or a job of one is a single process.
	Comm engine.Communicator
	// Zero is the ZeRO stage: 1 shards the optimizer's moments and f32
	// master weights across Comm's ranks (see optim.NewShardedAdamW); 0
	// keeps the whole optimizer on every rank.
	Zero int
	// OverlapReduce all-reduces each layer's gradients while the backward
	// of a step's last micro-batch goes on, where the backend allows
	// (Params.OverlapReduce: CPU ranks without ZeRO).
	OverlapReduce bool
	// AfterStep, when set, is called after each step this run takes, once
	// the step is recorded and checkpointed, with the number of steps
	// taken (1, 2, …, Steps) and the step's weights in place: to validate
	// mid-run and keep the best weights, as early stopping does. An error
	// stops the run and is returned. Every rank of a data-parallel job
	// calls it.
	AfterStep func(step int) error
}

// state is what trainer.json holds: enough, with the weights and the
// optimizer, to continue bit-exactly.
type state struct {
	Step     int           `json:"step"`
	Position data.Position `json:"data_position"`
	Tokens   int64         `json:"tokens"`
}

// Trainer runs supervised fine-tuning of one model.
type Trainer struct {
	cfg        Config
	m          *llama.Model
	ad         *llama.Adapter // nil: full fine-tuning
	p          *Params        // the trained parameters, their optimizer and gradients
	train      *data.Packer
	eval       *data.Packer
	st         state
	progress   *metrics.Progress
	metricsOut *metrics.Writer
	log        io.Writer
	guard      Guard // stops a diverged or interrupted run
}

// New prepares a run of model m (with adapter ad, or nil for full
// fine-tuning) over the train packer, evaluating on eval (nil: none).
// Progress goes to out. The run directory, when there is one, is created
// if need be and must be writable: a run that could not save its
// checkpoints is refused before it starts.
func New(m *llama.Model, ad *llama.Adapter, train, eval *data.Packer, cfg Config, out io.Writer) (*Trainer, error) {
	if cfg.Steps <= 0 || cfg.MicroBatches <= 0 {
		return nil, fmt.Errorf("trainer: %d steps of %d micro-batches", cfg.Steps, cfg.MicroBatches)
	}
	if cfg.RunDir != "" {
		if err := outfile.CheckDir(cfg.RunDir); err != nil {
			return nil, fmt.Errorf("trainer: %w", err)
		}
	}
	if cfg.KeepCheckpoints <= 0 {
		cfg.KeepCheckpoints = 1
	}
	t := &Trainer{cfg: cfg, m: m, ad: ad, train: train, eval: eval, log: out, guard: Guard{RunDir: cfg.RunDir}}
	if cfg.Comm != nil && cfg.Comm.Size() > 1 {
		if err := broadcastParams(cfg.Comm, trainedTensors(m, ad, nil)); err != nil {
			return nil, err
		}
		if cfg.Comm.Rank() != 0 {
			t.log = io.Discard // rank 0 reports
			out = io.Discard
		}
	}
	p, err := NewParamsZero(m, ad, cfg.AdamW, nil, cfg.Comm, cfg.Zero)
	if err != nil {
		return nil, err
	}
	t.p = p
	if cfg.OverlapReduce {
		p.OverlapReduce(cfg.Comm)
	}
	t.progress = metrics.NewProgress(out, metrics.ProgressOptions{Total: int64(cfg.Steps)})
	return t, nil
}

// Resume restores the newest valid checkpoint of the run directory, if any,
// and reports the step it continues from. Damaged checkpoints are skipped
// with a message. The run directory's metrics.jsonl is cut back to the
// steps up to the one resumed from (see metrics.Truncate), so that the
// steps run again are not recorded twice.
func (t *Trainer) Resume() (int, error) {
	if t.cfg.RunDir == "" {
		return 0, nil
	}
	dir, skipped, err := checkpoint.Latest(t.cfg.RunDir)
	for _, s := range skipped {
		fmt.Fprintf(t.log, "skipping a damaged checkpoint: %v\n", s)
	}
	if errors.Is(err, checkpoint.ErrNoCheckpoint) {
		return 0, t.truncateMetrics()
	}
	if err != nil {
		return 0, err
	}
	if err := t.p.LoadCheckpoint(t.cfg.Comm, dir, &t.st); err != nil {
		return 0, err
	}
	if err := t.train.Seek(t.st.Position); err != nil {
		return 0, fmt.Errorf("%s: %w", dir, err)
	}
	return t.st.Step, t.truncateMetrics()
}

// RefuseResume returns an error when resume is false and runDir holds a
// checkpoint, so that a run asked to start afresh does not replace or mix
// with an earlier one's; dirFlag is the flag naming runDir, for the message.
func RefuseResume(runDir string, resume bool, dirFlag string) error {
	if resume || runDir == "" {
		return nil
	}
	if d, _, err := checkpoint.Latest(runDir); err == nil {
		return fmt.Errorf("%s holds checkpoint %s: pass --resume or choose another %s", runDir, filepath.Base(d), dirFlag)
	}
	return nil
}

// MetricsName is the name of the metrics file in the run directory.
const MetricsName = "metrics.jsonl"

// truncateMetrics cuts the metrics file back to the current step. Only
// the rank that writes the file (rank 0 of a data-parallel job) cuts it:
// another rank's rewrite, renamed into place after rank 0 had reopened the
// file, would leave rank 0 appending to a file no longer in the directory.
func (t *Trainer) truncateMetrics() error {
	if t.cfg.Comm != nil && t.cfg.Comm.Rank() != 0 {
		return nil
	}
	path := filepath.Join(t.cfg.RunDir, MetricsName)
	n, err := metrics.Truncate(path, int64(t.st.Step))
	if err != nil {
		return err
	}
	if n > 0 {
		fmt.Fprintf(t.log, "%s: dropped %d records after step %d, the step resumed from\n", path, n, t.st.Step)
	}
	return nil
}

// lossGrad returns dLogP [N], the gradient of scale times the mean NLL over
// batch bt's supervised tokens with respect to each log-probability.
func lossGrad(bt llama.Batch, scale float32) ([]float32, error) {
	count := 0
	for _, g := range bt.Targets {
		if g >= 0 {
			count++
		}
	}
	if count == 0 {
		return nil, errors.New("trainer: a batch without supervised tokens")
	}
	vals := make([]float32, len(bt.IDs))
	for i, g := range bt.Targets {
		if g >= 0 {
			vals[i] = -scale / float32(count)
		}
	}
	return vals, nil
}

// meanNLL returns −mean logp over the supervised tokens of a pass.
func meanNLL(b engine.Backend, p *llama.Pass, bt llama.Batch) float64 {
	var s float64
	var n int
	for i, v := range engine.ToF32(b, p.LogP) {
		if bt.Targets[i] >= 0 {
			s -= float64(v)
			n++
		}
	}
	return s / float64(max(n, 1))
}

// Run trains from the current step to cfg.Steps. A run whose loss stays
// NaN or infinite stops with an error wrapping ErrDiverged (Guard.EndStep).
func (t *Trainer) Run() error { return t.RunContext(context.Background()) }

// RunContext is Run, stopping early when ctx is cancelled: the step under
// way is finished and, with a run directory, checkpointed, and the error
// wraps ErrInterrupted and names the checkpoint, from which Resume
// continues as if the run had not stopped. In a data-parallel job the
// ranks agree, with each step's loss, whether any was cancelled, and stop
// after the same step.
func (t *Trainer) RunContext(ctx context.Context) error {
	b := t.m.Backend()
	dp := newDataParallel(t.cfg.Comm, b)
	mdir := t.cfg.RunDir
	if mdir == "" && t.cfg.MetricsDir != "" && dp.writes() {
		// No checkpoints, so no resume: a new run drops an earlier one's records.
		mdir = t.cfg.MetricsDir
		if _, err := metrics.Truncate(filepath.Join(mdir, MetricsName), int64(t.st.Step)); err != nil {
			return err
		}
	}
	if mdir != "" && t.metricsOut == nil && dp.writes() {
		if err := os.MkdirAll(mdir, 0o755); err != nil {
			return err
		}
		w, err := metrics.Create(filepath.Join(mdir, MetricsName),
			metrics.WriterOptions{EventsDir: mdir, FromStep: int64(t.st.Step), Restart: t.cfg.RunDir == ""})
		if err != nil {
			return err
		}
		t.metricsOut = w
		defer func() { w.Close(); t.metricsOut = nil }()
	}
	// Tokens are summed over the ranks, so the peak is all of theirs.
	meter := NewMeter(t.m, t.ad, t.cfg.PeakFLOPS*float64(dp.size))
	if s := t.p.DataParallel(); s != "" {
		fmt.Fprintln(t.log, s)
	}
	for t.st.Step < t.cfg.Steps {
		start := time.Now()
		t.p.Opt.ZeroGrad()
		var loss float64
		var tokens int
		for mb := 0; mb < t.cfg.MicroBatches; mb++ {
			if mb == t.cfg.MicroBatches-1 {
				t.p.LastMicroBatch()
			}
			bt := dp.next(t.train)
			bt.DropoutSeed = engine.MixSeed(t.cfg.DropoutSeed, uint64(t.st.Step), uint64(mb), uint64(dp.rank)) | 1
			dlogp, err := lossGrad(bt, 1)
			if err != nil {
				return err
			}
			p, err := t.p.ForwardBackward(bt, dlogp)
			if err != nil {
				return err
			}
			loss += meanNLL(b, p, bt) / float64(t.cfg.MicroBatches)
			tokens += len(bt.IDs)
			p.Release()
		}
		var err error
		var stop bool
		if loss, tokens, stop, err = dp.reduce(t.p, loss, tokens, ctx.Err() != nil); err != nil {
			return err
		}
		lr := t.cfg.Schedule.LR(t.st.Step)
		res, err := t.p.Step(float32(lr), 1/float32(t.cfg.MicroBatches*dp.size))
		if err != nil {
			return err
		}
		t.st.Step++
		t.st.Tokens += int64(tokens)
		t.st.Position = t.train.Position()
		secs := time.Since(start).Seconds()
		tps := float64(tokens) / secs
		rec := metrics.Record{Step: int64(t.st.Step), Values: map[string]float64{
			metrics.Loss: loss, metrics.LR: lr, metrics.GradNorm: float64(res.GradNorm),
		}}
		meter.Add(rec.Values, tokens, secs)
		if res.Skipped {
			rec.Values["skipped"] = 1
		}
		if t.eval != nil && dp.writes() && t.cfg.EvalEvery > 0 && (t.st.Step%t.cfg.EvalEvery == 0 || t.st.Step == t.cfg.Steps) {
			ev, err := t.Evaluate()
			if err != nil {
				return err
			}
			rec.Values[metrics.EvalLoss] = ev
		}
		if t.metricsOut != nil {
			if err := t.metricsOut.Write(rec); err != nil {
				return err
			}
		}
		t.progress.Update(int64(t.st.Step), loss, lr, tps)
		var save func() error
		if dp.writes() || t.p.Opt.Sharded() {
			save = t.Save
		}
		due := (t.cfg.CheckpointEvery > 0 && t.st.Step%t.cfg.CheckpointEvery == 0) || t.st.Step == t.cfg.Steps
		if err := t.guard.EndStep(t.st.Step, loss, due, stop, save); err != nil {
			if errors.Is(err, ErrInterrupted) {
				t.progress.Done()
			}
			return err
		}
		if t.cfg.AfterStep != nil {
			if err := t.cfg.AfterStep(t.st.Step); err != nil {
				return fmt.Errorf("after step %d: %w", t.st.Step, err)
			}
		}
	}
	t.progress.Done()
	return nil
}

// Evaluate returns the mean held-out loss over EvalBatches batches (the
// eval packer restarts each time, so evaluations are comparable).
func (t *Trainer) Evaluate() (float64, error) {
	if err := t.eval.Seek(data.Position{}); err != nil {
		return 0, err
	}
	var sum float64
	n := max(t.cfg.EvalBatches, 1)
	for i := 0; i < n; i++ {
		bt := t.eval.Next()
		p, err := t.m.ForwardTrain(bt, t.ad)
		if err != nil {
			return 0, err
		}
		sum += meanNLL(t.m.Backend(), p, bt)
		p.Release()
	}
	if math.IsNaN(sum) {
		return sum, nil
	}
	return sum / float64(n), nil
}

// Save writes a checkpoint of the current step and prunes old ones. In a
// job of several ranks only rank 0 writes; with a sharded optimizer Save is
// a collective (it gathers the state), which every rank calls.
func (t *Trainer) Save() error {
	return t.p.SaveCheckpoint(t.cfg.Comm, t.cfg.RunDir, t.st.Step, t.cfg.KeepCheckpoints, t.st, t.cfg.Compress)
}

// Step returns the number of optimizer steps taken.
func (t *Trainer) Step() int { return t.st.Step }

// Optimizer returns the run's optimizer (for its counters).
func (t *Trainer) Optimizer() *optim.AdamW { return t.p.Opt }

// FinalDir is the directory of a run directory that holds the trained
// model as others load it (SaveOutput).
const FinalDir = "final"

// SaveOutput writes what the run trained to dir so that others load it
// (llama.Model.Save): the adapter in PEFT's layout naming its base, or
// the whole model as a Hugging Face directory with its tokenizer and
// generation files. In a job of several ranks only rank 0 writes. Weights
// that are not finite are not written: the error wraps ErrDiverged.
func (t *Trainer) SaveOutput(dir string) error {
	if t.cfg.Comm != nil && t.cfg.Comm.Rank() != 0 {
		return nil
	}
	if err := t.p.CheckFinite(t.st.Step, t.cfg.RunDir); err != nil {
		return err
	}
	return t.m.Save(t.ad, dir)
}
