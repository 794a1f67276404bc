// Package jsonl reads JSON-lines input one line at a time, with the checks
// every reader of the project's JSONL files shares: a line may be at most a
// fixed number of bytes long (so that a small file cannot exhaust memory,
// as a JSON decoder holds several times a line's size) and must be valid
// UTF-8 (which encoding/json would otherwise replace silently). Errors name
// the input and the line.
package jsonl

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// DefaultMaxLine is the longest line, in bytes, a Reader accepts unless told
// otherwise: far above a ColBench task or trajectory (tens of kilobytes) and
// small enough that decoding one cannot exhaust memory.
const DefaultMaxLine = 16 << 20

// ErrLineTooLong and ErrInvalidUTF8 are what a *LineError wraps when a line is
// longer than the cap or is not valid UTF-8.
var (
	ErrLineTooLong = errors.New("line too long")
	ErrInvalidUTF8 = errors.New("invalid UTF-8")
)

// LineError is a problem with one line of an input file: the one type of
// every file:line error of the project (data.LineError and
// sweetrl.LineError are this type under the names their readers document).
type LineError struct {
	// Name names the file.
	Name string
	// Line is the 1-based line number.
	Line int
	// Err says what is wrong.
	Err error
}

// Error returns "name:line: what is wrong".
func (e *LineError) Error() string { return fmt.Sprintf("%s:%d: %v", e.Name, e.Line, e.Err) }

// Unwrap returns what is wrong.
func (e *LineError) Unwrap() error { return e.Err }

// Reader reads the lines of a JSONL input. It is not safe for concurrent
// use.
type Reader struct {
	br         *bufio.Reader
	name       string
	max        int
	line       int   // number of the line last read
	off        int64 // bytes consumed, through the line last read
	terminated bool  // the line last read ended with '\n'
	buf        []byte
}

// NewReader returns a Reader of r, named name in errors, whose lines may be
// DefaultMaxLine bytes long at most.
func NewReader(r io.Reader, name string) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 64<<10), name: name, max: DefaultMaxLine}
}

// SetMaxLine sets the longest line accepted, in bytes, newline excluded
// (n ≤ 0: DefaultMaxLine).
func (r *Reader) SetMaxLine(n int) {
	if n <= 0 {
		n = DefaultMaxLine
	}
	r.max = n
}

// Next returns the next line that is not blank (without its line ending)
// and its 1-based number; after the last line the error is io.EOF. A line
// longer than the cap is a *LineError wrapping ErrLineTooLong, which names the
// cap; its bytes are skipped without being held, so that reading may go on.
// A line that is not valid UTF-8 is a *LineError wrapping ErrInvalidUTF8,
// naming the offset of the first bad byte. A failure of the input itself
// is returned wrapped, naming the line. The returned slice is valid until
// the next call.
func (r *Reader) Next() (line []byte, lineNo int, err error) {
	for {
		line, err := r.readLine()
		if err != nil {
			return nil, r.line, err
		}
		if line == nil {
			return nil, r.line, io.EOF
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if !utf8.Valid(line) {
			return nil, r.line, &LineError{Name: r.name, Line: r.line,
				Err: fmt.Errorf("%w at byte %d of the line", ErrInvalidUTF8, firstInvalid(line)+1)}
		}
		return line, r.line, nil
	}
}

// Terminated reports whether the line Next last returned ended with a
// newline; false means the input ended inside it (a cut line, when the
// input was being appended to).
func (r *Reader) Terminated() bool { return r.terminated }

// Offset returns the number of bytes of input consumed through the line
// Next last returned (or the line whose error it returned), its newline
// included.
func (r *Reader) Offset() int64 { return r.off }

// readLine reads one line, whatever it holds; nil at the end of the input.
func (r *Reader) readLine() ([]byte, error) {
	r.buf = r.buf[:0]
	r.line++
	n := 0 // bytes of this line consumed
	for {
		chunk, err := r.br.ReadSlice('\n')
		n += len(chunk)
		r.off += int64(len(chunk))
		if len(r.buf)+len(chunk) > r.max+2 { // room for "\r\n"
			// Too long: skip the rest of the line without keeping it.
			r.buf = r.buf[:0]
			for errors.Is(err, bufio.ErrBufferFull) {
				chunk, err = r.br.ReadSlice('\n')
				r.off += int64(len(chunk))
			}
			if err != nil && err != io.EOF {
				return nil, fmt.Errorf("%s:%d: reading: %w", r.name, r.line, err)
			}
			r.terminated = err == nil
			return nil, r.tooLong()
		}
		r.buf = append(r.buf, chunk...)
		switch {
		case err == nil:
			r.terminated = true
			return r.trim()
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF:
			if n == 0 {
				r.line--
				return nil, nil
			}
			r.terminated = false
			return r.trim()
		default:
			return nil, fmt.Errorf("%s:%d: reading: %w", r.name, r.line, err)
		}
	}
}

// trim returns the buffered line without its line ending, checking its
// length against the cap.
func (r *Reader) trim() ([]byte, error) {
	b := bytes.TrimSuffix(r.buf, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	if len(b) > r.max {
		return nil, r.tooLong()
	}
	if len(b) == 0 {
		return []byte{}, nil // not nil: nil means the end of the input
	}
	return b, nil
}

// tooLong is the error of a line over the cap.
func (r *Reader) tooLong() error {
	return &LineError{Name: r.name, Line: r.line,
		Err: fmt.Errorf("%w: longer than the cap of %d bytes", ErrLineTooLong, r.max)}
}

// firstInvalid returns the offset of the first byte of b that does not
// start a valid UTF-8 sequence.
func firstInvalid(b []byte) int {
	for i := 0; i < len(b); {
		c, size := utf8.DecodeRune(b[i:])
		if c == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(b)
}
