package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/turnwise/turnwise/checkpoint"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/sweetrl/demotask"
	"github.com/turnwise/turnwise/trainer"
)

// prefStage is one preference trainer's subcommand and the flags of its
// own that a test passes it.
type prefStage struct {
	name  string
	run   func([]string, io.Reader, io.Writer, io.Writer) error
	extra []string
}

// prefStages returns the preference trainers — critic, actor and mtdpo —
// on the scripted trajectories of 4 demo tasks and a tiny byte-level
// model, with the flags every one of them takes (common) and, for the
// actor, a critic trained first.
func prefStages(t *testing.T) (common []string, stages []prefStage) {
	t.Helper()
	dir := t.TempDir()
	scripted := filepath.Join(dir, "scripted.jsonl")
	if err := sweetrl.SaveTrajectories(scripted, demotask.ScriptedTrajectories(demotask.Tasks(4, 9), 4, 9)); err != nil {
		t.Fatal(err)
	}
	common = []string{"--hf", byteModel(t), "--threads", "1", "--trajectories", scripted, "--lora-rank", "2", "--batch-tokens", "2048", "--batch", "2"}
	critic := filepath.Join(dir, "critic")
	if out, err := runCmd(t, runCritic, "", append(common, "--out", critic, "--epochs", "1", "--lr", "1e-3")...); err != nil {
		t.Fatalf("critic for the actor: %v\n%s", err, out)
	}
	return common, []prefStage{
		{"critic", runCritic, nil},
		{"actor", runActor, []string{"--env", "demo", "--critic", critic, "--candidates", "3", "--data-fraction", "0.5", "--max-new", "4"}},
		{"mtdpo", runMTDPO, nil},
	}
}

// TestRLDiverges: critic, actor and mtdpo at --lr 1e9 stop with an error
// naming the step at which training diverged, and write no adapter.
func TestRLDiverges(t *testing.T) {
	common, stages := prefStages(t)
	for _, s := range stages {
		t.Run(s.name, func(t *testing.T) {
			out := t.TempDir()
			args := append(append(append([]string{}, common...), s.extra...), "--out", out, "--lr", "1e9", "--epochs", "4", "--checkpoint-every", "1")
			_, err := runCmd(t, s.run, "", args...)
			if !errors.Is(err, trainer.ErrDiverged) || !regexp.MustCompile(`training diverged at step \d+: the loss was NaN`).MatchString(err.Error()) {
				t.Fatalf("--lr 1e9: %v; want an error saying at which step training diverged", err)
			}
			if _, err := os.Stat(filepath.Join(out, "adapter_model.safetensors")); err == nil {
				t.Error("a diverged run wrote its adapter")
			}
		})
	}
}

// TestRLSignal sends SIGINT to critic, actor and mtdpo in a child process
// once a few steps are checkpointed: each finishes its step, writes a
// checkpoint of it, names it and exits with status 1, writing no adapter.
// (That the run resumed from such a checkpoint ends bit for bit as an
// uninterrupted one is sweetrl/rl's TestJobInterrupt.)
func TestRLSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	common, stages := prefStages(t)
	for _, s := range stages {
		t.Run(s.name, func(t *testing.T) {
			out := t.TempDir()
			args := append(append(append([]string{s.name}, common...), s.extra...), "--out", out, "--lr", "1e-3", "--epochs", "1000", "--checkpoint-every", "2")
			var log syncBuffer
			cmd := startTrain(t, &log, args)
			waitFor(t, checkpoint.Dir(out, 2))
			cmd.Process.Signal(syscall.SIGINT)
			err := waitOrKill(t, cmd, 2*time.Minute)
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 || !regexp.MustCompile(`interrupted after step \d+: checkpoint \S+step-\d{6} holds it`).MatchString(log.String()) {
				t.Fatalf("SIGINT: exit %v; want status 1 and a message naming the checkpoint\n%s", err, log.String())
			}
			if _, err := os.Stat(filepath.Join(out, "adapter_model.safetensors")); err == nil {
				t.Error("an interrupted run wrote its adapter")
			}
		})
	}
}

// waitOrKill waits for cmd to exit, killing it and failing the test when
// it runs past limit (a run that goes on after a signal runs for long).
func waitOrKill(t *testing.T, cmd *exec.Cmd, limit time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		cmd.Process.Kill()
		<-done
		t.Fatalf("still running %v after the signal", limit)
		return nil
	}
}
