package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/turnwise/turnwise/internal/buildinfo"
	"github.com/turnwise/turnwise/internal/jsonerr"
)

// Format and Version identify the layout of a checkpoint directory; they
// are written to and checked in every manifest.
const (
	Format  = "turnwise-checkpoint"
	Version = 1
)

// ManifestName is the name of the file in a checkpoint directory that lists
// every other file with its size and SHA-256 checksum.
const ManifestName = "manifest.json"

// Manifest is the content of manifest.json.
type Manifest struct {
	Format  string      `json:"format"`
	Version int         `json:"version"`
	Files   []FileEntry `json:"files"`
	// Build is what the binary that saved the checkpoint was built from;
	// zero in the manifests saved before it was recorded.
	Build buildinfo.Info `json:"build,omitzero"`
}

// FileEntry describes one file of a checkpoint as it lies on disk.
type FileEntry struct {
	Name   string `json:"name"`   // file name inside the checkpoint directory
	Size   int64  `json:"size"`   // bytes
	SHA256 string `json:"sha256"` // lower-case hex
}

// file returns the entry named name, or nil.
func (m *Manifest) file(name string) *FileEntry {
	for i := range m.Files {
		if m.Files[i].Name == name {
			return &m.Files[i]
		}
	}
	return nil
}

// CorruptError reports a checkpoint whose files do not match its manifest,
// or whose manifest is missing or unreadable.
type CorruptError struct {
	Dir     string // the checkpoint directory
	File    string // the file at fault, inside Dir
	Problem string // what is wrong with it
}

// Error returns "checkpoint DIR: FILE: PROBLEM".
func (e *CorruptError) Error() string {
	return fmt.Sprintf("checkpoint %s: %s: %s", e.Dir, e.File, e.Problem)
}

// validFileName reports whether name is a plain file name that a manifest
// may list: no directory part, not hidden, not the manifest itself.
func validFileName(name string) bool {
	return name != "" && name != ManifestName && !strings.HasPrefix(name, ".") &&
		!strings.ContainsAny(name, `/\`) && filepath.Base(name) == name
}

// readManifest reads and checks the syntax of dir's manifest.
func readManifest(dir string) (*Manifest, error) {
	corrupt := func(format string, args ...any) error {
		return &CorruptError{Dir: dir, File: ManifestName, Problem: fmt.Sprintf(format, args...)}
	}
	raw, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, corrupt("missing (the save did not complete, or this is not a checkpoint)")
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	var m Manifest
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, corrupt("not a valid manifest: %v", jsonerr.Reword(err))
	}
	if dec.More() {
		return nil, corrupt("not a valid manifest: data after the JSON object")
	}
	if m.Format != Format {
		return nil, corrupt("format %q, want %q", m.Format, Format)
	}
	if m.Version != Version {
		return nil, corrupt("version %d, this program reads version %d", m.Version, Version)
	}
	seen := make(map[string]bool, len(m.Files))
	for _, f := range m.Files {
		switch {
		case !validFileName(f.Name):
			return nil, corrupt("lists an invalid file name %q", f.Name)
		case seen[f.Name]:
			return nil, corrupt("lists %q twice", f.Name)
		case f.Size < 0:
			return nil, corrupt("%s: negative size %d", f.Name, f.Size)
		case len(f.SHA256) != 2*sha256.Size || strings.ToLower(f.SHA256) != f.SHA256:
			return nil, corrupt("%s: checksum %q is not a lower-case hex SHA-256", f.Name, f.SHA256)
		}
		seen[f.Name] = true
	}
	return &m, nil
}

// Verify checks the checkpoint in dir against its manifest: every listed
// file must exist with the recorded size and SHA-256 checksum. A fault is
// reported as a *CorruptError naming the file and what is wrong. Verify
// reads every file in full.
func Verify(dir string) error {
	_, err := verify(dir)
	return err
}

// verify is Verify returning the manifest.
func verify(dir string) (*Manifest, error) {
	m, err := readManifest(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range m.Files {
		if err := verifyFile(dir, e); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// verifyFile checks one file's size and checksum.
func verifyFile(dir string, e FileEntry) error {
	corrupt := func(format string, args ...any) error {
		return &CorruptError{Dir: dir, File: e.Name, Problem: fmt.Sprintf(format, args...)}
	}
	f, err := os.Open(filepath.Join(dir, e.Name))
	if errors.Is(err, os.ErrNotExist) {
		return corrupt("missing")
	}
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	if !st.Mode().IsRegular() {
		return corrupt("not a regular file")
	}
	if st.Size() != e.Size {
		what := "truncated"
		if st.Size() > e.Size {
			what = "too long"
		}
		return corrupt("%s: %d bytes, the manifest records %d", what, st.Size(), e.Size)
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return fmt.Errorf("checkpoint %s: reading %s: %w", dir, e.Name, err)
	}
	if n != e.Size {
		return corrupt("changed size while being read: %d bytes, the manifest records %d", n, e.Size)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != e.SHA256 {
		return corrupt("altered: SHA-256 %s, the manifest records %s", sum, e.SHA256)
	}
	return nil
}
