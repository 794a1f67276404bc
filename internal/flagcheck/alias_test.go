package flagcheck

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestAlias(t *testing.T) {
	tests := []struct {
		args       []string
		want       string
		wantNotice bool
	}{
		{nil, "runs/sft", false},
		{[]string{"--out", "a"}, "a", false},
		{[]string{"--run-dir", "b"}, "b", true},
	}
	for _, tc := range tests {
		var log bytes.Buffer
		fs := pflag.NewFlagSet("sft", pflag.ContinueOnError)
		fs.SetOutput(&log)
		out := fs.String("out", "runs/sft", "directory")
		Alias(fs, "run-dir", "out")
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if *out != tc.want {
			t.Errorf("%v: --out is %q, want %q", tc.args, *out, tc.want)
		}
		notice := log.String()
		if tc.wantNotice != (notice != "") || tc.wantNotice && (strings.Count(notice, "\n") != 1 || !strings.Contains(notice, "--run-dir") || !strings.Contains(notice, "use --out")) {
			t.Errorf("%v: notice %q", tc.args, notice)
		}
		var help bytes.Buffer
		fs.SetOutput(&help)
		fs.PrintDefaults()
		if strings.Contains(help.String(), "run-dir") || !strings.Contains(help.String(), "--out") {
			t.Errorf("help lists the deprecated spelling or not the new one:\n%s", help.String())
		}
	}
}

func TestWarmup(t *testing.T) {
	tests := []struct {
		in         string
		total      int
		want       int
		wantNotice bool
		err        bool
	}{
		{"0.05", 400, 20, false, false},
		{"0", 400, 0, false, false},
		{"0.03", 100, 3, false, false},
		{"0.03", 50, 2, false, false}, // rounded up, as the preference trainers do
		{"20", 400, 20, true, false},  // the deprecated count of steps
		{"1", 400, 1, true, false},
		{"1.5", 400, 0, false, true},
		{"-0.1", 400, 0, false, true},
		{"NaN", 400, 0, false, true},
		{"x", 400, 0, false, true},
	}
	for _, tc := range tests {
		w := NewWarmup(0.05)
		err := w.Set(tc.in)
		if tc.err {
			if err == nil {
				t.Errorf("--warmup %s accepted", tc.in)
			}
			continue
		}
		if err != nil {
			t.Errorf("--warmup %s: %v", tc.in, err)
			continue
		}
		steps, notice := w.Steps(tc.total)
		if steps != tc.want || (notice != "") != tc.wantNotice || w.String() != tc.in {
			t.Errorf("--warmup %s of %d steps: %d steps, notice %q, text %q; want %d steps, a notice %v", tc.in, tc.total, steps, notice, w.String(), tc.want, tc.wantNotice)
		}
	}
	// Check leaves the value to Set: a count of steps is not refused as a
	// fraction out of range.
	fs := pflag.NewFlagSet("sft", pflag.ContinueOnError)
	fs.Var(NewWarmup(0.05), "warmup", "")
	if err := fs.Parse([]string{"--warmup", "20"}); err != nil || Check(fs) != nil {
		t.Errorf("--warmup 20 in steps: %v, %v", err, Check(fs))
	}
}
