package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/internal/jsonl"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/sweetrl/pyeval"
)

// scoreTasks are three small backend tasks, one per line.
const scoreTasks = `{"problem_description": "double it. The signature of the function is: def f(x)", "hidden_information": "def f(x):\n    return 2 * x\n", "ground_truth": "def f(x):\n    return 2 * x\n", "test_cases": {"test1": "f(1)", "test2": "f(2)"}}

{"problem_description": "add one. The signature of the function is: def g(x)", "hidden_information": "def g(x):\n    return x + 1\n", "ground_truth": "def g(x):\n    return x + 1\n", "test_cases": {"test1": "g(1)", "test2": "g(5)", "test3": "g(-1)", "test4": "g(0)"}}
{"problem_description": "square it. The signature of the function is: def h(x)", "hidden_information": "def h(x):\n    return x * x\n", "ground_truth": "def h(x):\n    return x * x\n", "test_cases": {"test1": "h(3)"}}
`

// needPython skips the test when there is no python3 to run answers.
func needPython(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skipf("no python3 on PATH (scripts/setup.sh installs it): %v", err)
	}
}

// writeFile writes content to name in a fresh directory and returns its
// path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// scoreAnswers runs "train score-answers" and returns its standard output
// and error.
func scoreAnswers(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := runScoreAnswers(args, strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), err
}

// decodeRecords parses --json output.
func decodeRecords(t *testing.T, out string) []pyeval.Record {
	t.Helper()
	var recs []pyeval.Record
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var r pyeval.Record
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("output %q: %v", out, err)
		}
		recs = append(recs, r)
	}
	return recs
}

func TestScoreAnswersIndexLines(t *testing.T) {
	needPython(t)
	dir := t.TempDir()
	tasks := writeFile(t, dir, "tasks.jsonl", scoreTasks)
	answers := writeFile(t, dir, "answers.jsonl", strings.Join([]string{
		`{"index": 1, "answer": "def g(x):\n    return 1 + x", "model": "ignored"}`,
		`{"index": 0, "answer": "def f(x):\n    return x"}`,
		``,
		`{"index": 2, "answer": "import os\ndef h(x):\n    return x * x"}`,
		`{"index": 0, "answer": "K = 2\ndef f(x):\n    return K * x"}`,
		`{"index": 2, "answer": "` + "```python\\ndef h(x):\\n    return x ** 2\\n```" + `"}`,
	}, "\n"))

	out, errOut, err := scoreAnswers(t, "--tasks", tasks, "--answers", answers, "--json", "--workers", "2")
	if err != nil {
		t.Fatal(err)
	}
	recs := decodeRecords(t, out)
	want := []struct {
		index          int
		passed, total  int
		note           string
		firstTestError string
	}{
		{1, 4, 4, "", ""},
		{0, 0, 2, "outputs differ (every test)", "outputs differ"},
		{2, 0, 1, `forbidden string "import os"`, "not run"},
		{0, 0, 2, "NameError: name 'K' is not defined", "NameError"},
		{2, 1, 1, "", ""},
	}
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d:\n%s", len(recs), len(want), out)
	}
	for i, w := range want {
		r := recs[i]
		if r.Index != w.index || r.Passed != w.passed || r.Total != w.total || !strings.Contains(r.Note, w.note) ||
			len(r.Tests) != w.total || !strings.Contains(r.Tests[0].Error, w.firstTestError) || r.Success != (w.passed == w.total) {
			t.Errorf("record %d: %+v, want %+v", i, r, w)
		}
		if r.Task != nil || r.StoredReward != nil {
			t.Errorf("record %d has trajectory fields: %+v", i, r)
		}
	}
	for _, s := range []string{"pass rate (mean reward, the reference's tests passed): 0.4000", "success rate (reward 1): 0.4000 (2 of 5)",
		"python: ", "scope: function (as the reference)", "isolation:", "network: "} {
		if !strings.Contains(errOut, s) {
			t.Errorf("summary on standard error lacks %q:\n%s", s, errOut)
		}
	}

	// Module scope lets the module constant through; text output.
	out, _, err = scoreAnswers(t, "--tasks", tasks, "--answers", answers, "--module-scope")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"task 1: 4/4 passed, reward 1.000\n",
		"task 0: 0/2 passed, reward 0.000 — outputs differ (every test)\n",
		`task 2: 0/1 passed, reward 0.000 — contains the forbidden string "import os"` + "\n",
		"task 0: 2/2 passed, reward 1.000\n",
		"pass rate (mean reward, the reference's tests passed): 0.6000\n",
		"success rate (reward 1): 0.6000 (3 of 5)\n",
		"scope: module\n",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
}

func TestScoreAnswersTrajectories(t *testing.T) {
	needPython(t)
	dir := t.TempDir()
	tasksPath := writeFile(t, dir, "tasks.jsonl", scoreTasks)
	tasks, err := sweetrl.LoadBackendTasks(tasksPath)
	if err != nil {
		t.Fatal(err)
	}
	traj := func(task sweetrl.Task, answer string, reward float64) sweetrl.Trajectory {
		return sweetrl.Trajectory{
			Task:            task,
			DialogueHistory: []sweetrl.Turn{{Role: sweetrl.RoleUser, Content: task.ProblemDescription}},
			Answer:          answer,
			Reward:          reward,
		}
	}
	// The trajectory's own task is what it is scored against: this one
	// carries a ground truth the tasks file does not have.
	own := tasks[2]
	own.GroundTruth = "def h(x):\n    return x * x * x\n"
	trajs := []sweetrl.Trajectory{
		traj(tasks[2], "def h(x):\n    return x * x", 1),
		traj(tasks[1], "def g(x):\n    return x + 1 if x > 0 else 0", 0.25),
		traj(own, "def h(x):\n    return x ** 3", 1),
	}
	path := filepath.Join(dir, "trajectories.jsonl.zst")
	if err := sweetrl.SaveTrajectories(path, trajs); err != nil {
		t.Fatal(err)
	}

	out, _, err := scoreAnswers(t, "--answers", path, "--json")
	if err != nil {
		t.Fatal(err)
	}
	recs := decodeRecords(t, out)
	if len(recs) != 3 {
		t.Fatalf("%d records:\n%s", len(recs), out)
	}
	wantPassed := []int{1, 3, 1}
	for i, r := range recs {
		if r.Index != i || r.Passed != wantPassed[i] || r.StoredReward == nil || *r.StoredReward != trajs[i].Reward || r.Task != nil {
			t.Errorf("record %d: %+v", i, r)
		}
	}

	out, _, err = scoreAnswers(t, "--answers", path, "--tasks", tasksPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"trajectory 0 (task 2): 1/1 passed, reward 1.000\n",
		"trajectory 1 (task 1): 3/4 passed, reward 0.750 (stored 0.250)\n",
		"trajectory 2 (task 2): 1/1 passed, reward 1.000\n",
		"stored rewards that differ from these: 1 of 3\n",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}

	// A trajectory whose task is not in the tasks file.
	other := writeFile(t, dir, "other.jsonl", strings.SplitN(scoreTasks, "\n", 2)[0]+"\n")
	if _, _, err := scoreAnswers(t, "--answers", path, "--tasks", other); err == nil ||
		!strings.Contains(err.Error(), "trajectories.jsonl.zst:1: its task is not in") || !strings.Contains(err.Error(), "other.jsonl") {
		t.Errorf("trajectory with an unknown task: error %v", err)
	}
}

func TestScoreAnswersGroundTruth(t *testing.T) {
	needPython(t)
	tasks := writeFile(t, t.TempDir(), "tasks.jsonl", scoreTasks)
	out, _, err := scoreAnswers(t, "--tasks", tasks, "--ground-truth", "--stdlib-only")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"task 0: 2/2 passed", "task 1: 4/4 passed", "task 2: 1/1 passed",
		"success rate (reward 1): 1.0000 (3 of 3)", "(standard library only)"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
}

func TestScoreAnswersErrors(t *testing.T) {
	needPython(t)
	dir := t.TempDir()
	tasks := writeFile(t, dir, "tasks.jsonl", scoreTasks)
	good := `{"index": 0, "answer": "def f(x):\n    return 2 * x"}`
	const noTasks = "-"
	tests := []struct {
		name    string
		answers string // written to answers.jsonl and passed when not empty
		tasks   string // --tasks (default: the three tasks; noTasks: left out)
		args    []string
		want    []string // substrings of the error
	}{
		{"malformed line", good + "\n\n{\"index\": 1, \"answer\": \n", "", nil, []string{"answers.jsonl:3:", "not a JSON object"}},
		{"index out of range", good + "\n{\"index\": 3, \"answer\": \"x\"}\n", "", nil, []string{"answers.jsonl:2:", "out of range", "has 3 tasks"}},
		{"index not an integer", "{\"index\": 1.5, \"answer\": \"x\"}\n", "", nil, []string{"answers.jsonl:1:", `"index" 1.5 is not an integer`}},
		{"answer not a string", "{\"index\": 1, \"answer\": 7}\n", "", nil, []string{"answers.jsonl:1:", `"answer" is not a string`}},
		{"missing answer", good + "\n{\"index\": 1}\n", "", nil, []string{"answers.jsonl:2:", `missing "answer"`}},
		{"unknown format", "\n{\"prompt\": \"x\"}\n", "", nil, []string{"answers.jsonl:2:", "neither a trajectory"}},
		{"first line not JSON", "index 0\n", "", nil, []string{"answers.jsonl:1:", "not a JSON object"}},
		{"bad trajectory", "{\"task\": {}, \"dialogue_history\": [], \"answer\": \"x\"}\n", "", nil, []string{"answers.jsonl:1:", `missing "reward"`}},
		{"trajectory without its task", "\n{\"task\": {}, \"dialogue_history\": [], \"answer\": \"x\", \"reward\": 0}\n", noTasks, nil, []string{"answers.jsonl:2:", `its task has no "test_cases"`}},
		{"invalid UTF-8", good + "\n{\"index\": 1, \"answer\": \"\xff\"}\n", "", nil, []string{"answers.jsonl:2:", "invalid UTF-8"}},
		{"invalid UTF-8 in the first line", "{\"index\": 1, \"answer\": \"\xc3\"}\n", "", nil, []string{"answers.jsonl:1:", "invalid UTF-8"}},
		{"overlong line", good + "\n{\"index\": 1, \"answer\": \"" + strings.Repeat("x", jsonl.DefaultMaxLine) + "\"}\n", "", nil, []string{"answers.jsonl:2:", fmt.Sprintf("longer than the cap of %d bytes", jsonl.DefaultMaxLine)}},
		{"duplicate task rows", good, "dup", nil, []string{"tasks.jsonl:3:", `the same "problem_description" as line 1`}},
		{"empty", "\n\n", "", nil, []string{"answers.jsonl: no answers"}},
		{"missing answers file", "", "", []string{"--answers", filepath.Join(dir, "nope.jsonl")}, []string{"nope.jsonl", "no such file"}},
		{"missing tasks file", good, filepath.Join(dir, "none.jsonl"), nil, []string{"none.jsonl", "no such file"}},
		{"index lines without tasks", good, noTasks, nil, []string{"pass the tasks they index with --tasks"}},
		{"nothing to score", "", "", nil, []string{"nothing to score"}},
		{"both", good, "", []string{"--ground-truth"}, []string{"cannot be combined"}},
		{"ground truth without tasks", "", noTasks, []string{"--ground-truth"}, []string{"--ground-truth needs --tasks"}},
		{"bad interpreter", good, "", []string{"--python", filepath.Join(dir, "python9")}, []string{"python9"}},
		{"bad memory", good, "", []string{"--memory", "0"}, []string{"--memory"}},
		{"stray argument", good, "", []string{"extra"}, []string{"unexpected arguments"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var args []string
			switch tt.tasks {
			case "":
				args = append(args, "--tasks", tasks)
			case noTasks:
			case "dup":
				first := strings.SplitN(scoreTasks, "\n", 2)[0]
				args = append(args, "--tasks", writeFile(t, t.TempDir(), "tasks.jsonl", first+"\n\n"+first+"\n"))
			default:
				args = append(args, "--tasks", tt.tasks)
			}
			if tt.answers != "" {
				args = append(args, "--answers", writeFile(t, t.TempDir(), "answers.jsonl", tt.answers))
			}
			args = append(args, tt.args...)
			_, _, err := scoreAnswers(t, args...)
			if err == nil {
				t.Fatalf("no error for %q", args)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestScoreAnswersRegistered(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"help"}, strings.NewReader(""), &out, &errOut); code != 0 || !strings.Contains(out.String(), "score-answers") {
		t.Errorf("help (status %d) does not list score-answers:\n%s", code, out.String())
	}
	if code := run([]string{"score-answers", "--help"}, strings.NewReader(""), &out, &errOut); code != 0 || !strings.Contains(errOut.String(), "--module-scope") {
		t.Errorf("score-answers --help (status %d):\n%s", code, errOut.String())
	}
}
