package sweetrl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/turnwise/turnwise/internal/jsonerr"
	"github.com/turnwise/turnwise/internal/jsonl"
)

// TestCase is one unit test of a backend programming task: a Python call
// expression whose value, under the agent's answer, is compared with its
// value under the ground truth.
type TestCase struct {
	// Name is the test's key in the task row, e.g. "test3".
	Name string
	// Call is the Python call expression, e.g. "f([1, 2], 3)".
	Call string
}

// Task is one ColBench task row. Backend programming tasks use every field;
// frontend design tasks have no test cases.
type Task struct {
	// ProblemDescription is the vague request the human opens the dialogue
	// with; for backend tasks it ends with the function's signature.
	ProblemDescription string
	// HiddenInformation is what only the human simulator sees: for backend
	// tasks, the reference Python function.
	HiddenInformation string
	// GroundTruth is the reference answer used for scoring and, during
	// training, as the critic's training-time information.
	GroundTruth string
	// TestCases are the unit tests in the order the row gives them, which
	// in ColBench is the numeric order test1, test2, …, test10.
	TestCases []TestCase
	// Extra holds the row's fields this package does not know, kept so that
	// they are written back unchanged.
	Extra map[string]json.RawMessage
}

// Task field names in the ColBench files.
const (
	keyProblem   = "problem_description"
	keyHidden    = "hidden_information"
	keyTruth     = "ground_truth"
	keyTestCases = "test_cases"
)

// UnmarshalJSON decodes a task row. Missing fields are left empty; fields of
// the wrong type are errors.
func (t *Task) UnmarshalJSON(b []byte) error {
	obj, err := decodeObject(b)
	if err != nil {
		return err
	}
	var nt Task
	if nt.ProblemDescription, _, err = stringField(obj, keyProblem); err != nil {
		return err
	}
	if nt.HiddenInformation, _, err = stringField(obj, keyHidden); err != nil {
		return err
	}
	if nt.GroundTruth, _, err = stringField(obj, keyTruth); err != nil {
		return err
	}
	if raw, ok := obj[keyTestCases]; ok {
		if nt.TestCases, err = decodeTestCases(raw); err != nil {
			return err
		}
	}
	nt.Extra = extraFields(obj, keyProblem, keyHidden, keyTruth, keyTestCases)
	*t = nt
	return nil
}

// MarshalJSON encodes the task as its row: the known fields (omitted when
// empty), then Extra. Test cases are written in their order.
func (t Task) MarshalJSON() ([]byte, error) {
	var fs []field
	add := func(k, v string) {
		if v != "" {
			fs = append(fs, field{k, v})
		}
	}
	add(keyProblem, t.ProblemDescription)
	add(keyHidden, t.HiddenInformation)
	add(keyTruth, t.GroundTruth)
	if t.TestCases != nil {
		tc, err := encodeTestCases(t.TestCases)
		if err != nil {
			return nil, err
		}
		fs = append(fs, field{keyTestCases, json.RawMessage(tc)})
	}
	return encodeObject(fs, t.Extra)
}

// decodeTestCases decodes the test_cases object, keeping its keys in the
// order they appear (as a Python dict does); a key given twice keeps its
// first position and its last value.
func decodeTestCases(raw json.RawMessage) ([]TestCase, error) {
	obj, err := decodeObject(raw)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", keyTestCases, err)
	}
	for name := range obj {
		if _, _, err := stringField(obj, name); err != nil {
			return nil, fmt.Errorf("%q: test %w", keyTestCases, err)
		}
	}
	// raw is a valid JSON object: walk its keys in order.
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // '{'
		return nil, fmt.Errorf("%q: %w", keyTestCases, err)
	}
	tcs := make([]TestCase, 0, len(obj))
	index := make(map[string]int, len(obj))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%q: %w", keyTestCases, err)
		}
		name, _ := tok.(string)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, fmt.Errorf("%q: %w", keyTestCases, jsonerr.Reword(err))
		}
		if _, seen := index[name]; seen {
			continue
		}
		call, _, _ := stringField(obj, name) // checked above; the last value wins
		index[name] = len(tcs)
		tcs = append(tcs, TestCase{Name: name, Call: call})
	}
	return tcs, nil
}

// encodeTestCases writes test cases as a JSON object in slice order.
func encodeTestCases(tcs []TestCase) ([]byte, error) {
	fs := make([]field, len(tcs))
	for i, tc := range tcs {
		fs[i] = field{tc.Name, tc.Call}
	}
	return encodeObject(fs, nil)
}

// ReadBackendTasks reads ColBench backend programming tasks from r, one JSON
// object per line; name names r in errors. Blank lines are ignored.
//
// Each row must have a non-empty string problem_description, string
// hidden_information and ground_truth, and a test_cases object of at least
// one string call expression. Two rows with the same problem_description
// are refused, since trajectories name their task by it. A malformed row
// ends the read with a *LineError naming the file and the line; so does a
// line that is not valid UTF-8 or is longer than jsonl.DefaultMaxLine
// bytes.
func ReadBackendTasks(r io.Reader, name string) ([]Task, error) {
	return ReadTaskRows(r, name, parseBackendTask)
}

// ReadTaskRows reads tasks from r, one JSON object per line, each made and
// checked by parse; name names r in errors. Blank lines are ignored. Two
// rows with the same problem_description are refused, since trajectories
// name their task by it. An error of parse, a line that is not valid UTF-8
// or is longer than jsonl.DefaultMaxLine bytes ends the read with a
// *LineError naming the file and the line; the tasks before it are
// returned with it.
func ReadTaskRows(r io.Reader, name string, parse func(line []byte) (Task, error)) ([]Task, error) {
	var tasks []Task
	lineOf := map[string]int{} // problem_description → its line
	jr := jsonl.NewReader(r, name)
	for {
		line, lineNo, err := jr.Next()
		if err == io.EOF {
			return tasks, nil
		}
		if err != nil {
			return tasks, err // a line too long or not UTF-8 is a *LineError already
		}
		t, err := parse(line)
		if err != nil {
			return tasks, &LineError{Name: name, Line: lineNo, Err: err}
		}
		if first, dup := lineOf[t.ProblemDescription]; dup {
			return tasks, &LineError{Name: name, Line: lineNo,
				Err: fmt.Errorf("the same %q as line %d: tasks must be told apart by it", keyProblem, first)}
		}
		lineOf[t.ProblemDescription] = lineNo
		tasks = append(tasks, t)
	}
}

// parseBackendTask parses and checks one backend task row.
func parseBackendTask(line []byte) (Task, error) {
	var t Task
	if err := t.UnmarshalJSON(line); err != nil {
		return Task{}, err
	}
	obj, _ := decodeObject(line) // cannot fail: UnmarshalJSON succeeded
	for _, k := range []string{keyProblem, keyHidden, keyTruth, keyTestCases} {
		if _, ok := obj[k]; !ok {
			return Task{}, fmt.Errorf("missing %q", k)
		}
	}
	if strings.TrimSpace(t.ProblemDescription) == "" {
		return Task{}, fmt.Errorf("%q is empty", keyProblem)
	}
	if len(t.TestCases) == 0 {
		return Task{}, errors.New(`"test_cases" has no tests`)
	}
	return t, nil
}

// LoadBackendTasks reads the ColBench backend programming tasks of the JSONL
// file at path (see ReadBackendTasks); errors name the file.
func LoadBackendTasks(path string) ([]Task, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("loading backend tasks: %w", err)
	}
	defer f.Close()
	return ReadBackendTasks(f, path)
}
