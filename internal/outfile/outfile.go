// Package outfile writes the files a command produces so that a file under
// its final name is always whole.
//
// WriteFile and Write fill a temporary file in the destination's directory,
// sync it, and rename it over the destination only when it is complete; on
// any error the destination is left as it was and the temporary file is
// removed. Partial is a file that grows in steps (NAME.partial), each step
// appended and synced, and that Commit renames to NAME once it is complete.
// CheckDir tells, before a long job starts, whether its outputs can be
// written at all.
package outfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// PartialSuffix ends the name of a file that is still being written.
const PartialSuffix = ".partial"

// WriteFile writes data to path atomically (see Write), with permissions
// perm, set as given (the umask does not apply).
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return Write(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// Write creates path with what fill writes, atomically: fill writes into a
// temporary file in path's directory (buffered), which is synced, given
// permissions perm and renamed to path. When fill or any step fails, path
// is left as it was and the temporary file is removed. Errors name path.
func Write(path string, perm os.FileMode, fill func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 1<<16)
	if err = fill(bw); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err = bw.Flush(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err = finish(tmp, perm); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return SyncDir(dir)
}

// finish sets f's permissions, syncs it and closes it.
func finish(f *os.File, perm os.FileMode) error {
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}

// SyncDir makes the entries of dir (a rename into it) durable. File systems
// that cannot sync a directory (EINVAL) are tolerated.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}

// CheckDir makes sure dir exists (creating it and its parents if needed)
// and that files can be created in it, by creating and removing a small
// probe file. The error names dir and says what a command would have
// failed on, so that a long job can refuse to start instead of failing at
// its first save.
func CheckDir(dir string) error {
	if dir == "" {
		dir = "."
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("output directory %s cannot be created: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return fmt.Errorf("output directory %s is not writable: %w", dir, err)
	}
	name := f.Name()
	_, werr := f.Write([]byte{0})
	cerr := f.Close()
	rerr := os.Remove(name)
	switch {
	case werr != nil:
		return fmt.Errorf("output directory %s is not writable: %w", dir, werr)
	case cerr != nil:
		return fmt.Errorf("output directory %s is not writable: %w", dir, cerr)
	case rerr != nil:
		return fmt.Errorf("output directory %s: removing the write check %s: %w", dir, filepath.Base(name), rerr)
	}
	return nil
}

// Partial is a file that grows in steps under the name PATH.partial and is
// renamed to PATH once complete. Each Append is written and synced before it
// returns, so after a crash the partial file holds every step whose Append
// returned, plus possibly a cut piece of the step in progress. It is not
// safe for concurrent use.
type Partial struct {
	path string // the final name
	f    *os.File
	size int64 // bytes committed by Append
}

// Name returns the name the file grows under: PATH.partial.
func (p *Partial) Name() string { return p.path + PartialSuffix }

// Path returns the file's final name.
func (p *Partial) Path() string { return p.path }

// Size returns the number of bytes the partial file holds.
func (p *Partial) Size() int64 { return p.size }

// CreatePartial starts PATH.partial afresh, replacing one a previous run
// left.
func CreatePartial(path string) (*Partial, error) {
	f, err := os.OpenFile(path+PartialSuffix, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("creating %s: %w", path+PartialSuffix, err)
	}
	return &Partial{path: path, f: f}, nil
}

// ResumePartial opens the PATH.partial a previous run left, keeping its
// first keep bytes (the caller has checked that they are whole steps) and
// discarding the rest; later Appends continue after them. keep larger than
// the file is an error.
func ResumePartial(path string, keep int64) (*Partial, error) {
	name := path + PartialSuffix
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("resuming %s: %w", name, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("resuming %s: %w", name, err)
	}
	if keep < 0 || keep > st.Size() {
		f.Close()
		return nil, fmt.Errorf("resuming %s: keeping %d bytes of %d", name, keep, st.Size())
	}
	if err := f.Truncate(keep); err != nil {
		f.Close()
		return nil, fmt.Errorf("resuming %s: %w", name, err)
	}
	if _, err := f.Seek(keep, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("resuming %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("resuming %s: %w", name, err)
	}
	return &Partial{path: path, f: f, size: keep}, nil
}

// Append writes b at the end of the partial file and syncs it. On a failed
// write the file is cut back to its previous size where possible, so that
// it holds whole steps only.
func (p *Partial) Append(b []byte) error {
	if p.f == nil {
		return fmt.Errorf("appending to %s: the file is closed", p.Name())
	}
	if _, err := p.f.Write(b); err != nil {
		if terr := p.f.Truncate(p.size); terr == nil {
			p.f.Seek(p.size, io.SeekStart)
		}
		return fmt.Errorf("appending to %s: %w", p.Name(), err)
	}
	if err := p.f.Sync(); err != nil {
		return fmt.Errorf("appending to %s: %w", p.Name(), err)
	}
	p.size += int64(len(b))
	return nil
}

// Close closes the partial file and leaves it under its partial name (for
// a later run to resume). Closing a committed or closed Partial does
// nothing.
func (p *Partial) Close() error {
	if p.f == nil {
		return nil
	}
	err := p.f.Close()
	p.f = nil
	if err != nil {
		return fmt.Errorf("closing %s: %w", p.Name(), err)
	}
	return nil
}

// Commit completes the file: it is synced, closed and renamed from
// PATH.partial to PATH, replacing what PATH held.
func (p *Partial) Commit() error {
	if p.f == nil {
		return fmt.Errorf("committing %s: the file is closed", p.Name())
	}
	err := finish(p.f, 0o644)
	p.f = nil
	if err != nil {
		return fmt.Errorf("committing %s: %w", p.Name(), err)
	}
	if err := os.Rename(p.Name(), p.path); err != nil {
		return fmt.Errorf("committing %s: %w", p.Name(), err)
	}
	return SyncDir(filepath.Dir(p.path))
}

// CommitAs completes the file by writing its content, transformed by
// convert, to PATH atomically (see Write), then removing PATH.partial. It
// serves outputs whose final form is not a plain concatenation of the
// steps, such as a compressed file grown as plain text.
func (p *Partial) CommitAs(convert func(dst io.Writer, src io.Reader) error) error {
	if err := p.Close(); err != nil {
		return err
	}
	src, err := os.Open(p.Name())
	if err != nil {
		return fmt.Errorf("committing %s: %w", p.Name(), err)
	}
	defer src.Close()
	if err := Write(p.path, 0o644, func(w io.Writer) error { return convert(w, src) }); err != nil {
		return err
	}
	if err := os.Remove(p.Name()); err != nil {
		return fmt.Errorf("committing %s: %w", p.Name(), err)
	}
	return SyncDir(filepath.Dir(p.path))
}
