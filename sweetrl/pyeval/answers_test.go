package pyeval

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/sweetrl"
)

// TestLoadAnswers reads both formats of an answers file and formats the
// lines of the report from them.
func TestLoadAnswers(t *testing.T) {
	dir := t.TempDir()
	tasks := []sweetrl.Task{doubleTask(), task("def g(x):\n    return x + 1\n", "g(1)")}
	tasks[1].ProblemDescription = "q"
	index := filepath.Join(dir, "answers.jsonl")
	if err := os.WriteFile(index, []byte("\n{\"index\": 1, \"answer\": \"def g(x): return x\", \"extra\": 3}\n{\"index\": 0, \"answer\": \"a\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	trajPath := filepath.Join(dir, "trajectories.jsonl.zst")
	trajs := []sweetrl.Trajectory{{Task: tasks[1], Answer: "b", Reward: 1,
		DialogueHistory: []sweetrl.Turn{{Role: sweetrl.RoleUser, Content: "q"}}}}
	if err := sweetrl.SaveTrajectories(trajPath, trajs); err != nil {
		t.Fatal(err)
	}
	stored := 1.0
	r := Result{Score: sweetrl.Score{Passed: 0, Total: 1, Note: "outputs differ (every test)"}, Tests: []TestResult{{Name: "test1", Error: "outputs differ"}}}
	tests := []struct {
		name, path, tasksPath string
		want                  []Item
		line                  string // AnswerLine of the first item with r
	}{
		{"index lines", index, "tasks.jsonl",
			[]Item{{Index: 1, Task: tasks[1], Answer: "def g(x): return x", Row: -1}, {Index: 0, Task: tasks[0], Answer: "a", Row: -1}},
			"task 1: 0/1 passed, reward 0.000 — outputs differ (every test)"},
		{"trajectories with tasks", trajPath, "tasks.jsonl",
			[]Item{{Index: 0, Task: tasks[1], Answer: "b", Row: 1, Stored: &stored}},
			"trajectory 0 (task 1): 0/1 passed, reward 0.000 (stored 1.000) — outputs differ (every test)"},
		{"trajectories alone", trajPath, "",
			[]Item{{Index: 0, Task: tasks[1], Answer: "b", Row: -1, Stored: &stored}},
			"trajectory 0: 0/1 passed, reward 0.000 (stored 1.000) — outputs differ (every test)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := tasks
			if tt.tasksPath == "" {
				ts = nil
			}
			items, err := LoadAnswers(tt.path, ts, tt.tasksPath)
			if err != nil {
				t.Fatal(err)
			}
			if len(items) != len(tt.want) {
				t.Fatalf("%d items, want %d", len(items), len(tt.want))
			}
			for i, it := range items {
				w := tt.want[i]
				if it.Index != w.Index || it.Answer != w.Answer || it.Row != w.Row || it.Task.ProblemDescription != w.Task.ProblemDescription ||
					(it.Stored == nil) != (w.Stored == nil) || (it.Stored != nil && *it.Stored != *w.Stored) {
					t.Errorf("item %d = %+v, want %+v", i, it, w)
				}
			}
			if got := AnswerLine(items[0], r); got != tt.line {
				t.Errorf("AnswerLine = %q, want %q", got, tt.line)
			}
			rec := NewRecord(items[0], r)
			if rec.Index != items[0].Index || (rec.Task != nil) != (items[0].Row >= 0) || len(rec.Tests) != 1 || rec.Tests[0].Error != "outputs differ" {
				t.Errorf("NewRecord = %+v", rec)
			}
		})
	}
	if _, err := LoadAnswers(index, nil, ""); err == nil || !strings.Contains(err.Error(), "pass the tasks they index with --tasks") {
		t.Errorf("index lines without tasks: error %v", err)
	}
	if got := GroundTruthItems(tasks); len(got) != 2 || got[1].Answer != tasks[1].GroundTruth || got[1].Index != 1 || got[1].Row != -1 {
		t.Errorf("GroundTruthItems = %+v", got)
	}
}
