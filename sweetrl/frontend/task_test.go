package frontend

import (
	"errors"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/internal/testdata"
	"github.com/turnwise/turnwise/sweetrl"
)

func TestReadTasks(t *testing.T) {
	in := `{"problem_description": "A bakery site.", "ground_truth": "<html><body>Bread</body></html>", "source": "x"}

{"problem_description": "A law firm site.", "ground_truth": "<html>Law</html>"}
`
	tasks, err := ReadTasks(strings.NewReader(in), "tasks.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 2 {
		t.Fatalf("read %d tasks, want 2", len(tasks))
	}
	if tasks[0].ProblemDescription != "A bakery site." || tasks[0].GroundTruth != "<html><body>Bread</body></html>" {
		t.Errorf("task 0 = %+v", tasks[0])
	}
	if string(tasks[0].Extra["source"]) != `"x"` {
		t.Errorf("task 0 lost its extra field: %v", tasks[0].Extra)
	}
	if tasks[1].GroundTruth != "<html>Law</html>" {
		t.Errorf("task 1 = %+v", tasks[1])
	}
}

func TestReadTasksErrors(t *testing.T) {
	ok := `{"problem_description": "p1", "ground_truth": "<html></html>"}` + "\n"
	for _, tc := range []struct {
		name, in, want string
		line           int
	}{
		{"not json", ok + "{nope\n", "", 2},
		{"not an object", ok + "[1]\n", "", 2},
		{"missing truth", `{"problem_description": "p"}`, `"ground_truth" is missing or empty`, 1},
		{"blank truth", `{"problem_description": "p", "ground_truth": "  "}`, `"ground_truth" is missing or empty`, 1},
		{"truth not a string", `{"problem_description": "p", "ground_truth": 3}`, "ground_truth", 1},
		{"missing problem", `{"ground_truth": "<html></html>"}`, `"problem_description" is missing or empty`, 1},
		{"backend row", `{"problem_description": "p", "ground_truth": "def f(): pass", "test_cases": {"test1": "f()"}}`, "backend file", 1},
		{"duplicate", ok + "\n" + ok, "the same \"problem_description\" as line 1", 3},
		{"invalid utf-8", ok + "{\"problem_description\": \"\xff\"}\n", "invalid UTF-8", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tasks, err := ReadTasks(strings.NewReader(tc.in), "f.jsonl")
			var le *sweetrl.LineError
			if !errors.As(err, &le) {
				t.Fatalf("error %v (%T) is not a *sweetrl.LineError", err, err)
			}
			if le.Name != "f.jsonl" || le.Line != tc.line {
				t.Errorf("error at %s:%d, want f.jsonl:%d", le.Name, le.Line, tc.line)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if tc.line == 2 && len(tasks) != 1 {
				t.Errorf("kept %d tasks before the bad line, want 1", len(tasks))
			}
		})
	}
}

func TestLoadTasksMissingFile(t *testing.T) {
	_, err := LoadTasks("no-such-dir/frontend.jsonl")
	if err == nil || !strings.Contains(err.Error(), "no-such-dir/frontend.jsonl") {
		t.Errorf("error %v does not name the file", err)
	}
}

// TestSharedFrontendTasks reads the real test split: 1000 rows, each with
// a page to render.
func TestSharedFrontendTasks(t *testing.T) {
	tasks, err := LoadTasks(testdata.Path(t, "colbench", "frontend_test.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 1000 {
		t.Errorf("read %d tasks, want 1000", len(tasks))
	}
	found := 0
	for _, tk := range tasks {
		if _, ok := ExtractHTML(tk.GroundTruth); ok {
			found++
		}
	}
	if found != len(tasks) {
		t.Errorf("a page was found in %d of %d ground truths", found, len(tasks))
	}
}
