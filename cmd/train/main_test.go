package main

import (
	"io"
	"strings"
	"testing"
)

// TestStrayArgument checks that every subcommand that takes flags only
// refuses an argument that is not a flag — a file named without its flag
// (train sft --gguf M data.jsonl) — before it loads anything, and that
// every subcommand has a description.
func TestStrayArgument(t *testing.T) {
	takesArgs := map[string]bool{"bench": true, "launch": true, "plot": true, "completion": true}
	for name, c := range commands() {
		if c.summary == "" {
			t.Errorf("%s has no description", name)
		}
		if takesArgs[name] {
			continue
		}
		t.Run(name, func(t *testing.T) {
			_, err := runCmd(t, c.run, "", "data.jsonl")
			if err == nil || !strings.Contains(err.Error(), `unexpected arguments ["data.jsonl"]`) {
				t.Errorf("train %s with a stray argument: %v; want it refused", name, err)
			}
		})
	}
}

// TestFlagRanges checks that values out of range are refused, naming the
// flag, before a model loads (the model flags below name nothing that
// exists).
func TestFlagRanges(t *testing.T) {
	tests := []struct {
		run  func([]string, io.Reader, io.Writer, io.Writer) error
		args []string
		want string
	}{
		{runGenerate, []string{"--hf", "nowhere", "--temperature", "-1"}, "--temperature -1: want a value ≥ 0"},
		{runGenerate, []string{"--hf", "nowhere", "--top-p", "2"}, "--top-p 2: want a value in (0, 1]"},
		{runGenerate, []string{"--hf", "nowhere", "--top-k", "-1"}, "--top-k -1: want a value ≥ 0"},
		{runRollout, []string{"--hf", "nowhere", "--top-k", "-3"}, "--top-k -3: want a value ≥ 0"},
		{runSFT, []string{"--hf", "nowhere", "--lora-rank", "-2"}, "--lora-rank -2: want a value ≥ 0"},
		{runActor, []string{"--hf", "nowhere", "--data-fraction", "1.5"}, "--data-fraction 1.5: want a value in (0, 1]"},
		{runCritic, []string{"--hf", "nowhere", "--warmup", "2"}, "--warmup 2: want a value in [0, 1)"},
		{runPlan, []string{"--preset", "tiny", "--lora-rank", "-1"}, "--lora-rank -1"},
	}
	for _, tc := range tests {
		_, err := runCmd(t, tc.run, "", tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error naming %q", tc.args, err, tc.want)
		}
	}
}
