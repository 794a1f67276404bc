// Package pipeline runs SWEET-RL and its baselines end to end on a built-in
// task family, from the steps sweetrl/rl provides. It holds
//
//   - demo.go, methods.go: the demo (Run): a supervised start, rollouts,
//     a validation split carved from the training tasks, every method
//     trained and evaluated on held-out tasks, and the table (PrintTable);
//     its stages can be reused from an earlier run;
//   - family.go: the built-in task families (LookupFamily) with their
//     scripted dialogues, simulator, scorer and critic-check cases;
//   - check.go, checkrun.go: the critic check (CriticCheck, and CheckRun on
//     a demo run's directory);
//   - env.go: Env, where the episode subcommands play — the task family,
//     the human simulator and the scorer;
//   - frontend.go: the frontend family's browser, CLIP scorer, training
//     rules and evaluation (mean cosine, win rate against another method);
//   - health.go: signs of over-optimisation in a policy's episodes
//     (EpisodeHealth).
package pipeline
