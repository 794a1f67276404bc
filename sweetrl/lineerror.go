package sweetrl

import (
	"errors"
	"fmt"

	"github.com/turnwise/turnwise/internal/jsonl"
)

// LineError is a problem with one line of an input file.
type LineError struct {
	// Name names the file.
	Name string
	// Line is the 1-based line number.
	Line int
	// Err says what is wrong.
	Err error
}

// Error returns "name:line: what is wrong".
func (e *LineError) Error() string {
	return fmt.Sprintf("%s:%d: %v", e.Name, e.Line, e.Err)
}

// Unwrap returns the underlying error.
func (e *LineError) Unwrap() error { return e.Err }

// lineErr turns the line errors of a jsonl.Reader into *LineError; other
// errors are returned as they are.
func lineErr(err error) error {
	var je *jsonl.Error
	if errors.As(err, &je) {
		return &LineError{Name: je.Name, Line: je.Line, Err: je.Err}
	}
	return err
}
