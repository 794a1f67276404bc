package trainer

import (
	"errors"
	"fmt"
	"math"

	"github.com/turnwise/turnwise/checkpoint"
	"github.com/turnwise/turnwise/engine"
)

// MaxNonFiniteLosses is how many steps in a row may have a NaN or infinite
// loss before a run stops with ErrDiverged (Guard.EndStep). A single one —
// an overflow on one batch — costs one step: its gradient is non-finite
// too, and the optimizer skips it (optim.AdamW.Step), leaving the weights
// as they were.
const MaxNonFiniteLosses = 3

// ErrDiverged is what a run stopped for divergence wraps: MaxNonFiniteLosses
// losses in a row were not finite (Guard.EndStep), or the trained weights
// are (Params.CheckFinite, which every checkpoint and final model passes
// first: they are then not written).
var ErrDiverged = errors.New("training diverged")

// ErrInterrupted is what a run stopped by a cancelled context wraps: the
// step under way was finished and, with a run directory, checkpointed
// (Guard.EndStep).
var ErrInterrupted = errors.New("interrupted")

// Guard ends each optimizer step of a training loop the same way in every
// trainer of the project — the supervised Trainer and sweetrl/rl's
// preference and value-head trainers: it stops a run that has diverged,
// and one asked to stop after checkpointing its last step, so that a
// resumed run continues as if it had not stopped. The zero Guard guards a
// run without checkpoints. A Guard is one run's: it counts the non-finite
// losses in a row.
type Guard struct {
	// RunDir is the run directory the checkpoints go to ("": none).
	RunDir    string
	nonFinite int // steps in a row whose loss was NaN or infinite
}

// EndStep ends optimizer step step (1, 2, …) of the run, whose loss was
// loss. due says whether a checkpoint of the step is due, stop whether the
// run stops after it — its context was cancelled — and save writes the
// checkpoint (nil on a rank that takes no part in saving). In a
// data-parallel job every rank passes the same loss and stop: the step's
// reduction carries them, so that the ranks stop together if any was asked
// to.
//
// EndStep returns nil for the loop to go on, or the error that ends the
// run: one wrapping ErrDiverged and naming the step when the loss has been
// NaN or infinite for MaxNonFiniteLosses steps in a row (nothing is then
// saved); save's error; or, with stop, one wrapping ErrInterrupted that
// names the checkpoint save wrote of the step.
func (g *Guard) EndStep(step int, loss float64, due, stop bool, save func() error) error {
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		g.nonFinite++
	} else {
		g.nonFinite = 0
	}
	if g.nonFinite >= MaxNonFiniteLosses {
		return fmt.Errorf("%w at step %d: the loss was %v for %d steps in a row (lower the learning rate?)%s",
			ErrDiverged, step, loss, g.nonFinite, lastCheckpoint(g.RunDir))
	}
	if g.RunDir != "" && save != nil && (due || stop) {
		if err := save(); err != nil {
			return err
		}
	}
	switch {
	case !stop:
		return nil
	case g.RunDir == "":
		return fmt.Errorf("%w after step %d (no run directory: nothing saved)", ErrInterrupted, step)
	}
	return fmt.Errorf("%w after step %d: checkpoint %s holds it, and a resumed run continues from there", ErrInterrupted, step, checkpoint.Dir(g.RunDir, step))
}

// CheckFinite returns an error wrapping ErrDiverged, naming step and the
// newest checkpoint of runDir ("": none), when a trained parameter is NaN
// or infinite (or so large that its square overflows f32, about 1.8e19).
// SaveCheckpoint calls it first; a trainer calls it before it writes or
// returns its final weights.
func (p *Params) CheckFinite(step int, runDir string) error {
	b := p.m.Backend()
	if p.norm == nil {
		acc, err := engine.Alloc(b, engine.F32, 1)
		if err != nil {
			return err
		}
		p.norm = acc
	}
	ts := make([]*engine.Tensor, 0, len(p.Tensors))
	for _, w := range p.Tensors {
		ts = append(ts, w)
	}
	if n := engine.GlobalNorm(b, p.norm, ts); math.IsNaN(float64(n)) || math.IsInf(float64(n), 0) {
		return fmt.Errorf("%w at step %d: the trained weights hold non-finite values; nothing was saved from them%s", ErrDiverged, step, lastCheckpoint(runDir))
	}
	return nil
}

// lastCheckpoint names the newest valid checkpoint of runDir for an
// error's end ("" without one).
func lastCheckpoint(runDir string) string {
	if runDir == "" {
		return ""
	}
	if d, _, err := checkpoint.Latest(runDir); err == nil {
		return "; the newest checkpoint is " + d
	}
	return ""
}
