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
// start's data (the supervised policy's moves match it, see docs/sweetrl.md).
// It is exact: the simulator is deterministic, and the scripted agent's
// moves are enumerated with their probabilities. The reward depends on the
// hidden keys, which the dialogue need not show: this is what a critic
// that reads the ground truth could know at best. The human turns of
// before are taken as they are. It fails when task is not the family's,
// or before does not open with its problem or has ended.
func TallyScriptedValue(task sweetrl.Task, before []sweetrl.Turn, reply string) (float64, error) {
	_, keys, err := parseTally(task)
	if err != nil {
		return 0, err
	}
	if len(before) == 0 || before[0].Role != sweetrl.RoleUser || before[0].Content != task.ProblemDescription {
		return 0, fmt.Errorf("tally value: the dialogue does not open with the task's problem")
	}
	e, err := replayTally(task, before, nil)
	if err != nil {
		return 0, err
	}
	if e.Done() || e.NeedsHuman() {
		return 0, fmt.Errorf("tally value: the dialogue of %d turns does not end before an agent turn", len(before))
	}
	return tallyExpected(task, keys, before, []string{reply})
}

// replayTally plays the dialogue before (its human turns as they are) on
// task, then the agent replies outs against TallySimulator.
func replayTally(task sweetrl.Task, before []sweetrl.Turn, outs []string) (*sweetrl.Episode, error) {
	e := sweetrl.NewEpisodeWith(task, TallyProtocol())
	for i, t := range before {
		if i == 0 {
			continue // the problem, which the episode opens with
		}
		if e.Done() {
			return nil, fmt.Errorf("tally value: the episode ended before turn %d", i)
		}
		var err error
		if t.Role == sweetrl.RoleAssistant {
			o := t.Output
			if o == "" {
				o = t.Content
			}
			_, err = e.AgentTurn("", o)
		} else {
			err = e.HumanTurn(t.Content)
		}
		if err != nil {
			return nil, fmt.Errorf("tally value: turn %d: %w", i, err)
		}
	}
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

// tallyExpected is the expected reward after the dialogue before, the
// agent replies outs and the scripted agent playing on.
func tallyExpected(task sweetrl.Task, keys []byte, before []sweetrl.Turn, outs []string) (float64, error) {
	e, err := replayTally(task, before, outs)
	if err != nil {
		return 0, err
	}
	if e.Done() {
		return tallyScore(keys, e.Answer()).Reward, nil
	}
	s := tallyStateOf(task, e.History())
	var v float64
	for _, mp := range tallyMoves(s.count) {
		x, err := tallyExpected(task, keys, before, append(outs[:len(outs):len(outs)], s.say(mp.move)))
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
