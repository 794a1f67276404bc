package outfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// names lists the entries of dir.
func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func TestWrite(t *testing.T) {
	boom := errors.New("disk full")
	tests := []struct {
		name    string
		old     string // content before ("" : no file)
		fill    func(io.Writer) error
		want    string // content after
		wantErr error
	}{
		{"new file", "", func(w io.Writer) error { _, err := io.WriteString(w, "whole\n"); return err }, "whole\n", nil},
		{"replaces", "old\n", func(w io.Writer) error { _, err := io.WriteString(w, "new\n"); return err }, "new\n", nil},
		{"failure keeps the old file", "old\n", func(w io.Writer) error {
			io.WriteString(w, "half a li")
			return boom
		}, "old\n", boom},
		{"failure leaves no file", "", func(w io.Writer) error { io.WriteString(w, "half"); return boom }, "", boom},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "out.json")
			if tc.old != "" {
				if err := os.WriteFile(path, []byte(tc.old), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			err := Write(path, 0o644, tc.fill)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Write: %v, want %v", err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name %s", err, path)
			}
			got, rerr := os.ReadFile(path)
			switch {
			case tc.want == "" && !errors.Is(rerr, os.ErrNotExist):
				t.Errorf("after a failed write %s exists (%q, %v)", path, got, rerr)
			case tc.want != "" && string(got) != tc.want:
				t.Errorf("%s holds %q, want %q", path, got, tc.want)
			}
			if n := names(t, dir); len(n) > 1 || (tc.want == "" && len(n) > 0) {
				t.Errorf("the directory holds %v: a temporary file was left", n)
			}
		})
	}
}

func TestWriteFilePerm(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.md")
	if err := WriteFile(path, []byte("x"), 0o640); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", st.Mode().Perm())
	}
}

func TestCheckDir(t *testing.T) {
	base := t.TempDir()
	nested := filepath.Join(base, "a", "b")
	if err := CheckDir(nested); err != nil {
		t.Fatalf("CheckDir on a new directory: %v", err)
	}
	if n := names(t, nested); len(n) != 0 {
		t.Errorf("CheckDir left %v behind", n)
	}
	// A directory that cannot exist: its parent is a file.
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckDir(filepath.Join(file, "run")); err == nil || !strings.Contains(err.Error(), filepath.Join(file, "run")) {
		t.Errorf("CheckDir under a file = %v, want an error naming the directory", err)
	}
	if os.Geteuid() == 0 {
		t.Skip("running as root: a read-only mode does not stop writes, so the read-only case is not checked")
	}
	ro := filepath.Join(base, "ro")
	if err := os.Mkdir(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(ro, 0o755) })
	for _, dir := range []string{ro, filepath.Join(ro, "run")} {
		err := CheckDir(dir)
		if err == nil || !strings.Contains(err.Error(), dir) {
			t.Errorf("CheckDir(%s) = %v, want an error naming it", dir, err)
		}
	}
}

func TestPartial(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "roll.jsonl")
	p, err := CreatePartial(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"a\n", "b\n"} {
		if err := p.Append([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s exists before Commit", path)
	}
	// A cut third step, as a crash leaves it.
	if _, err := p.f.Write([]byte("c-cut")); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path + PartialSuffix); string(got) != "a\nb\nc-cut" {
		t.Fatalf("partial file holds %q", got)
	}
	if _, err := ResumePartial(path, 100); err == nil {
		t.Error("ResumePartial kept more bytes than the file holds")
	}
	p, err = ResumePartial(path, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Append([]byte("c\n")); err != nil {
		t.Fatal(err)
	}
	if err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "a\nb\nc\n" {
		t.Errorf("committed file holds %q, want %q", got, "a\nb\nc\n")
	}
	if n := names(t, dir); len(n) != 1 {
		t.Errorf("after Commit the directory holds %v", n)
	}
	if err := p.Append([]byte("d\n")); err == nil {
		t.Error("Append after Commit succeeded")
	}
}

func TestPartialCommitAs(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "roll.up")
	p, err := CreatePartial(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Append([]byte("abc\n")); err != nil {
		t.Fatal(err)
	}
	upper := func(dst io.Writer, src io.Reader) error {
		b, err := io.ReadAll(src)
		if err != nil {
			return err
		}
		_, err = dst.Write([]byte(strings.ToUpper(string(b))))
		return err
	}
	if err := p.CommitAs(upper); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "ABC\n" {
		t.Errorf("committed file holds %q", got)
	}
	if n := names(t, dir); len(n) != 1 {
		t.Errorf("after CommitAs the directory holds %v", n)
	}
}
