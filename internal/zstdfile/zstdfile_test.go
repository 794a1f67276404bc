package zstdfile

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	const text = "line one\nline two\n"
	for _, name := range []string{"plain.jsonl", "packed.jsonl.zst"} {
		path := filepath.Join(dir, name)
		var buf bytes.Buffer
		if Compressed(path) {
			if err := Compress(&buf, func(w io.Writer) error { _, err := io.WriteString(w, text); return err }); err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(buf.Bytes(), []byte{0x28, 0xb5, 0x2f, 0xfd}) {
				t.Fatalf("%s: compressed bytes % x do not open with the zstd magic", name, buf.Bytes()[:min(4, buf.Len())])
			}
		} else {
			buf.WriteString(text)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		rc, err := Open(path, "answers")
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := rc.Close(); err != nil {
			t.Fatal(err)
		}
		if string(got) != text {
			t.Errorf("%s read back %q, want %q", name, got, text)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "missing.zst"), "answers"); err == nil || !strings.Contains(err.Error(), "opening answers") {
		t.Errorf("a missing file gave %v, want an error naming what was opened", err)
	}
	bad := filepath.Join(dir, "bad.jsonl.zst")
	if err := os.WriteFile(bad, []byte("not zstd at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	rc, err := Open(bad, "trajectories")
	if err == nil {
		_, err = io.ReadAll(rc)
		rc.Close()
	}
	if err == nil {
		t.Error("a .zst file that is not zstd read without an error")
	}
}

func TestCompressed(t *testing.T) {
	for path, want := range map[string]bool{"a.jsonl.zst": true, "a.jsonl": false, "zst": false, "dir.zst/a.jsonl": false} {
		if got := Compressed(path); got != want {
			t.Errorf("Compressed(%q) = %v, want %v", path, got, want)
		}
	}
}
