package main

import (
	"github.com/spf13/pflag"

	"github.com/turnwise/turnwise/model/llama"
)

// loraTargets is the value of a --lora-targets flag: the projections a
// fresh LoRA adapter adapts, checked as the flag is parsed
// (llama.ParseLoRATargets), so that an unknown name is refused, naming
// it, before any model loads.
type loraTargets struct {
	text    string
	targets []string // nil until Set
}

// registerLoRATargets adds --lora-targets to fs and returns its value;
// its Targets are nil (every projection) unless the flag is given.
func registerLoRATargets(fs *pflag.FlagSet) *loraTargets {
	t := &loraTargets{text: llama.AllLinear}
	fs.Var(t, "lora-targets", "projections a fresh LoRA adapter adapts, comma-separated: q, k, v, o, gate, up, down, their PEFT names (q_proj, …), or all-linear; written to adapter_config.json's target_modules")
	return t
}

// Set implements pflag.Value.
func (t *loraTargets) Set(s string) error {
	targets, err := llama.ParseLoRATargets(s)
	if err != nil {
		return err
	}
	t.text, t.targets = s, targets
	return nil
}

// String implements pflag.Value: the flag's text as given.
func (t *loraTargets) String() string { return t.text }

// Type implements pflag.Value.
func (t *loraTargets) Type() string { return "names" }

// Targets returns the chosen projections, in llama.AllProjections' order;
// nil when the flag was not given (every projection).
func (t *loraTargets) Targets() []string { return t.targets }

// Chosen reports whether the flag was given.
func (t *loraTargets) Chosen() bool { return t.targets != nil }
