// Package metrics records a training run's metrics as JSON lines and shows
// its progress on a terminal or in a log.
//
// A metrics file holds one JSON object per line, such as
//
//	{"step":12,"loss":2.3,"lr":0.0001,"tokens_per_s":5120}
//
// with "step" first and the other values in key order. Values that are not
// finite (a loss that diverged) are written as the strings "NaN", "+Inf"
// and "-Inf", which JSON numbers cannot express, and read back as such.
//
// PlotSVG draws a run's loss and learning-rate curves from its records;
// the subpackage tfevents writes the same values as TensorBoard event files.
package metrics

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"

	"github.com/turnwise/turnwise/internal/jsonerr"
	"github.com/turnwise/turnwise/internal/jsonl"
	"github.com/turnwise/turnwise/internal/outfile"
	"github.com/turnwise/turnwise/metrics/tfevents"
)

// Keys of the values a training run records.
const (
	Loss       = "loss"
	LR         = "lr"
	TokensPerS = "tokens_per_s"
	GradNorm   = "grad_norm"
	EvalLoss   = "eval_loss"
)

// Record is the metrics of one step.
type Record struct {
	// Step is the optimizer step the values belong to.
	Step int64
	// Values maps a metric's key, such as Loss, to its value. A metric
	// not measured at this step is absent.
	Values map[string]float64
}

// Get returns the value of key and whether the record has it.
func (r Record) Get(key string) (float64, bool) {
	v, ok := r.Values[key]
	return v, ok
}

// MarshalJSON encodes r as one JSON object, "step" first, then the values
// in key order; non-finite values become strings.
func (r Record) MarshalJSON() ([]byte, error) {
	b := []byte(`{"step":`)
	b = strconv.AppendInt(b, r.Step, 10)
	keys := make([]string, 0, len(r.Values))
	for k := range r.Values {
		if k == "step" {
			return nil, errors.New(`metrics: "step" is not a value key`)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		b = append(b, ',')
		b = append(b, kb...)
		b = append(b, ':')
		v := r.Values[k]
		switch {
		case math.IsNaN(v):
			b = append(b, `"NaN"`...)
		case math.IsInf(v, 1):
			b = append(b, `"+Inf"`...)
		case math.IsInf(v, -1):
			b = append(b, `"-Inf"`...)
		default:
			b = strconv.AppendFloat(b, v, 'g', -1, 64)
		}
	}
	return append(b, '}'), nil
}

// UnmarshalJSON decodes a record written by MarshalJSON. "step" must be a
// non-negative integer; every other field must be a number or one of the
// strings "NaN", "+Inf", "Inf" and "-Inf". A null value is treated as
// absent.
func (r *Record) UnmarshalJSON(data []byte) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return fmt.Errorf("not a JSON object: %w", jsonerr.Reword(err))
	}
	if obj == nil {
		return errors.New("not a JSON object: null")
	}
	rawStep, ok := obj["step"]
	if !ok {
		return errors.New(`missing "step"`)
	}
	var step json.Number
	if err := json.Unmarshal(rawStep, &step); err != nil {
		return errors.New(`"step" is not a number`)
	}
	n, err := strconv.ParseInt(step.String(), 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf(`"step" %s is not a non-negative integer`, step)
	}
	*r = Record{Step: n, Values: make(map[string]float64, len(obj)-1)}
	for k, raw := range obj {
		if k == "step" || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			continue
		}
		var v float64
		if err := json.Unmarshal(raw, &v); err != nil {
			var s string
			if json.Unmarshal(raw, &s) != nil {
				return fmt.Errorf("%q is not a number", k)
			}
			switch s {
			case "NaN":
				v = math.NaN()
			case "+Inf", "Inf":
				v = math.Inf(1)
			case "-Inf":
				v = math.Inf(-1)
			default:
				return fmt.Errorf("%q is %q, not a number", k, s)
			}
		}
		r.Values[k] = v
	}
	return nil
}

// WriterOptions controls a Writer.
type WriterOptions struct {
	// Sync makes every Write flush the file to stable storage (when the
	// destination has a Sync method, as *os.File does), so that a crash
	// loses no recorded step.
	Sync bool

	// EventsDir, when not empty, makes Create also write every record to
	// a TensorBoard event file there (see package tfevents).
	EventsDir string

	// FromStep is the last step a resumed run keeps (0: a new run): the
	// event file begins with a session start at the step after it, so
	// that TensorBoard drops what an earlier process recorded past it.
	FromStep int64

	// Restart, for a run that starts over in a directory an earlier run
	// recorded in, begins the event file with a session start at step 1,
	// so that TensorBoard drops the earlier run's steps.
	Restart bool
}

// Writer writes records as JSON lines, and to a TensorBoard event file
// when asked. It is not safe for concurrent use.
type Writer struct {
	w      io.Writer
	opts   WriterOptions
	name   string
	events *tfevents.Writer // nil: none
}

// NewWriter returns a Writer that writes to w; name names w in errors.
func NewWriter(w io.Writer, name string, opts WriterOptions) *Writer {
	return &Writer{w: w, opts: opts, name: name}
}

// Create opens the file at path for appending, creating it if needed, and
// returns a Writer to it (and to a new event file in opts.EventsDir, if
// set). Close closes the files.
func Create(path string, opts WriterOptions) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	w := NewWriter(f, path, opts)
	if opts.EventsDir != "" {
		first := int64(0)
		if opts.FromStep > 0 || opts.Restart {
			first = opts.FromStep + 1
		}
		if w.events, err = tfevents.Create(opts.EventsDir, first); err != nil {
			f.Close()
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	return w, nil
}

// Write writes r as one line.
func (w *Writer) Write(r Record) error {
	b, err := r.MarshalJSON()
	if err != nil {
		return fmt.Errorf("metrics: %s: step %d: %w", w.name, r.Step, err)
	}
	if _, err := w.w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("metrics: %s: %w", w.name, err)
	}
	if s, ok := w.w.(interface{ Sync() error }); ok && w.opts.Sync {
		if err := s.Sync(); err != nil {
			return fmt.Errorf("metrics: %s: %w", w.name, err)
		}
	}
	if w.events != nil {
		if err := w.events.Scalars(r.Step, r.Values); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
		if err := w.events.Flush(); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
	}
	return nil
}

// Close closes the destination if it is an io.Closer, and the event file.
func (w *Writer) Close() error {
	if w.events != nil {
		if err := w.events.Close(); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
	}
	if c, ok := w.w.(io.Closer); ok {
		if err := c.Close(); err != nil {
			return fmt.Errorf("metrics: %s: %w", w.name, err)
		}
	}
	return nil
}

// Read reads the metrics file at path.
func Read(path string) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	defer f.Close()
	return ReadFrom(f, path)
}

// ReadFrom reads records from r, one JSON object per line; name names r in
// errors. Blank lines are ignored. A malformed line is a *jsonl.LineError
// ("name:line: what is wrong"); so is a line that is not valid UTF-8 or is
// longer than jsonl.DefaultMaxLine bytes.
func ReadFrom(r io.Reader, name string) ([]Record, error) {
	jr := jsonl.NewReader(r, name)
	var recs []Record
	for {
		line, lineNo, err := jr.Next()
		if err == io.EOF {
			return recs, nil
		}
		if err != nil {
			return recs, err
		}
		var rec Record
		if perr := rec.UnmarshalJSON(line); perr != nil {
			return recs, &jsonl.LineError{Name: name, Line: lineNo, Err: perr}
		}
		recs = append(recs, rec)
	}
}

// Truncate cuts the metrics file at path back to the records of steps up
// to step, as a run resumed from the checkpoint of that step must, so that
// the steps it repeats are not recorded twice. A last line cut short (the
// run was killed while writing it) is dropped too; a damaged line before
// it is an error naming the file and the line, and the file is left as it
// was. The file is rewritten atomically, the kept lines byte for byte; a
// missing file is no error. It returns the number of lines dropped.
func Truncate(path string, step int64) (dropped int, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("metrics: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("metrics: %w", err)
	}
	var kept bytes.Buffer
	jr := jsonl.NewReader(f, path)
	for {
		line, lineNo, rerr := jr.Next()
		if rerr == io.EOF {
			break
		}
		cut := !jr.Terminated() && jr.Offset() == st.Size()
		var rec Record
		if rerr == nil {
			rerr = rec.UnmarshalJSON(line)
			if rerr != nil {
				rerr = &jsonl.LineError{Name: path, Line: lineNo, Err: rerr}
			}
		}
		switch {
		case cut && rerr != nil: // the line a killed run was writing
			dropped++
		case rerr != nil:
			return 0, fmt.Errorf("metrics: %w", rerr)
		case rec.Step > step:
			dropped++
		default:
			kept.Write(line)
			kept.WriteByte('\n')
		}
	}
	if dropped == 0 && int64(kept.Len()) == st.Size() {
		return 0, nil
	}
	if err := outfile.WriteFile(path, kept.Bytes(), 0o644); err != nil {
		return 0, fmt.Errorf("metrics: %w", err)
	}
	return dropped, nil
}
