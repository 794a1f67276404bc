package demotask

import (
	"context"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/tokenizer"
)

func TestBudgetTasks(t *testing.T) {
	tasks := BudgetTasks(300, 7)
	if again := BudgetTasks(10, 7); again[9].ProblemDescription != tasks[9].ProblemDescription || again[9].HiddenInformation != tasks[9].HiddenInformation {
		t.Error("the first tasks of a larger call differ")
	}
	for i, task := range tasks {
		cands := BudgetCandidateLetters(task)
		hidden, err := parseHidden(task.HiddenInformation)
		if err != nil || len(cands) != BudgetCandidates || task.GroundTruth != task.HiddenInformation || len(task.TestCases) != NumKeys {
			t.Fatalf("task %d: %+v (%v)", i, task, err)
		}
		for _, p := range hidden {
			if !strings.ContainsRune(string(cands), rune(p.key)) {
				t.Errorf("task %d: key %c is not among the listed letters %q", i, p.key, cands)
			}
		}
	}
	train, test := BudgetSplit(7, 200, 100)
	seen := map[string]bool{}
	for _, tk := range train {
		seen[tk.ProblemDescription+tk.HiddenInformation] = true
	}
	for _, tk := range test {
		if seen[tk.ProblemDescription+tk.HiddenInformation] {
			t.Fatal("a test task is also a train task")
		}
	}
}

// TestBudgetRules checks the family's rules: a distractor is answered "no
// c", and six agent turns allow asking every letter once and answering,
// no more.
func TestBudgetRules(t *testing.T) {
	task := BudgetTasks(1, 3)[0]
	cands := BudgetCandidateLetters(task)
	hidden, _ := parseHidden(task.HiddenInformation)
	isKey := func(c byte) bool {
		for _, p := range hidden {
			if p.key == c {
				return true
			}
		}
		return false
	}
	for _, c := range cands {
		got, err := Simulator{}.Respond(context.Background(), task, []tokenizer.Message{{Role: sweetrl.RoleAssistant, Content: string(c) + "?"}})
		if err != nil {
			t.Fatal(err)
		}
		if want := "no " + string(c); !isKey(c) && got != want {
			t.Errorf("distractor %c answered %q, want %q", c, got, want)
		} else if isKey(c) && !strings.HasPrefix(got, string(c)+"=") {
			t.Errorf("key %c answered %q", c, got)
		}
	}
	if p := BudgetProtocol(); p.MaxTurns != BudgetCandidates+1 {
		t.Errorf("budget of %d turns, want %d", p.MaxTurns, BudgetCandidates+1)
	}
}

// TestBudgetScripted checks the scripted dialogues: every efficient or
// exhaustive one succeeds, none exceeds the budget, and some successful
// ones hold a wasted turn (a repeated or empty question) — what rejection
// fine-tuning copies.
func TestBudgetScripted(t *testing.T) {
	tasks := BudgetTasks(400, 5)
	trajs := BudgetScriptedTrajectories(tasks, 1, 5)
	if len(trajs) != len(tasks) {
		t.Fatalf("%d trajectories for %d tasks", len(trajs), len(tasks))
	}
	wastedWins, wastedLosses, successes := 0, 0, 0
	for i, tr := range trajs {
		asked := map[string]bool{}
		turns, wasted := 0, false
		for _, h := range tr.DialogueHistory {
			if h.Role != sweetrl.RoleAssistant {
				continue
			}
			turns++
			if strings.HasPrefix(h.Content, sweetrl.AnswerMarker) {
				continue
			}
			if asked[h.Content] || h.Content == "?" {
				wasted = true
			}
			asked[h.Content] = true
		}
		if turns > BudgetProtocol().MaxTurns {
			t.Fatalf("trajectory %d: %d agent turns", i, turns)
		}
		if s := score(mustHidden(t, tr.Task), tr.Answer); s.Reward != tr.Reward {
			t.Errorf("trajectory %d: reward %v, scorer says %v", i, tr.Reward, s.Reward)
		}
		if tr.Reward == 1 {
			successes++
		}
		switch {
		case wasted && tr.Reward == 1:
			wastedWins++
		case wasted:
			wastedLosses++
		}
	}
	if wastedWins == 0 || wastedLosses == 0 || successes == 0 || successes == len(trajs) {
		t.Errorf("%d successes of %d; wasted turns in %d successful and %d failed trajectories: want some of each",
			successes, len(trajs), wastedWins, wastedLosses)
	}
}

func mustHidden(t *testing.T, task sweetrl.Task) []pair {
	t.Helper()
	h, err := parseHidden(task.HiddenInformation)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
