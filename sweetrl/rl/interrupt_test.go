package rl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/checkpoint"
	"github.com/turnwise/turnwise/sweetrl/demotask"
	"github.com/turnwise/turnwise/tokenizer"
	"github.com/turnwise/turnwise/trainer"
)

// prefJobs are the jobs of the preference trainers, each run on job j
// with the context ctx, and the files each saves in j.Out at its end.
var prefJobs = []struct {
	name  string
	run   func(t *testing.T, ctx context.Context, j Job) error
	saved []string
}{
	{"critic", func(_ *testing.T, ctx context.Context, j Job) error {
		return TrainCriticContext(ctx, j, "logprob", "turn")
	},
		[]string{"adapter_model.safetensors"}},
	{"critic, value head", func(_ *testing.T, ctx context.Context, j Job) error {
		return TrainCriticContext(ctx, j, "scalar", "turn")
	},
		[]string{"adapter_model.safetensors", ValueHeadFile}},
	{"mtdpo", func(_ *testing.T, ctx context.Context, j Job) error { return TrainMTDPOContext(ctx, j) },
		[]string{"adapter_model.safetensors"}},
	{"actor", func(t *testing.T, ctx context.Context, j Job) error {
		// The critic is an adapter of its own over the job's model.
		critic := Critic{Model: j.Model, Adapter: newAdapter(t, j.Model), RefModel: j.Model}
		return TrainActorContext(ctx, j, ActorJob{Critic: critic, Temperature: 1, MaxNew: 4, Candidates: 3, PairsPerTurn: 1, DataFraction: 0.5, NLLSequence: true})
	}, []string{"adapter_model.safetensors"}},
}

// prefJob returns a job training a fresh LoRA adapter of a new model on
// scripted trajectories, at peak learning rate lr, in the run directory
// dir, checkpointing every 100 steps (so that only an interrupt and the
// last step write one).
func prefJob(t *testing.T, dir string, lr float64) Job {
	log := &bytes.Buffer{}
	o := ReferencePrefOptions()
	o.Epochs, o.PairsPerStep, o.BatchTokens, o.LR, o.Seed, o.NLLCoef, o.Progress = 2, 2, 4096, lr, 3, RefActorNLL, log
	return Job{Model: newModel(t, 0.3), Tok: tokenizer.Bytes{}, Protocol: demotask.Protocol(),
		Trajs: demotask.ScriptedTrajectories(demotask.Tasks(4, 9), 4, 9), Path: "scripted.jsonl",
		Target: Target{Rank: 2, LR: lr}, MaxLen: byteConfig.MaxSeqLen, Seed: 1, Pref: o, Out: dir, Log: log,
		Checkpoints: Checkpoints{RunDir: dir, Every: 100, Keep: 2}, Resume: true}
}

// TestJobInterrupt cancels each preference trainer's job during step 3:
// the run finishes the step, checkpoints it, returns trainer.ErrInterrupted
// naming the checkpoint and saves nothing else; the job started again on
// its run directory ends with the losses and the files (the adapter, the
// value head) of an uninterrupted run, bit for bit.
func TestJobInterrupt(t *testing.T) {
	for _, tc := range prefJobs {
		t.Run(tc.name, func(t *testing.T) {
			whole := t.TempDir()
			if err := tc.run(t, context.Background(), prefJob(t, whole, 1e-3)); err != nil {
				t.Fatal(err)
			}
			want := readLosses(t, whole)
			if len(want) <= 3 {
				t.Fatalf("the uninterrupted run took %d steps, want more than 3", len(want))
			}

			dir := t.TempDir()
			err := tc.run(t, &cancelAfter{Context: context.Background(), n: 3}, prefJob(t, dir, 1e-3))
			if !errors.Is(err, trainer.ErrInterrupted) || !strings.Contains(err.Error(), "after step 3: checkpoint "+filepath.Join(dir, "step-000003")) {
				t.Fatalf("cancelled during step 3: %v; want trainer.ErrInterrupted naming step-000003", err)
			}
			for _, f := range tc.saved {
				if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
					t.Errorf("the interrupted run saved %s", f)
				}
			}
			j := prefJob(t, dir, 1e-3)
			if err := tc.run(t, context.Background(), j); err != nil {
				t.Fatal(err)
			}
			if log := j.Log.(*bytes.Buffer).String(); !strings.Contains(log, "resuming from "+filepath.Join(dir, "step-000003")) {
				t.Errorf("the run started again does not resume from step 3:\n%s", log)
			}
			got := readLosses(t, dir)
			if len(got) != len(want) {
				t.Fatalf("interrupted and resumed: %d steps, uninterrupted %d", len(got), len(want))
			}
			for i := range want {
				if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
					t.Errorf("step %d: loss %.17g interrupted and resumed, %.17g uninterrupted", i+1, got[i], want[i])
				}
			}
			for _, f := range tc.saved {
				a, errA := os.ReadFile(filepath.Join(whole, f))
				b, errB := os.ReadFile(filepath.Join(dir, f))
				if errA != nil || errB != nil || !bytes.Equal(a, b) {
					t.Errorf("%s differs from the uninterrupted run's (%v, %v)", f, errA, errB)
				}
			}
		})
	}
}

// TestJobDiverges runs each preference trainer's job at learning rates
// that send the weights far out: at 1e9 the loss turns NaN and the run
// stops after trainer.MaxNonFiniteLosses such steps; at 1e30 the weights
// themselves overflow in the first step, whose checkpoint is refused. Each
// stops with trainer.ErrDiverged naming the step and saves none of its
// files.
func TestJobDiverges(t *testing.T) {
	for _, tc := range prefJobs {
		for _, c := range []struct {
			lr   float64
			want string
		}{
			{1e9, "the loss was NaN for 3 steps in a row"},
			{1e30, "training diverged at step 1: the trained weights hold non-finite values"},
		} {
			if c.lr == 1e9 && tc.name == "critic, value head" {
				continue // a value head's loss saturates: large, not NaN
			}
			t.Run(fmt.Sprintf("%s/lr %g", tc.name, c.lr), func(t *testing.T) {
				dir := t.TempDir()
				j := prefJob(t, dir, c.lr)
				j.Checkpoints.Every = 1
				err := tc.run(t, context.Background(), j)
				if !errors.Is(err, trainer.ErrDiverged) || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("%v; want trainer.ErrDiverged saying %q", err, c.want)
				}
				for _, f := range tc.saved {
					if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
						t.Errorf("the diverged run saved %s", f)
					}
				}
				if _, _, err := checkpoint.Latest(dir); c.lr == 1e30 && !errors.Is(err, checkpoint.ErrNoCheckpoint) {
					t.Errorf("a checkpoint of weights that are not finite was written (%v)", err)
				}
			})
		}
	}
}
