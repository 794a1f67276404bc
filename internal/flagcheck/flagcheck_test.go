package flagcheck

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		args []string
		want string // "" for no error
	}{
		{nil, ""},
		{[]string{"--temperature", "0", "--top-p", "1", "--lora-rank", "0"}, ""},
		{[]string{"--temperature", "-1"}, "--temperature -1: want a value ≥ 0"},
		{[]string{"--top-p", "2"}, "--top-p 2: want a value in (0, 1]"},
		{[]string{"--top-p", "0"}, "--top-p 0: want a value in (0, 1]"},
		{[]string{"--top-k", "-1"}, "--top-k -1: want a value ≥ 0"},
		{[]string{"--top-k", "0"}, ""},
		{[]string{"--top-k", "40"}, ""},
		{[]string{"--lora-rank", "-2"}, "--lora-rank -2: want a value ≥ 0"},
		{[]string{"--data-fraction", "1.5"}, "--data-fraction 1.5: want a value in (0, 1]"},
		{[]string{"--data-fraction", "1"}, ""},
		{[]string{"--warmup", "1"}, "--warmup 1: want a value in [0, 1)"},
		{[]string{"--warmup", "0.03"}, ""},
		{[]string{"--steps", "-1"}, "--steps -1: want a value ≥ 0"},
		{[]string{"--beta", "NaN"}, "--beta NaN"},
	}
	for _, tc := range tests {
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		fs.Float32("temperature", 1, "")
		fs.Float32("top-p", 1, "")
		fs.Int("top-k", 0, "")
		fs.Int("lora-rank", 16, "")
		fs.Float64("data-fraction", 0.1, "")
		fs.Float64("warmup", 0.03, "")
		fs.Int("steps", 10, "")
		fs.Float64("beta", 0.1, "")
		fs.String("name", "x", "")
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		err := Check(fs)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
	// An integer --warmup counts steps.
	fs := pflag.NewFlagSet("sft", pflag.ContinueOnError)
	fs.Int("warmup", 20, "")
	if err := fs.Parse([]string{"--warmup", "100"}); err != nil || Check(fs) != nil {
		t.Errorf("an integer --warmup of 100 steps: %v", Check(fs))
	}
}
