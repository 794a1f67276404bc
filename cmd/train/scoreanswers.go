package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/turnwise/turnwise/internal/jsonl"
	"github.com/turnwise/turnwise/internal/zstdfile"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/sweetrl/pyeval"
)

const scoreAnswersUsage = `usage: train score-answers --tasks FILE --answers FILE [flags]
       train score-answers --tasks FILE --ground-truth [flags]

Scores final answers to ColBench backend programming tasks as the SWEET-RL
reference does: an answer containing a forbidden string (import os, sudo,
exit( …) scores 0; otherwise markdown fences are stripped and, for each of
the task's unit tests, the ground truth's output and the answer's (under a
1 s limit) are compared; the reward is the fraction of tests passed. Each
answer runs in its own sandboxed Python process (see the end of the report
for the isolation this machine allows).

--answers is one of two formats, told apart by the first non-blank line:

  trajectories   JSON lines in the reference layout ({"task": ...,
                 "dialogue_history": ..., "answer": ..., "reward": ...};
                 zstd-compressed when the name ends in .zst). Each answer
                 is scored against the task its trajectory carries, as the
                 reference's evaluation does; --tasks is optional, and when
                 given every trajectory's task must be in it (matched by
                 problem_description) and its row is reported.
  index lines    {"index": N, "answer": "..."}, N being the task's 0-based
                 row in --tasks.

--ground-truth scores every task's own ground truth as its answer.

Output: one line per answer (its index, tests passed, reward and, for a 0,
why), then the pass rate (mean reward: the reference's "tests passed"), the
success rate (reward 1), the Python that ran the answers and the isolation.
With --json, one JSON object per answer goes to standard output and the
summary to standard error.

flags:
`

// answerItem is one answer to score and where it came from.
type answerItem struct {
	index  int          // task row, or trajectory number for trajectories
	task   sweetrl.Task // the task it answers
	answer string
	row    int      // trajectories with --tasks: the matched task row; -1 otherwise
	stored *float64 // trajectories: the reward stored in the file
}

// answerRecord is the JSON form of one scored answer.
type answerRecord struct {
	Index        int          `json:"index"`
	Task         *int         `json:"task,omitempty"`
	Passed       int          `json:"passed"`
	Total        int          `json:"total"`
	Reward       float64      `json:"reward"`
	Success      bool         `json:"success"`
	Note         string       `json:"note,omitempty"`
	StoredReward *float64     `json:"stored_reward,omitempty"`
	Tests        []testRecord `json:"tests"`
}

// testRecord is the JSON form of one test's outcome.
type testRecord struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Error  string `json:"error,omitempty"`
}

// runScoreAnswers implements "train score-answers".
func runScoreAnswers(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("score-answers", stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, scoreAnswersUsage)
		fs.PrintDefaults()
	}
	tasksPath := fs.String("tasks", "", "ColBench backend tasks (JSONL)")
	answersPath := fs.String("answers", "", "answers: trajectories or index lines (JSONL, optionally .zst)")
	groundTruth := fs.Bool("ground-truth", false, "score each task's ground truth as its answer")
	workers := fs.Int("workers", 0, "answers scored at once (default: the number of CPUs)")
	python := fs.String("python", pyeval.DefaultPython, "Python interpreter: a path, or a name looked up on PATH")
	moduleScope := fs.Bool("module-scope", false, "run programs as modules, not inside a function as the reference does (top-level imports and helpers then work)")
	stdlibOnly := fs.Bool("stdlib-only", false, "run Python with -S: answers can import only the standard library")
	timeout := fs.Duration("timeout", 0, "wall-clock limit per answer (default: tests × --test-timeout + 5s)")
	testTimeout := fs.Duration("test-timeout", pyeval.DefaultTestTimeout, "limit on the answer's part of one test (the reference's is 1s)")
	memory := fs.Int64("memory", pyeval.DefaultMemory>>20, "address-space limit per answer, MiB")
	asJSON := fs.Bool("json", false, "write one JSON object per answer; the summary goes to standard error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected arguments %q", fs.Args())
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
	}

	var tasks []sweetrl.Task
	if *tasksPath != "" {
		var err error
		if tasks, err = sweetrl.LoadBackendTasks(*tasksPath); err != nil {
			return err
		}
	}
	var items []answerItem
	if *groundTruth {
		for i, t := range tasks {
			items = append(items, answerItem{index: i, task: t, answer: t.GroundTruth, row: -1})
		}
	} else {
		var err error
		if items, err = loadAnswers(*answersPath, tasks, *tasksPath); err != nil {
			return err
		}
	}
	if len(items) == 0 {
		src := *answersPath
		if *groundTruth {
			src = *tasksPath
		}
		return fmt.Errorf("%s: no answers to score", src)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ev, err := pyeval.New(ctx, pyeval.Options{
		Python:      *python,
		StdlibOnly:  *stdlibOnly,
		ModuleScope: *moduleScope,
		Workers:     *workers,
		TestTimeout: *testTimeout,
		Timeout:     *timeout,
		Memory:      *memory << 20,
	})
	if err != nil {
		return err
	}
	ts := make([]sweetrl.Task, len(items))
	answers := make([]string, len(items))
	for i, it := range items {
		ts[i], answers[i] = it.task, it.answer
	}
	start := time.Now()
	results, err := ev.Evaluate(ctx, ts, answers)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)

	bw := bufio.NewWriter(stdout)
	var sum float64
	successes, differ := 0, 0
	for i, r := range results {
		it := items[i]
		sum += r.Reward
		if r.Success() {
			successes++
		}
		if it.stored != nil && !sameReward(*it.stored, r.Reward) {
			differ++
		}
		if *asJSON {
			if err := writeJSON(bw, record(it, r)); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintln(bw, answerLine(it, r))
	}
	if err := bw.Flush(); err != nil {
		return err
	}

	summary := stdout
	if *asJSON {
		summary = stderr
	}
	n := len(results)
	w := &errWriter{w: summary}
	w.printf("scored %d answers in %.1fs\n", n, elapsed.Seconds())
	w.printf("pass rate (mean reward, the reference's tests passed): %.4f\n", sum/float64(n))
	w.printf("success rate (reward 1): %.4f (%d of %d)\n", float64(successes)/float64(n), successes, n)
	if items[0].stored != nil {
		w.printf("stored rewards that differ from these: %d of %d\n", differ, n)
	}
	py := fmt.Sprintf("python: %s %s", ev.Python, ev.Version)
	if *stdlibOnly {
		py += " (standard library only)"
	}
	w.printf("%s\n", py)
	w.printf("scope: %s\n", ev.Scope())
	w.printf("isolation:\n")
	for _, l := range ev.Isolation.Lines() {
		w.printf("  %s\n", l)
	}
	return w.err
}

// answerLine is the text line of one scored answer.
func answerLine(it answerItem, r pyeval.Result) string {
	var b strings.Builder
	if it.stored != nil { // a trajectory
		fmt.Fprintf(&b, "trajectory %d", it.index)
		if it.row >= 0 {
			fmt.Fprintf(&b, " (task %d)", it.row)
		}
	} else {
		fmt.Fprintf(&b, "task %d", it.index)
	}
	fmt.Fprintf(&b, ": %d/%d passed, reward %.3f", r.Passed, r.Total, r.Reward)
	if it.stored != nil && !sameReward(*it.stored, r.Reward) {
		fmt.Fprintf(&b, " (stored %.3f)", *it.stored)
	}
	if r.Note != "" {
		b.WriteString(" — " + r.Note)
	}
	return b.String()
}

// record is the JSON form of one scored answer.
func record(it answerItem, r pyeval.Result) answerRecord {
	rec := answerRecord{
		Index: it.index, Passed: r.Passed, Total: r.Total, Reward: r.Reward,
		Success: r.Success(), Note: r.Note, StoredReward: it.stored,
		Tests: make([]testRecord, len(r.Tests)),
	}
	if it.row >= 0 {
		row := it.row
		rec.Task = &row
	}
	for i, t := range r.Tests {
		rec.Tests[i] = testRecord{Name: t.Name, Passed: t.Passed, Error: t.Error}
	}
	return rec
}

// sameReward compares a stored reward with a computed one, allowing for the
// float formatting of the file.
func sameReward(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// errWriter writes formatted text and keeps the first error.
type errWriter struct {
	w   io.Writer
	err error
}

func (w *errWriter) printf(format string, args ...any) {
	if w.err == nil {
		_, w.err = fmt.Fprintf(w.w, format, args...)
	}
}

// openAnswers opens an answers file, decompressing it when its name ends
// in ".zst".
func openAnswers(path string) (io.ReadCloser, error) { return zstdfile.Open(path, "answers") }

// answersFormat tells the two answer formats apart by the keys of the first
// non-blank line: "trajectories" or "index". An empty file is "index".
func answersFormat(path string) (string, error) {
	rc, err := openAnswers(path)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	jr := jsonl.NewReader(rc, path)
	line, lineNo, err := jr.Next()
	if err == io.EOF {
		return "index", nil
	}
	if err != nil {
		return "", err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(line, &obj); err != nil || obj == nil {
		return "", &sweetrl.LineError{Name: path, Line: lineNo, Err: errors.New("not a JSON object")}
	}
	_, hasTask := obj["task"]
	_, hasIndex := obj["index"]
	switch {
	case hasTask && !hasIndex:
		return "trajectories", nil
	case hasIndex && !hasTask:
		return "index", nil
	}
	return "", &sweetrl.LineError{Name: path, Line: lineNo,
		Err: errors.New(`neither a trajectory (with "task") nor an index line (with "index")`)}
}

// loadAnswers reads the answers file at path in either format. tasks (from
// the file tasksPath) may be empty for trajectories.
func loadAnswers(path string, tasks []sweetrl.Task, tasksPath string) ([]answerItem, error) {
	format, err := answersFormat(path)
	if err != nil {
		return nil, err
	}
	if format == "index" {
		if tasksPath == "" {
			return nil, fmt.Errorf("%s holds index lines: pass the tasks they index with --tasks", path)
		}
		rc, err := openAnswers(path)
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		return readIndexAnswers(rc, path, tasks, tasksPath)
	}
	rows := map[string]int{}
	for i := len(tasks) - 1; i >= 0; i-- {
		rows[tasks[i].ProblemDescription] = i // rows are distinct: LoadBackendTasks refuses duplicates
	}
	rc, err := sweetrl.OpenTrajectories(path)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var items []answerItem
	err = sweetrl.ScanTrajectories(rc, path, func(tr sweetrl.Trajectory, _ int) error {
		stored := tr.Reward
		it := answerItem{index: len(items), task: tr.Task, answer: tr.Answer, row: -1, stored: &stored}
		if len(tr.Task.TestCases) == 0 {
			return errors.New(`its task has no "test_cases" to score the answer with (is the task missing?)`)
		}
		if tasksPath != "" {
			row, ok := rows[tr.Task.ProblemDescription]
			if !ok {
				return fmt.Errorf("its task is not in %s (no task has its problem_description)", tasksPath)
			}
			it.row = row
		}
		items = append(items, it)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return items, nil
}

// readIndexAnswers reads lines {"index": N, "answer": "..."} from r (named
// name in errors); N is a row of tasks.
func readIndexAnswers(r io.Reader, name string, tasks []sweetrl.Task, tasksPath string) ([]answerItem, error) {
	var items []answerItem
	jr := jsonl.NewReader(r, name)
	for {
		line, lineNo, err := jr.Next()
		if err == io.EOF {
			return items, nil
		}
		if err != nil {
			return nil, err
		}
		it, err := parseIndexAnswer(line, tasks, tasksPath)
		if err != nil {
			return nil, &sweetrl.LineError{Name: name, Line: lineNo, Err: err}
		}
		items = append(items, it)
	}
}

// parseIndexAnswer parses one index line. Fields other than index and
// answer are ignored.
func parseIndexAnswer(line []byte, tasks []sweetrl.Task, tasksPath string) (answerItem, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(line, &obj); err != nil || obj == nil {
		return answerItem{}, errors.New("not a JSON object")
	}
	rawIndex, ok := obj["index"]
	if !ok {
		return answerItem{}, errors.New(`missing "index"`)
	}
	var index int
	if err := json.Unmarshal(rawIndex, &index); err != nil || bytes.Equal(bytes.TrimSpace(rawIndex), []byte("null")) {
		return answerItem{}, fmt.Errorf(`"index" %s is not an integer`, rawIndex)
	}
	if index < 0 || index >= len(tasks) {
		return answerItem{}, fmt.Errorf(`"index" %d is out of range: %s has %d tasks`, index, tasksPath, len(tasks))
	}
	rawAnswer, ok := obj["answer"]
	if !ok {
		return answerItem{}, errors.New(`missing "answer"`)
	}
	var answer *string
	if err := json.Unmarshal(rawAnswer, &answer); err != nil || answer == nil {
		return answerItem{}, errors.New(`"answer" is not a string`)
	}
	return answerItem{index: index, task: tasks[index], answer: *answer, row: -1}, nil
}
