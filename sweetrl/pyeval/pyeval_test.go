package pyeval

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/turnwise/turnwise/sweetrl"
)

// newEvaluator returns an evaluator with opts, or skips the test when there
// is no python3 to run.
func newEvaluator(t *testing.T, opts Options) *Evaluator {
	t.Helper()
	py := opts.Python
	if py == "" {
		py = DefaultPython
	}
	if _, err := exec.LookPath(py); err != nil {
		t.Skipf("no %s on PATH (scripts/setup.sh installs it): %v", py, err)
	}
	e, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("closing the evaluator: %v", err)
		}
	})
	t.Logf("python %s (%s); %s", e.Python, e.Version, e.Isolation)
	return e
}

// task makes a backend task with ground truth gt and the given calls as
// tests test1, test2, ….
func task(gt string, calls ...string) sweetrl.Task {
	tk := sweetrl.Task{ProblemDescription: "p", GroundTruth: gt}
	for i, c := range calls {
		tk.TestCases = append(tk.TestCases, sweetrl.TestCase{Name: fmt.Sprintf("test%d", i+1), Call: c})
	}
	return tk
}

// doubleGT is the ground truth most tests answer: f(x) = 2x.
const doubleGT = "def f(x):\n    return 2 * x\n"

// doubleTask asks for doubleGT on three inputs.
func doubleTask() sweetrl.Task { return task(doubleGT, "f(1)", "f(2)", "f(3)") }

// TestSemantics checks the reference's scoring rules in both scopes.
func TestSemantics(t *testing.T) {
	type tc struct {
		name   string
		task   sweetrl.Task
		answer string
		// want is the reward in the reference's function scope and in
		// module scope.
		want, wantModule float64
		// note, when set, must appear in the Note in function scope;
		// isolatedNote replaces it with CompareIsolated.
		note, isolatedNote string
	}
	cases := []tc{
		{name: "correct", task: doubleTask(), answer: "def f(x):\n    return x + x", want: 1, wantModule: 1},
		{name: "float equals int", task: doubleTask(), answer: "def f(x):\n    return 2.0 * x", want: 1, wantModule: 1},
		{name: "import inside the function", task: doubleTask(),
			answer: "def f(x):\n    import math\n    return int(math.pow(x, 1)) * 2", want: 1, wantModule: 1},
		{name: "top-level import", task: doubleTask(),
			answer: "import math\ndef f(x):\n    return int(math.pow(x, 1)) * 2", want: 0, wantModule: 1,
			note: "answer raised NameError: name 'math' is not defined (every test)"},
		{name: "helper function", task: doubleTask(),
			answer: "def g(x):\n    return 2 * x\n\ndef f(x):\n    return g(x)", want: 0, wantModule: 1, note: "NameError"},
		{name: "recursion", task: doubleTask(),
			answer: "def f(x):\n    return 0 if x == 0 else 2 + f(x - 1)", want: 0, wantModule: 1, note: "name 'f' is not defined"},
		{name: "module constant", task: doubleTask(),
			answer: "K = 2\ndef f(x):\n    return K * x", want: 0, wantModule: 1, note: "name 'K' is not defined"},
		{name: "top-level code sees top-level names", task: doubleTask(),
			answer: "K = 2\nF = lambda x, k=K: k * x\ndef f(x):\n    return x * 2\nassert F(1) == 2", want: 1, wantModule: 1},
		{name: "main guard does not run", task: doubleTask(),
			answer: "def f(x):\n    return 2 * x\nif __name__ == '__main__':\n    raise SystemExit", want: 1, wantModule: 1},
		{name: "python fence", task: doubleTask(),
			answer: "Here it is:\n```python\ndef f(x):\n    return 2 * x\n```\nIt doubles x.", want: 1, wantModule: 1},
		{name: "bare fence", task: doubleTask(), answer: "```\ndef f(x):\n    return 2 * x\n```", want: 1, wantModule: 1},
		{name: "prose without fences", task: doubleTask(),
			answer: "Here it is:\ndef f(x):\n    return 2 * x", want: 0, wantModule: 0, note: "does not compile: SyntaxError"},
		{name: "one test wrong", task: doubleTask(),
			answer: "def f(x):\n    return 4 if x == 2 else 0 if x == 3 else 2", want: 2.0 / 3, wantModule: 2.0 / 3},
		{name: "wrong", task: doubleTask(), answer: "def f(x):\n    return x", want: 0, wantModule: 0, note: "outputs differ"},
		{name: "answer raises", task: doubleTask(),
			answer: "def f(x):\n    if x == 2:\n        raise ValueError('no')\n    return 2 * x", want: 2.0 / 3, wantModule: 2.0 / 3},
		{name: "ground truth raises", task: task("def f(x):\n    return 10 // x\n", "f(1)", "f(0)", "f(5)"),
			answer: "def f(x):\n    return 10 // x", want: 2.0 / 3, wantModule: 2.0 / 3},
		{name: "ground truth returns None", task: task("def f(x):\n    return None\n", "f(1)", "f(2)"),
			answer: "def f(x):\n    return None", want: 0, wantModule: 0, note: "ground truth returned None (every test)"},
		{name: "ground truth prints only", task: task("def f(x):\n    print(x)\n", "f(1)"),
			answer: "def f(x):\n    pass", want: 0, wantModule: 0, note: "ground truth returned None"},
		{name: "comparison raises", task: doubleTask(),
			answer: "def f(x):\n    class E:\n        def __eq__(self, o):\n            raise ValueError('ambiguous')\n    return E()",
			want:   0, wantModule: 0, note: "comparing the outputs raised", isolatedNote: "answer's output holds a colbench_answer.f.<locals>.E, which cannot be compared as data"},
		{name: "under the time limit", task: doubleTask(),
			answer: "def f(x):\n    import time\n    time.sleep(0.2)\n    return 2 * x", want: 1, wantModule: 1},
		{name: "over the time limit", task: task(doubleGT, "f(1)", "f(2)"),
			answer: "def f(x):\n    import time\n    time.sleep(1.5)\n    return 2 * x", want: 0, wantModule: 0,
			note: "answer timed out (limit 1s) (every test)"},
		{name: "time limit on the answer only", task: task("def f(x):\n    import time\n    time.sleep(1.2)\n    return 2 * x\n", "f(1)"),
			answer: "def f(x):\n    return 2 * x", want: 1, wantModule: 1},
		{name: "catches the time-out", task: task(doubleGT, "f(1)"),
			answer: "def f(x):\n    import time\n    try:\n        time.sleep(3)\n    except TimeoutError:\n        return 2 * x", want: 1, wantModule: 1},
		{name: "empty answer", task: doubleTask(), answer: "", want: 0, wantModule: 0, note: "NameError"},
		{name: "bad test call", task: task(doubleGT, "f(1)", "f(("), answer: doubleGT, want: 0.5, wantModule: 0.5},
	}
	for _, s := range forbiddenStrings() {
		cases = append(cases, tc{name: "forbidden " + s, task: doubleTask(),
			answer: "def f(x):\n    return 2 * x  # " + s, want: 0, wantModule: 0, note: fmt.Sprintf("forbidden string %q", s)})
	}
	tasks := make([]sweetrl.Task, len(cases))
	answers := make([]string, len(cases))
	for i, c := range cases {
		tasks[i], answers[i] = c.task, c.answer
	}
	for _, mode := range []struct {
		module  bool
		compare Compare
	}{{false, CompareIsolated}, {true, CompareIsolated}, {false, CompareInProcess}, {true, CompareInProcess}} {
		module := mode.module
		e := newEvaluator(t, Options{ModuleScope: module, Compare: mode.compare})
		res, err := e.Evaluate(context.Background(), tasks, answers)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range cases {
			c := c
			if mode.compare == CompareIsolated && c.isolatedNote != "" {
				c.note = c.isolatedNote
			}
			t.Run(fmt.Sprintf("%s/module=%v/compare=%v", c.name, module, mode.compare), func(t *testing.T) {
				r := res[i]
				want := c.want
				if module {
					want = c.wantModule
				}
				if diff := r.Reward - want; diff > 1e-9 || diff < -1e-9 {
					t.Errorf("reward %v, want %v (%+v)", r.Reward, want, r)
				}
				if r.Total != len(c.task.TestCases) || r.Passed != int(want*float64(r.Total)+0.5) {
					t.Errorf("passed %d of %d (%+v)", r.Passed, r.Total, r)
				}
				if !module && c.note != "" && !strings.Contains(r.Note, c.note) {
					t.Errorf("note %q does not contain %q", r.Note, c.note)
				}
				if r.Reward == 1 && r.Note != "" {
					t.Errorf("full marks with note %q", r.Note)
				}
				if r.Reward == 0 && r.Note == "" {
					t.Errorf("no note for a zero")
				}
				for _, tr := range r.Tests {
					if tr.Passed == (tr.Error != "") {
						t.Errorf("test %s passed=%v with error %q", tr.Name, tr.Passed, tr.Error)
					}
				}
			})
		}
	}
}

func TestInterpret(t *testing.T) {
	lines := func(ss ...string) [][]byte {
		var out [][]byte
		for _, s := range ss {
			out = append(out, []byte(s))
		}
		return out
	}
	fresh := func() Result {
		return Result{Score: sweetrl.Score{Total: 2}, Tests: []TestResult{{Name: "test1"}, {Name: "test2"}}}
	}
	pass := `{"test": 0, "passed": true, "error": ""}`
	fail2 := `{"test": 1, "passed": false, "error": "outputs differ"}`
	tests := []struct {
		name    string
		out     outcome
		passed  int
		note    string
		wantErr string
	}{
		{"complete", outcome{lines: lines(`{"ready": true}`, pass, fail2, `{"done": true}`)}, 1, "", ""},
		{"all fail", outcome{lines: lines(`{"ready": true}`, `{"test": 0, "passed": false, "error": "outputs differ"}`, fail2, `{"done": true}`)},
			0, "outputs differ (every test)", ""},
		{"cut off", outcome{lines: lines(`{"ready": true}`, pass), deadline: true}, 1, "wall-clock limit of 7s reached after 1 of 2 tests", ""},
		{"killed", outcome{lines: lines(`{"ready": true}`), signal: "segmentation fault"}, 0, "killed by segmentation fault after 0 of 2 tests", ""},
		{"cpu", outcome{lines: lines(`{"ready": true}`, pass), signal: "killed", cpuLimit: true}, 1, "CPU-time limit reached after 1 of 2 tests", ""},
		{"closed early", outcome{lines: lines(`{"ready": true}`, pass), closedEarly: true}, 1, "the result channel closed while the process still ran after 1 of 2 tests", ""},
		{"out of turn", outcome{lines: lines(`{"ready": true}`, fail2, pass, `{"done": true}`)}, 0, "out of turn", ""},
		{"garbage", outcome{lines: lines(`{"ready": true}`, pass, `garbage`)}, 1, `carried "garbage"`, ""},
		{"done early", outcome{lines: lines(`{"ready": true}`, pass, `{"done": true}`)}, 1, "out of turn", ""},
		{"fatal", outcome{lines: lines(`{"ready": true}`, `{"fatal": "OSError: bad fd"}`), exitCode: 1}, 0, "the harness failed: OSError: bad fd", ""},
		{"fatal before ready", outcome{lines: lines(`{"fatal": "MemoryError: "}`)}, 0, "could not take the answer", ""},
		{"nothing", outcome{exitCode: 1, stderr: "SyntaxError: bad"}, 0, "", "stopped before taking the answer: the process exited with status 1: SyntaxError: bad"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := interpret(tt.out, fresh(), 7*time.Second)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Passed != tt.passed || r.Reward != float64(tt.passed)/2 {
				t.Errorf("passed %d reward %v, want %d", r.Passed, r.Reward, tt.passed)
			}
			if !strings.Contains(r.Note, tt.note) || (tt.note == "") != (r.Note == "") {
				t.Errorf("note %q, want %q", r.Note, tt.note)
			}
			for _, tr := range r.Tests {
				if !tr.Passed && tr.Error == "" {
					t.Errorf("failed test %s has no error", tr.Name)
				}
			}
		})
	}
}

func TestEvaluateErrors(t *testing.T) {
	e := newEvaluator(t, Options{})
	if _, err := e.Evaluate(context.Background(), []sweetrl.Task{doubleTask()}, nil); err == nil {
		t.Error("no error for 1 task and 0 answers")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Evaluate(ctx, []sweetrl.Task{doubleTask()}, []string{doubleGT}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: error %v", err)
	}
	// Cancelling while an answer runs stops it: the evaluator's own limits
	// are an hour and the answer swallows the per-test alarm, so only the
	// context can end this call.
	long := newEvaluator(t, Options{TestTimeout: time.Hour, Timeout: time.Hour})
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := long.Evaluate(ctx, []sweetrl.Task{doubleTask()}, []string{"def f(x):\n    while True:\n        try:\n            pass\n        except BaseException:\n            pass"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("deadline: error %v", err)
	}
	// A task without tests scores 0 with a note.
	r, err := e.Evaluate(context.Background(), []sweetrl.Task{{GroundTruth: doubleGT}}, []string{doubleGT})
	if err != nil || r[0].Total != 0 || r[0].Reward != 0 || r[0].Note == "" {
		t.Errorf("task without tests: %+v, %v", r, err)
	}
	if _, err := New(context.Background(), Options{Python: "/nonexistent/python3"}); err == nil || !strings.Contains(err.Error(), "/nonexistent/python3") {
		t.Errorf("missing interpreter: error %v", err)
	}
}

func TestScorer(t *testing.T) {
	e := newEvaluator(t, Options{Workers: 1})
	var s sweetrl.Scorer = e
	scores, err := s.Score(context.Background(), []sweetrl.Task{doubleTask(), doubleTask()}, []string{"def f(x):\n    return x * 2", "import os"})
	if err != nil {
		t.Fatal(err)
	}
	if !scores[0].Success() || scores[1].Reward != 0 || !strings.Contains(scores[1].Note, "forbidden") {
		t.Errorf("scores %+v", scores)
	}
	if e.Python == "" || e.Version == "" || e.Isolation.User == "" {
		t.Errorf("evaluator does not say what it runs: %+v", e)
	}
}

// frameCheck compares the harness's run_in_function_frame with exec and eval
// really run inside a function, as the reference runs them, on programs
// that probe the frame's locals. It prints one line per program.
const frameCheck = `
import sys, types
harness = types.ModuleType("harness")
exec(compile(sys.stdin.read(), "harness", "exec"), harness.__dict__)

def get_function_output(function_definition, test_case):
    try:
        exec(function_definition)
        return eval(test_case)
    except Exception as e:
        return None

programs = [
    ("def f(x):\n    return 2 * x", "f(3)"),
    ("import math\ndef f(x):\n    return math.sqrt(x)", "f(4)"),
    ("def g(x):\n    return x\ndef f(x):\n    return g(x)", "f(1)"),
    ("K = 2\nf = lambda x, k=K: k * x", "f(3)"),
    ("def f(x):\n    return x\ntest_case = 'f(99)'", "test_case"),
    ("e = 5", "e"),
    ("function_definition = 7", "function_definition"),
    ("g = [i * i for i in range(3)]", "g"),
    ("class A:\n    v = 3\ndef f():\n    return A.v", "f()"),
    ("import math\nv = math.pi", "v"),
]
for source, call in programs:
    want = get_function_output(source, call)
    try:
        got = harness.run_in_function_frame(
            compile(source, "<string>", "exec", dont_inherit=True), source,
            compile(call, "<string>", "eval", dont_inherit=True), call)
    except Exception:
        got = None
    print("same" if want == got else "differ: %r: %r != %r" % (source, got, want))
`

// TestFrameEmulation checks, under an interpreter whose exec and eval in a
// function share the frame's locals (Python 3.12 and older), that the
// harness reproduces the reference's function-frame semantics exactly.
func TestFrameEmulation(t *testing.T) {
	py, err := exec.LookPath(DefaultPython)
	if err != nil {
		t.Skipf("no %s on PATH: %v", DefaultPython, err)
	}
	v, err := exec.Command(py, "-c", "import sys; print(sys.version_info >= (3, 13))").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(v)) != "False" {
		t.Skipf("%s is Python 3.13 or newer, whose locals() in a function no longer shares the frame's dictionary", py)
	}
	cmd := exec.Command(py, "-c", frameCheck)
	cmd.Stdin = strings.NewReader(harnessSource)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 10 {
		t.Fatalf("want 10 lines:\n%s", out)
	}
	for _, l := range lines {
		if l != "same" {
			t.Error(l)
		}
	}
}

// BenchmarkEvaluate scores one correct three-test answer per iteration, in
// each comparison mode: isolated starts two processes per answer,
// in-process one.
func BenchmarkEvaluate(b *testing.B) {
	if _, err := exec.LookPath(DefaultPython); err != nil {
		b.Skipf("no %s on PATH: %v", DefaultPython, err)
	}
	for _, mode := range []Compare{CompareIsolated, CompareInProcess} {
		b.Run(mode.String(), func(b *testing.B) {
			e, err := New(context.Background(), Options{Workers: 1, StdlibOnly: true, Compare: mode})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			tasks := []sweetrl.Task{doubleTask()}
			answers := []string{doubleGT}
			b.ResetTimer()
			for range b.N {
				r, err := e.Evaluate(context.Background(), tasks, answers)
				if err != nil || !r[0].Success() {
					b.Fatalf("%+v, %v", r, err)
				}
			}
		})
	}
}
