package sweetrl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/internal/jsonl"
)

// sampleTrajectory returns a small trajectory with every field set.
func sampleTrajectory() Trajectory {
	return Trajectory{
		Task: Task{
			ProblemDescription: "Write f. The signature of the function is: def f(x)",
			HiddenInformation:  "def f(x):\n    return x < 2 and x > -2",
			GroundTruth:        "def f(x):\n    return x < 2 and x > -2",
			TestCases:          []TestCase{{"test1", "f(1)"}, {"test2", "f(5)"}, {"test10", "f(-3)"}},
		},
		DialogueHistory: []Turn{
			{Role: RoleUser, Content: "Write f."},
			{Role: RoleAssistant, Content: " What is x?", Input: "<|begin_of_text|>prompt", Output: "thinking OUTPUT: What is x?"},
			{Role: RoleUser, Content: "A number."},
			{Role: RoleAssistant, Content: "I WANT TO ANSWER: def f(x): return True", Input: "p2", Output: "I WANT TO ANSWER: def f(x): return True"},
		},
		Answer: "def f(x): return True",
		Reward: 0.5,
	}
}

func TestTrajectoryRoundTrip(t *testing.T) {
	trajs := []Trajectory{sampleTrajectory(), {Task: Task{ProblemDescription: "p"}, DialogueHistory: []Turn{{Role: RoleUser, Content: "p"}}, Reward: 1}}
	var buf bytes.Buffer
	if err := WriteTrajectories(&buf, trajs...); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), "\n"); n != 2 {
		t.Fatalf("wrote %d lines, want 2", n)
	}
	if strings.Contains(buf.String(), `\u003c`) {
		t.Errorf("HTML characters escaped: %s", buf.String())
	}
	// test_cases keep numeric order on disk.
	if i1, i2, i10 := strings.Index(buf.String(), `"test1"`), strings.Index(buf.String(), `"test2"`), strings.Index(buf.String(), `"test10"`); !(i1 < i2 && i2 < i10) {
		t.Errorf("test cases out of order: %s", buf.String())
	}
	got, err := ReadTrajectories(&buf, "mem")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, trajs) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, trajs)
	}
}

func TestTrajectoryKeepsUnknownFields(t *testing.T) {
	in := `{"task":{"problem_description":"p","test_cases":{"test2":"g()","test1":"f()"},"level":3},` +
		`"dialogue_history":[{"role":"user","content":"p","ts":1},{"role":"assistant","content":"c","input":"i","output":"o","logprob":-1.5}],` +
		`"answer":"a","reward":1,"id":"x7","meta":{"k":[1,2]}}` + "\n"
	trajs, err := ReadTrajectories(strings.NewReader(in), "in")
	if err != nil {
		t.Fatal(err)
	}
	tr := trajs[0]
	if got := string(tr.Extra["id"]); got != `"x7"` {
		t.Errorf("Extra[id] = %s", got)
	}
	if got := string(tr.Task.Extra["level"]); got != "3" {
		t.Errorf("Task.Extra[level] = %s", got)
	}
	if got := string(tr.DialogueHistory[1].Extra["logprob"]); got != "-1.5" {
		t.Errorf("turn Extra[logprob] = %s", got)
	}
	if tr.DialogueHistory[1].Input != "i" || tr.DialogueHistory[1].Output != "o" {
		t.Errorf("input/output = %q/%q", tr.DialogueHistory[1].Input, tr.DialogueHistory[1].Output)
	}
	if want := []TestCase{{"test2", "g()"}, {"test1", "f()"}}; !reflect.DeepEqual(tr.Task.TestCases, want) {
		t.Errorf("test cases %v, want %v", tr.Task.TestCases, want)
	}
	var buf bytes.Buffer
	if err := WriteTrajectories(&buf, tr); err != nil {
		t.Fatal(err)
	}
	// Same JSON value as the input (key order aside).
	var a, b any
	json.Unmarshal([]byte(in), &a)
	json.Unmarshal(buf.Bytes(), &b)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("written back differs:\n in %s\nout %s", in, buf.String())
	}
}

func TestReadTrajectoriesErrors(t *testing.T) {
	good := `{"task":{},"dialogue_history":[],"answer":"","reward":0}`
	tests := []struct {
		name, in, want string
	}{
		{"not json", good + "\n{oops\n", "f.jsonl:2: not a JSON object"},
		{"null", "null", "f.jsonl:1: not a JSON object: null"},
		{"array", "[1]", "f.jsonl:1: not a JSON object"},
		{"missing task", `{"dialogue_history":[],"answer":"","reward":0}`, `f.jsonl:1: missing "task"`},
		{"task not object", `{"task":3,"dialogue_history":[],"answer":"","reward":0}`, `f.jsonl:1: "task": not a JSON object`},
		{"task field type", `{"task":{"ground_truth":1},"dialogue_history":[],"answer":"","reward":0}`, `f.jsonl:1: "task": "ground_truth" is not a string`},
		{"test case type", `{"task":{"test_cases":{"test1":2}},"dialogue_history":[],"answer":"","reward":0}`, `f.jsonl:1: "task": "test_cases": test "test1" is not a string`},
		{"missing history", `{"task":{},"answer":"","reward":0}`, `f.jsonl:1: missing "dialogue_history"`},
		{"history not array", `{"task":{},"dialogue_history":{},"answer":"","reward":0}`, `f.jsonl:1: "dialogue_history" is not an array`},
		{"history null", `{"task":{},"dialogue_history":null,"answer":"","reward":0}`, `f.jsonl:1: "dialogue_history" is not an array`},
		{"bad role", `{"task":{},"dialogue_history":[{"role":"system","content":""}],"answer":"","reward":0}`, `f.jsonl:1: "dialogue_history" entry 0: role "system" is not "user" or "assistant"`},
		{"missing role", `{"task":{},"dialogue_history":[{"content":""}],"answer":"","reward":0}`, `f.jsonl:1: "dialogue_history" entry 0: missing "role"`},
		{"missing content", `{"task":{},"dialogue_history":[{"role":"user"}],"answer":"","reward":0}`, `f.jsonl:1: "dialogue_history" entry 0: missing "content"`},
		{"content null", `{"task":{},"dialogue_history":[{"role":"user","content":null}],"answer":"","reward":0}`, `f.jsonl:1: "dialogue_history" entry 0: "content" is not a string`},
		{"input type", `{"task":{},"dialogue_history":[{"role":"assistant","content":"","input":[]}],"answer":"","reward":0}`, `f.jsonl:1: "dialogue_history" entry 0: "input" is not a string`},
		{"missing answer", `{"task":{},"dialogue_history":[],"reward":0}`, `f.jsonl:1: missing "answer"`},
		{"answer type", `{"task":{},"dialogue_history":[],"answer":5,"reward":0}`, `f.jsonl:1: "answer" is not a string`},
		{"missing reward", `{"task":{},"dialogue_history":[],"answer":""}`, `f.jsonl:1: missing "reward"`},
		{"reward string", `{"task":{},"dialogue_history":[],"answer":"","reward":"1"}`, `f.jsonl:1: "reward" is not a number`},
		{"reward null", `{"task":{},"dialogue_history":[],"answer":"","reward":null}`, `f.jsonl:1: "reward" is not a number`},
		{"reward range", "\n\n" + `{"task":{},"dialogue_history":[],"answer":"","reward":1.5}`, `f.jsonl:3: "reward" 1.5 is outside [0, 1]`},
		{"reward negative", `{"task":{},"dialogue_history":[],"answer":"","reward":-0.1}`, `f.jsonl:1: "reward" -0.1 is outside [0, 1]`},
		{"invalid UTF-8", good + "\n" + `{"task":{},"dialogue_history":[],"answer":"` + "\xff" + `","reward":0}`, `f.jsonl:2: invalid UTF-8 at byte 44`},
		{"overlong line", good + "\n" + `{"task":{},"dialogue_history":[],"answer":"` + strings.Repeat("a", jsonl.DefaultMaxLine) + `","reward":0}`, fmt.Sprintf("f.jsonl:2: line too long: longer than the cap of %d bytes", jsonl.DefaultMaxLine)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadTrajectories(strings.NewReader(tc.in), "f.jsonl")
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %q, want prefix %q", err, tc.want)
			}
			var le *LineError
			if !errors.As(err, &le) {
				t.Errorf("error %T is not a *LineError", err)
			}
		})
	}
}

func TestReadTrajectoriesBlankLinesAndNoTrailingNewline(t *testing.T) {
	in := "\n  \n" + `{"task":{},"dialogue_history":[],"answer":"a","reward":0}` + "\r\n\n" + `{"task":{},"dialogue_history":[],"answer":"b","reward":1}`
	got, err := ReadTrajectories(strings.NewReader(in), "f")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Answer != "a" || got[1].Answer != "b" {
		t.Errorf("got %+v", got)
	}
}

func TestWriteTrajectoriesRejectsNaN(t *testing.T) {
	tr := sampleTrajectory()
	tr.Reward = nan()
	if err := WriteTrajectories(&bytes.Buffer{}, tr); err == nil || !strings.Contains(err.Error(), "not finite") {
		t.Errorf("err = %v, want a not-finite error", err)
	}
}

func nan() float64 {
	z := 0.0
	return z / z
}

func TestTrajectoryFiles(t *testing.T) {
	dir := t.TempDir()
	want := []Trajectory{sampleTrajectory(), sampleTrajectory()}
	want[1].Reward = 1
	for _, name := range []string{"t.jsonl", "t.jsonl.zst"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			if err := SaveTrajectories(path, want); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			compressed := bytes.HasPrefix(raw, []byte{0x28, 0xb5, 0x2f, 0xfd})
			if compressed != strings.HasSuffix(name, ".zst") {
				t.Errorf("zstd magic present = %v for %s", compressed, name)
			}
			got, err := LoadTrajectories(path)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("file round trip differs")
			}
		})
	}
}

func TestTrajectoryFileErrorsNameFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(path, []byte(`{"task":{},"dialogue_history":[],"answer":"","reward":0}`+"\nnope\n"), 0o644)
	if _, err := LoadTrajectories(path); err == nil || !strings.HasPrefix(err.Error(), path+":2: ") {
		t.Errorf("err = %v, want prefix %s:2:", err, path)
	}
	zpath := filepath.Join(dir, "bad.jsonl.zst")
	os.WriteFile(zpath, []byte("this is not zstd"), 0o644)
	if _, err := LoadTrajectories(zpath); err == nil || !strings.Contains(err.Error(), zpath) {
		t.Errorf("err = %v, want it to name %s", err, zpath)
	}
	if _, err := LoadTrajectories(filepath.Join(dir, "missing.jsonl")); err == nil || !strings.Contains(err.Error(), "missing.jsonl") {
		t.Errorf("err = %v, want it to name the file", err)
	}
}

// FuzzReadTrajectories checks that no input makes the reader panic, that
// every error names the input and a line, and that whatever is read writes
// back to something that reads the same.
func FuzzReadTrajectories(f *testing.F) {
	var buf bytes.Buffer
	WriteTrajectories(&buf, sampleTrajectory())
	f.Add(buf.String())
	f.Add(`{"task":{"x":1},"dialogue_history":[{"role":"user","content":"é","z":null}],"answer":"","reward":0,"k":{}}`)
	f.Add("\n\n{}\n")
	f.Add(`{"task":{"test_cases":{"test10":"a","test9":"b","t":"c","test09":"d"}},"dialogue_history":[],"answer":"","reward":1e-300}`)
	f.Add(`{"task":null,"dialogue_history":[],"answer":"","reward":0}`)
	f.Add("[\"\\ud800\"]")
	f.Add(`{"task":{},"dialogue_history":[],"answer":"\u0000<>&","reward":1}`)
	f.Fuzz(func(t *testing.T, in string) {
		trajs, err := ReadTrajectories(strings.NewReader(in), "fz")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fz:") {
				t.Fatalf("error %q does not name the input", err)
			}
			return
		}
		var out bytes.Buffer
		if err := WriteTrajectories(&out, trajs...); err != nil {
			t.Fatalf("writing what was read: %v", err)
		}
		first := out.String()
		again, err := ReadTrajectories(&out, "again")
		if err != nil {
			t.Fatalf("reading what was written: %v\n%s", err, out.String())
		}
		var out2 bytes.Buffer
		WriteTrajectories(&out2, again...)
		if first != out2.String() {
			t.Fatalf("not stable:\n%s\n%s", first, out2.String())
		}
	})
}
