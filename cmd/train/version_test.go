package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/internal/buildinfo"
)

// TestVersion checks train version's text and JSON against the binary's
// build information.
func TestVersion(t *testing.T) {
	want := buildinfo.Read()
	out, err := runCmd(t, runVersion, "")
	if err != nil {
		t.Fatal(err)
	}
	if out != want.Lines() {
		t.Errorf("train version printed\n%s\nwant\n%s", out, want.Lines())
	}
	for _, line := range []string{"version: ", "commit: ", "go: go", "tags: ", "cuda toolkit: "} {
		if !strings.Contains(out, "\n"+line) && !strings.HasPrefix(out, line) {
			t.Errorf("train version lacks a %q line:\n%s", line, out)
		}
	}
	out, err = runCmd(t, runVersion, "", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got buildinfo.Info
	if err := json.Unmarshal([]byte(out), &got); err != nil || got != want {
		t.Errorf("train version --json: %v\n%s\nwant %+v", err, out, want)
	}
	if _, err := runCmd(t, runVersion, "", "extra"); err == nil {
		t.Error("train version took an argument")
	}
}
