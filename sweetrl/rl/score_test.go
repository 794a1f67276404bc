package rl

import (
	"math"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/tokenizer"
)

// dialogue returns a trajectory whose agent turns say replies (each reply
// followed by a one-letter human turn), with ground truth "g".
func dialogue(replies ...string) sweetrl.Trajectory {
	tr := sweetrl.Trajectory{Task: sweetrl.Task{ProblemDescription: "p", GroundTruth: "g"}}
	tr.DialogueHistory = append(tr.DialogueHistory, sweetrl.Turn{Role: sweetrl.RoleUser, Content: "p"})
	for i, r := range replies {
		tr.DialogueHistory = append(tr.DialogueHistory, sweetrl.Turn{Role: sweetrl.RoleAssistant, Content: r, Output: r})
		if i < len(replies)-1 {
			tr.DialogueHistory = append(tr.DialogueHistory, sweetrl.Turn{Role: sweetrl.RoleUser, Content: "u"})
		}
	}
	return tr
}

// agentRuns returns the positions of s's weighted tokens, grouped by agent
// turn (runs of consecutive positions).
func agentRuns(s Seq) [][]int {
	var runs [][]int
	for i, w := range s.W {
		if w == 0 {
			continue
		}
		if n := len(runs); n > 0 && runs[n-1][len(runs[n-1])-1] == i-1 {
			runs[n-1] = append(runs[n-1], i)
		} else {
			runs = append(runs, []int{i})
		}
	}
	return runs
}

// TestPerTurnScoreHandComputed scores three agent turns of 2, 3 and 5
// tokens (a body of 1, 2 and 4 bytes and its end token) with given
// log-probabilities, and checks both scores against the sums written out.
func TestPerTurnScoreHandComputed(t *testing.T) {
	tok := tokenizer.Bytes{}
	tr := dialogue("a", "bc", "defg")
	logps := [][]float64{{-1, -3}, {-0.5, -1, -1.5}, {-2, -2, -2, -2, -2}}
	// Paper: Σ_t mean_t = (−4/2) + (−3/3) + (−10/5) = −5.
	// Released code: Σ/N = (−4 − 3 − 10)/10 = −1.7.
	tests := []struct {
		kind CriticScore
		want float64
	}{{ScoreTurn, -5}, {ScoreTrajectory, -1.7}}
	for _, tc := range tests {
		s, err := CriticSeq(tok, "", tr, tc.kind)
		if err != nil {
			t.Fatal(err)
		}
		runs := agentRuns(s)
		if len(runs) != 3 || len(runs[0]) != 2 || len(runs[1]) != 3 || len(runs[2]) != 5 {
			t.Fatalf("%s: agent turns of %v tokens, want 2, 3 and 5", tc.kind, runs)
		}
		logp := make([]float32, len(s.IDs)) // logp[i−1] is token i's
		for k, run := range runs {
			for j, i := range run {
				logp[i-1] = float32(logps[k][j])
			}
		}
		if got := weightedSum(s, logp); math.Abs(got-tc.want) > 1e-6 {
			t.Errorf("%s score = %v, want %v", tc.kind, got, tc.want)
		}
	}
}

// TestAnswerTokenShortcut checks the shortcut the trajectory-wide mean
// allows: lowering the log-probability of every token of the answer turn
// by δ leaves the paper's margin unchanged (each side has one answer turn,
// whose mean drops by δ) and changes the released code's by
// −δ·(a⁺ − a⁻), a being the share of answer tokens in each trajectory.
func TestAnswerTokenShortcut(t *testing.T) {
	tok := tokenizer.Bytes{}
	answer := sweetrl.AnswerMarker + " b=4 d=0 g=7"
	chosen := dialogue("b?", "d?", "g?", answer) // asks, then answers
	rejected := dialogue(answer[:len(answer)-4]) // answers at once
	const delta = 0.75
	margin := func(kind CriticScore, lower bool) float64 {
		var sides [2]float64
		for k, tr := range []sweetrl.Trajectory{chosen, rejected} {
			s, err := CriticSeq(tok, "", tr, kind)
			if err != nil {
				t.Fatal(err)
			}
			runs := agentRuns(s)
			logp := make([]float32, len(s.IDs))
			for i := range logp {
				logp[i] = -float32(i%7+1) / 4 // arbitrary, the same either way
			}
			if lower {
				for _, i := range runs[len(runs)-1] { // the answer turn
					logp[i-1] -= delta
				}
			}
			sides[k] = weightedSum(s, logp)
		}
		return sides[0] - sides[1]
	}
	share := func(tr sweetrl.Trajectory) float64 {
		s, _ := CriticSeq(tok, "", tr, ScoreTrajectory)
		runs := agentRuns(s)
		n := 0
		for _, r := range runs {
			n += len(r)
		}
		return float64(len(runs[len(runs)-1])) / float64(n)
	}
	aPos, aNeg := share(chosen), share(rejected)
	if aNeg != 1 || aPos >= aNeg {
		t.Fatalf("answer shares %v (chosen) and %v (rejected): the test wants the rejected side all answer", aPos, aNeg)
	}
	if d := margin(ScoreTurn, true) - margin(ScoreTurn, false); math.Abs(d) > 1e-5 {
		t.Errorf("paper's margin moved by %v, want 0", d)
	}
	want := -delta * (aPos - aNeg) // > 0: the shortcut pays
	if d := margin(ScoreTrajectory, true) - margin(ScoreTrajectory, false); math.Abs(d-want) > 1e-5 || want <= 0 {
		t.Errorf("released code's margin moved by %v, want %v", d, want)
	}
}

// TestAdvantageBaselines checks both baselines of the candidates'
// advantage: the reference's (the critic's frozen reference, with the
// ground truth) is 0 for an untrained critic and the log-ratio for a
// trained one; the policy's (the sampling policy, without the ground
// truth) is the critic's mean minus the policy's mean of the raw reply.
func TestAdvantageBaselines(t *testing.T) {
	m := newModel(t, 0.5)
	tok := tokenizer.Bytes{}
	pol := &Sampler{Model: m, Tok: tok, Sample: engine.SampleParams{Temperature: 1, TopP: 1}, MaxNew: 4, Seed: 1}
	task := sweetrl.Task{ProblemDescription: "p?", GroundTruth: "x=1"}
	before := []sweetrl.Turn{{Role: sweetrl.RoleUser, Content: "p?"}}
	cands := []string{"x?", "think OUTPUT: x?", "I WANT TO ANSWER: x=1"}
	fresh, err := m.NewAdapter(llama.LoRAConfig{Rank: 2, Alpha: 4, Targets: []string{"q", "v", "down"}}, 3) // B = 0: the critic equals its reference
	if err != nil {
		t.Fatal(err)
	}
	adv, err := Critic{Model: m, Adapter: fresh}.Advantages(pol, "sys", task, before, cands, 512)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range adv {
		if a != 0 {
			t.Errorf("reference baseline, untrained critic: candidate %d advantage %v, want 0", i, a)
		}
	}
	trained := newAdapter(t, m)
	prompt := withSystem("sys", sweetrl.TurnsToMessages(before))
	for _, tc := range []struct {
		name string
		bl   AdvantageBaseline
	}{{"reference", BaselineReference}, {"policy", BaselinePolicy}} {
		got, err := Critic{Model: m, Adapter: trained, Baseline: tc.bl}.Advantages(pol, "sys", task, before, cands, 512)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range cands {
			msgs := append(prompt[:len(prompt):len(prompt)], tokenizer.Message{Role: sweetrl.RoleAssistant, Content: c})
			cs, err := lastTurnSeq(tok, criticPrefix(tok, task.GroundTruth), msgs, mean)
			if err != nil {
				t.Fatal(err)
			}
			if text, _ := tok.Decode(cs.IDs); !strings.HasPrefix(text, "In light that the final answer is: x=1.s>sys") || !strings.HasSuffix(text, c) {
				t.Errorf("critic's view of candidate %d: %q", i, text)
			}
			ps, err := lastTurnSeq(tok, nil, msgs, mean)
			if err != nil {
				t.Fatal(err)
			}
			crit, _ := Scores(m, trained, []Seq{cs}, 512)
			var base []float64
			if tc.bl == BaselineReference {
				base, _ = Scores(m, nil, []Seq{cs}, 512)
			} else {
				base, _ = Scores(m, nil, []Seq{ps}, 512)
			}
			if want := crit[0] - base[0]; math.Abs(got[i]-want) > 1e-5 || want == 0 {
				t.Errorf("%s baseline: candidate %d advantage %v, want %v", tc.name, i, got[i], want)
			}
		}
	}
	if _, err := (Critic{Model: m}).Advantages(pol, "", task, before, cands, 512); err == nil {
		t.Error("a full critic with no reference ranked candidates against the reference baseline")
	}
}
