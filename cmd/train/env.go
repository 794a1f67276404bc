package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/sweetrl/frontend"
	"github.com/turnwise/turnwise/sweetrl/pipeline"
	"github.com/turnwise/turnwise/tokenizer"
)

// envFlags say which task family episodes are played on, who plays the
// human and how answers are scored (pipeline.Env); shared by rollout, eval
// and, for the agent's system prompt, the trainers.
type envFlags struct {
	pipeline.Env
	simRetries int
	simHF      string
	simWorkers int
	fs         *pflag.FlagSet // for the frontend's simulator defaults
}

// registerFamily adds --env alone, for the trainers, which take the
// family's episode rules (the agent's system prompt, the pairs and
// imitated trajectories) and nothing else.
func (e *envFlags) registerFamily(fs *pflag.FlagSet) {
	fs.StringVar(&e.Family, "env", "colbench", "task family, for the agent's system prompt and the family's pairs: colbench, frontend or demo (the built-in family of train demo)")
}

// register adds every flag of the subcommands that play episodes: the
// family and its tasks, the simulator and the scorer.
func (e *envFlags) register(fs *pflag.FlagSet) {
	e.fs = fs
	fs.StringVar(&e.Family, "env", "colbench", "task family: colbench (backend programming, --tasks FILE), frontend (frontend design, --tasks FILE; rollout and eval score with --clip DIR) or demo (the built-in family of train demo)")
	fs.StringVar(&e.TasksFile, "tasks", "", "ColBench tasks (JSONL): backend rows for --env colbench, frontend rows for --env frontend")
	fs.IntVar(&e.Limit, "limit", 0, "use the first N tasks only (0: all)")
	fs.IntVar(&e.DemoTasks, "demo-tasks", 200, "demo: number of tasks")
	fs.IntVar(&e.DemoFirst, "demo-first", -1, "demo: index of the first task in the family's seeded order (default: train demo's RL tasks for rollout, its held-out tasks for eval)")
	fs.Uint64Var(&e.DemoSeed, "demo-seed", 1, "demo: the seed of the tasks (train demo's --seed)")
	fs.StringVar(&e.Simulator, "simulator", "", "who plays the human: http (an OpenAI-compatible server), model (the local model, greedy), scripted (reveals the hidden information line by line); default: http for colbench, the family's own for demo")
	fs.StringVar(&e.HTTP.BaseURL, "sim-url", "http://localhost:8000/v1", "http simulator: base URL of the /v1/chat/completions server")
	fs.StringVar(&e.HTTP.Model, "sim-model", "meta-llama/Llama-3.1-70B-Instruct", "http simulator: model name")
	fs.StringVar(&e.HTTP.APIKeyEnv, "sim-key-env", "", "http simulator: environment variable holding the API key (empty: none)")
	fs.DurationVar(&e.HTTP.Timeout, "sim-timeout", 2*time.Minute, "http simulator: timeout per request")
	fs.IntVar(&e.simRetries, "sim-retries", 3, "http simulator: retries of a failed request")
	fs.IntVar(&e.HTTP.MaxFailures, "sim-max-failures", 20, "http simulator: stop the run with an error once this many calls failed (each after its retries), instead of playing on with the reply \"No response.\" (0: never stop)")
	fs.StringVar(&e.simHF, "sim-hf", "", "model simulator: a Hugging Face checkpoint to play the human (default: the agent's own model)")
	fs.IntVar(&e.SimMaxNew, "sim-max-new", 256, "http and model simulators: tokens per reply at most")
	fs.IntVar(&e.simWorkers, "sim-workers", 8, "simulator replies computed at once (the model simulator serialises)")
	fs.StringVar(&e.Python.Python, "python", "python3", "colbench: the Python that runs answers")
	fs.IntVar(&e.Python.Workers, "workers", 0, "colbench: answers scored at once (0: one per core)")
	fs.BoolVar(&e.Python.StdlibOnly, "stdlib-only", false, "colbench: let answers import the standard library only (python -S)")
	fs.BoolVar(&e.Python.ModuleScope, "module-scope", false, "colbench: run each answer as a module (corrected semantics) instead of the reference's exec inside a function")
}

// registerScoring adds the flags of the subcommands that play and score
// frontend episodes (rollout, eval; the trainers read scored trajectories
// and need neither, and their --clip is the gradient's).
func (e *envFlags) registerScoring(fs *pflag.FlagSet) {
	fs.StringVar(&e.CLIP, "clip-model", "", "frontend: the Hugging Face openai/clip-vit-base-patch32 directory whose image embeddings score pages (required: there is no substitute metric)")
	fs.StringVar(&e.CLIP, "clip", "", "the old name of --clip-model")
	_ = fs.MarkDeprecated("clip", "use --clip-model (--clip is the gradient clip of the trainers)")
	fs.IntVar(&e.Render.Tabs, "render-tabs", 4, "frontend: pages the browser renders at once")
	fs.DurationVar(&e.Render.Timeout, "render-timeout", 20*time.Second, "frontend: time a page has to render; a page past it scores as a black image")
}

// checkScorer stops a job that will score frontend pages without --clip.
func (e *envFlags) checkScorer() error {
	if err := e.CheckScorer(); err != nil {
		return fmt.Errorf("--env frontend needs --clip DIR: %w", err)
	}
	return nil
}

// tasks returns the tasks episodes are played on (pipeline.Env.Tasks).
func (e *envFlags) tasks(heldOut bool) ([]sweetrl.Task, error) {
	if e.Family == "colbench" && e.TasksFile == "" {
		return nil, errors.New("--env colbench needs --tasks FILE (ColBench backend tasks, JSONL)")
	}
	if e.Family == "frontend" && e.TasksFile == "" {
		return nil, errors.New("--env frontend needs --tasks FILE (ColBench frontend tasks, JSONL)")
	}
	return e.Tasks(heldOut)
}

// checkSimulator, when an HTTP simulator plays the human, asks it once
// whether it answers (sweetrl.HTTPSimulator.Check), so that a run stops at
// once, naming the URL, rather than after its model has loaded.
func (e *envFlags) checkSimulator(ctx context.Context) error {
	if e.SimulatorKind() != "http" {
		return nil
	}
	e.configureHTTP()
	h, err := sweetrl.NewHTTPSimulator(e.HTTP)
	if err != nil {
		return err
	}
	if err := h.Check(ctx); err != nil {
		return fmt.Errorf("%w (start it, or point --sim-url and --sim-model at one)", err)
	}
	return nil
}

// newSimulator returns the human simulator; the agent's model m and tok
// (loaded with pf) also play the human for the model simulator unless
// --sim-hf names another. The *sweetrl.HTTPSimulator is returned too (nil
// otherwise), for its failure count.
func (e *envFlags) newSimulator(pf *policyFlags, m *llama.Model, tok tokenizer.Tokenizer) (sweetrl.Simulator, *sweetrl.HTTPSimulator, error) {
	e.configureHTTP()
	var ad *llama.Adapter
	if e.SimulatorKind() == "model" && e.simHF != "" {
		sp := policyFlags{modelFlags: modelFlags{Source: llama.Source{HF: e.simHF}, dtype: pf.dtype, backendFlags: pf.backendFlags}}
		var err error
		if m, ad, tok, err = sp.load(); err != nil {
			return nil, nil, fmt.Errorf("simulator: %w", err)
		}
	}
	return e.NewSimulator(m, ad, tok)
}

// configureHTTP sets the HTTP simulator's configuration the flags imply
// beyond the fields they set directly.
func (e *envFlags) configureHTTP() {
	e.HTTP.MaxRetries, e.HTTP.MaxTokens = e.simRetries, e.SimMaxNew
	if e.simRetries == 0 {
		e.HTTP.MaxRetries = -1 // the config's 0 is its default
	}
	if e.Family == "frontend" && e.fs != nil {
		// The reference's vision simulator and its reply length, unless
		// the flags say otherwise.
		if !e.fs.Changed("sim-model") {
			e.HTTP.Model = frontend.SimulatorModel
		}
		if !e.fs.Changed("sim-max-new") {
			e.HTTP.MaxTokens = frontend.SimulatorMaxTokens
		}
	}
}
