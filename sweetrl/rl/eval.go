package rl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/internal/stats"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/tokenizer"

	"github.com/turnwise/turnwise/sweetrl"
)

// Summary is an evaluation's result: the reference's two metrics with 95%
// confidence intervals.
type Summary struct {
	Episodes, Tasks int
	// PassRate is the mean reward (the fraction of unit tests passed);
	// Success the fraction of episodes with reward 1.
	PassRate, Success float64
	// PassCI and SuccessCI are the half-widths of their 95% confidence
	// intervals.
	PassCI, SuccessCI float64
}

// String formats s as "pass 41.2% ± 3.1, success 30.0% ± 4.0 (200 tasks, 400 episodes)".
func (s Summary) String() string {
	return fmt.Sprintf("pass %.1f%% ± %.1f, success %.1f%% ± %.1f (%d tasks, %d episodes)",
		100*s.PassRate, 100*s.PassCI, 100*s.Success, 100*s.SuccessCI, s.Tasks, s.Episodes)
}

// Summarize computes a Summary from episodes' scores; task[i] identifies
// the task of episode i. Episodes of one task (several seeds) are not
// independent, so the interval is taken over tasks: each task's metric is
// the mean over its episodes, and the half-width is 1.96 times the
// standard error of the mean over tasks (normal approximation; 0 with a
// single task).
func Summarize(task []int, scores []sweetrl.Score) Summary {
	if len(task) != len(scores) {
		panic(fmt.Sprintf("rl: Summarize with %d task ids and %d scores", len(task), len(scores)))
	}
	type acc struct {
		pass, succ float64
		n          int
	}
	by := map[int]*acc{}
	var order []int
	for i, s := range scores {
		a, ok := by[task[i]]
		if !ok {
			a = &acc{}
			by[task[i]] = a
			order = append(order, task[i])
		}
		a.pass += s.Reward
		if s.Success() {
			a.succ++
		}
		a.n++
	}
	out := Summary{Episodes: len(scores), Tasks: len(order)}
	if len(order) == 0 {
		return out
	}
	pass, succ := make([]float64, len(order)), make([]float64, len(order))
	for k, t := range order {
		a := by[t]
		pass[k], succ[k] = a.pass/float64(a.n), a.succ/float64(a.n)
	}
	out.PassRate, out.PassCI = meanCI(pass)
	out.Success, out.SuccessCI = meanCI(succ)
	return out
}

// meanCI returns the mean of xs and 1.96 times its standard error.
func meanCI(xs []float64) (m, half float64) {
	m, sd := stats.MeanSD(xs)
	if len(xs) < 2 {
		return m, 0
	}
	return m, 1.96 * sd / math.Sqrt(float64(len(xs)))
}

// EvalOptions control Evaluate.
type EvalOptions struct {
	Seeds       int     // episodes per task, each with its own sampling seed
	Temperature float64 // of the agent's sampling
	TopP        float64 // nucleus sampling mass of the agent (0 or 1: off)
	TopK        int     // the agent draws among its TopK most likely tokens (0: off), before TopP
	MaxNew      int     // tokens per agent turn
	Seed        uint64
	SimWorkers  int
	Label       string
	// Comm, when it joins several ranks, splits the seeds across them: of
	// each W consecutive seeds rank r plays the r-th, and every rank
	// gathers the episodes and scores (through buffers of Backend, the
	// backend Comm runs on) in seed order. A seed's draws depend on the
	// seed alone, so the result is one process's. nil: one process.
	Comm    engine.Communicator
	Backend engine.Backend
	// Agent, when set, makes the agent of each seed from the sampler that
	// seed's episodes would have been played by (the same draws): a
	// best-of-N agent wraps it. nil: the sampler plays.
	Agent func(s *Sampler) BatchAgent
}

// Evaluate plays Seeds episodes of every task with the agent m + ad against
// sim, scores them, and summarises pass rate and success with 95%
// confidence intervals over tasks.
func Evaluate(ctx context.Context, m *llama.Model, ad *llama.Adapter, tok tokenizer.Tokenizer, proto sweetrl.Protocol,
	tasks []sweetrl.Task, sim sweetrl.Simulator, scorer sweetrl.Scorer, o EvalOptions, out io.Writer) (Summary, []sweetrl.Trajectory, error) {
	var all []sweetrl.Trajectory
	var ids []int
	var scores []sweetrl.Score
	seeds := max(o.Seeds, 1)
	rank, size := 0, 1
	if o.Comm != nil {
		rank, size = o.Comm.Rank(), o.Comm.Size()
	}
	for round := 0; round < seeds; round += size {
		var trajs []sweetrl.Trajectory
		var sc []sweetrl.Score
		if s := round + rank; s < seeds {
			var err error
			if trajs, sc, err = evalSeed(ctx, m, ad, tok, proto, tasks, sim, scorer, o, s, out); err != nil {
				return Summary{}, nil, err
			}
		}
		if size > 1 {
			var err error
			if trajs, sc, err = gatherEpisodes(o.Comm, o.Backend, trajs, sc); err != nil {
				return Summary{}, nil, fmt.Errorf("eval: gathering seeds %d on: %w", round+1, err)
			}
		}
		for i := range trajs {
			ids = append(ids, i%len(tasks))
		}
		all, scores = append(all, trajs...), append(scores, sc...)
	}
	return Summarize(ids, scores), all, nil
}

// evalSeed plays and scores one episode of every task with sampling seed s
// (0, 1, …) of o.
func evalSeed(ctx context.Context, m *llama.Model, ad *llama.Adapter, tok tokenizer.Tokenizer, proto sweetrl.Protocol,
	tasks []sweetrl.Task, sim sweetrl.Simulator, scorer sweetrl.Scorer, o EvalOptions, s int, out io.Writer) ([]sweetrl.Trajectory, []sweetrl.Score, error) {
	agent := &Sampler{Model: m, Adapter: ad, Tok: tok, MaxNew: o.MaxNew, Seed: o.Seed + uint64(s)*1000003,
		Sample: engine.SampleParams{Temperature: float32(o.Temperature), TopP: float32(o.TopP), TopK: o.TopK}}
	var a BatchAgent = agent
	if o.Agent != nil {
		a = o.Agent(agent)
	}
	trajs, err := RunEpisodes(ctx, tasks, a, sim, RolloutOptions{Protocol: proto, SimWorkers: o.SimWorkers,
		Progress: out, Label: fmt.Sprintf("%s episodes (seed %d/%d)", o.Label, s+1, max(o.Seeds, 1))})
	if err != nil {
		return nil, nil, err
	}
	sc, err := Score(ctx, scorer, trajs)
	return trajs, sc, err
}

// gatherEpisodes gathers every rank's scored episodes on every rank, in
// rank order.
func gatherEpisodes(c engine.Communicator, b engine.Backend, trajs []sweetrl.Trajectory, sc []sweetrl.Score) ([]sweetrl.Trajectory, []sweetrl.Score, error) {
	var lines bytes.Buffer
	if err := sweetrl.WriteTrajectories(&lines, trajs...); err != nil {
		return nil, nil, err
	}
	js, err := json.Marshal(sc)
	if err != nil {
		return nil, nil, err
	}
	allLines, err := engine.GatherBytes(c, b, lines.Bytes())
	if err != nil {
		return nil, nil, err
	}
	allScores, err := engine.GatherBytes(c, b, js)
	if err != nil {
		return nil, nil, err
	}
	var outT []sweetrl.Trajectory
	var outS []sweetrl.Score
	for r := range allLines {
		t, err := sweetrl.ReadTrajectories(bytes.NewReader(allLines[r]), fmt.Sprintf("rank %d's episodes", r))
		if err != nil {
			return nil, nil, err
		}
		var s []sweetrl.Score
		if err := json.Unmarshal(allScores[r], &s); err != nil {
			return nil, nil, fmt.Errorf("rank %d's scores: %w", r, err)
		}
		if len(s) != len(t) {
			return nil, nil, fmt.Errorf("rank %d sent %d episodes and %d scores", r, len(t), len(s))
		}
		outT, outS = append(outT, t...), append(outS, s...)
	}
	return outT, outS, nil
}
