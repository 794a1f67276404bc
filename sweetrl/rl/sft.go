package rl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/turnwise/turnwise/data"
	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/optim"
	"github.com/turnwise/turnwise/trainer"
)

// SFTOptions control SupervisedFT.
type SFTOptions struct {
	Steps       int     // optimizer steps
	BatchTokens int     // tokens per packed batch
	MaxLen      int     // tokens an example keeps at most (data.PackOptions)
	LR          float64 // peak learning rate
	Seed        uint64  // the order the examples are visited in
	// MetricsDir, when not empty, gets the run's metrics.jsonl and a
	// TensorBoard event file (trainer.Config.MetricsDir): per step the
	// loss, lr, grad_norm and the performance values of metrics.Meter.
	MetricsDir string
	PeakFLOPS  float64 // the device's peak FLOP/s for MFU (0: none)
	// Tuning, when set, replaces the reference's schedule and optimizer
	// settings (train rft's flags); nil: the reference's.
	Tuning *SFTTuning
	// Comm, when it joins several ranks, trains data parallel: each rank
	// trains on its share of the packed batches (trainer.Config.Comm), so
	// a step sees W batches; nil trains in one process.
	Comm engine.Communicator
	// Zero is the ZeRO stage of a data-parallel run (trainer.Config.Zero).
	Zero int
	// OverlapReduce overlaps the gradient all-reduce with the backward
	// (trainer.Config.OverlapReduce).
	OverlapReduce bool
	// Checkpoints, with a RunDir, checkpoints the run there and resumes it
	// from the newest valid checkpoint there, if any (trainer.Trainer.Resume):
	// the metrics then go to the RunDir.
	Checkpoints Checkpoints
	// AfterStep, when set, is called after each optimizer step with the
	// number of steps taken (1, 2, …, Steps), the adapter holding that
	// step's weights (trainer.Config.AfterStep): to validate the model
	// at given steps of the run — the ends of its epochs — and keep the
	// best, as early stopping does; the schedule stays the whole run's.
	// A resumed run calls it for the steps it takes. An error stops the
	// run and is returned.
	AfterStep func(step int) error
}

// SFTTuning is the schedule and optimizer of SupervisedFT when they are
// not the reference's.
type SFTTuning struct {
	WarmupFrac float64 // fraction of the steps spent warming up (as PrefOptions.WarmupFrac)
	MinLRRatio float64 // the cosine schedule's floor, as a fraction of the peak
	AdamW      optim.AdamWConfig
}

// SupervisedFT trains m's adapter ad (nil: every weight) on examples with
// the supervised trainer (trainer.Trainer) and the reference's optimizer
// settings (reference.go): AdamW (0.9, 0.95), 3% warm-up then cosine to
// 0.1·LR, clipping at 1, no weight decay, checkpoints as o.Checkpoints
// says. out gets the progress lines (nil: none).
func SupervisedFT(m *llama.Model, ad *llama.Adapter, examples []data.Example, o SFTOptions, out io.Writer) error {
	return SupervisedFTContext(context.Background(), m, ad, examples, o, out)
}

// SupervisedFTContext is SupervisedFT, stopping early when ctx is
// cancelled (trainer.Trainer.RunContext): the step under way is finished
// and checkpointed, and the error wraps trainer.ErrInterrupted.
func SupervisedFTContext(ctx context.Context, m *llama.Model, ad *llama.Adapter, examples []data.Example, o SFTOptions, out io.Writer) error {
	if out == nil {
		out = io.Discard
	}
	if len(examples) == 0 {
		return errors.New("no training examples")
	}
	train, err := data.NewPacker(examples, data.PackOptions{TokensPerBatch: o.BatchTokens, MaxLen: o.MaxLen, Seed: o.Seed})
	if err != nil {
		return err
	}
	sched := optim.Schedule{Peak: o.LR, Warmup: max(1, o.Steps*3/100), Total: o.Steps, Cosine: true, MinRatio: RefMinLRRatio}
	adamw := ReferenceAdamW()
	if t := o.Tuning; t != nil {
		sched.Warmup, sched.MinRatio, adamw = int(math.Ceil(t.WarmupFrac*float64(o.Steps)-1e-9)), t.MinLRRatio, t.AdamW
	}
	tr, err := trainer.New(m, ad, train, nil, trainer.Config{
		Steps: o.Steps, MicroBatches: 1, Comm: o.Comm, Zero: o.Zero, OverlapReduce: o.OverlapReduce, Schedule: sched, AdamW: adamw,
		MetricsDir: o.MetricsDir, PeakFLOPS: o.PeakFLOPS,
		RunDir: o.Checkpoints.RunDir, CheckpointEvery: o.Checkpoints.Every, KeepCheckpoints: o.Checkpoints.Keep, Compress: o.Checkpoints.Compress,
		AfterStep: o.AfterStep,
	}, out)
	if err != nil {
		return err
	}
	from, err := tr.Resume()
	if err != nil {
		return err
	}
	if from > 0 {
		fmt.Fprintf(out, "resuming from step %d\n", from)
	}
	return tr.RunContext(ctx)
}
