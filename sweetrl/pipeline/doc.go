// Package pipeline runs SWEET-RL and its baselines end to end on a built-in
// task family: the steps the train subcommands share (supervised
// fine-tuning, LoRA adapters, evaluation with confidence intervals), the
// critic check, validation on a split carved from the training tasks, and
// the demo (Run), whose stages can be reused from an earlier run.
package pipeline
