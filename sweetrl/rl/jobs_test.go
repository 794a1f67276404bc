package rl

import (
	"slices"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/tokenizer"
)

func TestTarget(t *testing.T) {
	m := newModel(t, 0.02)
	given := newAdapter(t, m)
	cases := []struct {
		name    string
		target  Target
		given   bool
		wantLR  float64
		wantAd  string // "given", "fresh" or "none"
		wantErr string
	}{
		{"lora default", Target{Rank: 4}, false, LoRALR, "fresh", ""},
		{"full default", Target{Full: true}, false, RefLR, "none", ""},
		{"lr given", Target{Rank: 4, LR: 0.5}, false, 0.5, "fresh", ""},
		{"adapter given", Target{Rank: 4}, true, LoRALR, "given", ""},
		{"full over an adapter", Target{Full: true}, true, RefLR, "", "merge the --adapter"},
		{"no rank", Target{}, false, LoRALR, "", "--lora-rank 0"},
		{"targets chosen", Target{Rank: 4, Targets: []string{"q", "down"}}, false, LoRALR, "fresh", ""},
		{"targets with full", Target{Full: true, Targets: []string{"q"}}, false, RefLR, "", "--lora-targets"},
		{"targets over an adapter", Target{Rank: 4, Targets: []string{"q"}}, true, LoRALR, "", "--lora-targets"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if lr := c.target.LearningRate(); lr != c.wantLR {
				t.Errorf("learning rate %g, want %g", lr, c.wantLR)
			}
			in := given
			if !c.given {
				in = nil
			}
			ad, err := c.target.Trained(m, in, 3)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch desc := c.target.Describe(ad); c.wantAd {
			case "none":
				if ad != nil || !strings.HasPrefix(desc, "every weight") {
					t.Errorf("adapter %v, %q; want none, every weight", ad != nil, desc)
				}
			case "given":
				if ad != given {
					t.Error("the given adapter is not the one trained")
				}
			case "fresh":
				if ad == nil || ad == given || ad.Config.Rank != c.target.Rank || !strings.HasPrefix(desc, "LoRA r=4") {
					t.Errorf("adapter %v (%q); want a fresh one of rank %d", ad != nil, desc, c.target.Rank)
				}
				if want := c.target.Targets; ad != nil && want != nil && !slices.Equal(ad.Config.Targets, want) {
					t.Errorf("fresh adapter on %v, want %v", ad.Config.Targets, want)
				}
				if ad != nil && c.target.Targets == nil && !slices.Equal(ad.Config.Targets, llama.AllProjections) {
					t.Errorf("fresh adapter on %v, want every projection", ad.Config.Targets)
				}
			}
		})
	}
}

// TestRules checks that a family's rules choose the pairs and the
// imitated trajectories, and that the zero Rules are the backend's.
func TestRules(t *testing.T) {
	tok := tokenizer.Bytes{}
	traj := func(task, answer string, r float64) sweetrl.Trajectory {
		return sweetrl.Trajectory{Task: sweetrl.Task{ProblemDescription: task, GroundTruth: "g"}, Reward: r, Answer: answer,
			DialogueHistory: []sweetrl.Turn{{Role: sweetrl.RoleUser, Content: task}, {Role: sweetrl.RoleAssistant, Content: answer, Input: "in", Output: answer}}}
	}
	trajs := []sweetrl.Trajectory{traj("a", "X", 0.9), traj("a", "Y", 0.5), traj("a", "Z", 1)}
	chosen := func(pairs []PrefPair) []string { // the chosen side's answer, one a pair
		var out []string
		for _, p := range pairs {
			text, err := tok.Decode(p.Chosen.IDs)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range []string{"X", "Y", "Z"} {
				if strings.Contains(text, a) {
					out = append(out, a)
				}
			}
		}
		return out
	}
	// Backend: the success against every lower reward.
	pairs, err := Rules{}.CriticPairs(tok, "sys", trajs, ScoreTurn)
	if err != nil || strings.Join(chosen(pairs), "") != "ZZ" {
		t.Errorf("backend pairs chosen %q (%v), want Z twice", chosen(pairs), err)
	}
	// A family's own rule: every pair it names, in its order.
	r := Rules{Pairs: func([]sweetrl.Trajectory) []sweetrl.Pair { return []sweetrl.Pair{{Chosen: 0, Rejected: 1}} },
		Imitate: func([]sweetrl.Trajectory) []int { return []int{0, 1} }, Imitated: "the first two"}
	for _, form := range []func() ([]PrefPair, error){
		func() ([]PrefPair, error) { return r.CriticPairs(tok, "sys", trajs, ScoreTurn) },
		func() ([]PrefPair, error) { return r.TrajectoryPairs(tok, "sys", trajs) },
	} {
		pairs, err := form()
		if err != nil || strings.Join(chosen(pairs), "") != "X" {
			t.Errorf("family pairs chosen %q (%v), want X", chosen(pairs), err)
		}
	}
	ex, what, err := r.RFTExamples(tok, "sys", trajs)
	if err != nil || len(ex) != 2 || what != "the first two" {
		t.Errorf("family RFT: %d examples of %q (%v), want 2 of the first two", len(ex), what, err)
	}
	ex, what, err = Rules{}.RFTExamples(tok, "sys", trajs)
	if err != nil || len(ex) != 1 || !strings.Contains(what, "reward 1") {
		t.Errorf("backend RFT: %d examples of %q (%v), want the one success", len(ex), what, err)
	}
}

func TestEvalResultName(t *testing.T) {
	tests := []struct{ model, adapter, method string }{
		{"base", "", "base"},
		{"base", "runs/actor", "runs/actor"},
	}
	for _, tc := range tests {
		var r EvalResult
		r.Name(tc.model, tc.adapter)
		if r.Model != tc.model || r.Adapter != tc.adapter || r.Method != tc.method {
			t.Errorf("Name(%q, %q): %+v, want method %q", tc.model, tc.adapter, r, tc.method)
		}
	}
}
