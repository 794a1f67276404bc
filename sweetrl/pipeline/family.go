package pipeline

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/sweetrl/demotask"
)

// Family is a built-in task family: its tasks, rules, human simulator,
// scorer, scripted dialogues for the supervised start, and the decisions
// the critic check ranks.
type Family struct {
	Name     string
	Describe string
	Protocol sweetrl.Protocol
	// Split returns train and test tasks that share no task; the train
	// tasks do not depend on the number of test tasks.
	Split func(seed uint64, train, test int) (trainTasks, testTasks []sweetrl.Task)
	// Scripted plays perTask scripted dialogues of mixed quality per task.
	Scripted func(tasks []sweetrl.Task, perTask int, seed uint64) []sweetrl.Trajectory
	Sim      sweetrl.Simulator
	Scorer   sweetrl.Scorer
	// Checks returns the decisions of task the critic check ranks.
	Checks func(ctx context.Context, task sweetrl.Task) ([]CheckCase, error)
	// Value, where the family has one, is the exact expected reward of an
	// agent reply after the dialogue before when the scripted agent plays
	// on (the oracle advantage); nil: none.
	Value func(task sweetrl.Task, before []sweetrl.Turn, reply string) (float64, error)
}

// CheckCase is one decision of the critic check: in the state Before (the
// dialogue up to an agent turn), the reply Better should get a higher
// advantage than the reply Worse.
type CheckCase struct {
	Name          string
	Before        []sweetrl.Turn
	Better, Worse string
}

// Families are the built-in task families' names.
var Families = []string{"keys", "budget", "tally"}

// LookupFamily returns the built-in family of the given name: "keys" (the
// demo's first family), "budget" (hidden keys among distractors under a
// turn budget) or "tally" (the budget's rules with a running tally in the
// human's replies).
func LookupFamily(name string) (Family, error) {
	switch name {
	case "keys", "":
		return Family{Name: "keys", Describe: demotask.Describe(), Protocol: demotask.Protocol(), Split: demotask.Split,
			Scripted: demotask.ScriptedTrajectories, Sim: demotask.Simulator{}, Scorer: demotask.Scorer{}, Checks: keysChecks}, nil
	case "budget":
		return Family{Name: "budget", Describe: demotask.DescribeBudget(), Protocol: demotask.BudgetProtocol(), Split: demotask.BudgetSplit,
			Scripted: demotask.BudgetScriptedTrajectories, Sim: demotask.Simulator{}, Scorer: demotask.Scorer{}, Checks: budgetChecks}, nil
	case "tally":
		return Family{Name: "tally", Describe: demotask.DescribeTally(), Protocol: demotask.TallyProtocol(), Split: demotask.TallySplit,
			Scripted: demotask.TallyScriptedTrajectories, Sim: demotask.TallySimulator{}, Scorer: demotask.TallyScorer{}, Checks: tallyChecks,
			Value: demotask.TallyScriptedValue}, nil
	}
	return Family{}, fmt.Errorf("unknown task family %q (want one of %s)", name, strings.Join(Families, ", "))
}

// answers returns a task's right answer, and a wrong one (every digit one
// more, modulo 10).
func answers(t sweetrl.Task) (right, wrong string) {
	var bad []string
	for _, f := range strings.Fields(t.GroundTruth) {
		k, d, _ := strings.Cut(f, "=")
		n, _ := strconv.Atoi(d)
		bad = append(bad, k+"="+strconv.Itoa((n+1)%10))
	}
	return sweetrl.AnswerMarker + " " + t.GroundTruth, sweetrl.AnswerMarker + " " + strings.Join(bad, " ")
}

// guess is an answer given without asking: every digit 0.
func guess(t sweetrl.Task) string {
	var g []string
	for _, tc := range t.TestCases {
		g = append(g, tc.Call+"=0")
	}
	return sweetrl.AnswerMarker + " " + strings.Join(g, " ")
}

// play returns the history after the agent asks each question of asks and
// the family's simulator replies.
func play(ctx context.Context, f Family, t sweetrl.Task, asks []string) ([]sweetrl.Turn, error) {
	e := sweetrl.NewEpisodeWith(t, f.Protocol)
	for _, q := range asks {
		if _, err := e.AgentTurn("", q); err != nil {
			return nil, err
		}
		r, err := f.Sim.Respond(ctx, t, e.Messages())
		if err != nil {
			return nil, err
		}
		if err := e.HumanTurn(r); err != nil {
			return nil, err
		}
	}
	return e.History(), nil
}

// keysChecks: at the start, ask a key over answering with guesses; once
// every key is known, answer right over asking again, and over a wrong
// answer.
func keysChecks(ctx context.Context, t sweetrl.Task) ([]CheckCase, error) {
	f, _ := LookupFamily("keys")
	var asks []string
	for _, tc := range t.TestCases {
		asks = append(asks, tc.Call+"?")
	}
	start, err := play(ctx, f, t, nil)
	if err != nil {
		return nil, err
	}
	known, err := play(ctx, f, t, asks)
	if err != nil {
		return nil, err
	}
	right, wrong := answers(t)
	return []CheckCase{
		{"at the start, ask a key over answering with guesses", start, asks[0], guess(t)},
		{"all keys known, answer right over asking again", known, right, asks[0]},
		{"all keys known, answer right over a wrong answer", known, right, wrong},
	}, nil
}

// budgetChecks: at the start, ask over guessing; after the first letter,
// ask the next letter over asking the first again (a wasted turn); once the
// keys are known (asking the letters in order), answer right over asking
// again and over a wrong answer.
func budgetChecks(ctx context.Context, t sweetrl.Task) ([]CheckCase, error) {
	f, _ := LookupFamily("budget")
	cands := demotask.BudgetCandidateLetters(t)
	keys := map[string]bool{}
	for _, tc := range t.TestCases {
		keys[tc.Call] = true
	}
	var asks []string
	found := 0
	for _, c := range cands {
		asks = append(asks, string(c)+"?")
		if keys[string(c)] {
			found++
		}
		if found == len(keys) {
			break
		}
	}
	start, err := play(ctx, f, t, nil)
	if err != nil {
		return nil, err
	}
	one, err := play(ctx, f, t, asks[:1])
	if err != nil {
		return nil, err
	}
	known, err := play(ctx, f, t, asks)
	if err != nil {
		return nil, err
	}
	right, wrong := answers(t)
	return []CheckCase{
		{"at the start, ask a letter over answering with guesses", start, asks[0], guess(t)},
		{"after one letter, ask the next over asking it again", one, string(cands[1]) + "?", asks[0]},
		{"all keys known, answer right over asking again", known, right, asks[0]},
		{"all keys known, answer right over a wrong answer", known, right, wrong},
	}, nil
}

// tallyChecks: at the start, ask about the next letter over answering;
// after one letter (the count below 3/3), ask about the next over a
// question asking about none (a wasted turn, fatal when the last key is the
// fifth letter); once two keys are known (asking the letters in order), ask
// about the next over answering; once the count reads 3/3, answer over
// asking on. (A tally answer is the keys the replies revealed: answering is
// the whole of the decision.)
func tallyChecks(ctx context.Context, t sweetrl.Task) ([]CheckCase, error) {
	f, _ := LookupFamily("tally")
	cands := demotask.TallyListed(t)
	if len(cands) != demotask.TallyCandidates {
		return nil, fmt.Errorf("not a tally task: %d listed letters", len(cands))
	}
	keys := map[string]bool{}
	for _, tc := range t.TestCases {
		keys[tc.Call] = true
	}
	var asks []string
	two := 0 // asks until two keys are known
	found := 0
	for _, c := range cands {
		if found == len(keys) {
			break
		}
		asks = append(asks, demotask.TallyNext)
		if keys[string(c)] {
			found++
			if found == 2 {
				two = len(asks)
			}
		}
	}
	var states [4][]sweetrl.Turn
	for i, n := range []int{0, 1, two, len(asks)} {
		var err error
		if states[i], err = play(ctx, f, t, asks[:n]); err != nil {
			return nil, err
		}
	}
	return []CheckCase{
		{"at the start, ask next over answering", states[0], demotask.TallyNext, demotask.TallyAnswer},
		{"after one letter, ask next over an empty question", states[1], demotask.TallyNext, "?"},
		{"count 2/3, ask next over answering", states[2], demotask.TallyNext, demotask.TallyAnswer},
		{"count 3/3, answer over asking on", states[3], demotask.TallyAnswer, demotask.TallyNext},
	}, nil
}
