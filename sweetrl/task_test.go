package sweetrl

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/internal/jsonl"
	"github.com/turnwise/turnwise/internal/testdata"
)

func TestReadBackendTasks(t *testing.T) {
	in := `{"problem_description":"Do it. The signature of the function is: def f(a)","hidden_information":"def f(a):\n    return a","ground_truth":"def f(a):\n    return a","test_cases":{"test1":"f(1)","test2":"f(2)","test10":"f(10)"},"source":"x"}` + "\n\n"
	tasks, err := ReadBackendTasks(strings.NewReader(in), "b.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 1 {
		t.Fatalf("%d tasks, want 1", len(tasks))
	}
	want := Task{
		ProblemDescription: "Do it. The signature of the function is: def f(a)",
		HiddenInformation:  "def f(a):\n    return a",
		GroundTruth:        "def f(a):\n    return a",
		TestCases:          []TestCase{{"test1", "f(1)"}, {"test2", "f(2)"}, {"test10", "f(10)"}},
		Extra:              tasks[0].Extra,
	}
	if !reflect.DeepEqual(tasks[0], want) {
		t.Errorf("got %+v\nwant %+v", tasks[0], want)
	}
	if string(tasks[0].Extra["source"]) != `"x"` {
		t.Errorf("Extra = %v", tasks[0].Extra)
	}
}

func TestReadBackendTasksErrors(t *testing.T) {
	const ok = `{"problem_description":"p","hidden_information":"h","ground_truth":"g","test_cases":{"test1":"f()"}}`
	tests := []struct{ name, in, want string }{
		{"syntax", ok + "\n{\n", "b.jsonl:2: not a JSON object"},
		{"missing problem", `{"hidden_information":"h","ground_truth":"g","test_cases":{"test1":"f()"}}`, `b.jsonl:1: missing "problem_description"`},
		{"empty problem", `{"problem_description":" ","hidden_information":"h","ground_truth":"g","test_cases":{"test1":"f()"}}`, `b.jsonl:1: "problem_description" is empty`},
		{"missing hidden", `{"problem_description":"p","ground_truth":"g","test_cases":{"test1":"f()"}}`, `b.jsonl:1: missing "hidden_information"`},
		{"missing truth", `{"problem_description":"p","hidden_information":"h","test_cases":{"test1":"f()"}}`, `b.jsonl:1: missing "ground_truth"`},
		{"missing tests", `{"problem_description":"p","hidden_information":"h","ground_truth":"g"}`, `b.jsonl:1: missing "test_cases"`},
		{"no tests", `{"problem_description":"p","hidden_information":"h","ground_truth":"g","test_cases":{}}`, `b.jsonl:1: "test_cases" has no tests`},
		{"tests array", `{"problem_description":"p","hidden_information":"h","ground_truth":"g","test_cases":["f()"]}`, `b.jsonl:1: "test_cases": not a JSON object`},
		{"test not string", `{"problem_description":"p","hidden_information":"h","ground_truth":"g","test_cases":{"test1":1}}`, `b.jsonl:1: "test_cases": test "test1" is not a string`},
		{"truth not string", `{"problem_description":"p","hidden_information":"h","ground_truth":null,"test_cases":{"test1":"f()"}}`, `b.jsonl:1: "ground_truth" is not a string`},
		{"duplicate row", ok + "\n\n" + ok + "\n", `b.jsonl:3: the same "problem_description" as line 1`},
		{"duplicate problem, other truth", ok + "\n" + strings.Replace(ok, `"g"`, `"g2"`, 1), `b.jsonl:2: the same "problem_description" as line 1`},
		{"invalid UTF-8", ok + "\n" + strings.Replace(ok, `"h"`, "\"h\xc3(\"", 1), `b.jsonl:2: invalid UTF-8 at byte 51`},
		{"overlong line", ok + "\n" + strings.Replace(ok, `"h"`, `"`+strings.Repeat("h", jsonl.DefaultMaxLine)+`"`, 1), fmt.Sprintf("b.jsonl:2: line too long: longer than the cap of %d bytes", jsonl.DefaultMaxLine)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadBackendTasks(strings.NewReader(tc.in), "b.jsonl")
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("err = %v, want prefix %q", err, tc.want)
			}
			var le *LineError
			if !errors.As(err, &le) {
				t.Errorf("error %T is not a *LineError", err)
			}
		})
	}
}

func TestTestCaseOrder(t *testing.T) {
	tests := []struct {
		name, in string
		want     []TestCase
	}{
		{"numeric", `{"test1":"a","test2":"b","test10":"c"}`, []TestCase{{"test1", "a"}, {"test2", "b"}, {"test10", "c"}}},
		{"file order kept", `{"test2":"b","case_x":"x","test1":"a"}`, []TestCase{{"test2", "b"}, {"case_x", "x"}, {"test1", "a"}}},
		{"duplicate key", `{"test1":"a","test2":"b","test1":"c"}`, []TestCase{{"test1", "c"}, {"test2", "b"}}},
		{"escaped key", `{"t\u00e9st1":"a"}`, []TestCase{{"tést1", "a"}}},
		{"empty", `{}`, []TestCase{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeTestCases([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestLoadBackendTasksMissingFile(t *testing.T) {
	if _, err := LoadBackendTasks("no/such/backend.jsonl"); err == nil || !strings.Contains(err.Error(), "no/such/backend.jsonl") {
		t.Errorf("err = %v, want it to name the file", err)
	}
}

// TestLoadBackendTasksShared loads the real ColBench backend test split.
func TestLoadBackendTasksShared(t *testing.T) {
	path := testdata.Path(t, "colbench", "backend_test.jsonl")
	tasks, err := LoadBackendTasks(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 1000 {
		t.Fatalf("%d tasks, want 1000", len(tasks))
	}
	testN := regexp.MustCompile(`^test[0-9]+$`)
	numberedTasks := 0
	for i, task := range tasks {
		if len(task.TestCases) == 0 {
			t.Errorf("task %d has no test cases", i)
		}
		if !strings.Contains(task.ProblemDescription, "def ") {
			t.Errorf("task %d: no function signature in the problem description", i)
		}
		if task.GroundTruth != task.HiddenInformation {
			t.Errorf("task %d: ground truth differs from hidden information", i)
		}
		// Where every test is named testN, the file lists them in numeric order.
		numbered := true
		for _, tc := range task.TestCases {
			if !testN.MatchString(tc.Name) {
				numbered = false
			}
		}
		if numbered {
			numberedTasks++
			for j, tc := range task.TestCases {
				if want := "test" + strconv.Itoa(j+1); tc.Name != want {
					t.Errorf("task %d: test case %d is %q, want %q", i, j, tc.Name, want)
					break
				}
			}
		}
	}
	if numberedTasks < 990 {
		t.Errorf("only %d tasks name their tests test1…testN, want at least 990", numberedTasks)
	}
}

// FuzzReadBackendTasks checks that no input makes the task reader panic,
// that every error is a *LineError naming the input, and that every task
// read has what a backend task needs.
func FuzzReadBackendTasks(f *testing.F) {
	f.Add(`{"problem_description":"p","hidden_information":"h","ground_truth":"def f(): return 1","test_cases":{"test1":"f()"}}`)
	f.Add("\n{\"problem_description\":\"p\"}\n")
	f.Add(`{"problem_description":"p","hidden_information":"h","ground_truth":"g","test_cases":{}}`)
	f.Add(`{"problem_description":" ","hidden_information":1,"ground_truth":"g","test_cases":{"a":2}}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, in string) {
		tasks, err := ReadBackendTasks(strings.NewReader(in), "fz")
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) || le.Name != "fz" || le.Line < 1 {
				t.Fatalf("error %v (%T) is not a *LineError naming the input and a line", err, err)
			}
		}
		seen := map[string]bool{}
		for _, task := range tasks {
			if strings.TrimSpace(task.ProblemDescription) == "" || len(task.TestCases) == 0 || seen[task.ProblemDescription] {
				t.Fatalf("read a task without a problem or a test, or twice: %+v", task)
			}
			seen[task.ProblemDescription] = true
		}
	})
}
