// Package rl is the model side of SWEET-RL: playing ColBench-style episodes
// with a local model, and training on them. It holds, file by file:
//
//   - agent.go, chat.go: the agent (batched sampling from a model, Sampler)
//     and a local-model human simulator (ModelSimulator); the chat-formatted
//     views of a dialogue the agent and the critic read (PolicySeq,
//     CriticSeq);
//   - rollout.go, rollfile.go: RunEpisodes, which plays many episodes at
//     once, each agent turn of every live episode generated in one batch,
//     Score, and RolloutToFile, which grows a trajectory file episode by
//     episode as they end, in the order RolloutOrder says, and continues an
//     interrupted one;
//   - seq.go: sequence scores (Seq, Scores), weighted sums of per-token
//     log-probabilities, the quantity every loss here is built on; sequences
//     are packed into batches by llama.Batch.Append;
//   - pref.go: TrainPreferences, the pairwise loss −log σ(β·[(s_θ⁺ − s_ref⁺)
//     − (s_θ⁻ − s_ref⁻)]) over pairs of sequences, with an optional NLL term
//     on the chosen side: the critic's Bradley–Terry loss (the paper's sum
//     over agent turns of per-turn mean log-probs, or the released code's
//     one mean over all agent-turn tokens: CriticScore), the actor's
//     turn-wise DPO (summed log-prob of one action) and the multi-turn DPO
//     baseline (summed log-prob of every agent turn) are all this one
//     function with different sequences; the parameters it trains and the
//     loss gradient's upload are trainer.Params, shared with the supervised
//     trainer;
//   - critic.go: the critic (Critic, its advantage against an
//     AdvantageBaseline) and its training pairs (CriticPairs: sequence pairs
//     of the trajectory pairs sweetrl.PairsByReward forms), the multi-turn
//     DPO baseline's (TrajectoryPairs), and a task family's own pairs and
//     imitated trajectories (Rules: frontend tasks pair by similarity gap);
//   - resume.go: the trainers' checkpoints in a run directory and their
//     resume (Checkpoints; a preference run's position and statistics), and
//     the actor's saved pairs (PairsFile);
//   - value.go: the value-head ablation of the critic (ValueHead,
//     TrainValueCritic);
//   - actor.go: the actor's turn-wise data (ActorPairs: best-of-N candidates
//     from a shared prefix, ranked by the critic's advantage, paired by
//     sweetrl.PairsByAdvantage);
//   - baselines.go, sft.go: supervised examples of trajectories (Examples,
//     and RFTExamples for rejection fine-tuning) and supervised fine-tuning
//     on examples (SupervisedFT);
//   - validate.go, eval.go: how a critic ranks held-out pairs (EvalPairs),
//     and evaluation by playing tasks (Evaluate) with confidence intervals
//     over tasks (Summarize);
//   - reference.go: the reference implementation's hyper-parameters, the
//     one place every trainer and subcommand takes them from;
//   - jobs.go: the pipeline's steps as `train` runs them, each from its
//     options to a saved model or a file, saying what it does: what a
//     trainer updates (Target), the trainers on a trajectory file (Job:
//     TrainCritic, TrainActor, TrainMTDPO, TrainRFT) and the jobs that play
//     episodes (Episodes: RolloutJob, EvalJob, EvalEpisodes).
//
// The frozen reference of every preference loss is the model as it is
// before training: its scores are computed once, before the first update,
// so that no second copy of the weights is needed for full fine-tuning,
// and a LoRA run's reference is simply the base without the adapter.
//
// What the formulas are, and where they come from, is in the documentation
// of each function. Where the paper (Zhou et al., 2025, arXiv 2503.15478)
// and its released code differ — the critic's score, the advantage's
// baseline — both are offered, the paper's by default.
package rl
