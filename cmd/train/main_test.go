package main

import (
	"strings"
	"testing"
)

// TestStrayArgument checks that every subcommand that takes flags only
// refuses an argument that is not a flag — a file named without its flag
// (train sft --gguf M data.jsonl) — before it loads anything, and that
// every subcommand has a description.
func TestStrayArgument(t *testing.T) {
	takesArgs := map[string]bool{"bench": true, "launch": true, "plot": true}
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
