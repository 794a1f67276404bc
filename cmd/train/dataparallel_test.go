package main

import (
	"bytes"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/sweetrl/demotask"
	"github.com/turnwise/turnwise/sweetrl/rl"
)

// TestLaunchPreferenceDataParallel: the preference trainers (critic with
// either head, actor, multi-turn DPO) on two ranks with --batch B give one
// process's per-step losses with --batch 2B (relative 1e-6) and its
// adapter (within 1e-5 of each tensor's largest weight), on the demo family
// with a tiny random model; rank 0 alone reports and writes. With --zero 1
// (ZeRO-1: the optimizer sharded across the two ranks) they give plain
// data parallelism's losses (relative 1e-6) and write its adapter, and the
// value head, within 1e-5 of each tensor's largest weight (the gradient
// norm the clipping uses is summed from the shards in another order).
func TestLaunchPreferenceDataParallel(t *testing.T) {
	if testing.Short() {
		t.Skip("trains three times per trainer")
	}
	dir := t.TempDir()
	model := byteModel(t)
	scripted := filepath.Join(dir, "scripted.jsonl")
	if err := sweetrl.SaveTrajectories(scripted, demotask.ScriptedTrajectories(demotask.Tasks(4, 9), 4, 9)); err != nil {
		t.Fatal(err)
	}
	common := []string{"--hf", model, "--threads", "1", "--trajectories", scripted, "--lora-rank", "2",
		"--batch-tokens", "2048", "--lr", "1e-3", "--epochs", "2"}
	critic := filepath.Join(dir, "critic")
	if out, err := runCmd(t, runCritic, "", append(common, "--out", critic, "--epochs", "1")...); err != nil {
		t.Fatalf("critic for the actor: %v\n%s", err, out)
	}
	for _, c := range []struct {
		name  string
		run   func([]string, io.Reader, io.Writer, io.Writer) error
		extra []string
	}{
		{"critic", runCritic, nil},
		{"critic", runCritic, []string{"--head", "scalar"}},
		{"mtdpo", runMTDPO, nil},
		{"actor", runActor, []string{"--env", "demo", "--critic", critic, "--candidates", "3", "--data-fraction", "0.5", "--max-new", "4"}},
	} {
		name := strings.Join(append([]string{c.name}, c.extra[:min(2, len(c.extra))]...), " ")
		sub := t.TempDir()
		oneOut, twoOut, zeroOut := filepath.Join(sub, "one"), filepath.Join(sub, "two"), filepath.Join(sub, "zero")
		oneLoss, twoLoss, zeroLoss := filepath.Join(sub, "one.losses"), filepath.Join(sub, "two.losses"), filepath.Join(sub, "zero.losses")
		args := append(append([]string{}, common...), c.extra...)
		one := append([]string{"--out", oneOut, "--losses", oneLoss, "--batch", "4"}, args...)
		if out, err := runCmd(t, c.run, "", one...); err != nil {
			t.Fatalf("%s, one process: %v\n%s", name, err, out)
		}
		two := append([]string{"--nproc-per-node", "2", "--master-port", freePort(t), "--",
			c.name, "--out", twoOut, "--losses", twoLoss, "--batch", "2"}, args...)
		out, errOut, err := launchRun(t, two...)
		if err != nil {
			t.Fatalf("%s, two ranks: %v\n%s\n%s", name, err, out, errOut)
		}
		if strings.Contains(out, "[rank 1]") || !strings.Contains(out, "[rank 0] saved to") {
			t.Errorf("%s: want rank 0 alone to report and save:\n%s", name, out)
		}
		want := readLosses(t, oneLoss)
		if len(want) < 2 {
			t.Fatalf("%s: %d steps in one process, want at least 2", name, len(want))
		}
		sameLosses(t, name+", two ranks against one process", readLosses(t, twoLoss), want)
		sameTensors(t, "adapter_model.safetensors", twoOut, oneOut, 1e-5)

		zero := append([]string{"--nproc-per-node", "2", "--master-port", freePort(t), "--",
			c.name, "--out", zeroOut, "--losses", zeroLoss, "--batch", "2", "--zero", "1"}, args...)
		out, errOut, err = launchRun(t, zero...)
		if err != nil {
			t.Fatalf("%s, two ZeRO-1 ranks: %v\n%s\n%s", name, err, out, errOut)
		}
		if !strings.Contains(out, "[rank 0] optimizer state sharded across 2 ranks (ZeRO-1)") {
			t.Errorf("%s, two ZeRO-1 ranks: no word of the sharded optimizer:\n%s", name, out)
		}
		sameLosses(t, name+", ZeRO-1 against plain data parallel", readLosses(t, zeroLoss), readLosses(t, twoLoss))
		sameTensors(t, "adapter_model.safetensors", zeroOut, twoOut, 1e-5)
		if slices.Contains(c.extra, "scalar") {
			sameTensors(t, rl.ValueHeadFile, zeroOut, twoOut, 1e-5)
		}
		sameCheckpoint(t, zeroOut, twoOut, 1e-5) // the gathered optimizer state, as plain data parallelism writes it
	}
}

// sameLosses compares two runs' per-step losses: as many steps, each within
// 1e-6 relative.
func sameLosses(t *testing.T, what string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d steps, want %d", what, len(got), len(want))
	}
	worst := 0.0
	for i, w := range want {
		rel := math.Abs(got[i]-w) / math.Abs(w)
		worst = max(worst, rel)
		if !(rel <= 1e-6) {
			t.Errorf("%s: step %d loss %.10g, want %.10g (relative %.2g)", what, i+1, got[i], w, rel)
		}
	}
	t.Logf("%s: %d steps, losses agree to %.2g relative", what, len(want), worst)
}

// readLosses reads a --losses file: a line "step loss" per step.
func readLosses(t *testing.T, path string) []float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []float64
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || f[0] != strconv.Itoa(i+1) {
			t.Fatalf("%s line %d: %q, want \"%d loss\"", path, i+1, line, i+1)
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			t.Fatalf("%s line %d: %v", path, i+1, err)
		}
		out = append(out, v)
	}
	return out
}

// TestLaunchRollout: train rollout on two ranks, each playing every other
// chunk of episodes, writes the file one process writes with the same
// seeds, byte for byte, with chunks that leave one rank a round short.
func TestLaunchRollout(t *testing.T) {
	if testing.Short() {
		t.Skip("plays the episodes twice")
	}
	dir := t.TempDir()
	common := []string{"--hf", byteModel(t), "--threads", "1", "--env", "demo", "--demo-tasks", "5", "--k", "2",
		"--max-new", "6", "--chunk", "3", "--temperature", "1", "--seed", "7"}
	one, two := filepath.Join(dir, "one.jsonl"), filepath.Join(dir, "two.jsonl")
	if out, err := runCmd(t, runRollout, "", append(common, "--out", one)...); err != nil {
		t.Fatalf("one process: %v\n%s", err, out)
	}
	out, errOut, err := launchRun(t, append([]string{"--nproc-per-node", "2", "--master-port", freePort(t), "--",
		"rollout", "--out", two}, common...)...)
	if err != nil {
		t.Fatalf("two ranks: %v\n%s\n%s", err, out, errOut)
	}
	if strings.Contains(out, "[rank 1]") || !strings.Contains(out, "[rank 0] wrote "+two) {
		t.Errorf("want rank 0 alone to report and write:\n%s", out)
	}
	want, err := os.ReadFile(one)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(two)
	if err != nil {
		t.Fatal(err)
	}
	trajs, err := sweetrl.LoadTrajectories(one)
	if err != nil || len(trajs) != 10 {
		t.Fatalf("one process wrote %d trajectories (%v), want 10", len(trajs), err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("two ranks wrote %d bytes, one process %d: the files differ", len(got), len(want))
	}
}

// TestLaunchRFT: train rft on two ranks trains through the data-parallel
// supervised trainer and rank 0 alone reports and writes the adapter; with
// --zero 1 the ranks record the same losses and gradient norms (relative
// 1e-6) and write the same adapter (within 1e-5 of each tensor's largest
// weight).
func TestLaunchRFT(t *testing.T) {
	dir := t.TempDir()
	scripted := filepath.Join(dir, "scripted.jsonl")
	if err := sweetrl.SaveTrajectories(scripted, demotask.ScriptedTrajectories(demotask.Tasks(4, 9), 4, 9)); err != nil {
		t.Fatal(err)
	}
	model := byteModel(t)
	plain, zero := filepath.Join(dir, "rft"), filepath.Join(dir, "zero")
	var logs string
	for _, r := range []struct {
		out   string
		extra []string
	}{{plain, nil}, {zero, []string{"--zero", "1"}}} {
		args := append([]string{"--nproc-per-node", "2", "--master-port", freePort(t), "--", "rft",
			"--hf", model, "--threads", "1", "--env", "demo", "--trajectories", scripted, "--lora-rank", "2", "--batch-tokens", "128", "--max-len", "128",
			"--epochs", "1", "--out", r.out}, r.extra...)
		stdout, errOut, err := launchRun(t, args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s\n%s", r.extra, err, stdout, errOut)
		}
		logs += stdout
		if strings.Contains(stdout, "[rank 1]") || !strings.Contains(stdout, "[rank 0] saved to "+r.out) {
			t.Errorf("%v: want rank 0 alone to report and save:\n%s", r.extra, stdout)
		}
		if sharded := strings.Contains(stdout, "[rank 0] optimizer state sharded across 2 ranks (ZeRO-1)"); sharded != (r.extra != nil) {
			t.Errorf("%v: the output says the optimizer is sharded: %v; want %v\n%s", r.extra, sharded, r.extra != nil, stdout)
		}
	}
	want := metricsByStep(t, plain)
	if len(want) < 2 {
		t.Fatalf("plain data parallel recorded %d steps, want at least 2\n%s", len(want), logs)
	}
	sameMetrics(t, "rft, ZeRO-1 against plain data parallel", metricsByStep(t, zero), want)
	sameTensors(t, "adapter_model.safetensors", zero, plain, 1e-5)
	sameCheckpoint(t, zero, plain, 1e-5)
}

// TestLaunchEval: train eval on two ranks, each playing every other seed,
// reports the summary one process reports and rank 0 writes the same
// episodes.
func TestLaunchEval(t *testing.T) {
	dir := t.TempDir()
	common := []string{"--hf", byteModel(t), "--threads", "1", "--env", "demo", "--demo-tasks", "4", "--seeds", "3",
		"--max-new", "6", "--temperature", "1", "--seed", "5"}
	one, two := filepath.Join(dir, "one.jsonl"), filepath.Join(dir, "two.jsonl")
	oneOut, err := runCmd(t, runEval, "", append(common, "--out", one)...)
	if err != nil {
		t.Fatalf("one process: %v\n%s", err, oneOut)
	}
	out, errOut, err := launchRun(t, append([]string{"--nproc-per-node", "2", "--master-port", freePort(t), "--",
		"eval", "--out", two}, common...)...)
	if err != nil {
		t.Fatalf("two ranks: %v\n%s\n%s", err, out, errOut)
	}
	if strings.Contains(out, "[rank 1]") {
		t.Errorf("rank 1 reported too:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(oneOut), "\n")
	summary := lines[len(lines)-1]
	if !strings.HasSuffix(summary, "(4 tasks, 12 episodes)") {
		t.Fatalf("one process's last line %q, want its summary of 4 tasks and 12 episodes", summary)
	}
	if !strings.Contains(out, "[rank 0] "+summary) {
		t.Errorf("two ranks' output lacks one process's summary %q:\n%s", summary, out)
	}
	want, err := sweetrl.LoadTrajectories(one)
	if err != nil || len(want) != 12 {
		t.Fatalf("one process wrote %d episodes (%v), want 12", len(want), err)
	}
	got, err := sweetrl.LoadTrajectories(two)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("two ranks wrote %d episodes, one process %d", len(got), len(want))
	}
	for i := range want {
		a, _ := want[i].MarshalJSON()
		b, _ := got[i].MarshalJSON()
		if !bytes.Equal(a, b) {
			t.Errorf("episode %d differs between two ranks and one process", i+1)
		}
	}
}
