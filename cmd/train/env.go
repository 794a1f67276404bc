package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/sweetrl/demotask"
	"github.com/turnwise/turnwise/sweetrl/rl"
	"github.com/turnwise/turnwise/tokenizer"
)

// envFlags say which task family episodes are played on, who plays the
// human and how answers are scored; shared by rollout, eval and, for the
// agent's system prompt, the trainers.
type envFlags struct {
	env         string // "colbench" or "demo"
	tasks       string // ColBench tasks file
	limit       int    // first tasks only (0: all)
	demoTasks   int
	demoFirst   int
	demoSeed    uint64
	simulator   string // scripted, model, http (colbench); demo
	simURL      string
	simModel    string
	simKeyEnv   string
	simTimeout  time.Duration
	simRetries  int
	simMaxNew   int
	simHF       string
	simWorkers  int
	python      string
	workers     int
	moduleScope bool
	stdlibOnly  bool
}

func (e *envFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&e.env, "env", "colbench", "task family: colbench (backend programming, --tasks FILE) or demo (the built-in family of train demo)")
	fs.StringVar(&e.tasks, "tasks", "", "ColBench backend tasks (JSONL)")
	fs.IntVar(&e.limit, "limit", 0, "use the first N tasks only (0: all)")
	fs.IntVar(&e.demoTasks, "demo-tasks", 200, "demo: number of tasks")
	fs.IntVar(&e.demoFirst, "demo-first", -1, "demo: index of the first task in the family's seeded order (default: train demo's RL tasks for rollout, its held-out tasks for eval)")
	fs.Uint64Var(&e.demoSeed, "demo-seed", 1, "demo: the seed of the tasks (train demo's --seed)")
	fs.StringVar(&e.simulator, "simulator", "", "who plays the human: http (an OpenAI-compatible server), model (the local model, greedy), scripted (reveals the hidden information line by line); default: http for colbench, the family's own for demo")
	fs.StringVar(&e.simURL, "sim-url", "http://localhost:8000/v1", "http simulator: base URL of the /v1/chat/completions server")
	fs.StringVar(&e.simModel, "sim-model", "meta-llama/Llama-3.1-70B-Instruct", "http simulator: model name")
	fs.StringVar(&e.simKeyEnv, "sim-key-env", "", "http simulator: environment variable holding the API key (empty: none)")
	fs.DurationVar(&e.simTimeout, "sim-timeout", 2*time.Minute, "http simulator: timeout per request")
	fs.IntVar(&e.simRetries, "sim-retries", 3, "http simulator: retries of a failed request")
	fs.StringVar(&e.simHF, "sim-hf", "", "model simulator: a Hugging Face checkpoint to play the human (default: the agent's own model)")
	fs.IntVar(&e.simMaxNew, "sim-max-new", 256, "http and model simulators: tokens per reply at most")
	fs.IntVar(&e.simWorkers, "sim-workers", 8, "simulator replies computed at once (the model simulator serialises)")
	fs.StringVar(&e.python, "python", "python3", "colbench: the Python that runs answers")
	fs.IntVar(&e.workers, "workers", 0, "colbench: answers scored at once (0: one per core)")
	fs.BoolVar(&e.stdlibOnly, "stdlib-only", false, "colbench: let answers import the standard library only (python -S)")
	fs.BoolVar(&e.moduleScope, "module-scope", false, "colbench: run each answer as a module (corrected semantics) instead of the reference's exec inside a function")
}

// protocol returns the family's episode rules.
func (e *envFlags) protocol() (sweetrl.Protocol, error) {
	switch e.env {
	case "colbench":
		return sweetrl.ColBenchProtocol(), nil
	case "demo":
		return demotask.Protocol(), nil
	}
	return sweetrl.Protocol{}, fmt.Errorf("--env %q: want colbench or demo", e.env)
}

// loadTasks returns the tasks episodes are played on. For the demo family
// they are, by default, train demo's RL tasks, or with heldOut its
// held-out tasks.
func (e *envFlags) loadTasks(heldOut bool) ([]sweetrl.Task, error) {
	var tasks []sweetrl.Task
	switch e.env {
	case "colbench":
		if e.tasks == "" {
			return nil, errors.New("--env colbench needs --tasks FILE (ColBench backend tasks, JSONL)")
		}
		var err error
		if tasks, err = sweetrl.LoadBackendTasks(e.tasks); err != nil {
			return nil, err
		}
	case "demo":
		if e.demoTasks <= 0 {
			return nil, fmt.Errorf("--demo-tasks %d: want a positive count", e.demoTasks)
		}
		first := e.demoFirst
		if first < 0 {
			first = demoSFTTasks // train demo's RL tasks follow its SFT tasks…
			if heldOut {
				first += demoRLTasks // …and its held-out tasks follow those
			}
		}
		if first+e.demoTasks > demotask.NumTasks {
			return nil, fmt.Errorf("--demo-first %d and --demo-tasks %d: the family has %d tasks", first, e.demoTasks, demotask.NumTasks)
		}
		tasks = demotask.Tasks(first+e.demoTasks, e.demoSeed)[first:]
	default:
		return nil, fmt.Errorf("--env %q: want colbench or demo", e.env)
	}
	if e.limit > 0 && e.limit < len(tasks) {
		tasks = tasks[:e.limit]
	}
	if len(tasks) == 0 {
		return nil, errors.New("no tasks")
	}
	return tasks, nil
}

// newSimulator returns the human simulator; the agent's model m and tok
// (loaded with pf) also play the human for the model simulator unless
// --sim-hf names another. The *sweetrl.HTTPSimulator is returned too (nil otherwise),
// for its failure count.
func (e *envFlags) newSimulator(pf *policyFlags, m *llama.Model, tok tokenizer.Tokenizer) (sweetrl.Simulator, *sweetrl.HTTPSimulator, error) {
	kind := e.simulator
	if kind == "" {
		kind = map[string]string{"colbench": "http", "demo": "demo"}[e.env]
	}
	switch kind {
	case "demo":
		if e.env != "demo" {
			return nil, nil, errors.New("--simulator demo plays the demo family only")
		}
		return demotask.Simulator{}, nil, nil
	case "scripted":
		return sweetrl.ScriptedSimulator{}, nil, nil
	case "model":
		if e.simHF != "" {
			sp := policyFlags{modelFlags: modelFlags{hf: e.simHF, dtype: pf.dtype, backendFlags: pf.backendFlags}}
			sm, sad, stok, err := sp.load()
			if err != nil {
				return nil, nil, fmt.Errorf("simulator: %w", err)
			}
			return &rl.ModelSimulator{Model: sm, Adapter: sad, Tok: stok, MaxNew: e.simMaxNew}, nil, nil
		}
		return &rl.ModelSimulator{Model: m, Tok: tok, MaxNew: e.simMaxNew}, nil, nil
	case "http":
		retries := e.simRetries
		if retries == 0 {
			retries = -1 // the config's 0 is its default
		}
		h, err := sweetrl.NewHTTPSimulator(sweetrl.HTTPSimulatorConfig{BaseURL: e.simURL, Model: e.simModel, APIKeyEnv: e.simKeyEnv,
			Timeout: e.simTimeout, MaxRetries: retries, MaxTokens: e.simMaxNew})
		if err != nil {
			return nil, nil, err
		}
		return h, h, nil
	}
	return nil, nil, fmt.Errorf("--simulator %q: want http, model, scripted or demo", kind)
}

// newScorer returns the family's scorer and a description of it.
func (e *envFlags) newScorer() (sweetrl.Scorer, string, error) {
	switch e.env {
	case "demo":
		return demotask.Scorer{}, "the demo family's scorer", nil
	case "colbench":
		return colbenchScorer(e)
	}
	return nil, "", fmt.Errorf("--env %q: want colbench or demo", e.env)
}
