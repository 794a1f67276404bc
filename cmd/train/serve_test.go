package main

import (
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/serve"
	"github.com/turnwise/turnwise/tokenizer"
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
		{[]string{"stray"}, `unexpected arguments ["stray"]`},
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

// TestRolloutAgainstServe plays demo episodes whose human is a model behind
// the OpenAI-compatible server (the http simulator, as with a remote
// server): every simulator request is answered.
func TestRolloutAgainstServe(t *testing.T) {
	c := builtinConfig
	c.Dim, c.Layers, c.Heads, c.KVHeads, c.HeadDim, c.FFN, c.MaxSeqLen = 32, 1, 2, 1, 16, 64, 4096
	sim, err := llama.NewRandom(cpu.New(cpu.Options{Threads: 1}), c, engine.F32, 0.3, 5)
	if err != nil {
		t.Fatal(err)
	}
	s, err := serve.New(serve.Config{Model: sim, Tokenizer: tokenizer.Bytes{}, Models: []serve.Served{{ID: "human"}}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	defer func() { ts.Close(); s.Close() }()
	roll := filepath.Join(t.TempDir(), "roll.jsonl")
	out, err := runCmd(t, runRollout, "", "--hf", byteModel(t), "--threads", "1", "--env", "demo", "--demo-tasks", "2", "--k", "1", "--max-new", "4",
		"--simulator", "http", "--sim-url", ts.URL+"/v1", "--sim-model", "human", "--sim-max-new", "6", "--sim-retries", "0", "--out", roll)
	if err != nil {
		t.Fatalf("rollout: %v\n%s", err, out)
	}
	if !strings.Contains(out, "2 episodes") || strings.Contains(out, "the simulator failed") {
		t.Errorf("rollout against the server:\n%s", out)
	}
}
