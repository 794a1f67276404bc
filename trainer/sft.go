package trainer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/turnwise/turnwise/data"
	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/internal/outfile"
	"github.com/turnwise/turnwise/internal/recipe"
	"github.com/turnwise/turnwise/model/llama"
)

// SFTJob is one supervised run on examples, as `train sft` makes it: the
// examples split into training and held-out ones, packed, trained on by a
// Trainer that checkpoints to Config.RunDir and resumes from it.
type SFTJob struct {
	Model        *llama.Model
	Adapter      *llama.Adapter // the adapter trained (nil: every weight)
	Rank         int            // the LoRA rank the run was asked for, for the opening line
	Examples     []data.Example
	EvalFraction float64 // fraction of the examples held out for evaluation
	BatchTokens  int     // tokens per packed micro-batch
	Seed         uint64  // seeds the split and the packing order
	Resume       bool    // continue from the newest valid checkpoint (false: refuse a run directory that has one)
	Config       Config  // the trainer's configuration; Join sets its Comm

	// Epochs, when positive, sets the run's length in passes over the
	// training examples instead of Config.Steps: the optimizer steps that
	// take Epochs·(batches of one pass) batches, Config.MicroBatches per
	// rank and step, rounded up (the last step may take a few batches of
	// the next pass). Config.Schedule.Total becomes that number, and its
	// Warmup WarmupSteps of it (nil: left as it is).
	Epochs      int
	WarmupSteps func(steps int) int

	// Flags are the command's resolved flags (recipe.Values), saved in the
	// run directory as ConfigName; a run directory whose saved flags differ
	// in a key other than SFTMayChange is refused unless Force. Nil: none.
	Flags map[string]string
	Force bool

	// Join joins the data-parallel job the process belongs to, returning
	// its communicator (nil: alone) and what closes it.
	Join func(engine.Backend) (engine.Communicator, func(), error)
	Log  io.Writer
}

// ConfigName is the file in a run directory that holds the run's resolved
// flags (see recipe.CheckRun).
const ConfigName = "config.yaml"

// SFTMayChange are the flags of train sft that a resumed run may change
// without --force: where and how fast it runs, and what it reports — not
// what it computes — the number of steps (training longer; the cosine
// schedule then follows the new total), and so the number of epochs, and
// the micro-batches per step, which a resume with another number of ranks
// changes to keep the batch.
var SFTMayChange = []string{"steps", "micro-batches", "backend", "gemm", "threads", "recompute", "checkpoint-every", "keep", "eval-every",
	"prompt", "max-new", "resume", "force", "out", "run-dir", "zero", "peak-tflops", "epochs"}

// RunSFT runs j to its last step, saying on Log what it trains, where it
// resumes and where the checkpoints and metrics are.
func RunSFT(j SFTJob) error { return RunSFTContext(context.Background(), j) }

// RunSFTContext is RunSFT, stopping early when ctx is cancelled
// (Trainer.RunContext): the error then wraps ErrInterrupted and names the
// checkpoint a resumed run continues from, and no final model is written.
func RunSFTContext(ctx context.Context, j SFTJob) error {
	m, cfg := j.Model, j.Config
	trainEx, evalEx, err := data.Split(j.Examples, j.EvalFraction, j.Seed)
	if err != nil {
		return err
	}
	if len(trainEx) == 0 {
		return errors.New("no training examples")
	}
	maxLen := min(j.BatchTokens, m.Config.MaxSeqLen)
	train, err := data.NewPacker(trainEx, data.PackOptions{TokensPerBatch: j.BatchTokens, MaxLen: maxLen, Seed: j.Seed})
	if err != nil {
		return err
	}
	var eval *data.Packer
	if len(evalEx) > 0 && cfg.EvalEvery > 0 {
		if eval, err = data.NewPacker(evalEx, data.PackOptions{TokensPerBatch: j.BatchTokens, MaxLen: maxLen, NoShuffle: true}); err != nil {
			return err
		}
	}
	st := train.Stats()
	fmt.Fprintf(j.Log, "model: %d parameters%s; data: %d training examples (%d truncated, %d dropped), %d held out\n",
		m.Config.Params(), map[bool]string{true: fmt.Sprintf(", LoRA r=%d", j.Rank)}[j.Adapter != nil], st.Examples, st.Truncated, st.Dropped, len(evalEx))

	if err := outfile.CheckDir(cfg.RunDir); err != nil {
		return err
	}
	if j.Flags != nil {
		if err := recipe.CheckRun(filepath.Join(cfg.RunDir, ConfigName), j.Flags, j.Force, SFTMayChange...); err != nil {
			return err
		}
	}
	comm, leave, err := j.Join(m.Backend())
	if err != nil {
		return err
	}
	defer leave()
	cfg.Comm = comm
	if j.Epochs > 0 {
		ranks := 1
		if comm != nil {
			ranks = comm.Size()
		}
		per := cfg.MicroBatches * ranks
		cfg.Steps = (train.EpochBatches(j.Epochs) + per - 1) / per
		cfg.Schedule.Total = cfg.Steps
		if j.WarmupSteps != nil {
			cfg.Schedule.Warmup = j.WarmupSteps(cfg.Steps)
		}
		fmt.Fprintf(j.Log, "%d epochs: %d steps of %d batches\n", j.Epochs, cfg.Steps, per)
	}
	tr, err := New(m, j.Adapter, train, eval, cfg, j.Log)
	if err != nil {
		return err
	}
	if err := RefuseResume(cfg.RunDir, j.Resume, "--out"); err != nil {
		return err
	}
	from, err := tr.Resume()
	if err != nil {
		return err
	}
	if from > 0 {
		fmt.Fprintf(j.Log, "resuming from step %d\n", from)
	}
	if err := tr.RunContext(ctx); err != nil {
		return err
	}
	if comm != nil {
		// Rank 0 has written the last checkpoint and serves the store:
		// the ranks leave together.
		if err := comm.Barrier(); err != nil {
			return err
		}
	}
	if err := tr.SaveOutput(filepath.Join(cfg.RunDir, FinalDir)); err != nil {
		return err
	}
	if o := tr.Optimizer(); o.Skipped > 0 {
		fmt.Fprintf(j.Log, "%d steps were skipped for a non-finite gradient\n", o.Skipped)
	}
	fmt.Fprintf(j.Log, "checkpoints and metrics: %s (draw them: train plot %s -o loss.svg); the trained model: %s\n",
		cfg.RunDir, filepath.Join(cfg.RunDir, "metrics.jsonl"), filepath.Join(cfg.RunDir, FinalDir))
	return nil
}
