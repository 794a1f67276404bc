package pipeline

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/sweetrl/demotask"
	"github.com/turnwise/turnwise/sweetrl/frontend"
	"github.com/turnwise/turnwise/sweetrl/rl"
)

func TestEnvTasks(t *testing.T) {
	all := demotask.Tasks(DefaultSFTTasks+DefaultRLTasks+5, 3)
	cases := []struct {
		name    string
		env     Env
		heldOut bool
		first   int    // index in the family's order of the first task wanted
		n       int    // tasks wanted
		err     string // part of the error wanted ("": none)
	}{
		{"the demo's RL tasks", Env{Family: "demo", DemoTasks: 4, DemoFirst: -1, DemoSeed: 3}, false, DefaultSFTTasks, 4, ""},
		{"the demo's held-out tasks", Env{Family: "demo", DemoTasks: 5, DemoFirst: -1, DemoSeed: 3}, true, DefaultSFTTasks + DefaultRLTasks, 5, ""},
		{"from a first task, limited", Env{Family: "demo", DemoTasks: 6, DemoFirst: 2, DemoSeed: 3, Limit: 2}, false, 2, 2, ""},
		{"no demo tasks", Env{Family: "demo", DemoTasks: 0}, false, 0, 0, "positive"},
		{"past the family's end", Env{Family: "demo", DemoTasks: 2, DemoFirst: demotask.NumTasks - 1}, false, 0, 0, "the family has"},
		{"colbench without a file", Env{Family: "colbench"}, false, 0, 0, "tasks file"},
		{"an unknown family", Env{Family: "nope"}, false, 0, 0, `"nope"`},
	}
	for _, c := range cases {
		got, err := c.env.Tasks(c.heldOut)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want one with %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(got) != c.n {
			t.Fatalf("%s: %d tasks, want %d", c.name, len(got), c.n)
		}
		for i, task := range got {
			if task.ProblemDescription != all[c.first+i].ProblemDescription {
				t.Errorf("%s: task %d is not the family's task %d", c.name, i, c.first+i)
			}
		}
	}
}

func TestEnvSimulatorAndScorer(t *testing.T) {
	for _, c := range []struct {
		env  Env
		kind string
		err  string
	}{
		{Env{Family: "demo"}, "demo", ""},
		{Env{Family: "colbench"}, "http", "URL"},
		{Env{Family: "demo", Simulator: "scripted"}, "scripted", ""},
		{Env{Family: "colbench", Simulator: "demo"}, "demo", "demo family only"},
		{Env{Family: "demo", Simulator: "oracle"}, "oracle", `"oracle"`},
	} {
		if got := c.env.SimulatorKind(); got != c.kind {
			t.Errorf("%+v: simulator kind %q, want %q", c.env, got, c.kind)
		}
		sim, _, err := c.env.NewSimulator(nil, nil, nil)
		if c.err == "" && (err != nil || sim == nil) {
			t.Errorf("%+v: simulator %v, %v", c.env, sim, err)
		}
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%+v: error %v, want one with %q", c.env, err, c.err)
		}
	}
	e := Env{Family: "demo"}
	if _, desc, err := e.NewScorer(context.Background(), nil); err != nil || desc == "" {
		t.Errorf("demo scorer: %q, %v", desc, err)
	}
	if _, err := (&Env{Family: "x"}).Protocol(); err == nil {
		t.Error("an unknown family has a protocol")
	}
}

// TestEnvFrontend checks the frontend family's parts that need neither a
// browser nor CLIP: its tasks, rules and protocol, and the errors that stop
// a job before anything is loaded.
func TestEnvFrontend(t *testing.T) {
	path := filepath.Join(t.TempDir(), "frontend.jsonl")
	rows := `{"problem_description": "A bakery.", "ground_truth": "<html><body>bread</body></html>"}
{"problem_description": "A garage.", "ground_truth": "<html><body>cars</body></html>"}
`
	if err := os.WriteFile(path, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	e := Env{Family: "frontend", TasksFile: path, Limit: 1}
	tasks, err := e.Tasks(false)
	if err != nil || len(tasks) != 1 || tasks[0].ProblemDescription != "A bakery." {
		t.Fatalf("tasks %+v, %v", tasks, err)
	}
	p, err := e.Protocol()
	if err != nil || p.System != frontend.AgentSystemPrompt || p.Answer == nil || p.ReplyLimit != frontend.SimulatorReplyLimit {
		t.Errorf("protocol %+v, %v; want the frontend's", p, err)
	}
	if k := e.SimulatorKind(); k != "http" {
		t.Errorf("default simulator %q, want http", k)
	}
	if err := e.CheckScorer(); !errors.Is(err, ErrNoCLIP) {
		t.Errorf("no CLIP: %v, want ErrNoCLIP", err)
	}
	if _, _, err := e.NewScorer(context.Background(), nil); !errors.Is(err, ErrNoCLIP) {
		t.Errorf("a scorer without CLIP: %v, want ErrNoCLIP", err)
	}
	for _, kind := range []string{"model", "demo"} {
		e := Env{Family: "frontend", Simulator: kind}
		if _, _, err := e.NewSimulator(nil, nil, nil); err == nil || !strings.Contains(err.Error(), "want http") {
			t.Errorf("simulator %s for frontend tasks: %v", kind, err)
		}
	}
	if err := (&Env{Family: "frontend"}).CheckScorer(); err == nil {
		t.Error("no error without CLIP")
	}
	if err := (&Env{Family: "frontend", CLIP: "dir"}).CheckScorer(); err != nil {
		t.Errorf("with CLIP: %v", err)
	}
	if _, err := (&Env{Family: "frontend"}).Tasks(false); err == nil || !strings.Contains(err.Error(), "tasks file") {
		t.Errorf("no tasks file: %v", err)
	}

	// Rules: frontend pairs (gap ≥ 0.1, the higher chosen) and best
	// attempts; the backend's for the others.
	tr := func(r float64) sweetrl.Trajectory { return sweetrl.Trajectory{Task: tasks[0], Reward: r} }
	trajs := []sweetrl.Trajectory{tr(0.5), tr(0.9), tr(0.55)}
	r := e.Rules()
	if got := r.Pairs(trajs); len(got) != 2 || got[0] != (sweetrl.Pair{Chosen: 1, Rejected: 0}) || got[1] != (sweetrl.Pair{Chosen: 1, Rejected: 2}) {
		t.Errorf("frontend pairs %v", got)
	}
	if got := r.Imitate(trajs); len(got) != 1 || got[0] != 1 {
		t.Errorf("frontend imitates %v, want [1]", got)
	}
	if b := (&Env{Family: "colbench"}).Rules(); b.Pairs != nil || b.Imitate != nil {
		t.Error("colbench has rules other than the backend's")
	}
	if _, err := (&Env{Family: "demo"}).EvalJob(context.Background(), rl.Episodes{}, 1, "", "other.jsonl", 0); err == nil {
		t.Error("a win rate on the demo family gave no error")
	}
}
