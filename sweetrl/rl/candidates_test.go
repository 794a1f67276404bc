package rl

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/tokenizer"
)

// TestTurnCandidates checks that candidates sampled once and ranked by a
// critic's advantage give ActorPairs' pairs, that ranking them again gives
// the same pairs, and that another advantage ranks the same candidates.
func TestTurnCandidates(t *testing.T) {
	m := newModel(t, 0.5)
	tok := tokenizer.Bytes{}
	newPol := func() *Sampler {
		return &Sampler{Model: m, Tok: tok, Sample: engine.SampleParams{Temperature: 1, TopP: 1}, MaxNew: 6, Seed: 1}
	}
	tasks := []sweetrl.Task{{ProblemDescription: "p?", HiddenInformation: "x", GroundTruth: "x=1"}, {ProblemDescription: "q?", HiddenInformation: "y", GroundTruth: "y=2"}}
	proto := sweetrl.Protocol{MaxTurns: 3, ReplyLimit: 4}
	trajs, err := RunEpisodes(context.Background(), tasks, newPol(), &ModelSimulator{Model: m, Tok: tok, MaxNew: 5}, RolloutOptions{Protocol: proto})
	if err != nil {
		t.Fatal(err)
	}
	o := ActorOptions{Protocol: proto, Candidates: 4, PairsPerTurn: 2, DataFraction: 1, BatchTokens: 256, Seed: 3}
	for _, critic := range []Critic{{Model: m, Baseline: BaselinePolicy}, {Model: m, Baseline: BaselinePolicy, WithoutInfo: true}} {
		pol := newPol()
		want, wantSt, err := ActorPairs(trajs, pol, critic, o)
		if err != nil {
			t.Fatal(err)
		}
		pol2 := newPol()
		tc, err := SampleTurnCandidates(trajs, pol2, o)
		if err != nil {
			t.Fatal(err)
		}
		if pol2.calls != pol.calls {
			t.Errorf("the sampler made %d calls, ActorPairs' %d", pol2.calls, pol.calls)
		}
		for range 2 {
			got, st, err := tc.Pairs(CriticAdvantage(critic, pol2, proto.System, o.BatchTokens), false)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) || st != wantSt {
				t.Errorf("without info %v: %d pairs %+v, ActorPairs formed %d %+v", critic.WithoutInfo, len(got), st, len(want), wantSt)
			}
		}
	}
	// An advantage that prefers earlier candidates: every pair sets one of
	// a turn's first two candidates against one of its last two.
	tc, err := SampleTurnCandidates(trajs, newPol(), o)
	if err != nil {
		t.Fatal(err)
	}
	early := func(_ sweetrl.Task, _ []sweetrl.Turn, cands []string) ([]float64, error) {
		a := make([]float64, len(cands))
		for i := range cands {
			a[i] = -float64(i)
		}
		return a, nil
	}
	pairs, st, err := tc.Pairs(early, false)
	if err != nil || st.Turns != tc.Turns() || len(pairs) == 0 {
		t.Fatalf("%v: %+v", err, st)
	}
	in := func(s Seq, seqs []Seq) bool {
		return slices.ContainsFunc(seqs, func(x Seq) bool { return reflect.DeepEqual(x, s) })
	}
	for _, p := range pairs {
		if !slices.ContainsFunc(tc.polSum, func(seqs []Seq) bool { return in(p.Chosen, seqs[:2]) && in(p.Rejected, seqs[2:]) }) {
			t.Errorf("a pair is not a turn's early candidate against its late one")
		}
	}
	// An advantage that ties every candidate forms no pair with dropEqual.
	flat := func(_ sweetrl.Task, _ []sweetrl.Turn, cands []string) ([]float64, error) {
		return make([]float64, len(cands)), nil
	}
	if pairs, st, err := tc.Pairs(flat, true); err != nil || len(pairs) != 0 || st.TiedPairs != 2*st.Turns {
		t.Errorf("equal advantages: %d pairs, %+v, %v; want none, every one tied", len(pairs), st, err)
	}
	if pairs, _, _ := tc.Pairs(flat, false); len(pairs) == 0 {
		t.Error("equal advantages without dropEqual: no pair")
	}
}

// TestBestOfN plays episodes with a best-of-N agent whose advantage
// prefers the longest reply: each reply played is the longest of the N the
// policy drew for that turn (drawn in one batch), and the advantage sees
// the episode's task and dialogue.
func TestBestOfN(t *testing.T) {
	m := newModel(t, 0.5)
	tok := tokenizer.Bytes{}
	tasks := []sweetrl.Task{{ProblemDescription: "p?", HiddenInformation: "x", GroundTruth: "x=1"}, {ProblemDescription: "q?", HiddenInformation: "y", GroundTruth: "y=2"}}
	proto := sweetrl.Protocol{MaxTurns: 2, ReplyLimit: 4}
	var seen [][]string
	long := func(task sweetrl.Task, before []sweetrl.Turn, cands []string) ([]float64, error) {
		if len(before) == 0 || before[0].Content != task.ProblemDescription {
			t.Errorf("advantage given task %q with dialogue %+v", task.ProblemDescription, before)
		}
		seen = append(seen, slices.Clone(cands))
		a := make([]float64, len(cands))
		for i, c := range cands {
			a[i] = float64(len(c))
		}
		return a, nil
	}
	pol := &Sampler{Model: m, Tok: tok, Sample: engine.SampleParams{Temperature: 1, TopP: 1}, MaxNew: 6, Seed: 1}
	b := &BestOfN{Policy: pol, N: 3, Advantage: long}
	trajs, err := RunEpisodes(context.Background(), tasks, b, &ModelSimulator{Model: m, Tok: tok, MaxNew: 5}, RolloutOptions{Protocol: proto})
	if err != nil {
		t.Fatal(err)
	}
	k := 0
	for round := 0; round < proto.MaxTurns; round++ {
		for _, tr := range trajs {
			var agent []sweetrl.Turn
			for _, h := range tr.DialogueHistory {
				if h.Role == sweetrl.RoleAssistant {
					agent = append(agent, h)
				}
			}
			if round >= len(agent) {
				continue
			}
			if k >= len(seen) {
				t.Fatalf("%d turns scored, more played", len(seen))
			}
			cands := seen[k]
			k++
			if len(cands) != 3 {
				t.Fatalf("%d candidates, want 3", len(cands))
			}
			longest := cands[0]
			for _, c := range cands {
				if len(c) > len(longest) {
					longest = c
				}
			}
			if agent[round].Output != longest {
				t.Errorf("played %q, not the longest of %q", agent[round].Output, cands)
			}
		}
	}
	if k != len(seen) {
		t.Errorf("%d turns scored, %d played", len(seen), k)
	}
	if _, _, err := b.ActBatch(context.Background(), nil); err == nil {
		t.Error("best-of-N without the tasks: want an error")
	}
}

// TestWithoutInfo checks the critic without the training-time
// information: its pairs are the critic's pairs without the prefix that
// names the ground truth, and its advantages read no prefix either.
func TestWithoutInfo(t *testing.T) {
	tok := tokenizer.Bytes{}
	task := sweetrl.Task{ProblemDescription: "p?", HiddenInformation: "x", GroundTruth: "x=1"}
	mk := func(reward float64, reply string) sweetrl.Trajectory {
		return sweetrl.Trajectory{Task: task, Reward: reward, DialogueHistory: []sweetrl.Turn{
			{Role: sweetrl.RoleUser, Content: task.ProblemDescription}, {Role: sweetrl.RoleAssistant, Content: reply}}}
	}
	trajs := []sweetrl.Trajectory{mk(1, "x=1"), mk(0, "x=2")}
	with, err := CriticPairs(tok, "sys", trajs, ScoreTurn)
	if err != nil {
		t.Fatal(err)
	}
	without, err := Rules{}.CriticPairsWithoutInfo(tok, "sys", trajs, ScoreTurn)
	if err != nil {
		t.Fatal(err)
	}
	prefix := criticPrefix(tok, task.GroundTruth)
	if len(with) != 1 || len(without) != 1 {
		t.Fatalf("%d and %d pairs, want 1 each", len(with), len(without))
	}
	for _, side := range [][2]Seq{{with[0].Chosen, without[0].Chosen}, {with[0].Rejected, without[0].Rejected}} {
		w, wo := side[0], side[1]
		if !slices.Equal(w.IDs[:len(prefix)], prefix) || !slices.Equal(w.IDs[len(prefix):], wo.IDs) || !slices.Equal(w.W[len(prefix):], wo.W) {
			t.Errorf("without the information: %v, want the critic's %v without its prefix", wo.IDs, w.IDs)
		}
	}
	m := newModel(t, 0.5)
	pol := &Sampler{Model: m, Tok: tok}
	c := Critic{Model: m, Baseline: BaselinePolicy}
	a, err := c.Advantages(pol, "sys", task, trajs[0].DialogueHistory[:1], []string{"x=1", "x=2"}, 256)
	if err != nil {
		t.Fatal(err)
	}
	c.WithoutInfo = true
	b, err := c.Advantages(pol, "sys", task, trajs[0].DialogueHistory[:1], []string{"x=1", "x=2"}, 256)
	if err != nil {
		t.Fatal(err)
	}
	if a[0] == b[0] || a[1] == b[1] {
		t.Errorf("advantages %v with the information, %v without: the prefix changed nothing", a, b)
	}
}
