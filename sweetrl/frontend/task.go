package frontend

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/turnwise/turnwise/sweetrl"
)

// ReadTasks reads ColBench frontend design tasks from r, one JSON object per
// line; name names r in errors. Blank lines are ignored.
//
// Each row must have a non-empty string problem_description and a
// non-empty string ground_truth (the target page's HTML); other fields are
// kept in the task's Extra. Two rows with the same problem_description are
// refused, since trajectories name their task by it. A malformed row ends
// the read with a *sweetrl.LineError naming the file and the line; so does
// a line that is not valid UTF-8 or is longer than jsonl.DefaultMaxLine
// bytes.
func ReadTasks(r io.Reader, name string) ([]sweetrl.Task, error) {
	return sweetrl.ReadTaskRows(r, name, parseTask)
}

// parseTask parses and checks one frontend task row.
func parseTask(line []byte) (sweetrl.Task, error) {
	var t sweetrl.Task
	if err := t.UnmarshalJSON(line); err != nil {
		return sweetrl.Task{}, err
	}
	if strings.TrimSpace(t.ProblemDescription) == "" {
		return sweetrl.Task{}, errors.New(`"problem_description" is missing or empty`)
	}
	if strings.TrimSpace(t.GroundTruth) == "" {
		return sweetrl.Task{}, errors.New(`"ground_truth" is missing or empty: a frontend task needs its target page`)
	}
	if len(t.TestCases) > 0 {
		return sweetrl.Task{}, errors.New(`"test_cases" in a frontend task: is this a backend file?`)
	}
	return t, nil
}

// LoadTasks reads the ColBench frontend design tasks of the JSONL file at
// path (see ReadTasks); errors name the file.
func LoadTasks(path string) ([]sweetrl.Task, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("loading frontend tasks: %w", err)
	}
	defer f.Close()
	return ReadTasks(f, path)
}
