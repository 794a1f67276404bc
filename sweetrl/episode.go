package sweetrl

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/turnwise/turnwise/tokenizer"
)

// Protocol constants of ColBench episodes.
const (
	// OutputMarker precedes the part of an agent reply the human sees.
	OutputMarker = "OUTPUT:"
	// AnswerMarker precedes the agent's final answer and ends the episode.
	AnswerMarker = "I WANT TO ANSWER:"
	// MaxAgentTurns is the number of agent turns after which an episode
	// ends regardless; the last reply is then the answer.
	MaxAgentTurns = 10
	// SimulatorReplyLimit is the number of characters (Unicode code points)
	// a human simulator reply is cut to.
	SimulatorReplyLimit = 400
)

// AgentSystemPrompt is the system prompt given to the agent on ColBench
// backend programming tasks. It describes the episode protocol: ask the
// human about what is unclear, prefix what the human should see with
// OutputMarker, and end with AnswerMarker followed by the final function.
const AgentSystemPrompt = `You are working together with a human on a Python programming task. ` +
	`The human knows exactly what the function should do but has described it only vaguely, ` +
	`and only the human can tell you what is missing. You may take up to ten turns.

In each turn, think about what you still need to know, then write the message the human will ` +
	`read after the marker "OUTPUT:". Nothing before that marker is shown to the human. Use your ` +
	`turns to ask short, specific questions about behaviour, inputs, outputs and edge cases; ` +
	`the human answers briefly.

When you are confident you know what is wanted, write "I WANT TO ANSWER:" followed by the ` +
	`complete Python function, with exactly the signature the human gave, and nothing else after ` +
	`it. Put every import and helper inside the function body. If you reach your last turn, your ` +
	`whole reply is taken as the answer.`

// VisibleReply returns the part of an agent reply the human sees: the text
// between the first OutputMarker and the next one (or the end), or the whole
// text when the marker is absent — the reference's
// response.split("OUTPUT:")[1]. The text is returned as it is, without
// trimming.
func VisibleReply(agentText string) string {
	if _, after, ok := strings.Cut(agentText, OutputMarker); ok {
		visible, _, _ := strings.Cut(after, OutputMarker)
		return visible
	}
	return agentText
}

// RawReply returns the agent reply as the reference records it in a turn's
// "output": the text up to a second OutputMarker, if any (the reference
// drops everything from the second marker on).
func RawReply(agentText string) string {
	before, after, ok := strings.Cut(agentText, OutputMarker)
	if !ok {
		return agentText
	}
	visible, _, _ := strings.Cut(after, OutputMarker)
	return before + OutputMarker + visible
}

// Answer returns the final answer an agent reply gives: the text after the
// first AnswerMarker, with surrounding white space removed (a leading space
// would make the Python code fail to parse). ok reports whether the marker
// is present.
func Answer(agentText string) (answer string, ok bool) {
	_, after, ok := strings.Cut(agentText, AnswerMarker)
	if !ok {
		return "", false
	}
	return strings.TrimSpace(after), true
}

// TruncateReply cuts s to at most limit Unicode code points, as a Python
// slice s[:limit] does. Invalid UTF-8 bytes count as one character each.
func TruncateReply(s string, limit int) string {
	if limit < 0 {
		panic("sweetrl: negative reply limit")
	}
	n := 0
	for i := range s {
		if n == limit {
			return s[:i]
		}
		n++
	}
	return s
}

// ErrEpisodeOver is returned when an episode is driven past its end.
var ErrEpisodeOver = errors.New("sweetrl: episode is over")

// Simulator plays the human of a ColBench episode: it sees the task
// (including its hidden information) and the dialogue so far, whose last
// entry is the agent's visible reply, and returns the human's next message.
type Simulator interface {
	Respond(ctx context.Context, task Task, history []tokenizer.Message) (string, error)
}

// Episode is the state of one ColBench episode. Drive it by alternating
// AgentTurn and HumanTurn while NeedsHuman reports true; when Done reports
// true, Answer and Trajectory hold the result. An Episode is not safe for
// concurrent use.
type Episode struct {
	proto      Protocol
	task       Task
	history    []Turn
	agentTurns int
	done       bool
	answer     string
}

// Protocol holds the rules of an episode that differ between task
// families. ColBench's are ColBenchProtocol.
type Protocol struct {
	// System is the agent's system prompt ("": none).
	System string
	// MaxTurns is the number of agent turns after which the episode ends,
	// the last reply then being the answer.
	MaxTurns int
	// ReplyLimit is the number of characters a human reply is cut to.
	ReplyLimit int
	// Answer, when not nil, gives the answer of an episode that has just
	// ended, from its dialogue (whose last turn is the agent's last),
	// instead of the text after AnswerMarker or the last visible reply:
	// a family whose answer is not the last reply's text (a frontend
	// task's is the last page the agent wrote) sets it.
	Answer func(history []Turn) string
}

// ColBenchProtocol returns ColBench's rules: AgentSystemPrompt,
// MaxAgentTurns and SimulatorReplyLimit.
func ColBenchProtocol() Protocol {
	return Protocol{System: AgentSystemPrompt, MaxTurns: MaxAgentTurns, ReplyLimit: SimulatorReplyLimit}
}

// NewEpisode starts an episode on task under ColBench's rules: the history
// holds the problem description as the first user turn.
func NewEpisode(task Task) *Episode { return NewEpisodeWith(task, ColBenchProtocol()) }

// NewEpisodeWith starts an episode on task under the rules p. It panics if
// p allows no agent turn or a negative reply limit.
func NewEpisodeWith(task Task, p Protocol) *Episode {
	if p.MaxTurns <= 0 || p.ReplyLimit < 0 {
		panic(fmt.Sprintf("sweetrl: protocol with %d turns and a reply limit of %d", p.MaxTurns, p.ReplyLimit))
	}
	return &Episode{
		proto:   p,
		task:    task,
		history: []Turn{{Role: RoleUser, Content: task.ProblemDescription}},
	}
}

// Task returns the episode's task.
func (e *Episode) Task() Task { return e.task }

// History returns a copy of the dialogue so far.
func (e *Episode) History() []Turn { return append([]Turn(nil), e.history...) }

// Messages returns the dialogue so far as chat messages, with the visible
// content of each turn.
func (e *Episode) Messages() []tokenizer.Message {
	return TurnsToMessages(e.history)
}

// AgentMessages returns what the agent is prompted with for its next turn:
// the protocol's system prompt as the system message (none when empty),
// then the dialogue so far.
func (e *Episode) AgentMessages() []tokenizer.Message {
	if e.proto.System == "" {
		return e.Messages()
	}
	return append([]tokenizer.Message{{Role: "system", Content: e.proto.System}}, e.Messages()...)
}

// AgentTurns returns the number of agent turns taken.
func (e *Episode) AgentTurns() int { return e.agentTurns }

// Done reports whether the episode has ended.
func (e *Episode) Done() bool { return e.done }

// NeedsHuman reports whether the human simulator is to speak next.
func (e *Episode) NeedsHuman() bool {
	return !e.done && e.history[len(e.history)-1].Role == RoleAssistant
}

// Answer returns the final answer; it is empty until the episode is done.
func (e *Episode) Answer() string { return e.answer }

// AgentTurn records the agent's reply output to the prompt text input. The
// reply's visible part becomes the assistant turn's content, and the reply up
// to a second OutputMarker its output (RawReply). As in the reference, the
// episode ends when the visible part contains AnswerMarker (the answer is
// what follows it) or when it is the protocol's last agent turn (the answer
// is then the whole visible part), unless the protocol's Answer gives it;
// done reports which. It is an error to call AgentTurn when the episode is
// over or the human is to speak.
func (e *Episode) AgentTurn(input, output string) (done bool, err error) {
	if e.done {
		return true, ErrEpisodeOver
	}
	if e.NeedsHuman() {
		return false, fmt.Errorf("agent turn %d: the human is to speak first", e.agentTurns+1)
	}
	e.agentTurns++
	visible := VisibleReply(output)
	e.history = append(e.history, Turn{
		Role:    RoleAssistant,
		Content: visible,
		Input:   input,
		Output:  RawReply(output),
	})
	if ans, ok := Answer(visible); ok {
		e.done, e.answer = true, ans
	} else if e.agentTurns >= e.proto.MaxTurns {
		e.done, e.answer = true, visible
	}
	if e.done && e.proto.Answer != nil {
		e.answer = e.proto.Answer(e.history)
	}
	return e.done, nil
}

// HumanTurn records the human simulator's reply, cut to the protocol's
// reply limit. It is an error to call HumanTurn unless
// NeedsHuman reports true.
func (e *Episode) HumanTurn(reply string) error {
	if e.done {
		return ErrEpisodeOver
	}
	if !e.NeedsHuman() {
		return fmt.Errorf("human turn after agent turn %d: the agent is to speak first", e.agentTurns)
	}
	e.history = append(e.history, Turn{Role: RoleUser, Content: TruncateReply(reply, e.proto.ReplyLimit)})
	return nil
}

// Trajectory returns the episode as a trajectory with the given reward.
func (e *Episode) Trajectory(reward float64) Trajectory {
	return Trajectory{Task: e.task, DialogueHistory: e.History(), Answer: e.answer, Reward: reward}
}

// TurnsToMessages converts dialogue turns to chat messages carrying their
// visible content.
func TurnsToMessages(turns []Turn) []tokenizer.Message {
	msgs := make([]tokenizer.Message, len(turns))
	for i, t := range turns {
		msgs[i] = tokenizer.Message{Role: t.Role, Content: t.Content}
	}
	return msgs
}

// Agent produces the agent's turns of an episode.
type Agent interface {
	// Act returns the agent's reply to messages (system prompt and
	// dialogue) together with the exact prompt text it was given.
	Act(ctx context.Context, messages []tokenizer.Message) (input, output string, err error)
}

// RunEpisode plays one episode of task between agent and sim under
// ColBench's rules and returns it as a trajectory with zero reward (scoring
// is separate).
func RunEpisode(ctx context.Context, task Task, agent Agent, sim Simulator) (Trajectory, error) {
	return RunEpisodeWith(ctx, task, ColBenchProtocol(), agent, sim)
}

// RunEpisodeWith is RunEpisode under the rules p.
func RunEpisodeWith(ctx context.Context, task Task, p Protocol, agent Agent, sim Simulator) (Trajectory, error) {
	e := NewEpisodeWith(task, p)
	for !e.Done() {
		if err := ctx.Err(); err != nil {
			return Trajectory{}, err
		}
		input, output, err := agent.Act(ctx, e.AgentMessages())
		if err != nil {
			return Trajectory{}, fmt.Errorf("agent turn %d: %w", e.AgentTurns()+1, err)
		}
		if _, err := e.AgentTurn(input, output); err != nil {
			return Trajectory{}, err
		}
		if !e.NeedsHuman() {
			continue
		}
		reply, err := sim.Respond(ctx, task, e.Messages())
		if err != nil {
			return Trajectory{}, fmt.Errorf("simulator after agent turn %d: %w", e.AgentTurns(), err)
		}
		if err := e.HumanTurn(reply); err != nil {
			return Trajectory{}, err
		}
	}
	return e.Trajectory(0), nil
}

// ScriptedSimulator is a deterministic Simulator for tests. Its reply after
// the agent's k-th turn is the k-th non-blank line of the task's hidden
// information, trimmed and prefixed with "Hint: "; once the lines run out it
// replies Exhausted (or "I have nothing more to add." when Exhausted is
// empty).
type ScriptedSimulator struct {
	// Exhausted is the reply once the hidden information is used up.
	Exhausted string
}

// Respond implements Simulator.
func (s ScriptedSimulator) Respond(ctx context.Context, task Task, history []tokenizer.Message) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	k := 0
	for _, m := range history {
		if m.Role == RoleAssistant {
			k++
		}
	}
	if k == 0 {
		return "", fmt.Errorf("scripted simulator: no agent turn to answer")
	}
	var lines []string
	for _, l := range strings.Split(task.HiddenInformation, "\n") {
		if t := strings.TrimSpace(l); t != "" {
			lines = append(lines, t)
		}
	}
	if k <= len(lines) {
		return "Hint: " + lines[k-1], nil
	}
	if s.Exhausted != "" {
		return s.Exhausted, nil
	}
	return "I have nothing more to add.", nil
}
