package demotask

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/turnwise/turnwise/sweetrl"
)

// tallyBefore plays the replies outs on task and returns the dialogue.
func tallyBefore(t *testing.T, task sweetrl.Task, outs ...string) []sweetrl.Turn {
	t.Helper()
	e, err := replayTally(task, []sweetrl.Turn{{Role: sweetrl.RoleUser, Content: task.ProblemDescription}}, outs)
	if err != nil {
		t.Fatal(err)
	}
	return e.History()
}

// TestTallyScriptedValue checks the exact value against cases computed by
// hand and against the mean reward of scripted episodes sampled from the
// same state.
func TestTallyScriptedValue(t *testing.T) {
	first := tallyTask([]byte("bcfkn"), []byte("bcf")) // the keys come first
	last := tallyTask([]byte("bcfkn"), []byte("bcn"))  // the last key is the fifth letter
	val := func(task sweetrl.Task, reply string, outs ...string) float64 {
		t.Helper()
		v, err := TallyScriptedValue(task, tallyBefore(t, task, outs...), reply)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// At 3/3 after three turns, answering succeeds; a wasted turn is
	// followed by an answer with probability 3/4, and failing that by a
	// sixth turn that succeeds only as an answer: 3/4 + 1/4 · 3/4.
	if v := val(first, TallyAnswer, TallyNext, TallyNext, TallyNext); v != 1 {
		t.Errorf("answer at 3/3: %v, want 1", v)
	}
	if v := val(first, "?", TallyNext, TallyNext, TallyNext); math.Abs(v-0.9375) > 1e-15 {
		t.Errorf("a wasted turn at 3/3 after three turns: %v, want 0.9375", v)
	}
	// Answering before any question reveals no key: reward 0.
	if v := val(first, TallyAnswer); v != 0 {
		t.Errorf("answering at once: %v, want 0", v)
	}
	// When the last key is the fifth letter, a wasted turn before 3/3
	// leaves no turn to answer in: the reward is at most 2/3.
	if v := val(last, "?", TallyNext); v > 2.0/3+1e-12 {
		t.Errorf("a wasted turn when the last key is the fifth letter: %v, want ≤ 2/3", v)
	}
	if a, b := val(last, TallyNext, TallyNext), val(last, "?", TallyNext); !(a > b) {
		t.Errorf("next? %v, not above a wasted turn %v", a, b)
	}
	// A named letter is read by the simulator as the script's own are.
	if a, b := val(first, "b?"), val(first, TallyNext); a != b {
		t.Errorf("asking b by name %v, by next? %v", a, b)
	}
	// Monte Carlo: the scripted agent played from the state after the reply.
	rng := rand.New(rand.NewPCG(4, 5))
	policy := tallyScripted(rng)
	for _, tc := range []struct {
		task  sweetrl.Task
		reply string
		outs  []string
	}{{last, TallyNext, []string{"?"}}, {first, "?", nil}, {last, TallyNext, nil}} {
		want := val(tc.task, tc.reply, tc.outs...)
		_, keys, _ := parseTally(tc.task)
		const n = 6000
		var sum, sq float64
		for range n {
			before := tallyBefore(t, tc.task, tc.outs...)
			outs := []string{tc.reply}
			e, err := replayTally(tc.task, before, outs)
			if err != nil {
				t.Fatal(err)
			}
			for !e.Done() {
				o := policy(tallyStateOf(tc.task, e.History()))
				outs = append(outs, o)
				if e, err = replayTally(tc.task, before, outs); err != nil {
					t.Fatal(err)
				}
			}
			r := tallyScore(keys, e.Answer()).Reward
			sum += r
			sq += r * r
		}
		mean := sum / n
		se := math.Sqrt((sq/n - mean*mean) / n)
		if math.Abs(mean-want) > 4*se+1e-9 {
			t.Errorf("%q after %q: exact %v, sampled %v ± %v", tc.reply, tc.outs, want, mean, se)
		}
	}
	other := tallyTask([]byte("bcfkm"), []byte("bcf"))
	if _, err := TallyScriptedValue(first, tallyBefore(t, other, TallyNext), TallyNext); err == nil {
		t.Error("a dialogue of another task: want an error")
	}
	if _, err := TallyScriptedValue(first, tallyBefore(t, first, TallyAnswer), TallyNext); err == nil {
		t.Error("a dialogue that has ended: want an error")
	}
}
