package pipeline

import (
	"context"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/sweetrl/demotask"
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
	if _, desc, err := e.NewScorer(context.Background()); err != nil || desc == "" {
		t.Errorf("demo scorer: %q, %v", desc, err)
	}
	if _, err := (&Env{Family: "x"}).Protocol(); err == nil {
		t.Error("an unknown family has a protocol")
	}
}
