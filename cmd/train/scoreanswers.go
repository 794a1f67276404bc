package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/turnwise/turnwise/sweetrl/pyeval"
)

// runScoreAnswers implements "train score-answers".
func runScoreAnswers(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("score-answers", stderr)
	tasksPath := fs.String("tasks", "", "ColBench backend tasks (JSONL)")
	answersPath := fs.String("answers", "", "answers: trajectories or index lines (JSONL, optionally .zst)")
	groundTruth := fs.Bool("ground-truth", false, "score each task's ground truth as its answer")
	workers := fs.Int("workers", 0, "answers scored at once (default: the number of CPUs)")
	python := fs.String("python", pyeval.DefaultPython, "Python interpreter: a path, or a name looked up on PATH")
	moduleScope := fs.Bool("module-scope", false, "run programs as modules, not inside a function as the reference does (top-level imports and helpers then work)")
	stdlibOnly := fs.Bool("stdlib-only", false, "run Python with -S: answers can import only the standard library")
	compare := fs.String("compare", "isolated", "where outputs are compared: isolated (separate processes, outputs as data) or in-process (the reference's ==, forgeable)")
	firstUID := fs.Int("first-uid", pyeval.DefaultFirstUID, "as root: first of the user ids answers run under (two per worker)")
	timeout := fs.Duration("timeout", 0, "wall-clock limit per answer (default: tests × --test-timeout + 5s)")
	testTimeout := fs.Duration("test-timeout", pyeval.DefaultTestTimeout, "limit on the answer's part of one test (the reference's is 1s)")
	memory := fs.Int64("memory", pyeval.DefaultMemory>>20, "address-space limit per answer, MiB")
	asJSON := fs.Bool("json", false, "write one JSON object per answer; the summary goes to standard error")
	if err := parse(fs, args); err != nil {
		return err
	}
	mode, err := pyeval.ParseCompare(*compare)
	switch {
	case err != nil:
		return fmt.Errorf("--compare: %w", err)
	case *groundTruth && *answersPath != "":
		return errors.New("--ground-truth and --answers cannot be combined")
	case !*groundTruth && *answersPath == "":
		return errors.New("nothing to score: pass --answers FILE, or --ground-truth")
	case *groundTruth && *tasksPath == "":
		return errors.New("--ground-truth needs --tasks FILE")
	case *memory <= 0:
		return fmt.Errorf("--memory %d: want a positive number of MiB", *memory)
	case *testTimeout <= 0:
		return fmt.Errorf("--test-timeout %v: want a positive duration", *testTimeout)
	case *timeout < 0:
		return fmt.Errorf("--timeout %v: want a positive duration, or 0 for the default", *timeout)
	case *firstUID <= 0:
		return fmt.Errorf("--first-uid %d: want a positive user id", *firstUID)
	}

	items, hide, err := pyeval.LoadItems(*tasksPath, *answersPath, *groundTruth)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return pyeval.ScoreItems(ctx, pyeval.Options{
		Python:      *python,
		StdlibOnly:  *stdlibOnly,
		ModuleScope: *moduleScope,
		Workers:     *workers,
		TestTimeout: *testTimeout,
		Timeout:     *timeout,
		Memory:      *memory << 20,
		Compare:     mode,
		FirstUID:    *firstUID,
		Hide:        hide,
	}, items, stdout, stderr, *asJSON)
}
