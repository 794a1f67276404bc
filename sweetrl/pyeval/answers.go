package pyeval

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/turnwise/turnwise/internal/jsonl"
	"github.com/turnwise/turnwise/sweetrl"
)

// Item is one answer to score and where it came from.
type Item struct {
	// Index is the task's row (index lines, ground truths) or the
	// trajectory's number in its file.
	Index int
	// Task is the task the answer answers.
	Task sweetrl.Task
	// Answer is the answer as written, fences and all.
	Answer string
	// Row is, for a trajectory matched against a tasks file, that task's
	// row; -1 otherwise.
	Row int
	// Stored is the reward a trajectory file holds for the answer; nil for
	// other sources.
	Stored *float64
}

// GroundTruthItems makes each task's own ground truth its answer.
func GroundTruthItems(tasks []sweetrl.Task) []Item {
	items := make([]Item, len(tasks))
	for i, t := range tasks {
		items[i] = Item{Index: i, Task: t, Answer: t.GroundTruth, Row: -1}
	}
	return items
}

// AnswersFormat tells the two formats of an answers file apart by the keys
// of its first non-blank line: "trajectories" (JSON lines in the
// reference's layout, with "task") or "index" (lines {"index": N, "answer":
// "..."}). An empty file is "index". A name ending in ".zst" is read
// through zstd.
func AnswersFormat(path string) (string, error) {
	rc, err := sweetrl.OpenTrajectories(path)
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

// LoadAnswers reads the answers file at path in either format (see
// AnswersFormat). tasks, read from the file tasksPath, index the index
// lines; for trajectories, which carry their tasks, they may be empty, and
// when given every trajectory's task must be among them (matched by
// problem_description). Errors name the file and line.
func LoadAnswers(path string, tasks []sweetrl.Task, tasksPath string) ([]Item, error) {
	format, err := AnswersFormat(path)
	if err != nil {
		return nil, err
	}
	rc, err := sweetrl.OpenTrajectories(path)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if format == "index" {
		if tasksPath == "" {
			return nil, fmt.Errorf("%s holds index lines: pass the tasks they index with --tasks", path)
		}
		return readIndexAnswers(rc, path, tasks, tasksPath)
	}
	rows := map[string]int{}
	for i := len(tasks) - 1; i >= 0; i-- {
		rows[tasks[i].ProblemDescription] = i // rows are distinct: LoadBackendTasks refuses duplicates
	}
	var items []Item
	err = sweetrl.ScanTrajectories(rc, path, func(tr sweetrl.Trajectory, _ int) error {
		stored := tr.Reward
		it := Item{Index: len(items), Task: tr.Task, Answer: tr.Answer, Row: -1, Stored: &stored}
		if len(tr.Task.TestCases) == 0 {
			return errors.New(`its task has no "test_cases" to score the answer with (is the task missing?)`)
		}
		if tasksPath != "" {
			row, ok := rows[tr.Task.ProblemDescription]
			if !ok {
				return fmt.Errorf("its task is not in %s (no task has its problem_description)", tasksPath)
			}
			it.Row = row
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
func readIndexAnswers(r io.Reader, name string, tasks []sweetrl.Task, tasksPath string) ([]Item, error) {
	var items []Item
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
func parseIndexAnswer(line []byte, tasks []sweetrl.Task, tasksPath string) (Item, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(line, &obj); err != nil || obj == nil {
		return Item{}, errors.New("not a JSON object")
	}
	rawIndex, ok := obj["index"]
	if !ok {
		return Item{}, errors.New(`missing "index"`)
	}
	var index int
	if err := json.Unmarshal(rawIndex, &index); err != nil || bytes.Equal(bytes.TrimSpace(rawIndex), []byte("null")) {
		return Item{}, fmt.Errorf(`"index" %s is not an integer`, rawIndex)
	}
	if index < 0 || index >= len(tasks) {
		return Item{}, fmt.Errorf(`"index" %d is out of range: %s has %d tasks`, index, tasksPath, len(tasks))
	}
	rawAnswer, ok := obj["answer"]
	if !ok {
		return Item{}, errors.New(`missing "answer"`)
	}
	var answer *string
	if err := json.Unmarshal(rawAnswer, &answer); err != nil || answer == nil {
		return Item{}, errors.New(`"answer" is not a string`)
	}
	return Item{Index: index, Task: tasks[index], Answer: *answer, Row: -1}, nil
}

// Record is the JSON form of one scored answer.
type Record struct {
	Index        int          `json:"index"`
	Task         *int         `json:"task,omitempty"`
	Passed       int          `json:"passed"`
	Total        int          `json:"total"`
	Reward       float64      `json:"reward"`
	Success      bool         `json:"success"`
	Note         string       `json:"note,omitempty"`
	StoredReward *float64     `json:"stored_reward,omitempty"`
	Tests        []TestRecord `json:"tests"`
}

// TestRecord is the JSON form of one test's outcome.
type TestRecord struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Error  string `json:"error,omitempty"`
}

// NewRecord is the JSON form of one scored answer.
func NewRecord(it Item, r Result) Record {
	rec := Record{
		Index: it.Index, Passed: r.Passed, Total: r.Total, Reward: r.Reward,
		Success: r.Success(), Note: r.Note, StoredReward: it.Stored,
		Tests: make([]TestRecord, len(r.Tests)),
	}
	if it.Row >= 0 {
		row := it.Row
		rec.Task = &row
	}
	for i, t := range r.Tests {
		rec.Tests[i] = TestRecord{Name: t.Name, Passed: t.Passed, Error: t.Error}
	}
	return rec
}

// AnswerLine is the text line of one scored answer, e.g. "task 3: 7/10
// passed, reward 0.700" or "trajectory 5 (task 2): 0/10 passed, reward
// 0.000 (stored 1.000) — outputs differ (every test)".
func AnswerLine(it Item, r Result) string {
	var b strings.Builder
	if it.Stored != nil { // a trajectory
		fmt.Fprintf(&b, "trajectory %d", it.Index)
		if it.Row >= 0 {
			fmt.Fprintf(&b, " (task %d)", it.Row)
		}
	} else {
		fmt.Fprintf(&b, "task %d", it.Index)
	}
	fmt.Fprintf(&b, ": %d/%d passed, reward %.3f", r.Passed, r.Total, r.Reward)
	if it.Stored != nil && !sameReward(*it.Stored, r.Reward) {
		fmt.Fprintf(&b, " (stored %.3f)", *it.Stored)
	}
	if r.Note != "" {
		b.WriteString(" — " + r.Note)
	}
	return b.String()
}

// sameReward compares a stored reward with a computed one, allowing for the
// float formatting of the file.
func sameReward(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// Report writes the scores of items (results[i] is items[i]'s): one line
// per answer (AnswerLine) or, with asJSON, one JSON object per answer
// (Record), on out; then the summary — pass rate, success rate, stored
// rewards that differ, the Python, scope, comparison and isolation — on
// out, or on summary with asJSON. elapsed is the scoring time reported.
func (e *Evaluator) Report(out, summary io.Writer, items []Item, results []Result, elapsed time.Duration, asJSON bool) error {
	if len(items) != len(results) || len(items) == 0 {
		panic(fmt.Sprintf("pyeval: Report of %d items with %d results", len(items), len(results)))
	}
	bw := bufio.NewWriter(out)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	var sum float64
	successes, differ := 0, 0
	for i, r := range results {
		it := items[i]
		sum += r.Reward
		if r.Success() {
			successes++
		}
		if it.Stored != nil && !sameReward(*it.Stored, r.Reward) {
			differ++
		}
		if asJSON {
			if err := enc.Encode(NewRecord(it, r)); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintln(bw, AnswerLine(it, r))
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if !asJSON {
		summary = out
	}
	bw = bufio.NewWriter(summary)
	n := len(results)
	fmt.Fprintf(bw, "scored %d answers in %.1fs\n", n, elapsed.Seconds())
	fmt.Fprintf(bw, "pass rate (mean reward, the reference's tests passed): %.4f\n", sum/float64(n))
	fmt.Fprintf(bw, "success rate (reward 1): %.4f (%d of %d)\n", float64(successes)/float64(n), successes, n)
	if items[0].Stored != nil {
		fmt.Fprintf(bw, "stored rewards that differ from these: %d of %d\n", differ, n)
	}
	py := fmt.Sprintf("python: %s %s", e.Python, e.Version)
	if e.opts.StdlibOnly {
		py += " (standard library only)"
	}
	fmt.Fprintf(bw, "%s\n", py)
	fmt.Fprintf(bw, "scope: %s\n", e.Scope())
	fmt.Fprintf(bw, "compare: %s\n", e.CompareMode())
	fmt.Fprintf(bw, "isolation:\n")
	for _, l := range e.Isolation.Lines() {
		fmt.Fprintf(bw, "  %s\n", l)
	}
	return bw.Flush()
}

// LoadItems reads what is to be scored: the tasks of tasksPath ("": none)
// and either each task's own ground truth (groundTruth) or the answers of
// answersPath (LoadAnswers). hide lists the files read, for Options.Hide;
// no answer at all is an error naming the file.
func LoadItems(tasksPath, answersPath string, groundTruth bool) (items []Item, hide []string, err error) {
	var tasks []sweetrl.Task
	if tasksPath != "" {
		if tasks, err = sweetrl.LoadBackendTasks(tasksPath); err != nil {
			return nil, nil, err
		}
		hide = append(hide, tasksPath)
	}
	src := tasksPath
	if groundTruth {
		items = GroundTruthItems(tasks)
	} else {
		if items, err = LoadAnswers(answersPath, tasks, tasksPath); err != nil {
			return nil, nil, err
		}
		hide, src = append(hide, answersPath), answersPath
	}
	if len(items) == 0 {
		return nil, nil, fmt.Errorf("%s: no answers to score", src)
	}
	return items, hide, nil
}

// ScoreItems scores items with an Evaluator of opts and writes its report
// (Evaluator.Report) on out and summary.
func ScoreItems(ctx context.Context, opts Options, items []Item, out, summary io.Writer, asJSON bool) error {
	ev, err := New(ctx, opts)
	if err != nil {
		return err
	}
	defer ev.Close()
	ts := make([]sweetrl.Task, len(items))
	answers := make([]string, len(items))
	for i, it := range items {
		ts[i], answers[i] = it.Task, it.Answer
	}
	start := time.Now()
	results, err := ev.Evaluate(ctx, ts, answers)
	if err != nil {
		return err
	}
	if err := ev.Report(out, summary, items, results, time.Since(start), asJSON); err != nil {
		return err
	}
	return ev.Close()
}
