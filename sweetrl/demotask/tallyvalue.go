package demotask

import (
	"context"
	"fmt"

	"github.com/turnwise/turnwise/sweetrl"
)

// TallyScriptedValue is the expected reward of an episode of task whose
// dialogue so far is before (the problem, then agent and human turns,
// ending before an agent turn) when the agent now says reply and the
// scripted agent of TallyScriptedTrajectories plays every later turn: the
// value Q(s, a) of the reply under the policy that made the supervised
// start's data (the supervised policy's moves match it, see the README).
// It is exact: the simulator is deterministic, and the scripted agent's
// moves are enumerated with their probabilities. The reward depends on the
// hidden keys, which the dialogue need not show: this is what a critic
// that reads the ground truth could know at best. It fails when task is
// not the family's, or when before is not what the family's simulator
// answers to its agent turns.
func TallyScriptedValue(task sweetrl.Task, before []sweetrl.Turn, reply string) (float64, error) {
	_, keys, err := parseTally(task)
	if err != nil {
		return 0, err
	}
	if len(before) == 0 || before[0].Role != sweetrl.RoleUser || before[0].Content != task.ProblemDescription {
		return 0, fmt.Errorf("tally value: the dialogue does not open with the task's problem")
	}
	var outs []string
	for _, t := range before {
		if t.Role == sweetrl.RoleAssistant {
			o := t.Output
			if o == "" {
				o = t.Content
			}
			outs = append(outs, o)
		}
	}
	e, err := replayTally(task, outs)
	if err != nil {
		return 0, err
	}
	h := e.History()
	if len(h) != len(before) || e.Done() {
		return 0, fmt.Errorf("tally value: the dialogue of %d turns replays as %d (ended: %v)", len(before), len(h), e.Done())
	}
	for i := range h {
		if h[i].Role != before[i].Role || h[i].Content != before[i].Content {
			return 0, fmt.Errorf("tally value: turn %d replays as %q, the dialogue has %q", i, h[i].Content, before[i].Content)
		}
	}
	return tallyExpected(task, keys, append(outs, reply))
}

// replayTally plays the agent replies outs on task against TallySimulator.
func replayTally(task sweetrl.Task, outs []string) (*sweetrl.Episode, error) {
	e := sweetrl.NewEpisodeWith(task, TallyProtocol())
	for i, o := range outs {
		if e.Done() {
			return nil, fmt.Errorf("tally value: the episode ended before agent turn %d", i+1)
		}
		if _, err := e.AgentTurn("", o); err != nil {
			return nil, err
		}
		if !e.NeedsHuman() {
			continue
		}
		r, err := TallySimulator{}.Respond(context.Background(), task, e.Messages())
		if err != nil {
			return nil, err
		}
		if err := e.HumanTurn(r); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// tallyExpected is the expected reward after the agent replies outs and
// the scripted agent plays on.
func tallyExpected(task sweetrl.Task, keys []byte, outs []string) (float64, error) {
	e, err := replayTally(task, outs)
	if err != nil {
		return 0, err
	}
	if e.Done() {
		return tallyScore(keys, e.Answer()).Reward, nil
	}
	s := tallyStateOf(task, e.History())
	var v float64
	for _, mp := range tallyMoves(s.count) {
		x, err := tallyExpected(task, keys, append(outs[:len(outs):len(outs)], s.say(mp.move)))
		if err != nil {
			return 0, err
		}
		v += mp.p * x
	}
	return v, nil
}

// tallyMoves are the scripted agent's moves at a count, with their
// probabilities (tallyScripted's draws).
func tallyMoves(count int) []struct {
	move TallyMove
	p    float64
} {
	type mp = struct {
		move TallyMove
		p    float64
	}
	if count >= NumKeys {
		return []mp{{MoveWaste, TallyLinger}, {MoveAnswer, 1 - TallyLinger}}
	}
	return []mp{{MoveWaste, TallyWaste}, {MoveAnswer, TallyHasty}, {MoveNext, 1 - TallyWaste - TallyHasty}}
}
