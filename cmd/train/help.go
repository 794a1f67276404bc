package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/turnwise/turnwise/sweetrl/pipeline"
	"github.com/turnwise/turnwise/trainer"
)

// help is a subcommand's help: what "train X --help" and "train help X"
// print above its flags.
type help struct {
	// usage holds the synopsis lines, "train X [flags]" by default.
	usage []string
	// text describes the subcommand: a paragraph or more.
	text string
	// examples are command lines, each after a comment line saying what it
	// does; TestHelpExamples parses each with its subcommand's flags.
	examples []example
}

// example is one command line of a subcommand's help.
type example struct {
	what, line string
}

// guards says how every trainer ends a run early: the same for sft, rft,
// critic, actor and mtdpo (trainer.Guard).
func guards() string {
	return `A step whose gradient is NaN or infinite is skipped; a loss that is NaN
or infinite for ` + fmt.Sprint(trainer.MaxNonFiniteLosses) + ` steps in a row stops the run with an error naming
the step, and no checkpoint or final model is written from weights that
are not finite. SIGINT or SIGTERM finishes the step under way, writes a
checkpoint to --out and exits naming it (the same command resumes from
it); a second signal exits at once.`
}

// helps returns every subcommand's help, keyed by its name ("bench report"
// and "bench profile" for the subcommands of bench).
func helps() map[string]help {
	var families []string
	for _, name := range pipeline.Families {
		f, _ := pipeline.LookupFamily(name)
		families = append(families, f.Describe)
	}
	return map[string]help{
		"actor": {
			text: `The SWEET-RL actor (paper §4.2): for each agent turn of the rollouts it
samples --candidates replies from the policy, ranks them by the critic's
advantage (the critic's score of the candidate given the ground truth,
minus its frozen reference's), and trains the policy with turn-wise DPO on
the best and worst of them, with an NLL term on the chosen reply
(--nll). --data-fraction of the agent turns are used, as the reference
uses a tenth. Checkpoints, metrics and the final adapter go to --out;
a run started again with the same --out resumes.

` + guards(),
			examples: []example{
				{"train the actor of a ColBench run on 10% of the turns, 16 candidates each", "train actor --hf MODEL --critic critic --trajectories roll.jsonl.zst --candidates 16 --data-fraction 0.1 --out actor"},
				{"the same from a recipe, with a flag overridden", "train actor --config recipes/colbench-8b-actor.yaml --hf MODEL --critic critic --trajectories roll.jsonl.zst --lr 2e-7"},
			},
		},
		"bench": {
			usage: []string{"train bench [flags]", "train bench report [--out FILE.md] RESULT.json...", "train bench profile [--brief] [--out FILE.md] NCU.csv..."},
			text: `Measures every engine op (achieved TFLOP/s or GB/s, % of the GEMM and copy
ceilings measured in the same run, our GEMM beside the vendor's) and a LoRA
training step and generation of a model with random weights (tokens/s, MFU,
peak memory); or, with --baseline, gates on kernel regressions. The results
print as markdown tables; --out FILE writes them as JSON for train bench
report and the gate, --json prints that JSON instead of the tables.`,
			examples: []example{
				{"every op and the step on the CPU, in markdown", "train bench --suite all"},
				{"the kernels on a GPU, kept as JSON and markdown", "train bench --backend cuda --suite kernels --out bench-kernels.json --md bench-kernels.md"},
				{"fail naming every kernel more than 5% slower than a recorded run", "train bench --backend cuda --baseline bench/runs/2026-11-27-h200-9b1ace1/bench-kernels.json"},
			},
		},
		"bench report": {
			usage: []string{"train bench report [--out FILE.md] RESULT.json..."},
			text: `Side-by-side tables of results from train bench and its PyTorch peers, with
ratios (ours over the peer, ours over the ceilings) and the targets' verdicts.`,
			examples: []example{
				{"ours against the PyTorch peers measured on the same GPU", "train bench report --out bench.md bench-kernels.json bench-step.json bench-torch.json"},
			},
		},
		"bench profile": {
			usage: []string{"train bench profile [--brief] [--out FILE.md] NCU.csv..."},
			text: `One table of the kernels Nsight Compute profiled, from its raw page
(ncu --import REPORT --page raw --csv --print-units base > CASE.csv; the
GPU bundle's profile step writes them): per kernel its grid, registers,
shared memory, time, the share of the SM's, the memory system's and the
tensor pipe's peak it sustained, its occupancy, and the stall reasons with
the most cycles per issued instruction. A metric the profile lacks is left
blank.`,
			examples: []example{
				{"the bundle's attention profiles, ours beside SDPA's", "train bench profile --out profile.md attn-fwd.csv attn-bwd.csv sdpa-fwd.csv sdpa-bwd.csv"},
			},
		},
		"collectives": {
			text: `Checks every collective (all-reduce, broadcast, all-gather, reduce-scatter)
across the ranks of a job against the sum computed on each rank, then
times all-reduce at --sizes and prints its bus bandwidth. Run it under
train launch: Gloo carries the CPU backend's collectives, NCCL the cuda
backend's.`,
			examples: []example{
				{"one process, a job of one rank", "train collectives --sizes 1"},
				{"two CPU ranks on this machine", "train launch --nproc-per-node 2 -- collectives"},
				{"eight GPUs", "train launch --nproc-per-node 8 -- collectives --backend cuda --sizes 16,256"},
			},
		},
		"completion": {
			usage: []string{"train completion bash|zsh|fish"},
			text: `Prints a shell completion script for train's subcommands and their flags.
Load it in the current shell, or save it where the shell looks for
completions.`,
			examples: []example{
				{"bash, this shell", "train completion bash"},
				{"zsh: save it on $fpath as _train", "train completion zsh"},
				{"fish: save it as ~/.config/fish/completions/train.fish", "train completion fish"},
			},
		},
		"critic": {
			text: `The SWEET-RL critic (paper §4.1): a LoRA adapter trained with the
Bradley–Terry loss on pairs of trajectories of the same task (the better
one against the worse), with the task's ground truth (the hidden
information) in its prompt. Its score of a trajectory is the sum over the
agent's turns of the mean per-token log-ratio to its frozen reference
(--critic-score turn, the paper's) or one mean over all agent tokens
(trajectory, the released code's); --head value trains a value head
instead.

` + guards(),
			examples: []example{
				{"the critic of a ColBench run", "train critic --hf MODEL --trajectories roll.jsonl.zst --out critic"},
				{"from the 8B recipe", "train critic --config recipes/colbench-8b-critic.yaml --hf MODEL --trajectories roll.jsonl.zst"},
			},
		},
		"critic-check": {
			text: `Prints the critic check of a critic over a train demo run: on held-out tasks
of the run's family, the decisions whose better and worse continuations
the family knows exactly, and how often the critic's advantage orders them
rightly (each decision's share, the mean and the worst).`,
			examples: []example{
				{"the check of a demo run's critic", "train critic-check --from runs/demo --critic runs/demo/critic"},
			},
		},
		"demo": {
			text: `Runs the whole SWEET-RL pipeline on a built-in task family, on a small
byte-level model trained from scratch, on the CPU by default. The families:

` + strings.Join(families, "\n\n") + `

The stages: a supervised start on scripted dialogues; K episodes per RL
task with the supervised model; a critic (a LoRA adapter) trained with the
Bradley–Terry loss on trajectory pairs, seeing the ground truth, keeping
its best epoch on validation; the actor (another adapter) trained with
turn-wise DPO on best-of-N candidates ranked by the critic's advantage;
rejection fine-tuning and multi-turn DPO trained on the same rollouts;
then each policy plays the held-out test tasks, and a table of pass rate
and success with 95% confidence intervals is printed, with the critic
check of each critic.

--settings K gives every method the same tuning budget: rejection
fine-tuning, multi-turn DPO, each critic and each actor validate K settings
of their knobs (learning rate; for the DPO-trained policies β, epochs 1–3
and the share of the pairs 0.3–1.0; for the critics β and epochs 1–4; for
rejection fine-tuning the passes) on the same validation tasks and keep the
best. --diagnostics adds the rows that locate the bottleneck: critic-guided
best-of-N on the SFT policy (--best-of), an actor trained on candidates
ranked by the family's exact value (tally), the critic without the ground
truth with its actor, and an RPO-style actor. --epoch-select validates
every tuned policy (rejection fine-tuning, multi-turn DPO, each actor)
after each of its epochs, as the critics always are, and keeps each
setting's best epoch, its weights and its statistics; a setting's epochs
become its most. --full is --diagnostics and --epoch-select (unless
--epoch-select=false is given) with --settings 4 unless --settings is
given; the study over seeds refuses to combine runs with and without
--epoch-select. --seeds N runs training seeds
--seed … --seed+N-1, each in OUT/seed-S (--from DIR: DIR/seed-S), and
prints the study: each method's success as mean ± sd over the seeds and
the pre-registered paired comparisons (paired bootstrap over tasks within
each seed, McNemar's exact test, Holm's correction). Every table ends with
those comparisons.

With --select each method's learning rate is chosen on the validation split
from a small grid (--select-critic: only the critics', by validation pair
accuracy); --ablations adds the ablation rows (SWEET-RL with the other
critic score, with the other advantage baseline, and the value-head critic)
and, on the keys family, runs the budget family too (in OUT/budget).
--from DIR reuses DIR's supervised model and rollouts. --stages sft runs
the supervised start alone and evaluates it on the held-out tasks (the
same tasks and sampling seeds as a whole run's "SFT start" row), to check
a family's start before any RL method runs on it; --stages prepare makes the
supervised start and the rollouts alone, for later runs to reuse (--from).
--stages study trains nothing: it prints and writes the study over the
results that runs of single seeds left in OUT/seed-S.

Same seed, same --threads: same table (OpenBLAS chooses its GEMM kernels by
CPU model; pin them with OPENBLAS_CORETYPE for the same numbers on other
CPUs).`,
			examples: []example{
				{"the main table on the keys family (what make run runs)", "train demo"},
				{"the study: three training seeds of the tally family, equal tuning, diagnostics", "train demo --family tally --seeds 3 --full --out runs/tally"},
				{"seeds run one at a time (or on several machines), then their study", "train demo --family tally --full --seed 2 --out runs/tally/seed-2"},
				{"", "train demo --family tally --seeds 3 --stages study --out runs/tally"},
			},
		},
		"eval": {
			text: `Plays held-out tasks with a model (and adapter) against the simulated human
and reports the pass rate and the success rate with 95% confidence
intervals (frontend tasks: the mean CLIP cosine and the win rate against
--against). The agent samples at --temperature (1, as the paper's
evaluation does); --seeds episodes per task. --json prints one JSON object;
--out keeps the episodes.`,
			examples: []example{
				{"ColBench backend tasks, three episodes each, a served model as the human", "train eval --hf MODEL --adapter actor --tasks test.jsonl --seeds 3 --sim-url http://127.0.0.1:8000/v1"},
				{"the built-in family of train demo, greedy", "train eval --hf runs/demo/sft --env demo --temperature 0"},
			},
		},
		"export": {
			text: `Turns a model into a merged Hugging Face directory (config.json,
model.safetensors, tokenizer files) or a GGUF file that llama.cpp and
Ollama load: a Hugging Face or GGUF checkpoint, a PEFT adapter merged into
its base, or a full fine-tuning run's checkpoint. An existing --out is
refused unless --force, which replaces it whole.`,
			examples: []example{
				{"merge an adapter into its base, as a Hugging Face directory", "train export --from runs/mine/final --out merged --format hf"},
				{"a GGUF file in f16", "train export --from merged --out model.gguf --format gguf --dtype f16"},
			},
		},
		"family-stats": {
			text: `Prints what a built-in task family asks of a learner, computed from its
scripted dialogues alone, with no model: the share of scripted dialogues
that succeed, the success of imitating the successful ones exactly (a
policy drawing each move with the frequencies the successes show after the
same dialogue so far, played on fresh tasks), the optimum, and the share
of successes that hold a harmful turn; then the success of the scripted
dialogues a train demo run's supervised start learns from, and the bar its
SFT start must reach (0.8 times that). Only the tally family has these
statistics.`,
			examples: []example{
				{"the tally family's statistics", "train family-stats --family tally"},
			},
		},
		"generate": {
			text: `Continues a prompt with a model (and adapter): greedy by default
(--temperature 0, as Hugging Face's generate, so that a continuation is
reproducible), or sampled with --temperature, --top-p and --top-k from
--seed. The prompt is --prompt, --ids, or standard input; --chat wraps it
as a user turn of the Llama 3.1 chat template. --json prints the text, the
ids and each token's log-probability.`,
			examples: []example{
				{"the model train sft trained from scratch", "train generate --hf runs/sft/final --prompt \"Once upon a time\""},
				{"a chat turn, sampled", "train generate --hf MODEL --adapter actor --chat --prompt \"Write a haiku\" --temperature 0.7 --top-p 0.9 --seed 3"},
			},
		},
		"help": {
			usage: []string{"train help [subcommand]"},
			text:  `Prints the list of subcommands, or one subcommand's help and flags.`,
			examples: []example{
				{"sft's help", "train help sft"},
			},
		},
		"info": {
			text: `Prints a model's architecture (dimensions, layers, heads, vocabulary,
RoPE) and its parameter counts by kind, from a checkpoint's metadata or a
preset, without loading the weights.`,
			examples: []example{
				{"Llama-3.1-8B's shapes", "train info --preset llama-3.1-8b"},
				{"a GGUF file", "train info --gguf model.gguf"},
			},
		},
		"launch": {
			usage: []string{"train launch --nproc-per-node N [--nnodes M --node-rank K --master-addr A --master-port P] -- <subcommand> <flags>"},
			text: `Starts a subcommand once per rank, as torchrun starts a script: each rank
gets RANK, WORLD_SIZE, LOCAL_RANK and the rendezvous address in its
environment; when one rank fails the others get SIGTERM, then SIGKILL
after --grace. On several nodes, run it on each with the same
--master-addr and its own --node-rank.`,
			examples: []example{
				{"data-parallel SFT on two CPU ranks", "train launch --nproc-per-node 2 -- sft --threads 1 --out runs/sft2"},
				{"node 1 of a two-node job of 8 GPUs each", "train launch --nproc-per-node 8 --nnodes 2 --node-rank 1 --master-addr 10.0.0.1 -- sft --backend cuda --hf MODEL --data chats.jsonl"},
			},
		},
		"mtdpo": {
			text: `The multi-turn DPO baseline of the SWEET-RL paper: DPO over whole
trajectories, each task's better trajectory against its worse, with the
loss on the agent's tokens of every turn.

` + guards(),
			examples: []example{
				{"on a ColBench run's rollouts", "train mtdpo --hf MODEL --trajectories roll.jsonl.zst --out mtdpo"},
			},
		},
		"plan": {
			text: `Prints the device memory a training step (or, with --inference, a prefill
into a KV cache) needs at its peak, line by line: the weights and training
state, which are allocated once, and the activations and their gradients,
exactly as the forward and backward take them from the model's buffer pool
(before the pool rounds sizes up by at most 1/8). Starred lines exist one
after the other; the total counts the largest.

With --json it prints the same as one JSON object:
  model         the architecture (dim, layers, heads, kv_heads, head_dim, ffn, vocab)
  mode          "full", "lora" or "inference"
  lora_rank     the LoRA rank (0: none)
  batch, seq    sequences and tokens per sequence
  weight_dtype  "bf16" or "f32"
  recompute     whether layers are recomputed in the backward
  ranks, zero   data-parallel ranks and the ZeRO stage (the plan is per rank)
  items         the lines: key (stable name), what (in words), bytes,
                note (how the bytes are made up), transient (starred)
  total_bytes   the peak
  pooled_bytes  the part of the peak drawn from the model's buffer pool`,
			examples: []example{
				{"a LoRA step of Llama-3.1-8B on 8k tokens", "train plan --preset llama-3.1-8b --lora-rank 16 --seq 8192"},
			},
		},
		"plot": {
			usage: []string{"train plot [flags] metrics.jsonl"},
			text: `Draws the training loss (and evaluation loss, when recorded) against the step,
and the learning rate in a second panel, as a standalone SVG image; with
--metric, the metrics named, a panel each (--log-y: on logarithmic axes).
Only SVG is drawn: a file named otherwise is refused.`,
			examples: []example{
				{"a run's loss and learning rate", "train plot runs/sft/metrics.jsonl --out loss.svg"},
				{"KL and MFU of an actor run, to standard output", "train plot actor/metrics.jsonl --metric kl,mfu --out -"},
			},
		},
		"rft": {
			text: `The rejection fine-tuning baseline of the SWEET-RL paper: supervised
fine-tuning on the trajectories whose reward is the task's best (success),
with the loss on the agent's turns.

` + guards(),
			examples: []example{
				{"on a ColBench run's rollouts", "train rft --hf MODEL --trajectories roll.jsonl.zst --out rft"},
			},
		},
		"rollout": {
			text: `Plays --k episodes of every task with a local model (and adapter) against
the simulated human and writes them, scored, as trajectories in the
reference's layout (zstd-compressed when the name ends in .zst): the input
of train critic, actor, rft and mtdpo. The agent samples at --temperature
(1: the rollouts must differ for the pairs). An interrupted run continues
with --continue.`,
			examples: []example{
				{"eight episodes per task, a served model as the human", "train rollout --hf MODEL --tasks train.jsonl --k 8 --simulator http --sim-url http://127.0.0.1:8000/v1 --out roll.jsonl.zst"},
			},
		},
		"score": {
			text: `Prints each token's log-probability under a model (and adapter) for
sequences given as JSON lines ({"ids": [...]} or {"text": "..."}), one
JSON object per sequence: the ids, the log-probabilities and their sum.`,
			examples: []example{
				{"score texts from a file", "train score --hf MODEL --input texts.jsonl"},
			},
		},
		"score-answers": {
			usage: []string{"train score-answers --tasks FILE --answers FILE [flags]", "train score-answers --tasks FILE --ground-truth [flags]"},
			text: `Scores final answers to ColBench backend programming tasks as the SWEET-RL
reference does: an answer containing a forbidden string (import os, sudo,
exit( …) scores 0; otherwise markdown fences are stripped and, for each of
the task's unit tests, the ground truth's output and the answer's (under a
1 s limit) are compared; the reward is the fraction of tests passed. Each
answer runs in its own sandboxed Python process (see the end of the report
for the isolation this machine allows). With --compare isolated (the
default) the ground truth runs in a process of its own and both send their
outputs as data, which the evaluator compares, so an answer cannot forge a
pass; --compare in-process compares the objects with == in one process,
exactly as the reference does.

--answers is one of two formats, told apart by the first non-blank line:

  trajectories   JSON lines in the reference layout ({"task": ...,
                 "dialogue_history": ..., "answer": ..., "reward": ...};
                 zstd-compressed when the name ends in .zst). Each answer
                 is scored against the task its trajectory carries, as the
                 reference's evaluation does; --tasks is optional, and when
                 given every trajectory's task must be in it (matched by
                 problem_description) and its row is reported.
  index lines    {"index": N, "answer": "..."}, N being the task's 0-based
                 row in --tasks.

--ground-truth scores every task's own ground truth as its answer.

Output: one line per answer (its index, tests passed, reward and, for a 0,
why), then the pass rate (mean reward: the reference's "tests passed"), the
success rate (reward 1), the Python that ran the answers and the isolation.
With --json, one JSON object per answer goes to standard output and the
summary to standard error.`,
			examples: []example{
				{"a rollout's answers", "train score-answers --answers roll.jsonl.zst"},
				{"check that every task's ground truth passes its own tests", "train score-answers --tasks test.jsonl --ground-truth"},
			},
		},
		"serve": {
			text: `Serves a model, and with --adapter its LoRA adapter, behind the OpenAI API:
POST /v1/chat/completions (the Llama 3.1 chat template), POST
/v1/completions and GET /v1/models, streamed or not, and GET /health and
GET /metrics (Prometheus). Batching is continuous: a request joins the
running batch (up to --max-batch sequences, whatever their sampling
parameters or model id) at the next step and leaves it when it ends; its
prompt is prefilled in chunks of up to --prefill-chunk tokens between
decoding steps. One line per request is logged on stderr. SIGINT or
SIGTERM stops accepting connections and lets the requests in flight finish
for --grace; a second signal ends them at once.

With --load-test N it instead serves on a loopback port, sends N requests
from --load-concurrency clients, and prints requests/s, latency
percentiles, and goroutines and heap before and after.`,
			examples: []example{
				{"a model and its adapter on port 8000", "train serve --hf MODEL --adapter actor --addr 127.0.0.1:8000"},
				{"the load test on the tiny preset", "train serve --preset tiny --load-test 64"},
				{"with a key clients must send as Authorization: Bearer KEY", "train serve --hf MODEL --api-key secret-key --addr 0.0.0.0:8000"},
			},
		},
		"sft": {
			text: `Supervised fine-tuning, or training from scratch. With no flags it trains a
small byte-level model from scratch on a built-in corpus of short stories
and then generates from it. Data is JSONL or plain text (documents
separated by blank lines: loss on every token). JSONL rows are chat
{"messages": [...]} (loss on assistant turns), {"text": "..."} (loss on
every token), {"prompt": ..., "completion": ...} (loss on the completion)
or ShareGPT {"conversations": [...]} (loss on gpt turns); the first row's
keys tell which, unless --data-format says. Checkpoints go to --out; a
run started again with the same --out resumes from its newest valid
checkpoint, bit-exactly on the CPU backend.

How long: --steps optimizer steps, or --epochs N passes over the training
examples (the steps those take, rounded up; --steps then stays unset or
0: giving both is an error).

Learning rate: unless --lr is given, ` + fmt.Sprintf("%g", scratchLR) + ` from scratch (the built-in model
or --preset), ` + fmt.Sprintf("%g", fullFineTuneLR) + ` for every weight of a pretrained model (--hf, --gguf:
small enough to keep what it learned in pretraining) and ` + fmt.Sprintf("%g", loraFineTuneLR) + ` for a LoRA
adapter on one (ten times higher: the adapter starts at zero, learns a
low-rank update and is scaled by --lora-alpha/--lora-rank).

Divergence: a step whose gradient is NaN or infinite is skipped (the
weights stay as they were), so one overflow costs one step; a run whose
loss is NaN or infinite for ` + fmt.Sprint(trainer.MaxNonFiniteLosses) + ` steps in a row stops with an error naming
the step, and no checkpoint or final model is ever written from weights
that are not finite.

SIGINT or SIGTERM (Ctrl-C) finishes the step under way, writes a
checkpoint of it to --out and exits with an error naming it; the same
command resumes from there exactly as if the run had not stopped. A
second signal exits at once, without that checkpoint.`,
			examples: []example{
				{"a small model from scratch on the built-in stories", "train sft"},
				{"a LoRA adapter on a Hugging Face model's q and v projections", "train sft --hf MODEL --data chats.jsonl --lora-rank 16 --lora-targets q,v --out runs/mine"},
				{"three epochs of LoRA with PEFT's alpha and dropout", "train sft --hf MODEL --data chats.jsonl --lora-rank 16 --lora-alpha 32 --lora-dropout 0.05 --epochs 3 --out runs/mine"},
				{"Llama-3.1-8B LoRA from the recipe, on a GPU", "train sft --config recipes/llama3.1-8b-sft-lora.yaml --hf MODEL --data chats.jsonl --backend cuda"},
			},
		},
		"tokenize": {
			usage: []string{"train tokenize --tokenizer PATH [flags]"},
			text: `Encodes text to token ids (a JSON array), decodes ids to text (--decode;
the text is written as it is, with no newline added), or renders a
conversation in the Llama 3.1 chat format (--chat) and prints its text, ids
and assistant mask as a JSON object.

Input comes from --text (--ids for --decode) or, when that is not given,
from standard input, byte for byte (a trailing newline is part of the text).

The tokenizer is a Llama 3 tokenizer.json or tokenizer.model, or a .gguf
model file, whose metadata holds its vocabulary (SentencePiece or Llama 3
BPE).`,
			examples: []example{
				{"encode a line", "train tokenize --tokenizer MODEL/tokenizer.json --text \"Hello, world\""},
				{"decode ids", "train tokenize --tokenizer MODEL/tokenizer.json --decode --ids \"[9906, 11, 1917]\""},
			},
		},
		"version": {
			usage: []string{"train version [--json]"},
			text: `Prints what this binary was built from: its version ("devel" for a build
from an untagged tree), the commit ("(modified)": with uncommitted
changes), the Go version, the build tags and the CUDA toolkit of a -tags
cuda build. Every run records the same in its config.yaml, its
checkpoints' manifest.json and train bench's results.

With --json it prints one JSON object: version and go, and commit,
modified, tags and cuda where the build has them.`,
			examples: []example{
				{"as JSON", "train version --json"},
			},
		},
	}
}

// usageFunc returns the function that prints a subcommand's help (its
// usage lines, description and examples) and fs's flags to w.
func usageFunc(name string, fs *pflag.FlagSet, w io.Writer) func() {
	return func() {
		h := helps()[name]
		writeHelp(w, name, h)
		if fs.HasAvailableFlags() {
			fmt.Fprintf(w, "\nflags:\n%s", fs.FlagUsages())
		}
	}
}

// writeHelp writes a subcommand's help above its flags.
func writeHelp(w io.Writer, name string, h help) {
	usage := h.usage
	if len(usage) == 0 {
		usage = []string{"train " + name + " [flags]"}
	}
	for i, u := range usage {
		lead := "usage: "
		if i > 0 {
			lead = "       "
		}
		fmt.Fprintln(w, lead+u)
	}
	if h.text != "" {
		fmt.Fprintf(w, "\n%s\n", h.text)
	}
	if len(h.examples) > 0 {
		fmt.Fprintln(w, "\nexamples:")
		for _, e := range h.examples {
			if e.what != "" {
				fmt.Fprintf(w, "  # %s\n", e.what)
			}
			fmt.Fprintf(w, "  %s\n", e.line)
		}
	}
}
