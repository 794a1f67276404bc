// Package sweetrl holds the pieces of SWEET-RL (Zhou et al., 2025, "RL with
// Step-WisE Evaluation from Training-time information") and of its ColBench
// benchmark that do not need a model: trajectories in the reference
// implementation's record layout, ColBench backend programming tasks, the
// multi-turn episode protocol between an agent and a human simulator, human
// simulators (scripted, and an OpenAI-compatible server), the interface of
// answer scorers, and SWEET-RL's losses and pair-forming rules.
//
// Its subpackages: rl plays episodes with a local model and trains the
// critic, the actor and the baselines; pyeval scores ColBench answers by
// running their Python in a sandbox; demotask is the built-in task family
// of "train demo"; pipeline runs them end to end.
//
// # Trajectories
//
// A trajectory is one JSON object per line:
//
//	{"task": {...}, "dialogue_history": [{"role": ..., "content": ...}, ...],
//	 "answer": "...", "reward": 0.75}
//
// task is the ColBench task row the episode was played on; dialogue_history
// alternates user (human simulator) and assistant (agent) turns starting with
// the user's problem description; answer is the agent's final answer and
// reward its score in [0, 1]. Each assistant turn carries two extra fields
// beside role and content:
//
//   - "input": the exact prompt text the agent was given for that turn (the
//     chat-templated system prompt and history), so that log-probabilities
//     can later be computed on exactly what was sampled;
//   - "output": the agent's whole generated text for that turn, of which
//     content is the part the human saw (see VisibleReply).
//
// The agent is later prompted with the content of earlier turns, so it sees
// its own past replies as the human saw them.
//
// Fields this package does not know, at any level, are kept when reading and
// written back unchanged, so files pass between tools without loss; a task's
// test cases keep the order of the file (as a Python dict does), and a
// task's known text fields are left out when empty. Files
// whose name ends in ".zst" are zstd-compressed (OpenTrajectories,
// SaveTrajectories). A trajectory file is written whole or not at all
// (SaveTrajectories), or grown as NAME.partial and renamed to NAME when
// complete (PartialTrajectories); every line read must be valid UTF-8 and
// at most jsonl.DefaultMaxLine bytes long.
//
// # Episodes
//
// An Episode follows the ColBench protocol: the history starts with the
// task's problem description as a user turn; each agent reply is appended as
// an assistant turn; the episode ends when a reply contains AnswerMarker (the
// answer is the text after it) or after MaxAgentTurns agent turns (the whole
// last reply is the answer); otherwise the human simulator replies, cut to
// SimulatorReplyLimit characters.
package sweetrl
