package main

import (
	"bytes"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/checkpoint"
	"github.com/turnwise/turnwise/internal/recipe"
	"github.com/turnwise/turnwise/metrics"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/sweetrl/demotask"
	"github.com/turnwise/turnwise/sweetrl/rl"
	"github.com/turnwise/turnwise/trainer"
)

// stoppedRun makes dst the run directory that the run in src (which
// checkpointed every step) leaves when it is killed right after step k's
// checkpoint: the checkpoints up to step k, the files written before
// training (config.yaml, the actor's pairs) and the metrics of every step
// (a kill may come later than the checkpoint), but not the trained model.
func stoppedRun(t *testing.T, src, dst string, k int) {
	t.Helper()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		name := e.Name()
		if step, ok := checkpoint.Step(name); ok && e.IsDir() {
			if step <= k {
				n++
				if err := os.CopyFS(filepath.Join(dst, name), os.DirFS(filepath.Join(src, name))); err != nil {
					t.Fatal(err)
				}
			}
			continue
		}
		if name != trainer.ConfigName && name != rl.PairsFile && name != trainer.MetricsName {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if n != k {
		t.Fatalf("%s holds %d checkpoints up to step %d, want %d", src, n, k, k)
	}
}

// TestRLResume: each RL trainer, killed after a checkpoint and started
// again on its --out, continues from it to the very losses and adapter (or
// weights, with --full) of an uninterrupted run (a tiny random model on the
// CPU, bit for bit); the
// actor trains on the pairs the first run formed instead of sampling them
// again. A resume with another --lr is refused, naming it, unless --force;
// --resume=false refuses a directory that holds a checkpoint.
func TestRLResume(t *testing.T) {
	if testing.Short() {
		t.Skip("trains each stage three times")
	}
	dir := t.TempDir()
	model := byteModel(t)
	scripted := filepath.Join(dir, "scripted.jsonl")
	if err := sweetrl.SaveTrajectories(scripted, demotask.ScriptedTrajectories(demotask.Tasks(4, 9), 4, 9)); err != nil {
		t.Fatal(err)
	}
	common := []string{"--hf", model, "--threads", "1", "--trajectories", scripted, "--lora-rank", "2",
		"--batch-tokens", "2048", "--lr", "1e-3", "--checkpoint-every", "1", "--keep", "100"}
	critic := filepath.Join(dir, "critic")
	if out, err := runCmd(t, runCritic, "", append(common, "--out", critic, "--epochs", "1", "--batch", "2")...); err != nil {
		t.Fatalf("critic for the actor: %v\n%s", err, out)
	}
	for _, c := range []struct {
		name  string
		run   func([]string, io.Reader, io.Writer, io.Writer) error
		extra []string
	}{
		{"critic", runCritic, []string{"--epochs", "2", "--batch", "2"}},
		{"critic scalar", runCritic, []string{"--epochs", "2", "--head", "scalar", "--batch", "2"}},
		{"critic full", runCritic, []string{"--epochs", "2", "--full", "--batch", "2"}},
		{"mtdpo", runMTDPO, []string{"--epochs", "2", "--batch", "2"}},
		{"actor", runActor, []string{"--env", "demo", "--critic", critic, "--candidates", "3", "--data-fraction", "0.5", "--max-new", "4", "--batch", "2"}},
		{"rft", runRFT, []string{"--env", "demo", "--epochs", "1", "--batch-tokens", "64", "--max-len", "64"}}, // no --batch of pairs, no --losses: rft records its losses in metrics.jsonl
	} {
		t.Run(c.name, func(t *testing.T) {
			sub := t.TempDir()
			whole, resumed := filepath.Join(sub, "whole"), filepath.Join(sub, "resumed")
			args := func(out string, extra ...string) []string {
				a := append(append(append([]string{}, common...), c.extra...), "--out", out)
				if c.name != "rft" {
					a = append(a, "--losses", out+".losses")
				}
				return append(a, extra...)
			}
			if out, err := runCmd(t, c.run, "", args(whole)...); err != nil {
				t.Fatalf("uninterrupted: %v\n%s", err, out)
			}
			want := stageLosses(t, whole)
			if len(want) < 3 {
				t.Fatalf("the uninterrupted run took %d steps, want at least 3", len(want))
			}
			k := len(want) / 2
			stoppedRun(t, whole, resumed, k)
			_, err := runCmd(t, c.run, "", args(resumed, "--lr", "2e-3")...)
			if !errors.Is(err, recipe.ErrChanged) || !strings.Contains(err.Error(), `lr: "0.001" → "0.002"`) {
				t.Errorf("resuming with another --lr: %v; want a refusal naming lr", err)
			}
			_, err = runCmd(t, c.run, "", args(resumed, "--resume=false")...)
			if err == nil || !strings.Contains(err.Error(), "holds checkpoint step-") {
				t.Errorf("--resume=false on a directory with checkpoints: %v; want a refusal", err)
			}
			out, err := runCmd(t, c.run, "", args(resumed)...)
			if err != nil {
				t.Fatalf("resumed: %v\n%s", err, out)
			}
			if !strings.Contains(out, "resuming from") {
				t.Errorf("the resumed run does not say it resumes:\n%s", out)
			}
			if c.name == "actor" && !strings.Contains(out, "pairs an earlier run formed") {
				t.Errorf("the resumed actor sampled its pairs again:\n%s", out)
			}
			got := stageLosses(t, resumed)
			if len(got) != len(want) {
				t.Fatalf("resumed after step %d: %d steps, uninterrupted %d", k, len(got), len(want))
			}
			for i := range want {
				if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
					t.Errorf("resumed after step %d: step %d loss %.17g, uninterrupted %.17g", k, i+1, got[i], want[i])
				}
			}
			weights := "adapter_model.safetensors"
			if strings.HasSuffix(c.name, "full") {
				weights = "model.safetensors"
			}
			sameFile(t, weights, resumed, whole)
			if c.name == "critic scalar" {
				sameFile(t, rl.ValueHeadFile, resumed, whole)
			}
			// A forced resume with other settings goes ahead and records them.
			if out, err := runCmd(t, c.run, "", args(resumed, "--lr", "2e-3", "--force")...); err != nil {
				t.Fatalf("--force: %v\n%s", err, out)
			}
			saved, err := recipe.Load(filepath.Join(resumed, trainer.ConfigName))
			if err != nil || saved["lr"] != "0.002" {
				t.Errorf("after --force config.yaml records lr %q (%v), want 0.002", saved["lr"], err)
			}
		})
	}
}

// stageLosses returns the per-step losses of the run in dir: its --losses
// file where the stage writes one, else its metrics.jsonl.
func stageLosses(t *testing.T, dir string) []float64 {
	t.Helper()
	if _, err := os.Stat(dir + ".losses"); err == nil {
		return readLosses(t, dir+".losses")
	}
	return metricLosses(t, dir)
}

// metricLosses returns the losses the metrics.jsonl of dir records, a step
// each, in order.
func metricLosses(t *testing.T, dir string) []float64 {
	t.Helper()
	recs, err := metrics.Read(filepath.Join(dir, trainer.MetricsName))
	if err != nil {
		t.Fatal(err)
	}
	var out []float64
	for i, rec := range recs {
		l, ok := rec.Get(metrics.Loss)
		if rec.Step != int64(i+1) || !ok {
			t.Fatalf("%s: record %d is of step %d (loss present: %v)", dir, i+1, rec.Step, ok)
		}
		out = append(out, l)
	}
	return out
}

// sameFile checks that the file name is the same, byte for byte, in the
// directories got and want.
func sameFile(t *testing.T, name, got, want string) {
	t.Helper()
	g, err := os.ReadFile(filepath.Join(got, name))
	if err != nil {
		t.Fatal(err)
	}
	w, err := os.ReadFile(filepath.Join(want, name))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(g, w) {
		t.Errorf("%s differs between %s and %s", name, got, want)
	}
}

// TestLaunchRLResumeOtherWorldSize: a critic run checkpointed by two ranks
// (--batch 2 each) resumes in one process (--batch 4), and one
// checkpointed by one process resumes on two ranks, each to the losses
// (relative 1e-6) and adapter (1e-5 of each tensor's largest weight) of
// an uninterrupted run in one process: the checkpoint is the same whatever
// the number of ranks that wrote it.
func TestLaunchRLResumeOtherWorldSize(t *testing.T) {
	if testing.Short() {
		t.Skip("trains five times")
	}
	dir := t.TempDir()
	scripted := filepath.Join(dir, "scripted.jsonl")
	if err := sweetrl.SaveTrajectories(scripted, demotask.ScriptedTrajectories(demotask.Tasks(4, 9), 4, 9)); err != nil {
		t.Fatal(err)
	}
	common := []string{"--hf", byteModel(t), "--threads", "1", "--trajectories", scripted, "--lora-rank", "2",
		"--batch-tokens", "2048", "--lr", "1e-3", "--epochs", "2", "--checkpoint-every", "1", "--keep", "100"}
	one := func(out string) {
		t.Helper()
		args := append(append([]string{}, common...), "--out", out, "--losses", out+".losses", "--batch", "4")
		if o, err := runCmd(t, runCritic, "", args...); err != nil {
			t.Fatalf("one process into %s: %v\n%s", out, err, o)
		}
	}
	two := func(out string) string {
		t.Helper()
		args := append([]string{"--nproc-per-node", "2", "--master-port", freePort(t), "--", "critic"}, common...)
		o, errOut, err := launchRun(t, append(args, "--out", out, "--losses", out+".losses", "--batch", "2")...)
		if err != nil {
			t.Fatalf("two ranks into %s: %v\n%s\n%s", out, err, o, errOut)
		}
		return o
	}
	whole := filepath.Join(dir, "whole")
	one(whole)
	want := readLosses(t, whole+".losses")
	if len(want) < 4 {
		t.Fatalf("%d steps, want at least 4", len(want))
	}
	k := len(want) / 2
	check := func(name, got string) {
		t.Helper()
		losses := readLosses(t, got+".losses")
		if len(losses) != len(want) {
			t.Fatalf("%s: %d steps, uninterrupted %d", name, len(losses), len(want))
		}
		for i, w := range want {
			if rel := math.Abs(losses[i]-w) / math.Abs(w); !(rel <= 1e-6) {
				t.Errorf("%s: step %d loss %.10g, uninterrupted %.10g (relative %.2g)", name, i+1, losses[i], w, rel)
			}
		}
		sameTensors(t, "adapter_model.safetensors", got, whole, 1e-5)
	}

	byTwo, resumedByOne := filepath.Join(dir, "by-two"), filepath.Join(dir, "resumed-by-one")
	two(byTwo)
	stoppedRun(t, byTwo, resumedByOne, k)
	one(resumedByOne)
	check("written by two ranks, resumed by one process", resumedByOne)

	resumedByTwo := filepath.Join(dir, "resumed-by-two")
	stoppedRun(t, whole, resumedByTwo, k)
	if out := two(resumedByTwo); !strings.Contains(out, "[rank 0] resuming from") || strings.Contains(out, "[rank 1]") {
		t.Errorf("want rank 0 alone to say it resumes:\n%s", out)
	}
	check("written by one process, resumed by two ranks", resumedByTwo)
}

// TestRLCheckpointFlags: a negative checkpoint interval or no checkpoint
// kept is refused, naming the flag.
func TestRLCheckpointFlags(t *testing.T) {
	dir := t.TempDir()
	scripted := filepath.Join(dir, "scripted.jsonl")
	if err := sweetrl.SaveTrajectories(scripted, demotask.ScriptedTrajectories(demotask.Tasks(2, 9), 2, 9)); err != nil {
		t.Fatal(err)
	}
	model := byteModel(t)
	for _, bad := range [][]string{{"--checkpoint-every", "-1"}, {"--keep", "0"}} {
		args := append([]string{"--hf", model, "--threads", "1", "--trajectories", scripted, "--out", filepath.Join(dir, "out")}, bad...)
		_, err := runCmd(t, runCritic, "", args...)
		if err == nil || !strings.Contains(err.Error(), bad[0]+" "+bad[1]) {
			t.Errorf("critic %v: %v; want a refusal naming %s", bad, err, bad[0])
		}
	}
}
