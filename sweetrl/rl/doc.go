// Package rl is the model side of SWEET-RL: playing ColBench-style episodes
// with a local model, and training on them. It holds
//
//   - the agent (batched sampling from a model, Sampler) and a local-model
//     human simulator (ModelSimulator);
//   - RunEpisodes, which plays many episodes at once, each agent turn of
//     every live episode generated in one batch;
//   - sequence scores (Seq, Scores): weighted sums of per-token
//     log-probabilities, the quantity every loss here is built on;
//   - TrainPreferences, the pairwise loss −log σ(β·[(s_θ⁺ − s_ref⁺) −
//     (s_θ⁻ − s_ref⁻)]) over pairs of sequences, with an optional NLL term
//     on the chosen side: the critic's Bradley–Terry loss (the paper's sum
//     over agent turns of per-turn mean log-probs, or the released code's
//     one mean over all agent-turn tokens: CriticScore), the actor's
//     turn-wise DPO (summed log-prob of one action) and the multi-turn DPO
//     baseline (summed log-prob of every agent turn) are all this one
//     function with different sequences;
//   - the critic (CriticPairs), the actor's turn-wise data (ActorPairs:
//     best-of-N candidates from a shared prefix ranked by the critic's
//     advantage against an AdvantageBaseline), the baselines (RFTExamples, TrajectoryPairs) and
//     evaluation with confidence intervals (Summarize).
//
// The frozen reference of every preference loss is the model as it is
// before training: its scores are computed once, before the first update,
// so that no second copy of the weights is needed for full fine-tuning,
// and a LoRA run's reference is simply the base without the adapter.
//
// What the formulas are, and where they come from, is in the documentation
// of each function. Where the paper (Zhou et al., 2025, arXiv 2503.15478)
// and its released code differ — the critic's score, the advantage's
// baseline — both are offered, the paper's by default; the reference's
// hyper-parameters are in one place (reference.go).
package rl
