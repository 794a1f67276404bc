package jsonl

import (
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
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

// FuzzReader checks the Reader against a plain model of it — split the
// input at newlines, drop one "\r" before each, skip blank lines, refuse
// lines over the cap and lines that are not UTF-8 — at caps small enough
// that the fuzzer reaches them, and that Offset ends at the input's length.
func FuzzReader(f *testing.F) {
	for _, seed := range []string{
		"", "\n", "{}\n", "{\"a\":1}\r\n\n  \n{}", "abcdef\nab\n", "\xe2\x82\n\xff\n", "x\r\r\n", strings.Repeat("y", 70) + "\nz",
	} {
		f.Add(seed, uint8(4))
	}
	f.Fuzz(func(t *testing.T, in string, capb uint8) {
		max := int(capb%64) + 1
		r := NewReader(strings.NewReader(in), "in.jsonl")
		r.SetMaxLine(max)
		segs := strings.Split(in, "\n")
		if segs[len(segs)-1] == "" {
			segs = segs[:len(segs)-1]
		}
		for i, seg := range segs {
			want := strings.TrimSuffix(seg, "\r")
			var wantErr error
			switch {
			case len(want) > max:
				wantErr = ErrLineTooLong
			case strings.TrimSpace(want) == "":
				continue
			case !utf8.ValidString(want):
				wantErr = ErrInvalidUTF8
			}
			line, n, err := r.Next()
			if n != i+1 {
				t.Fatalf("Next gave line %d (err %v), want line %d", n, err, i+1)
			}
			if wantErr != nil {
				var le *Error
				if !errors.Is(err, wantErr) || !errors.As(err, &le) || le.Line != i+1 {
					t.Fatalf("line %d: err %v, want an *Error wrapping %v", i+1, err, wantErr)
				}
				continue
			}
			if err != nil || string(line) != want {
				t.Fatalf("line %d: %q, %v; want %q", i+1, line, err, want)
			}
			if r.Terminated() != (i < len(segs)-1 || strings.HasSuffix(in, "\n")) {
				t.Fatalf("line %d: Terminated %v", i+1, r.Terminated())
			}
		}
		if _, _, err := r.Next(); err != io.EOF {
			t.Fatalf("after the last line: %v, want io.EOF", err)
		}
		if r.Offset() != int64(len(in)) {
			t.Fatalf("Offset %d at the end of %d bytes", r.Offset(), len(in))
		}
	})
}
