package main

import (
	"encoding/json"
	"io"

	"github.com/turnwise/turnwise/internal/buildinfo"
)

// runVersion implements "train version".
func runVersion(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("version", stderr)
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
