// Command train is turnwise's single binary: every job (tokenizing,
// benchmarking, training, evaluation) is a subcommand.
//
//	train <subcommand> [flags]
//
// Run "train help" for the list of subcommands and "train <subcommand> --help"
// for the flags of one.
package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/turnwise/turnwise/internal/flagcheck"
	"github.com/turnwise/turnwise/internal/recipe"
)

// command is one subcommand: its one-line summary and the function that runs
// it with the arguments that follow its name.
type command struct {
	summary string
	run     func(args []string, stdin io.Reader, stdout, stderr io.Writer) error
}

// commands returns the table of subcommands. Each subcommand lives in its own
// file of this package and registers itself here.
func commands() map[string]command {
	return map[string]command{
		"bench":         {"benchmark every op, a LoRA training step and generation; report against peers; gate on kernel regressions", runBench},
		"actor":         {"SWEET-RL actor: turn-wise DPO on best-of-N candidates ranked by the critic's advantage", runActor},
		"completion":    {"print a shell completion script: train completion bash|zsh|fish", runCompletion},
		"collectives":   {"check every collective across the ranks of a job and print all-reduce bandwidth (Gloo on cpu, NCCL on cuda)", runCollectives},
		"critic-check":  {"print the critic check of a critic over a train demo run's model, on its family's held-out tasks", runCriticCheck},
		"critic":        {"SWEET-RL critic: Bradley–Terry on trajectory pairs, with the ground truth in its prompt", runCritic},
		"demo":          {"the whole SWEET-RL pipeline on a built-in task family, with a table of held-out success", runDemo},
		"eval":          {"play held-out tasks and report pass rate and success (frontend: mean CLIP cosine, win rate) with 95% confidence intervals", runEval},
		"family-stats":  {"a built-in task family's statistics from its scripted dialogues alone: scripted success, imitation of the successes, optimum, harmful turns", runFamilyStats},
		"export":        {"turn a model, or an adapter on its base, into a merged Hugging Face directory or a GGUF file (f32, f16, bf16)", runExport},
		"generate":      {"continue a prompt with a model (greedy, temperature, top-k, top-p)", runGenerate},
		"info":          {"print a model's architecture and parameter counts", runInfo},
		"launch":        {"start a subcommand once per rank, as torchrun does: train launch --nproc-per-node N -- <subcommand> <flags>", runLaunch},
		"mtdpo":         {"the multi-turn DPO baseline: DPO over whole trajectories", runMTDPO},
		"plan":          {"print the memory a training or inference job needs", runPlan},
		"plot":          {"draw loss and learning-rate curves from a metrics JSONL file as SVG", runPlot},
		"rft":           {"the rejection fine-tuning baseline: SFT on successful trajectories", runRFT},
		"rollout":       {"play K episodes per task with a local model and score them", runRollout},
		"score":         {"per-token log-probabilities of sequences, as JSON lines", runScore},
		"score-answers": {"score final answers of ColBench backend tasks with the sandboxed Python evaluator", runScoreAnswers},
		"serve":         {"serve a model and adapter behind the OpenAI API (chat and text completions, streaming, batching)", runServe},
		"sft":           {"supervised fine-tuning, or training from scratch on the built-in corpus", runSFT},
		"tokenize":      {"encode text to token ids, decode ids, or render a chat", runTokenize},
		"version":       {"print what this binary was built from: version, commit, Go version, build tags, CUDA toolkit", runVersion},
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run dispatches to a subcommand and turns its error into an exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || (args[0] == "help" && len(args) == 1) {
		usage(stdout, cmds)
		return 0
	}
	if args[0] == "help" {
		// train help X prints X's help (train X --help) on standard output.
		name := strings.Join(args[1:], " ")
		if name == "help" {
			writeHelp(stdout, name, helps()[name])
			return 0
		}
		c, ok := cmds[args[1]]
		if !ok || len(args) > 3 || (len(args) == 3 && name != "bench report" && name != "bench profile") {
			fmt.Fprintf(stderr, "train help: no subcommand %q\n\n", name)
			usage(stderr, cmds)
			return 2
		}
		c.run(append(args[2:], "--help"), strings.NewReader(""), stdout, stdout)
		return 0
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "train: unknown subcommand %q\n\n", args[0])
		usage(stderr, cmds)
		return 2
	}
	err := c.run(args[1:], stdin, stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, pflag.ErrHelp):
		return 0
	default:
		fmt.Fprintf(stderr, "train %s: %v\n", args[0], err)
		return 1
	}
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: train <subcommand> [flags]\n\nsubcommands:")
	for _, n := range slices.Sorted(maps.Keys(cmds)) {
		fmt.Fprintf(w, "  %-14s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nRun \"train help <subcommand>\" (or \"train <subcommand> --help\") for its description,\nexamples and flags; \"train completion bash|zsh|fish\" prints a shell completion script.")
}

// newFlags returns a flag set for a subcommand that reports errors instead of
// exiting, so that run decides the exit status, with --config (recipe.Parse)
// and the subcommand's help (helps) as its usage. Given a *flagCapture as
// stderr it records the flag set there, for the completion scripts.
func newFlags(name string, stderr io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet("train "+name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = usageFunc(name, fs, stderr)
	if c, ok := stderr.(*flagCapture); ok {
		c.fs = fs
	}
	recipe.Register(fs)
	return fs
}

// parse parses a subcommand's flags (see parseArgs); an argument that is
// not a flag is an error.
func parse(fs *pflag.FlagSet, args []string) error {
	if err := parseArgs(fs, args); err != nil || fs.NArg() == 0 {
		return err
	}
	return fmt.Errorf("unexpected arguments %q (%s takes flags only)", fs.Args(), fs.Name())
}

// parseArgs parses a subcommand's flags, --config's recipe included, and
// checks the ranges of the numeric ones (flagcheck), leaving the arguments
// that follow them to the subcommands that take some (files, or a
// subcommand to launch).
func parseArgs(fs *pflag.FlagSet, args []string) error {
	if err := recipe.Parse(fs, args); err != nil {
		return err
	}
	return flagcheck.Check(fs)
}
