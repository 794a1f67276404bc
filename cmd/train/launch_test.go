package main

import (
	"bytes"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// freePort returns a TCP port nothing listens on now.
func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// launchRun runs train launch with args; its ranks are this test binary
// running train's main.
func launchRun(t *testing.T, args ...string) (stdout, stderr string, err error) {
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
