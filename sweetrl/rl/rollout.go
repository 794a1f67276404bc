package rl

import (
	"context"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/turnwise/turnwise/metrics"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/tokenizer"
)

// BatchAgent produces the agent turns of many episodes at once.
type BatchAgent interface {
	// ActBatch returns, for each conversation (system prompt and
	// dialogue), the exact prompt text the agent was given and its reply.
	ActBatch(ctx context.Context, convs [][]tokenizer.Message) (inputs, outputs []string, err error)
}

// RolloutOptions control RunEpisodes.
type RolloutOptions struct {
	Protocol sweetrl.Protocol
	// SimWorkers is how many simulator replies are computed at once (a
	// remote simulator serves several; a local model one at a time). 0: 1.
	SimWorkers int
	Progress   io.Writer // a progress line counting finished episodes (nil: none)
	Label      string    // what the progress line counts
	// Finished, when set, is given in each round the episodes that ended
	// in it — their indices into the tasks, in order, and their
	// trajectories with zero reward — as soon as the agent's turns are in,
	// before the simulator answers the others; an error it returns stops
	// the run.
	Finished func(idx []int, trajs []sweetrl.Trajectory) error
}

// RunEpisodes plays one episode of each task between agent and sim and
// returns them as trajectories with zero reward (score them with Score).
// The episodes advance in lockstep: each round, every live episode's agent
// turn is generated in one batch, then the simulator answers each episode
// that goes on. A TaskAgent is given each episode's task and dialogue too.
func RunEpisodes(ctx context.Context, tasks []sweetrl.Task, agent BatchAgent, sim sweetrl.Simulator, o RolloutOptions) ([]sweetrl.Trajectory, error) {
	eps := make([]*sweetrl.Episode, len(tasks))
	for i, t := range tasks {
		eps[i] = sweetrl.NewEpisodeWith(t, o.Protocol)
	}
	var prog *metrics.Progress
	if o.Progress != nil {
		prog = metrics.NewProgress(o.Progress, metrics.ProgressOptions{Total: int64(len(tasks)), Label: o.Label, Every: int64(max(1, len(tasks)/10))})
	}
	finished := 0
	for {
		var live []int
		for i, e := range eps {
			if !e.Done() {
				live = append(live, i)
			}
		}
		if len(live) == 0 {
			break
		}
		convs := make([][]tokenizer.Message, len(live))
		for k, i := range live {
			convs[k] = eps[i].AgentMessages()
		}
		var inputs, outputs []string
		var err error
		if ta, ok := agent.(TaskAgent); ok {
			tasks, hists := make([]sweetrl.Task, len(live)), make([][]sweetrl.Turn, len(live))
			for k, i := range live {
				tasks[k], hists[k] = eps[i].Task(), eps[i].History()
			}
			inputs, outputs, err = ta.ActTasks(ctx, tasks, hists, convs)
		} else {
			inputs, outputs, err = agent.ActBatch(ctx, convs)
		}
		if err != nil {
			return nil, err
		}
		var ask, ended []int
		for k, i := range live {
			if _, err := eps[i].AgentTurn(inputs[k], outputs[k]); err != nil {
				return nil, fmt.Errorf("episode %d: %w", i, err)
			}
			if eps[i].NeedsHuman() {
				ask = append(ask, i)
			} else {
				finished++
				ended = append(ended, i)
			}
		}
		if o.Finished != nil && len(ended) > 0 {
			trajs := make([]sweetrl.Trajectory, len(ended))
			for k, i := range ended {
				trajs[k] = eps[i].Trajectory(0)
			}
			if err := o.Finished(ended, trajs); err != nil {
				return nil, err
			}
		}
		if err := simulate(ctx, eps, ask, sim, max(o.SimWorkers, 1)); err != nil {
			return nil, err
		}
		if prog != nil {
			prog.Update(int64(finished), math.NaN(), math.NaN(), math.NaN())
		}
	}
	if prog != nil {
		prog.Done()
	}
	out := make([]sweetrl.Trajectory, len(eps))
	for i, e := range eps {
		out[i] = e.Trajectory(0)
	}
	return out, nil
}

// simulate has sim answer the episodes ask, workers at a time.
func simulate(ctx context.Context, eps []*sweetrl.Episode, ask []int, sim sweetrl.Simulator, workers int) error {
	replies := make([]string, len(ask))
	errs := make([]error, len(ask))
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(workers, len(ask)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				e := eps[ask[k]]
				replies[k], errs[k] = sim.Respond(ctx, e.Task(), e.Messages())
			}
		}()
	}
	for k := range ask {
		next <- k
	}
	close(next)
	wg.Wait()
	for k, i := range ask {
		if errs[k] != nil {
			return fmt.Errorf("simulator, episode %d: %w", i, errs[k])
		}
		if err := eps[i].HumanTurn(replies[k]); err != nil {
			return fmt.Errorf("episode %d: %w", i, err)
		}
	}
	return nil
}

// Score scores every trajectory's answer with scorer and sets its Reward.
func Score(ctx context.Context, scorer sweetrl.Scorer, trajs []sweetrl.Trajectory) ([]sweetrl.Score, error) {
	tasks := make([]sweetrl.Task, len(trajs))
	answers := make([]string, len(trajs))
	for i, t := range trajs {
		tasks[i], answers[i] = t.Task, t.Answer
	}
	scores, err := scorer.Score(ctx, tasks, answers)
	if err != nil {
		return nil, err
	}
	if len(scores) != len(trajs) {
		return nil, fmt.Errorf("the scorer returned %d scores for %d answers", len(scores), len(trajs))
	}
	for i := range trajs {
		trajs[i].Reward = scores[i].Reward
	}
	return scores, nil
}
