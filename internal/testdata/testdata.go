// Package testdata locates the project's shared test data: real artifacts made
// outside the project (a tiny Llama checkpoint, the Llama 3 tokenizer, ColBench
// tasks) that live in a directory named shared/testdata beside the repository
// and are never copied into it.
//
// Tests call Dir or Path; both skip the test with a message saying why when
// the data is absent.
package testdata

import (
	"os"
	"path/filepath"
	"testing"
)

// EnvVar names the environment variable that, when set, overrides where the
// shared test data is looked for.
const EnvVar = "TURNWISE_TESTDATA"

// Find returns the shared test data directory, or "" when there is none. It
// honours $TURNWISE_TESTDATA, then walks up from the working directory to the
// repository root (the directory holding go.mod) and looks for
// ../shared/testdata beside it.
func Find() string {
	if d := os.Getenv(EnvVar); d != "" {
		if isDir(d) {
			return d
		}
		return ""
	}
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			cand := filepath.Join(filepath.Dir(d), "shared", "testdata")
			if isDir(cand) {
				return cand
			}
			return ""
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

// Dir returns the shared test data directory or skips t.
func Dir(t testing.TB) string {
	t.Helper()
	d := Find()
	if d == "" {
		t.Skipf("shared test data not found: expected ../shared/testdata beside the repository (or $%s); skipping", EnvVar)
	}
	return d
}

// Path returns the path of a file under the shared test data directory, or
// skips t when the directory or the file is absent.
func Path(t testing.TB, elem ...string) string {
	t.Helper()
	p := filepath.Join(append([]string{Dir(t)}, elem...)...)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared test file %s not found (%v); skipping", filepath.Join(elem...), err)
	}
	return p
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
