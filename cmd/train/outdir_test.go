package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutputDirNotWritable checks that the commands that train refuse an
// output directory they could not write before they start, naming it.
func TestOutputDirNotWritable(t *testing.T) {
	base := t.TempDir()
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(file, "run") // its parent is a file
	tests := []struct {
		name string
		run  func([]string, io.Reader, io.Writer, io.Writer) error
		args []string
	}{
		{"sft", runSFT, []string{"--out", bad, "--steps", "2", "--batch-tokens", "256"}},
		{"critic", runCritic, []string{"--preset", "tiny", "--trajectories", filepath.Join(base, "none.jsonl"), "--out", bad}},
		{"demo", runDemo, []string{"--out", bad}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runCmd(t, tc.run, "", tc.args...)
			if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "cannot be created") {
				t.Errorf("%s with an unwritable output directory: %v\n%s", tc.name, err, out)
			}
			if strings.Contains(out, "step") {
				t.Errorf("%s started training:\n%s", tc.name, out)
			}
		})
	}
}
