// Package flagcheck checks the ranges of the numeric flags the project's
// subcommands share, by name, so that one spelling means one range in every
// subcommand and a bad value is refused before anything is loaded. It also
// holds the flag values the subcommands share (--lora-targets, --warmup)
// and the deprecated spellings of renamed flags (Alias).
package flagcheck

import (
	"fmt"
	"math"
	"strconv"

	"github.com/spf13/pflag"
)

// rule is the range of one flag's value.
type rule struct {
	lo, hi         float64 // bounds
	loOpen, hiOpen bool    // whether lo and hi themselves are excluded
	want           string  // the range in words, for the error
}

var (
	nonNegative = rule{lo: 0, hi: math.Inf(1), hiOpen: true, want: "≥ 0"}
	positive    = rule{lo: 0, loOpen: true, hi: math.Inf(1), hiOpen: true, want: "> 0"}
	fraction    = rule{lo: 0, hi: 1, loOpen: true, want: "in (0, 1]"}
	share       = rule{lo: 0, hi: 1, hiOpen: true, want: "in [0, 1)"}
	unitClosed  = rule{lo: 0, hi: 1, want: "in [0, 1]"}
)

// rules maps a flag's name to its range. A float "warmup" is a fraction of
// the steps and an integer one a number of steps (see ruleFor).
var rules = map[string]rule{
	"temperature": nonNegative, "top-p": fraction, "top-k": nonNegative, "lora-rank": nonNegative,
	"data-fraction": fraction, "eval-fraction": share, "min-lr-ratio": unitClosed,
	"lr": nonNegative, "critic-lr": nonNegative, "actor-lr": nonNegative, "rft-lr": nonNegative, "mtdpo-lr": nonNegative,
	"weight-decay": nonNegative, "clip": nonNegative, "beta": positive, "nll": nonNegative,
	"steps": nonNegative, "epochs": positive, "critic-epochs": positive, "sft-steps": positive,
	"batch": positive, "batch-tokens": positive, "micro-batches": positive, "k": positive,
	"candidates": positive, "pairs-per-turn": positive, "max-len": positive, "chunk": positive,
	"max-batch": positive, "sim-max-new": positive,
	"threads": nonNegative, "workers": nonNegative, "sim-workers": nonNegative, "sim-retries": nonNegative, "sim-max-failures": nonNegative,
	"limit": nonNegative, "keep": nonNegative, "eval-every": nonNegative, "checkpoint-every": nonNegative,
	"peak-tflops": nonNegative, "lora-alpha": nonNegative, "lora-dropout": share,
}

// ruleFor returns the range of flag f, if it has one.
func ruleFor(f *pflag.Flag) (rule, bool) {
	if _, ok := f.Value.(*Warmup); ok {
		return rule{}, false // Warmup.Set checks it
	}
	if f.Name == "warmup" {
		if f.Value.Type() == "int" {
			return nonNegative, true
		}
		return share, true
	}
	r, ok := rules[f.Name]
	return r, ok
}

// Check returns an error naming the first flag of fs whose value is out
// of its range, such as "--top-p 2: want a value in (0, 1]".
func Check(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		r, ok := ruleFor(f)
		if err != nil || !ok {
			return
		}
		v, perr := strconv.ParseFloat(f.Value.String(), 64)
		if perr != nil {
			return // not a number: its own parser has said so
		}
		if math.IsNaN(v) || v < r.lo || v > r.hi || (r.loOpen && v == r.lo) || (r.hiOpen && v == r.hi) {
			err = fmt.Errorf("--%s %s: want a value %s", f.Name, f.Value.String(), r.want)
		}
	})
	return err
}
