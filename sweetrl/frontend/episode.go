package frontend

import (
	"context"
	"fmt"

	"github.com/turnwise/turnwise/sweetrl"
)

// Rules of frontend episodes that differ from backend ones.
const (
	// MaxAgentTurns is the number of agent turns after which an episode
	// ends regardless.
	MaxAgentTurns = 10
	// SimulatorReplyLimit is the number of characters (Unicode code
	// points) a human reply is cut to.
	SimulatorReplyLimit = 1000
)

// AgentSystemPrompt is the system prompt of the agent on frontend design
// tasks. Like the backend prompt it asks for thoughts, then "OUTPUT:" and
// the message; the message carries one page in an <html> tag, which the
// human sees only as a screenshot, and the final one starts with
// "I WANT TO ANSWER:".
const AgentSystemPrompt = `You are an AI agent helping a human user build a complete, well designed web page ` +
	`in HTML with Tailwind CSS. Put the page inside an <html> tag. Fill it with real, full sentences ` +
	`about the business. Images are optional; if you use any, take them only from ` +
	`https://picsum.photos/id/48/W/H, with W and H replaced by the image's width and height and the ` +
	`id left at 48.

1) The human has a very particular page in mind, so expect several rounds of revision.
2) When you know enough, begin your reply with "I WANT TO ANSWER:" and give your final page.
3) You have at most ten rounds with the human and must give your final page before they run out.
4) You are judged on how close your final page is to the human's and on how few rounds you need.
5) Each reply may hold only ONE page of HTML and Tailwind CSS, wrapped in an <html> tag. It is ` +
	`rendered, and the human sees only its screenshot.
6) The human answers by comparing the screenshot with the page they want; make yours match it in ` +
	`layout, navigation bars, colours and everything else.
7) The human cannot read questions in text; they react only to the screenshot.

First write your thoughts on what you are still unsure of about the page the human wants. Then ` +
	`write "OUTPUT:" on its own line, followed by your proposed page.`

// Protocol returns the rules of frontend episodes: AgentSystemPrompt,
// MaxAgentTurns and SimulatorReplyLimit, ending as backend episodes do
// (sweetrl.AnswerMarker in the visible reply, or the last turn), with
// LastPage as the answer.
func Protocol() sweetrl.Protocol {
	return sweetrl.Protocol{System: AgentSystemPrompt, MaxTurns: MaxAgentTurns, ReplyLimit: SimulatorReplyLimit, Answer: LastPage}
}

// LastPage returns the answer of a frontend dialogue: the page of the last
// agent turn whose visible reply holds one (ExtractHTML), whatever follows
// sweetrl.AnswerMarker; "" when no turn does.
func LastPage(history []sweetrl.Turn) string {
	for i := len(history) - 1; i >= 0; i-- {
		if history[i].Role != sweetrl.RoleAssistant {
			continue
		}
		if page, ok := ExtractHTML(history[i].Content); ok {
			return page
		}
	}
	return ""
}

// RunEpisode plays one frontend episode of task between agent and sim,
// rendering pages with r, and returns it as a trajectory with zero reward
// (scoring is separate; see Scorer).
//
// The target page (the task's ground truth) is rendered once. After each
// agent turn that does not end the episode, the page in its visible reply
// (ExtractHTML) is rendered and the simulator compares the screenshot with
// the target's, or is told there is no page; its reply is cut to
// SimulatorReplyLimit. The last turn's page is not rendered, as nobody
// looks at it before scoring. The trajectory's answer is the last page the
// agent wrote in any turn ("" if none), whatever follows
// sweetrl.AnswerMarker.
func RunEpisode(ctx context.Context, task sweetrl.Task, agent sweetrl.Agent, r Renderer, sim Simulator) (sweetrl.Trajectory, error) {
	target, err := r.Render(ctx, task.GroundTruth)
	if err != nil {
		return sweetrl.Trajectory{}, fmt.Errorf("rendering the target page: %w", err)
	}
	e := sweetrl.NewEpisodeWith(task, Protocol())
	for !e.Done() {
		if err := ctx.Err(); err != nil {
			return sweetrl.Trajectory{}, err
		}
		input, output, err := agent.Act(ctx, e.AgentMessages())
		if err != nil {
			return sweetrl.Trajectory{}, fmt.Errorf("agent turn %d: %w", e.AgentTurns()+1, err)
		}
		if _, err := e.AgentTurn(input, output); err != nil {
			return sweetrl.Trajectory{}, err
		}
		if !e.NeedsHuman() {
			continue
		}
		reply, err := respond(ctx, r, sim, sweetrl.VisibleReply(output), target)
		if err != nil {
			return sweetrl.Trajectory{}, fmt.Errorf("agent turn %d: %w", e.AgentTurns(), err)
		}
		if err := e.HumanTurn(reply); err != nil {
			return sweetrl.Trajectory{}, err
		}
	}
	return e.Trajectory(0), nil
}

// respond renders the page of the agent's visible reply, if it holds one,
// and returns sim's reply to its screenshot (nil without a page) and the
// target's.
func respond(ctx context.Context, r Renderer, sim Simulator, visible string, target []byte) (string, error) {
	var shot []byte
	if page, ok := ExtractHTML(visible); ok {
		var err error
		if shot, err = r.Render(ctx, page); err != nil {
			return "", fmt.Errorf("rendering its page: %w", err)
		}
	}
	reply, err := sim.Respond(ctx, shot, target)
	if err != nil {
		return "", fmt.Errorf("simulator: %w", err)
	}
	return reply, nil
}
