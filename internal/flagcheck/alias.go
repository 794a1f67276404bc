package flagcheck

import (
	"fmt"
	"math"
	"strconv"

	"github.com/spf13/pflag"
)

// Alias registers old as a deprecated spelling of the flag name that fs
// already has: both set the same value, old is hidden from --help, and
// using it (on the command line or in a recipe) prints a one-line notice
// naming the spelling to use. It panics if fs has no flag name.
func Alias(fs *pflag.FlagSet, old, name string) {
	f := fs.Lookup(name)
	if f == nil {
		panic(fmt.Sprintf("flagcheck: alias --%s of --%s, which %s does not have", old, name, fs.Name()))
	}
	fs.Var(f.Value, old, f.Usage)
	if err := fs.MarkDeprecated(old, fmt.Sprintf("use --%s", name)); err != nil {
		panic(err) // the flag was just added
	}
}

// Warmup is the value of a --warmup flag: the fraction of the steps spent
// warming the learning rate up, in [0, 1), as in every trainer. For
// scripts written when train sft counted its warm-up in steps, a whole
// number ≥ 1 is still taken as a number of steps, with a notice.
type Warmup struct {
	text  string
	frac  float64
	steps int // > 0: the deprecated count of steps
}

// NewWarmup returns a Warmup of fraction frac.
func NewWarmup(frac float64) *Warmup {
	return &Warmup{text: strconv.FormatFloat(frac, 'g', -1, 64), frac: frac}
}

// Set implements pflag.Value.
func (w *Warmup) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil || math.IsNaN(v) || v < 0:
		return fmt.Errorf("want a fraction of the steps in [0, 1)")
	case v < 1:
		w.frac, w.steps = v, 0
	case v == math.Trunc(v) && v <= math.MaxInt32:
		w.frac, w.steps = 0, int(v)
	default:
		return fmt.Errorf("want a fraction of the steps in [0, 1) (or, deprecated, a whole number of steps)")
	}
	w.text = s
	return nil
}

// String implements pflag.Value: the value as given.
func (w *Warmup) String() string { return w.text }

// Type implements pflag.Value.
func (w *Warmup) Type() string { return "fraction" }

// Steps returns the warm-up's length in steps of a run of total steps, and
// a notice to print when it was given the deprecated way ("" otherwise).
func (w *Warmup) Steps(total int) (int, string) {
	if w.steps > 0 {
		return w.steps, fmt.Sprintf("--warmup %d: a count of steps is deprecated; --warmup is a fraction of the steps (here %.4g)", w.steps, float64(w.steps)/float64(max(total, 1)))
	}
	return int(math.Ceil(w.frac*float64(total) - 1e-9)), "" // as rl.PrefOptions.WarmupFrac, without rounding noise
}
