package main

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/turnwise/turnwise/checkpoint"
	"github.com/turnwise/turnwise/safetensors"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/sweetrl/demotask"
)

// TestLaunchSFTZeRO1 checks ZeRO-1 against plain data parallelism: two
// ranks with --zero 1 record the same losses and gradient norms (relative
// 1e-6) as two ranks without it and as one process of twice the batch, end
// with the same weights (within 1e-5 of each tensor's largest weight; bit
// for bit without clipping), and their checkpoint — the whole optimizer
// state, gathered — resumes in one process, as one process's resumes on two
// ZeRO-1 ranks.
func TestLaunchSFTZeRO1(t *testing.T) {
	if testing.Short() {
		t.Skip("trains seven times")
	}
	common := []string{"--steps", "4", "--batch-tokens", "256", "--eval-every", "0", "--prompt", "",
		"--threads", "1", "--checkpoint-every", "2"}
	one, dp, zero := t.TempDir(), t.TempDir(), t.TempDir()
	if out, err := runCmd(t, runSFT, "", append([]string{"--run-dir", one, "--micro-batches", "2"}, common...)...); err != nil {
		t.Fatalf("one process: %v\n%s", err, out)
	}
	for _, r := range []struct {
		dir   string
		extra []string
	}{{dp, nil}, {zero, []string{"--zero", "1"}}} {
		args := append([]string{"--nproc-per-node", "2", "--master-port", freePort(t), "--",
			"sft", "--run-dir", r.dir, "--micro-batches", "1"}, common...)
		if out, errOut, err := launchRun(t, append(args, r.extra...)...); err != nil {
			t.Fatalf("two ranks %v: %v\n%s\n%s", r.extra, err, out, errOut)
		}
	}
	want := metricsByStep(t, one)
	if len(want) != 4 {
		t.Fatalf("one process recorded %d steps, want 4", len(want))
	}
	sameMetrics(t, "two ranks, ZeRO-1", metricsByStep(t, zero), want)
	sameMetrics(t, "two ranks, ZeRO-1 against plain data parallel", metricsByStep(t, zero), metricsByStep(t, dp))
	sameCheckpoint(t, zero, dp, 1e-5) // rank 0 writes the gathered state: plain data parallelism's files

	// The ZeRO-1 run's step-2 checkpoint resumes in one process (of 2B).
	if err := os.RemoveAll(checkpoint.Dir(zero, 4)); err != nil {
		t.Fatal(err)
	}
	if out, err := runCmd(t, runSFT, "", append([]string{"--run-dir", zero, "--micro-batches", "2"}, common...)...); err != nil ||
		!strings.Contains(out, "resuming from step 2") {
		t.Fatalf("resuming with one process: %v\n%s", err, out)
	}
	sameMetrics(t, "ZeRO-1 on two ranks, then one process from step 2", metricsByStep(t, zero), want)
	sameWeights(t, checkpoint.Dir(zero, 4), checkpoint.Dir(dp, 4), 1e-5)

	// And the other way: two ZeRO-1 ranks, each taking its shard of the
	// one process's step-2 checkpoint, continue it.
	if err := os.RemoveAll(checkpoint.Dir(one, 4)); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--nproc-per-node", "2", "--master-port", freePort(t), "--",
		"sft", "--run-dir", one, "--micro-batches", "1", "--zero", "1"}, common...)
	if out, errOut, err := launchRun(t, args...); err != nil || !strings.Contains(out, "resuming from step 2") {
		t.Fatalf("resuming with two ZeRO-1 ranks: %v\n%s\n%s", err, out, errOut)
	}
	sameMetrics(t, "one process, then ZeRO-1 on two ranks from step 2", metricsByStep(t, one), want)
	sameWeights(t, checkpoint.Dir(one, 4), checkpoint.Dir(dp, 4), 1e-5)

	// Without clipping — the gradient norm, summed from the shards in
	// another order, is then unused — ZeRO-1 gives plain data parallelism's
	// weights bit for bit.
	dp, zero = t.TempDir(), t.TempDir()
	for _, r := range []struct {
		dir   string
		extra []string
	}{{dp, []string{"--clip", "0"}}, {zero, []string{"--clip", "0", "--zero", "1"}}} {
		args := append([]string{"--nproc-per-node", "2", "--master-port", freePort(t), "--",
			"sft", "--run-dir", r.dir, "--micro-batches", "1"}, common...)
		if out, errOut, err := launchRun(t, append(args, r.extra...)...); err != nil {
			t.Fatalf("two ranks %v: %v\n%s\n%s", r.extra, err, out, errOut)
		}
	}
	sameWeights(t, checkpoint.Dir(zero, 4), checkpoint.Dir(dp, 4), 0)
}

// sameWeights compares the f32 tensors of two checkpoints' model files: every
// element within tol of the tensor's largest magnitude.
func sameWeights(t *testing.T, gotDir, wantDir string, tol float64) {
	t.Helper()
	sameTensors(t, "model.safetensors", gotDir, wantDir, tol)
}

// sameTensors compares the f32 tensors of the safetensors file named file in
// two directories: every element within tol of the tensor's largest
// magnitude.
func sameTensors(t *testing.T, file, gotDir, wantDir string, tol float64) {
	t.Helper()
	open := func(dir string) *safetensors.File {
		f, err := safetensors.Open(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	got, want := open(gotDir), open(wantDir)
	names := want.Names()
	if len(names) == 0 || len(got.Names()) != len(names) {
		t.Fatalf("%s has %d tensors, %s %d", gotDir, len(got.Names()), wantDir, len(names))
	}
	var largest float64 // the largest difference relative to its tensor's scale
	defer func() {
		t.Logf("%s against %s: weights differ by up to %.3g of their tensor's largest", gotDir, wantDir, largest)
	}()
	for _, name := range names {
		w, info, err := want.Data(name)
		if err != nil {
			t.Fatal(err)
		}
		g, _, err := got.Data(name)
		if err != nil {
			t.Fatal(err)
		}
		if info.DType != safetensors.F32 || len(g) != len(w) {
			t.Fatalf("%s: %v, %d and %d bytes; want F32 of one size", name, info.DType, len(g), len(w))
		}
		var scale, worst float64
		for i := 0; i < len(w); i += 4 {
			a := float64(math.Float32frombits(binary.LittleEndian.Uint32(g[i:])))
			b := float64(math.Float32frombits(binary.LittleEndian.Uint32(w[i:])))
			scale, worst = max(scale, math.Abs(b)), max(worst, math.Abs(a-b))
		}
		if worst > 0 { // an all-zero tensor that stayed zero differs by nothing
			largest = max(largest, worst/scale)
		}
		if !(worst <= tol*scale) {
			t.Errorf("%s: weights differ by up to %.3g (largest weight %.3g, tolerance %g of it)", name, worst, scale, tol)
		}
	}
}

// sameCheckpoint compares the newest checkpoints of two run directories: the
// same step and the same files, the model's and the optimizer's tensors
// within tol of each tensor's largest magnitude (sameTensors), and the same
// integer fields of trainer.json (steps, data positions, counts).
func sameCheckpoint(t *testing.T, gotRun, wantRun string, tol float64) {
	t.Helper()
	latest := func(run string) string {
		dir, _, err := checkpoint.Latest(run)
		if err != nil {
			t.Fatalf("%s: %v", run, err)
		}
		return dir
	}
	got, want := latest(gotRun), latest(wantRun)
	if filepath.Base(got) != filepath.Base(want) {
		t.Fatalf("newest checkpoints %s and %s: want the same step", got, want)
	}
	files := func(dir string) []string {
		es, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range es {
			names = append(names, e.Name())
		}
		return names
	}
	if g, w := files(got), files(want); !slices.Equal(g, w) {
		t.Fatalf("%s holds %v, %s %v", got, g, want, w)
	}
	sameTensors(t, "model.safetensors", got, want, tol)
	if _, err := os.Stat(filepath.Join(want, checkpoint.OptimizerZstdName)); err == nil {
		plain := func(dir string) string {
			out := t.TempDir()
			in, err := os.Open(filepath.Join(dir, checkpoint.OptimizerZstdName))
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			zr, err := zstd.NewReader(in)
			if err != nil {
				t.Fatal(err)
			}
			defer zr.Close()
			raw, err := io.ReadAll(zr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(out, checkpoint.OptimizerName), raw, 0o644); err != nil {
				t.Fatal(err)
			}
			return out
		}
		sameTensors(t, checkpoint.OptimizerName, plain(got), plain(want), tol)
	} else {
		sameTensors(t, checkpoint.OptimizerName, got, want, tol)
	}
	state := func(dir string) map[string]json.RawMessage {
		raw, err := os.ReadFile(filepath.Join(dir, checkpoint.TrainerName))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		return m
	}
	gs, ws := state(got), state(want)
	compared := 0
	for k, w := range ws {
		if _, err := strconv.ParseInt(string(w), 10, 64); err != nil && !strings.HasPrefix(string(w), "{") {
			continue // a float, which may differ within tol
		}
		compared++
		if string(gs[k]) != string(w) {
			t.Errorf("%s: %s %s, %s %s", checkpoint.TrainerName, got, gs[k], want, w)
		}
	}
	if compared == 0 {
		t.Errorf("%s of %s has no integer field to compare", checkpoint.TrainerName, want)
	}
}

// TestLaunchZeRO1RLResume: a critic trained by two ZeRO-1 ranks, stopped
// after its step-2 checkpoint (the gathered, unsharded state), resumes on
// two ZeRO-1 ranks — each taking its shard — to the uninterrupted run's
// losses and adapter bit for bit, and in one process with the same pairs
// a step to them within 1e-6 (the sums then add in another order).
func TestLaunchZeRO1RLResume(t *testing.T) {
	if testing.Short() {
		t.Skip("trains three times")
	}
	dir := t.TempDir()
	scripted := filepath.Join(dir, "scripted.jsonl")
	if err := sweetrl.SaveTrajectories(scripted, demotask.ScriptedTrajectories(demotask.Tasks(4, 9), 4, 9)); err != nil {
		t.Fatal(err)
	}
	common := []string{"--hf", byteModel(t), "--threads", "1", "--trajectories", scripted, "--lora-rank", "2",
		"--batch-tokens", "2048", "--lr", "1e-3", "--epochs", "2", "--checkpoint-every", "1", "--keep", "10"}
	launch := func(out string) string {
		t.Helper()
		args := append([]string{"--nproc-per-node", "2", "--master-port", freePort(t), "--", "critic", "--zero", "1", "--batch", "2",
			"--out", out, "--losses", out + ".losses"}, common...)
		stdout, errOut, err := launchRun(t, args...)
		if err != nil {
			t.Fatalf("two ZeRO-1 ranks into %s: %v\n%s\n%s", out, err, stdout, errOut)
		}
		return stdout
	}
	whole := filepath.Join(dir, "whole")
	launch(whole)
	want := readLosses(t, whole+".losses")
	if len(want) < 3 {
		t.Fatalf("%d steps, want at least 3", len(want))
	}

	two := filepath.Join(dir, "two")
	stoppedRun(t, whole, two, 2)
	if out := launch(two); !strings.Contains(out, "step-000002: step 2,") {
		t.Errorf("two ZeRO-1 ranks did not resume from step 2:\n%s", out)
	}
	if got := readLosses(t, two+".losses"); !slices.Equal(got, want) {
		t.Errorf("resumed on two ZeRO-1 ranks: losses %v, uninterrupted %v", got, want)
	}
	sameTensors(t, "adapter_model.safetensors", two, whole, 0)

	one := filepath.Join(dir, "one")
	stoppedRun(t, whole, one, 2)
	args := append([]string{"--out", one, "--losses", one + ".losses", "--batch", "4"}, common...)
	if out, err := runCmd(t, runCritic, "", args...); err != nil || !strings.Contains(out, "step-000002: step 2,") {
		t.Fatalf("resumed in one process: %v\n%s", err, out)
	}
	sameLosses(t, "two ZeRO-1 ranks, then one process from step 2", readLosses(t, one+".losses"), want)
	sameTensors(t, "adapter_model.safetensors", one, whole, 1e-5)
}
