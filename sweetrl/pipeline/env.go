package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/sweetrl/demotask"
	"github.com/turnwise/turnwise/sweetrl/frontend"
	"github.com/turnwise/turnwise/sweetrl/frontend/render"
	"github.com/turnwise/turnwise/sweetrl/pyeval"
	"github.com/turnwise/turnwise/sweetrl/rl"
	"github.com/turnwise/turnwise/tokenizer"
)

// The demo's default task counts: the family's tasks in seeded order are
// the SFT tasks, then the RL tasks (the last of them the validation split),
// then the held-out tasks. Env.Tasks finds the demo's RL and held-out tasks
// by them.
const (
	DefaultSFTTasks = 3000
	DefaultRLTasks  = 200
)

// Env says where episodes are played, for the subcommands that play or
// train on them one step at a time (rollout, eval, and the trainers, which
// need the agent's system prompt): the task family, who plays the human,
// and how answers are scored.
type Env struct {
	// Family is "colbench" (ColBench backend tasks from TasksFile),
	// "frontend" (ColBench frontend design tasks from TasksFile) or "demo"
	// (the built-in keys family).
	Family    string
	TasksFile string // ColBench backend or frontend tasks, JSONL
	Limit     int    // the first Limit tasks only (0: all)
	DemoTasks int    // demo: the number of tasks
	DemoFirst int    // demo: the first task's index in the family's seeded order (< 0: the demo's RL tasks, or held-out tasks)
	DemoSeed  uint64 // demo: the seed of the tasks (the demo's seed)
	// Simulator is who plays the human: "http" (an OpenAI-compatible
	// server, HTTP; for frontend a vision model shown the screenshots),
	// "model" (a local model, greedy), "scripted" (reveals the hidden
	// information line by line; for frontend frontend.ScriptedSimulator)
	// or "demo" (the demo family's own); "" is http for colbench and
	// frontend and demo for the demo family.
	Simulator string
	HTTP      sweetrl.HTTPSimulatorConfig
	SimMaxNew int            // model simulator: tokens per reply at most
	Python    pyeval.Options // colbench: how answers are run
	// CLIP is the Hugging Face openai/clip-vit-base-patch32 directory whose
	// image tower scores frontend pages; without it frontend episodes
	// cannot be scored (there is no substitute metric).
	CLIP string
	// Render configures the browser that renders frontend pages.
	Render render.Options

	fe frontendState // frontend: the renderer and CLIP, opened when needed
}

// Protocol returns the family's episode rules.
func (e *Env) Protocol() (sweetrl.Protocol, error) {
	switch e.Family {
	case "colbench":
		return sweetrl.ColBenchProtocol(), nil
	case "frontend":
		return frontend.Protocol(), nil
	case "demo":
		return demotask.Protocol(), nil
	}
	return sweetrl.Protocol{}, fmt.Errorf("task family (--env) %q: want colbench, frontend or demo", e.Family)
}

// Tasks returns the tasks episodes are played on. For the demo family
// they are, unless DemoFirst says otherwise, the demo's RL tasks, or with
// heldOut its held-out tasks (with the default task counts).
func (e *Env) Tasks(heldOut bool) ([]sweetrl.Task, error) {
	var tasks []sweetrl.Task
	switch e.Family {
	case "colbench":
		if e.TasksFile == "" {
			return nil, errors.New("the colbench family needs a tasks file (ColBench backend tasks, JSONL)")
		}
		var err error
		if tasks, err = sweetrl.LoadBackendTasks(e.TasksFile); err != nil {
			return nil, err
		}
	case "frontend":
		if e.TasksFile == "" {
			return nil, errors.New("the frontend family needs a tasks file (ColBench frontend tasks, JSONL)")
		}
		var err error
		if tasks, err = frontend.LoadTasks(e.TasksFile); err != nil {
			return nil, err
		}
	case "demo":
		if e.DemoTasks <= 0 {
			return nil, fmt.Errorf("%d demo tasks: want a positive count", e.DemoTasks)
		}
		first := e.DemoFirst
		if first < 0 {
			first = DefaultSFTTasks // the demo's RL tasks follow its SFT tasks…
			if heldOut {
				first += DefaultRLTasks // …and its held-out tasks follow those
			}
		}
		if first+e.DemoTasks > demotask.NumTasks {
			return nil, fmt.Errorf("demo tasks %d to %d: the family has %d tasks", first, first+e.DemoTasks, demotask.NumTasks)
		}
		tasks = demotask.Tasks(first+e.DemoTasks, e.DemoSeed)[first:]
	default:
		return nil, fmt.Errorf("task family %q: want colbench, frontend or demo", e.Family)
	}
	if e.Limit > 0 && e.Limit < len(tasks) {
		tasks = tasks[:e.Limit]
	}
	if len(tasks) == 0 {
		return nil, errors.New("no tasks")
	}
	return tasks, nil
}

// NewSimulator returns the human simulator. The model simulator is played
// by m with its adapter ad and tokenizer tok (the agent's own model, or
// another the caller loaded). The *sweetrl.HTTPSimulator is returned too
// (nil otherwise), for its failure count.
func (e *Env) NewSimulator(m *llama.Model, ad *llama.Adapter, tok tokenizer.Tokenizer) (sweetrl.Simulator, *sweetrl.HTTPSimulator, error) {
	if e.Family == "frontend" {
		return e.frontendSimulator()
	}
	switch e.SimulatorKind() {
	case "demo":
		if e.Family != "demo" {
			return nil, nil, errors.New("the demo simulator plays the demo family only")
		}
		return demotask.Simulator{}, nil, nil
	case "scripted":
		return sweetrl.ScriptedSimulator{}, nil, nil
	case "model":
		return &rl.ModelSimulator{Model: m, Adapter: ad, Tok: tok, MaxNew: e.SimMaxNew}, nil, nil
	case "http":
		h, err := sweetrl.NewHTTPSimulator(e.HTTP)
		if err != nil {
			return nil, nil, err
		}
		return h, h, nil
	}
	return nil, nil, fmt.Errorf("simulator %q: want http, model, scripted or demo", e.Simulator)
}

// SimulatorKind returns the simulator NewSimulator makes: Simulator, or the
// family's default.
func (e *Env) SimulatorKind() string {
	if e.Simulator != "" {
		return e.Simulator
	}
	return map[string]string{"colbench": "http", "frontend": "http", "demo": "demo"}[e.Family]
}

// NewScorer returns the family's scorer — for colbench the sandboxed
// Python evaluator, with the tasks file hidden from answers; for frontend
// the CLIP image similarity of pages rendered offline, its tower on b —
// and a line saying which scorer it is (for colbench: which Python runs
// answers, in which scope, and how they are isolated).
func (e *Env) NewScorer(ctx context.Context, b engine.Backend) (sweetrl.Scorer, string, error) {
	switch e.Family {
	case "frontend":
		return e.frontendScorer(b)
	case "demo":
		return demotask.Scorer{}, "the demo family's scorer", nil
	case "colbench":
		o := e.Python
		if e.TasksFile != "" {
			o.Hide = append(slices.Clip(o.Hide), e.TasksFile)
		}
		ev, err := pyeval.New(ctx, o)
		if err != nil {
			return nil, "", err
		}
		return ev, fmt.Sprintf("Python %s (%s), %s; %s", ev.Version, ev.Python, ev.Scope(), ev.Isolation), nil
	}
	return nil, "", fmt.Errorf("task family %q: want colbench, frontend or demo", e.Family)
}
