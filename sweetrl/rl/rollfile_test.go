package rl

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/tokenizer"
)

// countingAgent asks as many questions as its task's problem description
// says (a number), then answers.
type countingAgent struct{}

func (countingAgent) ActBatch(_ context.Context, convs [][]tokenizer.Message) ([]string, []string, error) {
	in, out := make([]string, len(convs)), make([]string, len(convs))
	for i, c := range convs {
		asked := 0
		for _, m := range c {
			if m.Role == "assistant" {
				asked++
			}
		}
		n, _ := strconv.Atoi(c[1].Content)
		in[i] = c[len(c)-1].Content
		out[i] = "OUTPUT: again?"
		if asked >= n {
			out[i] = "I WANT TO ANSWER: done " + c[1].Content
		}
	}
	return in, out, nil
}

// halfScorer gives every answer reward 0.5.
type halfScorer struct{}

func (halfScorer) Score(_ context.Context, tasks []sweetrl.Task, _ []string) ([]sweetrl.Score, error) {
	s := make([]sweetrl.Score, len(tasks))
	for i := range s {
		s[i] = sweetrl.Score{Reward: 0.5}
	}
	return s, nil
}

// peekingSimulator is the scripted simulator that records, at each reply,
// how many lines the rollout file being written holds.
type peekingSimulator struct {
	partial string
	seen    []int
}

func (p *peekingSimulator) Respond(ctx context.Context, task sweetrl.Task, history []tokenizer.Message) (string, error) {
	b, _ := os.ReadFile(p.partial)
	p.seen = append(p.seen, bytes.Count(b, []byte("\n")))
	return sweetrl.ScriptedSimulator{}.Respond(ctx, task, history)
}

// TestRolloutWritesEpisodesAsTheyEnd: in a chunk whose episodes end in
// different rounds, each episode is in the file as soon as it and those
// before it have ended — while the later ones are still played — and an
// episode that ends before an earlier one waits for it, so the file stays
// in task order.
func TestRolloutWritesEpisodesAsTheyEnd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "roll.jsonl")
	// Episode 0 ends in round 1, episode 2 in round 2, episode 1 in round 3
	// and episode 3 in round 4; each round but the last asks the simulator.
	tasks := []sweetrl.Task{{ProblemDescription: "0"}, {ProblemDescription: "2"}, {ProblemDescription: "1"}, {ProblemDescription: "3"}}
	sim := &peekingSimulator{partial: path + ".partial"}
	trajs, err := RolloutToFile(context.Background(), tasks, func(int) BatchAgent { return countingAgent{} }, sim, halfScorer{},
		RolloutOptions{Protocol: sweetrl.ColBenchProtocol()}, FileRolloutOptions{Path: path, Chunk: 4})
	if err != nil {
		t.Fatal(err)
	}
	// Replies: round 1 to episodes 1, 2, 3, episode 0 written; round 2 to
	// 1 and 3, episode 2 ended but waiting for 1; round 3 to episode 3,
	// with 0, 1 and 2 in.
	want := []int{1, 1, 1, 1, 1, 3}
	if !slices.Equal(sim.seen, want) {
		t.Errorf("the file held %v lines at the simulator's replies, want %v", sim.seen, want)
	}
	got, err := sweetrl.LoadTrajectories(path)
	if err != nil || len(got) != 4 || len(trajs) != 4 {
		t.Fatalf("%d trajectories written, %d returned (%v); want 4", len(got), len(trajs), err)
	}
	for i, tr := range got {
		if tr.Task.ProblemDescription != tasks[i].ProblemDescription || tr.Reward != 0.5 {
			t.Errorf("line %d: task %q reward %g; want task %q scored 0.5", i+1, tr.Task.ProblemDescription, tr.Reward, tasks[i].ProblemDescription)
		}
	}
}

// TestRolloutOrder: ByTask keeps a task's episodes together, ByAttempt
// lists every task, then every task again.
func TestRolloutOrder(t *testing.T) {
	tasks := []sweetrl.Task{{ProblemDescription: "a"}, {ProblemDescription: "b"}, {ProblemDescription: "c"}}
	for _, tc := range []struct {
		flag string
		want string
	}{
		{"task", "aabbcc"},
		{"reference", "abcabc"},
	} {
		o, err := ParseRolloutOrder(tc.flag)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		for _, e := range o.Episodes(tasks, 2) {
			got += e.ProblemDescription
		}
		if got != tc.want {
			t.Errorf("--order %s: %s, want %s", tc.flag, got, tc.want)
		}
	}
	if _, err := ParseRolloutOrder("random"); err == nil {
		t.Error("--order random was accepted")
	}
}
