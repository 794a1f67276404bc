package main

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/turnwise/turnwise/checkpoint"
	"github.com/turnwise/turnwise/metrics"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/sweetrl/demotask"
	"github.com/turnwise/turnwise/sweetrl/rl"
)

// freePort returns a TCP port nothing listens on now.
func freePort(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// launchRun runs train launch with args; its ranks are this test binary
// running train's main.
func launchRun(t testing.TB, args ...string) (stdout, stderr string, err error) {
	t.Setenv("TW_TRAIN_ARGV", "1")
	var out, errOut bytes.Buffer
	err = runLaunch(args, strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), err
}

// TestLaunchCollectives: two CPU ranks, started by train launch, check
// every collective over Gloo and rank 0 prints the bandwidth.
func TestLaunchCollectives(t *testing.T) {
	out, errOut, err := launchRun(t, "--nproc-per-node", "2", "--master-port", freePort(t), "--",
		"collectives", "--threads", "1", "--sizes", "0.25", "--reps", "2", "--n", "1001")
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, out, errOut)
	}
	for _, want := range []string{
		"[rank 0] collectives: rank 0 of 2 (local 0 of 2",
		"[rank 1] collectives: rank 1 of 2 (local 1 of 2",
		"[rank 0] collectives: AllReduce, ReduceScatter (f32, bf16), AllGather, Broadcast (f32, bf16, i32) and Barrier match plain sums over 2 ranks",
		"[rank 1] collectives: AllReduce",
		"[rank 0] all-reduce f32     0.25 MiB over 2 ranks:",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "[rank 1] all-reduce") {
		t.Errorf("rank 1 printed the bandwidth too:\n%s", out)
	}
}

// TestLaunchMissingNode: the second node of a 2-node job never starts; the
// first node's ranks fail their rendezvous within its timeout, naming the
// missing ranks, and train launch reports it.
func TestLaunchMissingNode(t *testing.T) {
	start := time.Now()
	_, errOut, err := launchRun(t, "--nproc-per-node", "1", "--nnodes", "2", "--master-addr", "127.0.0.1",
		"--master-port", freePort(t), "--", "collectives", "--threads", "1", "--timeout", "1s")
	if err == nil || !strings.Contains(err.Error(), "rank 0 failed (exit status 1): train collectives: rendezvous at 127.0.0.1:") ||
		!strings.Contains(err.Error(), "rank 1 of 2 never arrived within 1s") {
		t.Fatalf("error %v, want rank 0's rendezvous error naming rank 1\n%s", err, errOut)
	}
	t.Logf("failed after %v: %v", time.Since(start), err)
}

func TestLaunchUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--nproc-per-node", "2"},
		{"--nproc-per-node", "2", "--", "nosuch"},
		{"--nproc-per-node", "2", "--", "launch"},
		{"--nproc-per-node", "2", "sft", "--", "sft"},
	} {
		if _, _, err := launchRun(t, args...); err == nil {
			t.Errorf("train launch %q: no error", args)
		}
	}
}

// TestLaunchSFTDataParallel: two ranks with one packed batch of B tokens
// each give the per-step losses and gradient norms of one process
// accumulating two batches of B (relative 1e-6), and only rank 0 writes.
func TestLaunchSFTDataParallel(t *testing.T) {
	if testing.Short() {
		t.Skip("trains twice")
	}
	common := []string{"--steps", "4", "--batch-tokens", "256", "--eval-every", "0", "--prompt", "",
		"--threads", "1", "--checkpoint-every", "2"}
	one, two := t.TempDir(), t.TempDir()
	if out, err := runCmd(t, runSFT, "", append([]string{"--out", one, "--micro-batches", "2"}, common...)...); err != nil {
		t.Fatalf("one process: %v\n%s", err, out)
	}
	out, errOut, err := launchRun(t, append([]string{"--nproc-per-node", "2", "--master-port", freePort(t), "--",
		"sft", "--out", two, "--micro-batches", "1"}, common...)...)
	if err != nil {
		t.Fatalf("two ranks: %v\n%s\n%s", err, out, errOut)
	}
	if strings.Contains(out, "[rank 1]") {
		t.Errorf("rank 1 reported too:\n%s", out)
	}
	want, got := metricsByStep(t, one), metricsByStep(t, two)
	if len(want) != 4 || len(got) != 4 {
		t.Fatalf("%d and %d steps recorded, want 4 and 4", len(want), len(got))
	}
	sameMetrics(t, "two ranks", got, want)

	// Resuming the two ranks' run at its step-2 checkpoint with one
	// process (of 2B) continues it: steps 3 and 4 are the same again.
	if err := os.RemoveAll(checkpoint.Dir(two, 4)); err != nil {
		t.Fatal(err)
	}
	if out, err := runCmd(t, runSFT, "", append([]string{"--out", two, "--micro-batches", "2"}, common...)...); err != nil ||
		!strings.Contains(out, "resuming from step 2") {
		t.Fatalf("resuming with one process: %v\n%s", err, out)
	}
	sameMetrics(t, "two ranks, then one process from step 2", metricsByStep(t, two), want)
}

// sameMetrics compares each step's loss and gradient norm (relative 1e-6).
func sameMetrics(t *testing.T, what string, got, want map[int64]map[string]float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d steps recorded, want %d", what, len(got), len(want))
	}
	for step, w := range want {
		for _, k := range []string{metrics.Loss, metrics.GradNorm} {
			if rel := math.Abs(got[step][k]-w[k]) / math.Abs(w[k]); !(rel <= 1e-6) {
				t.Errorf("%s: step %d %s %.10g, one process %.10g (relative %.2g)", what, step, k, got[step][k], w[k], rel)
			}
		}
	}
}

// metricsByStep returns each step's loss and gradient norm from a run's
// metrics.jsonl.
func metricsByStep(t *testing.T, dir string) map[int64]map[string]float64 {
	recs, err := metrics.Read(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]map[string]float64{}
	for _, r := range recs {
		out[r.Step] = map[string]float64{}
		for _, k := range []string{metrics.Loss, metrics.GradNorm} {
			out[r.Step][k], _ = r.Get(k)
		}
	}
	return out
}

// TestLaunchKillRankAndResume: rank 1 of a data-parallel SFT run is killed
// with SIGKILL mid-run, right after the step-2 checkpoint; train launch
// stops rank 0 and fails within 30 s naming rank 1. Two ranks resume from
// step 2 and are killed again after step 4; one process resumes from step 4
// and finishes. The run records each of its 6 steps once, with the losses
// and gradient norms of an uninterrupted process (relative 1e-6): no step
// lost or repeated.
func TestLaunchKillRankAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("trains four times")
	}
	common := []string{"--steps", "6", "--batch-tokens", "256", "--eval-every", "0", "--prompt", "",
		"--threads", "1", "--checkpoint-every", "2", "--keep", "5"}
	whole, dir := t.TempDir(), t.TempDir()
	if out, err := runCmd(t, runSFT, "", append([]string{"--run-dir", whole, "--micro-batches", "2"}, common...)...); err != nil {
		t.Fatalf("one process: %v\n%s", err, out)
	}
	t.Setenv("TW_TEST_KILL_RANK", "1")
	for _, c := range []struct{ from, killAt int }{{0, 2}, {2, 4}} {
		at := checkpoint.Dir(dir, c.killAt)
		t.Setenv("TW_TEST_KILL_AT", at)
		seen := make(chan time.Time, 1) // when the checkpoint that kills rank 1 appeared
		stop := make(chan struct{})
		go func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := os.Stat(at); err == nil {
					seen <- time.Now()
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
		out, errOut, err := launchRun(t, append([]string{"--nproc-per-node", "2", "--master-port", freePort(t), "--",
			"sft", "--run-dir", dir, "--micro-batches", "1"}, common...)...)
		close(stop)
		done := time.Now()
		if err == nil || !strings.Contains(err.Error(), "rank 1 failed (signal: killed)") {
			t.Fatalf("killing rank 1 after step %d: %v, want rank 1 named as killed\n%s\n%s", c.killAt, err, out, errOut)
		}
		select {
		case at := <-seen:
			if d := done.Sub(at); d > 30*time.Second {
				t.Errorf("train launch returned %v after rank 1 was killed, want within 30 s", d)
			} else {
				t.Logf("killed after step %d: train launch returned %v later: %v", c.killAt, d.Round(time.Millisecond), err)
			}
		default:
			t.Fatalf("the step-%d checkpoint never appeared", c.killAt)
		}
		if c.from > 0 && !strings.Contains(out, fmt.Sprintf("[rank 0] resuming from step %d", c.from)) {
			t.Errorf("two ranks did not resume from step %d:\n%s", c.from, out)
		}
		if _, err := os.Stat(checkpoint.Dir(dir, c.killAt+2)); err == nil {
			t.Fatalf("a checkpoint of step %d exists: rank 1 was not killed mid-run", c.killAt+2)
		}
	}
	t.Setenv("TW_TEST_KILL_AT", "")
	out, err := runCmd(t, runSFT, "", append([]string{"--run-dir", dir, "--micro-batches", "2"}, common...)...)
	if err != nil || !strings.Contains(out, "resuming from step 4") {
		t.Fatalf("resuming with one process: %v\n%s", err, out)
	}
	recs, err := metrics.Read(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if r.Step != int64(i+1) {
			t.Fatalf("metrics.jsonl record %d is of step %d: a step lost or repeated", i+1, r.Step)
		}
	}
	if len(recs) != 6 {
		t.Fatalf("metrics.jsonl holds %d steps, want 6", len(recs))
	}
	sameMetrics(t, "two ranks killed twice, resumed by two ranks and by one process", metricsByStep(t, dir), metricsByStep(t, whole))
}

// TestLaunchOverlapReduce: two CPU ranks with --overlap-reduce, which
// all-reduce each layer's gradients while the backward goes on, train as
// two ranks that all-reduce the whole gradient after it: the same per-step
// losses and the same weights, bit for bit (with two ranks each element's
// sum is a+b however the buffer is cut) — for sft (every weight), and for
// the critic (a LoRA adapter) and the value-head critic (a head outside
// every layer, reduced after the backward) with steps that leave rank 1
// without pairs.
func TestLaunchOverlapReduce(t *testing.T) {
	if testing.Short() {
		t.Skip("trains six times")
	}
	common := []string{"--steps", "4", "--batch-tokens", "256", "--eval-every", "0", "--prompt", "",
		"--threads", "1", "--checkpoint-every", "4"}
	plain, overlap := t.TempDir(), t.TempDir()
	for _, r := range []struct {
		dir   string
		extra []string
	}{{plain, nil}, {overlap, []string{"--overlap-reduce"}}} {
		args := append([]string{"--nproc-per-node", "2", "--master-port", freePort(t), "--",
			"sft", "--run-dir", r.dir, "--micro-batches", "2"}, common...)
		out, errOut, err := launchRun(t, append(args, r.extra...)...)
		if err != nil {
			t.Fatalf("sft %v: %v\n%s\n%s", r.extra, err, out, errOut)
		}
		if said := strings.Contains(out, "[rank 0] gradients all-reduced layer by layer during the backward (4 layers, then 2 other ranges)"); said != (r.extra != nil) {
			t.Errorf("sft %v: says the all-reduce overlaps: %v\n%s", r.extra, said, out)
		}
	}
	want, got := metricsByStep(t, plain), metricsByStep(t, overlap)
	if len(want) != 4 || !maps.EqualFunc(got, want, maps.Equal) {
		t.Errorf("sft: the overlapped run recorded %v, the plain one %v; want 4 steps, the same", got, want)
	}
	sameWeights(t, checkpoint.Dir(overlap, 4), checkpoint.Dir(plain, 4), 0)

	dir := t.TempDir()
	scripted := filepath.Join(dir, "scripted.jsonl")
	if err := sweetrl.SaveTrajectories(scripted, demotask.ScriptedTrajectories(demotask.Tasks(4, 9), 4, 9)); err != nil {
		t.Fatal(err)
	}
	model := byteModel(t)
	for _, head := range []string{"logprob", "scalar"} {
		var losses [2][]float64
		outs := [2]string{filepath.Join(dir, head+"-plain"), filepath.Join(dir, head+"-overlap")}
		for i, extra := range [][]string{nil, {"--overlap-reduce"}} {
			lossFile := outs[i] + ".losses"
			// 3 pairs a step on two ranks: the last step of an epoch of 7
			// pairs leaves rank 1 none.
			args := append([]string{"--nproc-per-node", "2", "--master-port", freePort(t), "--", "critic", "--head", head,
				"--hf", model, "--threads", "1", "--trajectories", scripted, "--lora-rank", "2", "--batch-tokens", "512",
				"--lr", "1e-3", "--epochs", "2", "--batch", "3", "--out", outs[i], "--losses", lossFile}, extra...)
			out, errOut, err := launchRun(t, args...)
			if err != nil {
				t.Fatalf("critic --head %s %v: %v\n%s\n%s", head, extra, err, out, errOut)
			}
			if !strings.Contains(out, "on 7 trajectory pairs") {
				t.Fatalf("critic --head %s: want 7 pairs\n%s", head, out)
			}
			if said := strings.Contains(out, "[rank 0] gradients all-reduced layer by layer during the backward"); said != (extra != nil) {
				t.Errorf("critic --head %s %v: says the all-reduce overlaps: %v\n%s", head, extra, said, out)
			}
			losses[i] = readLosses(t, lossFile)
		}
		if len(losses[0]) < 2 || !slices.Equal(losses[1], losses[0]) {
			t.Errorf("critic --head %s: losses %v overlapped, %v plain; want the same, at least 2 steps", head, losses[1], losses[0])
		}
		sameTensors(t, "adapter_model.safetensors", outs[1], outs[0], 0)
		if head == "scalar" {
			sameTensors(t, rl.ValueHeadFile, outs[1], outs[0], 0)
		}
	}
}
