package demotask

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/turnwise/turnwise/sweetrl"
)

// The budget family: hidden keys among distractors, under a turn budget.
//
// A task lists BudgetCandidates letters, of which NumKeys are keys with a
// hidden digit and the others are distractors:
//
//	problem:  Need digits for 3 of b c d g h.
//	hidden:   b=4 d=0 g=7
//
// The Simulator and the Scorer are the keys family's: asking a key reveals
// its digit, asking a distractor is answered "no c", and the reward is the
// fraction of keys given the right digit. The turn budget (BudgetProtocol:
// six agent turns, the sixth reply being the answer) allows asking every
// candidate once and answering, and no more: an agent that asks candidates
// until it knows the three keys and then answers always succeeds, while
// every wasted turn — asking a candidate twice, a question naming no
// candidate — fails whenever the last key comes late. The scripted
// dialogues a model starts from contain such wasted turns in successful
// trajectories too (when the budget happened to allow them), which
// rejection fine-tuning copies, while a critic that sees the answer can
// tell that the turn taught nothing.

// BudgetCandidates is the number of letters a budget task lists.
const BudgetCandidates = 5

const budgetStream = 0x627564676574 // "budget"

// BudgetProtocol returns the budget family's episode rules: no system
// prompt, six agent turns, human replies cut to 400 characters.
func BudgetProtocol() sweetrl.Protocol {
	return sweetrl.Protocol{System: "", MaxTurns: BudgetCandidates + 1, ReplyLimit: 400}
}

// DescribeBudget returns a short paragraph describing the budget family.
func DescribeBudget() string {
	return "Each task lists five letters from a to h, three of which are keys with a hidden digit " +
		`("Need digits for 3 of b c d g h."); the human answers "b=4" for a key and "no c" for a distractor. ` +
		"The agent has six turns: enough to ask every letter once and answer, so a repeated or empty " +
		"question fails whenever the last key comes late."
}

// BudgetTasks returns n distinct budget tasks, deterministically for a
// seed (the first n of a larger call). It panics unless 0 <= n <= NumTasks.
func BudgetTasks(n int, seed uint64) []sweetrl.Task {
	if n < 0 || n > NumTasks {
		panic(fmt.Sprintf("demotask: %d budget tasks asked for; at most %d", n, NumTasks))
	}
	rng := rand.New(rand.NewPCG(seed, budgetStream))
	tasks := make([]sweetrl.Task, 0, n)
	seen := make(map[string]bool, n)
	for len(tasks) < n {
		cands := make([]byte, BudgetCandidates)
		for i, p := range rng.Perm(len(Letters))[:BudgetCandidates] {
			cands[i] = Letters[p]
		}
		slices.Sort(cands)
		var keys []byte
		for _, i := range rng.Perm(BudgetCandidates)[:NumKeys] {
			keys = append(keys, cands[i])
		}
		slices.Sort(keys)
		digits := make([]int, NumKeys)
		for i := range digits {
			digits[i] = rng.IntN(10)
		}
		t := newTask(keys, digits)
		names := make([]string, len(cands))
		for i, c := range cands {
			names[i] = string(c)
		}
		t.ProblemDescription = fmt.Sprintf("Need digits for %d of %s.", NumKeys, strings.Join(names, " "))
		if seen[t.ProblemDescription+t.HiddenInformation] {
			continue
		}
		seen[t.ProblemDescription+t.HiddenInformation] = true
		tasks = append(tasks, t)
	}
	return tasks
}

// BudgetSplit is Split for the budget family.
func BudgetSplit(seed uint64, train, test int) (trainTasks, testTasks []sweetrl.Task) {
	if train < 0 || test < 0 || train+test > NumTasks {
		panic(fmt.Sprintf("demotask: a split of %d train and %d test tasks; there are %d", train, test, NumTasks))
	}
	all := BudgetTasks(train+test, seed)
	return all[:train:train], all[train:]
}

// BudgetCandidateLetters returns the letters a budget task lists, in order.
func BudgetCandidateLetters(task sweetrl.Task) []byte {
	_, list, _ := strings.Cut(task.ProblemDescription, " of ")
	list = strings.TrimSuffix(list, ".")
	var out []byte
	for _, f := range strings.Fields(list) {
		if len(f) == 1 {
			out = append(out, f[0])
		}
	}
	return out
}

// BudgetScriptedTrajectories plays every budget task perTask times with a
// scripted agent, deterministically for a seed, the supervised start of a
// model. The agent asks the listed letters in order ("b?") and each style
// differs in what else it does:
//
//   - efficient (30%): stops asking once it knows the three keys, answers;
//   - exhaustive (15%): asks every letter, then answers (six turns: it
//     succeeds, with wasted turns after the last key);
//   - wasteful (30%): efficient, with one or two wasted questions inserted
//     at uniformly drawn points (even odds: a letter asked again, or "?"):
//     it succeeds only when the budget still allows the answer;
//   - partial (15%): stops after a uniformly drawn number of letters
//     (1 to 4) and guesses the digits it does not know;
//   - hasty (10%): answers at once, guessing every digit.
//
// A reply that would exceed the budget is the answer, as the protocol
// says. It panics if perTask is negative or a task is not the family's.
func BudgetScriptedTrajectories(tasks []sweetrl.Task, perTask int, seed uint64) []sweetrl.Trajectory {
	if perTask < 0 {
		panic(fmt.Sprintf("demotask: %d scripted trajectories per task", perTask))
	}
	rng := rand.New(rand.NewPCG(seed, budgetStream+1))
	out := make([]sweetrl.Trajectory, 0, len(tasks)*perTask)
	for i, task := range tasks {
		hidden, err := parseHidden(task.HiddenInformation)
		cands := BudgetCandidateLetters(task)
		if err != nil || len(cands) != BudgetCandidates {
			panic(fmt.Sprintf("demotask: budget scripted trajectories: task %d is not a budget task (%v)", i, err))
		}
		for range perTask {
			out = append(out, playBudget(task, hidden, cands, rng))
		}
	}
	return out
}

// budgetPlan returns the scripted agent's questions, in order.
func budgetPlan(rng *rand.Rand, hidden []pair, cands []byte) []string {
	// The prefix of the candidates that holds every key.
	last := 0
	for i, c := range cands {
		if slices.ContainsFunc(hidden, func(p pair) bool { return p.key == c }) {
			last = i
		}
	}
	asks := func(letters []byte) []string {
		var q []string
		for _, c := range letters {
			q = append(q, string(c)+"?")
		}
		return q
	}
	switch u := rng.IntN(20); {
	case u < 6: // efficient
		return asks(cands[:last+1])
	case u < 9: // exhaustive
		return asks(cands)
	case u < 15: // wasteful
		q := asks(cands[:last+1])
		for range 1 + rng.IntN(2) {
			w := "?"
			if rng.IntN(2) == 0 {
				w = q[rng.IntN(len(q))]
				if w == "?" {
					w = string(cands[0]) + "?"
				}
			}
			q = slices.Insert(q, rng.IntN(len(q)+1), w)
		}
		return q
	case u < 18: // partial
		return asks(cands[:1+rng.IntN(BudgetCandidates-1)])
	}
	return nil // hasty
}

// playBudget plays one scripted budget episode.
func playBudget(task sweetrl.Task, hidden []pair, cands []byte, rng *rand.Rand) sweetrl.Trajectory {
	ctx := context.Background()
	e := sweetrl.NewEpisodeWith(task, BudgetProtocol())
	known := map[byte]byte{}
	for _, q := range budgetPlan(rng, hidden, cands) {
		agentTurn(e, q)
		if !e.NeedsHuman() { // the budget: this was the answer
			break
		}
		reply, err := Simulator{}.Respond(ctx, task, e.Messages())
		if err != nil {
			panic("demotask: scripted budget episode: " + err.Error())
		}
		if err := e.HumanTurn(reply); err != nil {
			panic("demotask: scripted budget episode: " + err.Error())
		}
		for _, p := range parsePairs(reply) {
			known[p.key] = p.digit
		}
	}
	if !e.Done() {
		agentTurn(e, answerWith(hidden, known, rng))
	}
	return e.Trajectory(score(hidden, e.Answer()).Reward)
}

// answerWith is the answer giving the known digits and guessing the rest.
func answerWith(hidden []pair, known map[byte]byte, rng *rand.Rand) string {
	pairs := make([]string, len(hidden))
	for i, p := range hidden {
		d, ok := known[p.key]
		if !ok {
			d = byte('0' + rng.IntN(10))
		}
		pairs[i] = string([]byte{p.key, '=', d})
	}
	return sweetrl.AnswerMarker + " " + strings.Join(pairs, " ")
}
