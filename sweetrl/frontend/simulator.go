package frontend

import (
	"bytes"
	"context"
	"fmt"
	"image/png"

	"github.com/turnwise/turnwise/sweetrl"
)

// Renderer renders a web page to a full-page screenshot.
type Renderer interface {
	// Render returns the PNG screenshot of the page html. A page that
	// does not finish in time renders as a black image, not an error;
	// an error means the renderer itself failed.
	Render(ctx context.Context, html string) (pngImage []byte, err error)
}

// Simulator plays the human of a frontend episode. It sees only images:
// agent is the PNG screenshot of the page the agent just proposed, nil when
// its reply held no page, and target is the screenshot of the page the
// human has in mind. It returns the human's reply.
type Simulator interface {
	Respond(ctx context.Context, agent, target []byte) (string, error)
}

// SimulatorPrompt is the instruction the vision model playing the human is
// given before the two screenshots.
const SimulatorPrompt = `Play a human who is working with an AI agent to build a web page, in a dialogue. ` +
	`You have an exact page in mind and want the agent to build precisely that page; you need the ` +
	`agent's help to get there, so behave like the human user, not like an assistant.
You are shown two screenshots: first the page the agent made, then the page you want.
Tell the agent briefly how its page differs from yours, starting with the most striking ` +
	`differences, and say concretely what to change in each part (for example: the picture should ` +
	`be larger, the heading should be centred, the background should be dark blue).`

// Texts placed between the simulator's images.
const (
	// AgentImageText introduces the screenshot of the agent's page.
	AgentImageText = "This is the page the agent proposed."
	// NoAgentImageText stands in for the agent's screenshot when its reply
	// held no page.
	NoAgentImageText = "The agent did not show any page."
	// TargetImageText introduces the screenshot of the wanted page.
	TargetImageText = "This is the page the human user wants."
)

// SimulatorParts returns the user message the vision simulator is sent:
// SimulatorPrompt, then the agent's screenshot introduced by
// AgentImageText (or NoAgentImageText alone when agent is nil), then the
// target's screenshot introduced by TargetImageText.
func SimulatorParts(agent, target []byte) []sweetrl.ContentPart {
	parts := []sweetrl.ContentPart{sweetrl.TextPart(SimulatorPrompt)}
	if agent != nil {
		parts = append(parts, sweetrl.TextPart(AgentImageText), sweetrl.PNGPart(agent))
	} else {
		parts = append(parts, sweetrl.TextPart(NoAgentImageText))
	}
	return append(parts, sweetrl.TextPart(TargetImageText), sweetrl.PNGPart(target))
}

// HTTPSimulator is a Simulator that asks a vision model behind an
// OpenAI-compatible chat completions endpoint, sending SimulatorParts as
// one user message. Retries, failures and NoResponse are those of
// sweetrl.HTTPSimulator. It is safe for concurrent use.
type HTTPSimulator struct {
	// Client sends the requests.
	Client *sweetrl.HTTPSimulator
}

// SimulatorMaxTokens is the reply length, in tokens, the reference asks
// the vision simulator for.
const SimulatorMaxTokens = 4096

// SimulatorModel is the vision model the reference serves to play the
// human of frontend tasks.
const SimulatorModel = "Qwen/Qwen2-VL-72B-Instruct"

// NewHTTPSimulator returns an HTTPSimulator with the client
// sweetrl.NewHTTPSimulator(cfg) makes, after setting cfg.MaxTokens to
// SimulatorMaxTokens when it is 0.
func NewHTTPSimulator(cfg sweetrl.HTTPSimulatorConfig) (HTTPSimulator, error) {
	if cfg.MaxTokens == 0 {
		cfg.MaxTokens = SimulatorMaxTokens
	}
	c, err := sweetrl.NewHTTPSimulator(cfg)
	if err != nil {
		return HTTPSimulator{}, err
	}
	return HTTPSimulator{Client: c}, nil
}

// Respond implements Simulator.
func (s HTTPSimulator) Respond(ctx context.Context, agent, target []byte) (string, error) {
	return s.Client.RespondParts(ctx, SimulatorParts(agent, target))
}

// ScriptedSimulator is a deterministic Simulator for tests: it compares
// the sizes of the two screenshots. Without an agent page it asks for one;
// with pages of equal bytes it is satisfied; otherwise it names both
// sizes.
type ScriptedSimulator struct{}

// Replies of ScriptedSimulator.
const (
	ScriptedNoPage = "Please show me a page."
	ScriptedSame   = "That is exactly the page I want."
)

// Respond implements Simulator. An image that is not a PNG is an error.
func (ScriptedSimulator) Respond(ctx context.Context, agent, target []byte) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	tc, err := png.DecodeConfig(bytes.NewReader(target))
	if err != nil {
		return "", fmt.Errorf("scripted simulator: target screenshot: %w", err)
	}
	if agent == nil {
		return ScriptedNoPage, nil
	}
	ac, err := png.DecodeConfig(bytes.NewReader(agent))
	if err != nil {
		return "", fmt.Errorf("scripted simulator: agent screenshot: %w", err)
	}
	if bytes.Equal(agent, target) {
		return ScriptedSame, nil
	}
	return fmt.Sprintf("Your page is %d×%d pixels; mine is %d×%d and looks different.", ac.Width, ac.Height, tc.Width, tc.Height), nil
}
