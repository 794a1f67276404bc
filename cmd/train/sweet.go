package main

import (
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/sweetrl/pipeline"
)

// The steps of SWEET-RL and its baselines that the subcommands share live
// in sweetrl/pipeline; these are the names the subcommands call them by.

// newLoRA adds a fresh LoRA adapter of rank r (alpha 2r) on every
// projection.
func newLoRA(m *llama.Model, r int, seed uint64) (*llama.Adapter, error) {
	return pipeline.NewLoRA(m, r, seed)
}

type sftOptions = pipeline.SFTOptions

type evalOptions = pipeline.EvalOptions

var (
	supervisedFT = pipeline.SupervisedFT
	evaluate     = pipeline.Evaluate
)

func meanReward(trajs []sweetrl.Trajectory) float64 {
	var s float64
	for _, t := range trajs {
		s += t.Reward
	}
	return s / float64(max(len(trajs), 1))
}

func successRate(trajs []sweetrl.Trajectory) float64 {
	var s float64
	for _, t := range trajs {
		if t.Reward == 1 {
			s++
		}
	}
	return s / float64(max(len(trajs), 1))
}
