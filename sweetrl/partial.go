package sweetrl

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/turnwise/turnwise/internal/jsonl"
	"github.com/turnwise/turnwise/internal/outfile"
	"github.com/turnwise/turnwise/internal/zstdfile"
)

// PartialTrajectories is a trajectory file written in steps: it grows as
// PATH.partial (see outfile.PartialSuffix), each Append written and synced
// in full, and Commit gives it its final name PATH once every trajectory is
// in. A file under its final name is therefore always whole, and a run that
// stops early leaves PATH.partial for a later run to continue
// (ResumePartialTrajectories). The partial file is plain JSON lines in the
// reference's layout even when PATH ends in ".zst": Commit compresses it.
// It is not safe for concurrent use.
type PartialTrajectories struct {
	p *outfile.Partial
	n int
}

// CreatePartialTrajectories starts PATH.partial afresh, replacing one a
// previous run left.
func CreatePartialTrajectories(path string) (*PartialTrajectories, error) {
	p, err := outfile.CreatePartial(path)
	if err != nil {
		return nil, err
	}
	return &PartialTrajectories{p: p}, nil
}

// ResumePartialTrajectories reopens the PATH.partial a previous run left.
// Its lines are read and checked as ReadTrajectories checks them; a last
// line the previous run did not finish (no newline at the end of the file)
// is dropped, while a damaged line before it is an error naming the file
// and the line, and nothing is changed. keep is given the whole
// trajectories, in order, and returns how many of them to keep (it may
// refuse them with an error, which is returned); the file is cut after
// those, and later Appends continue from there. dropped counts the lines
// discarded: the cut one and those keep did not keep.
func ResumePartialTrajectories(path string, keep func([]Trajectory) (int, error)) (w *PartialTrajectories, kept []Trajectory, dropped int, err error) {
	name := path + outfile.PartialSuffix
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("continuing: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, 0, fmt.Errorf("continuing: %w", err)
	}
	var trajs []Trajectory
	var ends []int64 // byte offset after each trajectory's line
	jr := jsonl.NewReader(f, name)
	for {
		line, lineNo, rerr := jr.Next()
		if rerr == io.EOF {
			break
		}
		cut := !jr.Terminated() && jr.Offset() == st.Size()
		var je *LineError
		if rerr != nil && !(cut && errors.As(rerr, &je)) {
			f.Close()
			return nil, nil, 0, rerr
		}
		if cut { // the line the previous run was writing when it stopped
			dropped++
			break
		}
		var tr Trajectory
		if perr := tr.UnmarshalJSON(line); perr != nil {
			f.Close()
			return nil, nil, 0, &LineError{Name: name, Line: lineNo, Err: perr}
		}
		trajs = append(trajs, tr)
		ends = append(ends, jr.Offset())
	}
	f.Close()
	n, err := keep(trajs)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("continuing %s: %w", name, err)
	}
	if n < 0 || n > len(trajs) {
		panic(fmt.Sprintf("sweetrl: ResumePartialTrajectories: keep returned %d of %d trajectories", n, len(trajs)))
	}
	var size int64
	if n > 0 {
		size = ends[n-1]
	}
	p, err := outfile.ResumePartial(path, size)
	if err != nil {
		return nil, nil, 0, err
	}
	return &PartialTrajectories{p: p, n: n}, trajs[:n], dropped + len(trajs) - n, nil
}

// Name returns the name the file grows under, PATH.partial.
func (w *PartialTrajectories) Name() string { return w.p.Name() }

// Len returns the number of trajectories the file holds.
func (w *PartialTrajectories) Len() int { return w.n }

// Append writes trajs at the end of the file, one line each, and syncs it;
// on error the file holds what it held before.
func (w *PartialTrajectories) Append(trajs ...Trajectory) error {
	var buf bytes.Buffer
	if err := WriteTrajectories(&buf, trajs...); err != nil {
		return fmt.Errorf("%s: %w", w.Name(), err)
	}
	if err := w.p.Append(buf.Bytes()); err != nil {
		return err
	}
	w.n += len(trajs)
	return nil
}

// AppendEncoded writes n trajectories already encoded by WriteTrajectories
// (lines) at the end of the file, as Append does: the bytes Append would
// write for them, even where a trajectory's text is not valid UTF-8 and
// would not survive decoding and encoding again.
func (w *PartialTrajectories) AppendEncoded(lines []byte, n int) error {
	if err := w.p.Append(lines); err != nil {
		return err
	}
	w.n += n
	return nil
}

// Commit completes the file: PATH.partial becomes PATH (compressed with
// zstd when PATH ends in ".zst").
func (w *PartialTrajectories) Commit() error {
	if !zstdfile.Compressed(w.p.Path()) {
		return w.p.Commit()
	}
	return w.p.CommitAs(func(dst io.Writer, src io.Reader) error {
		return zstdfile.Compress(dst, func(zw io.Writer) error {
			_, err := io.Copy(zw, src)
			return err
		})
	})
}

// Close leaves the file under its partial name, for a later run to
// continue.
func (w *PartialTrajectories) Close() error { return w.p.Close() }
