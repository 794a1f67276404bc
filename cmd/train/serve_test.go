package main

import (
	"strings"
	"testing"
)

// TestServeFlags checks that bad flags are refused before any model loads
// (the model directory does not exist).
func TestServeFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-batch", "0"}, "--max-batch 0"},
		{[]string{"--batch-window", "-1s"}, "--batch-window -1s"},
		{[]string{"--load-test", "-2"}, "--load-test -2"},
		{[]string{"--load-concurrency", "0"}, "--load-concurrency 0"},
		{[]string{"stray"}, `unexpected argument "stray"`},
	} {
		_, err := runCmd(t, runServe, "", append([]string{"--hf", "no-such-model"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one naming %q", tc.args, err, tc.want)
		}
	}
}

// TestServeLoadTest runs train serve's load test on a tiny byte-level
// model: every request answered, each round reported.
func TestServeLoadTest(t *testing.T) {
	out, err := runCmd(t, runServe, "", "--hf", byteModel(t), "--threads", "1", "--load-test", "8", "--load-concurrency", "2", "--load-max-tokens", "4", "--load-rounds", "2", "--load-chat")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"round 1: 8 requests (0 failed)", "round 2: 8 requests (0 failed)", "requests/s", "latency p50", "goroutines"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
