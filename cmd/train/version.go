package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/turnwise/turnwise/internal/buildinfo"
)

const versionUsage = `usage: train version [--json]

Prints what this binary was built from: its version ("devel" for a build
from an untagged tree), the commit ("(modified)": with uncommitted
changes), the Go version, the build tags and the CUDA toolkit of a -tags
cuda build. Every run records the same in its config.yaml, its
checkpoints' manifest.json and train bench's results.

With --json it prints one JSON object: version and go, and commit,
modified, tags and cuda where the build has them.

flags:
`

// runVersion implements "train version".
func runVersion(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("version", stderr)
	fs.Usage = func() { fmt.Fprint(stderr, versionUsage); fs.PrintDefaults() }
	asJSON := fs.Bool("json", false, "print it as one JSON object")
	if err := parse(fs, args); err != nil {
		return err
	}
	info := buildinfo.Read()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(info)
	}
	_, err := io.WriteString(stdout, info.Lines())
	return err
}
