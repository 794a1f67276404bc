package jsonl

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// readAll returns the lines and numbers Next gives until the end or the
// first error.
func readAll(r *Reader) (lines []string, nums []int, err error) {
	for {
		l, n, err := r.Next()
		if err == io.EOF {
			return lines, nums, nil
		}
		if err != nil {
			return lines, nums, err
		}
		lines, nums = append(lines, string(l)), append(nums, n)
	}
}

func TestReader(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		max       int
		lines     []string
		nums      []int
		wantErr   error  // nil: no error
		errSubstr string // what the error must say
		cut       bool   // the last line read has no newline
	}{
		{"lines and blanks", "{\"a\":1}\n\n  \n{\"b\":2}\r\n", 0, []string{`{"a":1}`, `{"b":2}`}, []int{1, 4}, nil, "", false},
		{"cut last line", "{\"a\":1}\n{\"b\":", 0, []string{`{"a":1}`, `{"b":`}, []int{1, 2}, nil, "", true},
		{"empty", "", 0, nil, nil, nil, "", false},
		{"invalid UTF-8", "{\"a\":\"ok\"}\n{\"a\":\"\xff\xfe\"}\n", 0, []string{`{"a":"ok"}`}, []int{1}, ErrInvalidUTF8, "in.jsonl:2: invalid UTF-8 at byte 7", false},
		{"overlong line", "{\"a\":1}\n" + `{"a":"` + strings.Repeat("x", 100) + "\"}\n", 64, []string{`{"a":1}`}, []int{1}, ErrLineTooLong, "in.jsonl:2: line too long: longer than the cap of 64 bytes", false},
		{"overlong last line, no newline", strings.Repeat("x", 65), 64, nil, nil, ErrLineTooLong, "in.jsonl:1:", false},
		{"at the cap", strings.Repeat("x", 64) + "\r\n", 64, []string{strings.Repeat("x", 64)}, []int{1}, nil, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReader(strings.NewReader(tc.in), "in.jsonl")
			r.SetMaxLine(tc.max)
			lines, nums, err := readAll(r)
			if strings.Join(lines, "|") != strings.Join(tc.lines, "|") || len(nums) != len(tc.nums) {
				t.Errorf("lines %q %v, want %q %v", lines, nums, tc.lines, tc.nums)
			}
			for i := range nums {
				if i < len(tc.nums) && nums[i] != tc.nums[i] {
					t.Errorf("line numbers %v, want %v", nums, tc.nums)
				}
			}
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), tc.errSubstr) {
				t.Errorf("error %q does not say %q", err, tc.errSubstr)
			}
			if err == nil && len(lines) > 0 && r.Terminated() == tc.cut {
				t.Errorf("Terminated() = %v, want %v", r.Terminated(), !tc.cut)
			}
		})
	}
}

// TestReaderGoesOnAfterOverlong checks that an overlong line is skipped in
// bounded memory and the next line is read.
func TestReaderGoesOnAfterOverlong(t *testing.T) {
	in := strings.Repeat("y", 1<<20) + "\n{\"ok\":1}\n"
	r := NewReader(strings.NewReader(in), "big.jsonl")
	r.SetMaxLine(1000)
	if _, _, err := r.Next(); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("first line: %v, want ErrLineTooLong", err)
	}
	if cap(r.buf) > 1<<17 {
		t.Errorf("the reader held %d bytes for an overlong line", cap(r.buf))
	}
	l, n, err := r.Next()
	if err != nil || string(l) != `{"ok":1}` || n != 2 {
		t.Errorf("after the overlong line: %q line %d, %v", l, n, err)
	}
	if r.Offset() != int64(len(in)) {
		t.Errorf("Offset %d, want %d", r.Offset(), len(in))
	}
}
