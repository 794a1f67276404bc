package sweetrl

import "github.com/turnwise/turnwise/internal/jsonl"

// LineError is a problem with one line of an input file: Name, the 1-based
// Line and Err, what is wrong. It is the one line-error type of the
// project, shared with data.LineError; the readers of this package return
// it for every malformed line, and so does the jsonl reader beneath them
// for a line too long or not UTF-8.
type LineError = jsonl.LineError
