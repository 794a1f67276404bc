package demotask

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/turnwise/turnwise/sweetrl"
)

// Shape of the task family.
const (
	// Letters are the letters keys are drawn from.
	Letters = "abcdefgh"
	// NumKeys is the number of keys of a task, and so of its unit tests.
	NumKeys = 3
	// NumTasks is the number of distinct tasks there are: the 56 sets of
	// three keys times the 1000 ways to give them digits.
	NumTasks = 56 * 1000
)

// Streams of the PCG generator, so that the same seed gives unrelated
// draws to Tasks and to ScriptedTrajectories.
const (
	taskStream     = 0x7461736b73   // "tasks"
	scriptedStream = 0x736372697074 // "script"
)

// Protocol returns the episode rules of the task family: no system prompt,
// at most six agent turns (enough to ask every key and answer, with turns to
// spare), and human replies cut to 400 characters, which the Simulator's
// replies never reach.
func Protocol() sweetrl.Protocol {
	return sweetrl.Protocol{System: "", MaxTurns: 6, ReplyLimit: 400}
}

// Describe returns a short paragraph describing the task family, for help
// texts and docs/sweetrl.md.
func Describe() string {
	return "Each task names three keys, letters from a to h, each with a hidden digit " +
		`("Need digits for b d g."). Only the human simulator knows the digits: ` +
		`the agent asks for one key at a time ("b?", answered "b=4") and ends with ` +
		`"I WANT TO ANSWER: b=4 d=0 g=7". The reward is the fraction of keys given ` +
		"the right digit, so an agent that answers without asking gets about 0.1 " +
		"and one that asks every key first gets 1."
}

// Tasks returns n distinct tasks drawn at random from the family,
// deterministically for a seed: the same seed gives the same tasks, and the
// first n tasks of a larger call. It panics unless 0 <= n <= NumTasks.
func Tasks(n int, seed uint64) []sweetrl.Task {
	if n < 0 || n > NumTasks {
		panic(fmt.Sprintf("demotask: %d tasks asked for; there are %d", n, NumTasks))
	}
	rng := rand.New(rand.NewPCG(seed, taskStream))
	tasks := make([]sweetrl.Task, 0, n)
	seen := make(map[string]bool, n)
	for len(tasks) < n {
		var keys [NumKeys]byte
		var digits [NumKeys]int
		for i, p := range rng.Perm(len(Letters))[:NumKeys] {
			keys[i] = Letters[p]
		}
		slices.Sort(keys[:])
		for i := range digits {
			digits[i] = rng.IntN(10)
		}
		t := newTask(keys[:], digits[:])
		if seen[t.HiddenInformation] {
			continue
		}
		seen[t.HiddenInformation] = true
		tasks = append(tasks, t)
	}
	return tasks
}

// Split returns train and test tasks that share no task: the first train
// and the next test tasks of Tasks(train+test, seed). The train tasks do not
// depend on test. It panics unless both counts are non-negative and their
// sum is at most NumTasks.
func Split(seed uint64, train, test int) (trainTasks, testTasks []sweetrl.Task) {
	if train < 0 || test < 0 || train+test > NumTasks {
		panic(fmt.Sprintf("demotask: a split of %d train and %d test tasks; there are %d", train, test, NumTasks))
	}
	all := Tasks(train+test, seed)
	return all[:train:train], all[train:]
}

// newTask makes the task of the given sorted keys and their digits.
func newTask(keys []byte, digits []int) sweetrl.Task {
	names := make([]string, len(keys))
	pairs := make([]string, len(keys))
	tests := make([]sweetrl.TestCase, len(keys))
	for i, k := range keys {
		names[i] = string(k)
		pairs[i] = string(k) + "=" + strconv.Itoa(digits[i])
		tests[i] = sweetrl.TestCase{Name: "test" + strconv.Itoa(i+1), Call: string(k)}
	}
	hidden := strings.Join(pairs, " ")
	return sweetrl.Task{
		ProblemDescription: "Need digits for " + strings.Join(names, " ") + ".",
		HiddenInformation:  hidden,
		GroundTruth:        hidden,
		TestCases:          tests,
	}
}

// pair is one key and its digit.
type pair struct {
	key   byte
	digit byte // '0'…'9'
}

// parseHidden parses a task's hidden information strictly: exactly NumKeys
// pairs "k=d" separated by single spaces, with keys from Letters in
// increasing order.
func parseHidden(s string) ([]pair, error) {
	fields := strings.Split(s, " ")
	if len(fields) != NumKeys {
		return nil, fmt.Errorf("hidden information %q: %d fields, want %d", s, len(fields), NumKeys)
	}
	ps := make([]pair, len(fields))
	for i, f := range fields {
		if len(f) != 3 || strings.IndexByte(Letters, f[0]) < 0 || f[1] != '=' || f[2] < '0' || f[2] > '9' {
			return nil, fmt.Errorf("hidden information %q: %q is not a key=digit pair", s, f)
		}
		if i > 0 && f[0] <= ps[i-1].key {
			return nil, fmt.Errorf("hidden information %q: keys are not distinct and in order", s)
		}
		ps[i] = pair{f[0], f[2]}
	}
	return ps, nil
}
