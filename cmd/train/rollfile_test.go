package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/sweetrl"
)

// TestRolloutContinue cuts a rollout file as a full disk or a kill leaves
// it, mid-line, and checks that --continue completes it into the very
// file an uninterrupted run writes.
func TestRolloutContinue(t *testing.T) {
	dir := t.TempDir()
	model := byteModel(t)
	args := func(out string, extra ...string) []string {
		return append([]string{"--hf", model, "--threads", "1", "--env", "demo", "--demo-tasks", "3", "--k", "2",
			"--max-new", "6", "--chunk", "2", "--out", out}, extra...)
	}
	whole := filepath.Join(dir, "whole.jsonl")
	if out, err := runCmd(t, runRollout, "", args(whole)...); err != nil {
		t.Fatalf("rollout: %v\n%s", err, out)
	}
	want, err := os.ReadFile(whole)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(whole + ".partial"); !errors.Is(err, os.ErrNotExist) {
		t.Error("a complete rollout left its .partial file")
	}
	lines := bytes.SplitAfter(want, []byte("\n"))
	if len(lines) < 6 {
		t.Fatalf("the rollout wrote %d lines, want 6", len(lines))
	}

	tests := []struct {
		name    string
		partial []byte
		kept    string
	}{
		{"cut mid-line in the second chunk", append(bytes.Join(lines[:3], nil), lines[3][:len(lines[3])/2]...), "3 of 6 episodes done (1 unfinished lines dropped)"},
		{"cut on a line boundary", bytes.Join(lines[:4], nil), "4 of 6 episodes done (0 unfinished lines dropped)"},
		{"cut in the middle of a character", append(bytes.Join(lines[:1], nil), 0xe2, 0x82), "1 of 6 episodes done (1 unfinished lines dropped)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "roll.jsonl")
			if err := os.WriteFile(path+".partial", tc.partial, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := runCmd(t, runRollout, "", args(path)...)
			if err == nil || !strings.Contains(err.Error(), "--continue") {
				t.Fatalf("a rollout over an unfinished one without --continue: %v, want an error naming --continue", err)
			}
			out, err := runCmd(t, runRollout, "", args(path, "--continue")...)
			if err != nil {
				t.Fatalf("rollout --continue: %v\n%s", err, out)
			}
			if !strings.Contains(out, tc.kept) {
				t.Errorf("rollout --continue does not say %q:\n%s", tc.kept, out)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("the continued file differs from an uninterrupted run's (%d bytes, want %d)", len(got), len(want))
			}
			if _, err := os.Stat(path + ".partial"); !errors.Is(err, os.ErrNotExist) {
				t.Error("the .partial file remains")
			}
		})
	}

	// A partial file of other tasks is refused, naming the line.
	other := filepath.Join(dir, "other.jsonl")
	if err := os.WriteFile(other+".partial", bytes.Join([][]byte{lines[2], lines[0]}, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = runCmd(t, runRollout, "", args(other, "--continue")...)
	if err == nil || !strings.Contains(err.Error(), "other.jsonl.partial: line 1 is an episode of another task") {
		t.Errorf("continuing a file of other tasks: %v", err)
	}
}

// TestRolloutOrderReference: --order reference writes every task once,
// then every task again — the layout the reference's scripts assert — and
// --continue completes such a file cut mid-line into the uninterrupted
// run's.
func TestRolloutOrderReference(t *testing.T) {
	dir := t.TempDir()
	args := func(out string, extra ...string) []string {
		return append([]string{"--hf", byteModel(t), "--threads", "1", "--env", "demo", "--demo-tasks", "3", "--k", "2",
			"--max-new", "6", "--chunk", "2", "--order", "reference", "--out", out}, extra...)
	}
	whole := filepath.Join(dir, "whole.jsonl")
	if out, err := runCmd(t, runRollout, "", args(whole)...); err != nil {
		t.Fatalf("rollout: %v\n%s", err, out)
	}
	trajs, err := sweetrl.LoadTrajectories(whole)
	if err != nil || len(trajs) != 6 {
		t.Fatalf("%d trajectories (%v), want 6", len(trajs), err)
	}
	task := func(i int) string {
		b, err := trajs[i].Task.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for i := range 3 {
		if task(i) != task(i+3) {
			t.Errorf("lines %d and %d are episodes of different tasks; want the same task's two attempts", i+1, i+4)
		}
		if task(i) == task((i+1)%3) {
			t.Errorf("lines %d and %d are episodes of one task; want every task once per round", i+1, (i+1)%3+1)
		}
	}
	want, err := os.ReadFile(whole)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(want, []byte("\n"))
	cut := filepath.Join(dir, "cut.jsonl")
	if err := os.WriteFile(cut+".partial", append(bytes.Join(lines[:3], nil), lines[3][:len(lines[3])/2]...), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := runCmd(t, runRollout, "", args(cut, "--continue")...); err != nil {
		t.Fatalf("rollout --continue: %v\n%s", err, out)
	}
	if got, err := os.ReadFile(cut); err != nil || !bytes.Equal(got, want) {
		t.Errorf("the continued file differs from the uninterrupted one (%v)", err)
	}
}
