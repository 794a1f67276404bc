package sweetrl

import "fmt"

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
