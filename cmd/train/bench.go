// train bench: per-kernel figures, the Llama-3.1-8B LoRA step and generation,
// side-by-side reports with the PyTorch peers, and the kernel regression
// gate. The logic lives in bench/...; this file parses flags and calls it.
//
// The commands the GPU bundle's run.sh calls, OUT being its output folder
// (the defaults of --backend cuda are the Llama-3.1-8B shapes and model on a
// GPU, and small shapes with a tiny model under the emulator, so the same
// lines serve both bundles):
//
//	train bench --backend cuda --suite kernels --out OUT/bench-kernels.json --md OUT/bench-kernels.md
//	train bench --backend cuda --suite step --gemm cublas --out OUT/bench-step.json --md OUT/bench-step.md
//	train bench --backend cuda --suite step --gemm own --out OUT/bench-step-own.json --md OUT/bench-step-own.md
//	python3 peers/torch_peers.py --out OUT/bench-torch.json   # bench/peers/; writes a "skipped" result without PyTorch or a GPU
//	train bench report --out OUT/bench.md OUT/bench-kernels.json OUT/bench-step.json OUT/bench-torch.json
//
// and, to gate a change on a GPU machine against a saved run:
//
//	train bench --backend cuda --baseline OUT/bench-kernels.json --max-slowdown 5%
//
// and, to sweep the attention kernels' tile sizes (run.sh's attn-sweep step):
//
//	for c in $(train bench --attention-configs); do
//		train bench --backend cuda --suite kernels --filter '^attention/' --attention-config $c --reps 3 --out OUT/$c.json
//	done
//
// and, to sum up Nsight Compute's counters of the kernels run.sh's profile
// step profiled (one raw-page CSV per case, and its source page's samples
// per instruction):
//
//	train bench profile --out OUT/profile.md attn-fwd.csv attn-bwd.csv sdpa-bwd.csv attn-bwd.sass.csv
//
// Results carry the commit from the binary's version-control stamp; a build
// without one (-buildvcs=false, an exported tree) sets it with
// -ldflags "-X github.com/turnwise/turnwise/internal/buildinfo.commit=$(git rev-parse HEAD)".

package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/turnwise/turnwise/bench"
	"github.com/turnwise/turnwise/bench/ncu"
	"github.com/turnwise/turnwise/bench/suite"
	"github.com/turnwise/turnwise/bench/target"
)

// runBench measures (suite.Measure), gates (--baseline) or, as
// "train bench report", merges result files into one report.
func runBench(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "report" {
		return runBenchReport(args[1:], stdin, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "profile" {
		return runBenchProfile(args[1:], stdin, stdout, stderr)
	}
	fs := newFlags("bench", stderr)
	var o suite.Options
	fs.StringVar(&o.Backend, "backend", "cpu", "cpu, or cuda (a GPU; the kernel emulator in a -tags cudaemu build)")
	fs.IntVar(&o.Device, "device", 0, "GPU ordinal")
	attn := fs.String("attention-config", "", "cuda: the attention kernels' tile sizes and pipeline depths, as name=value pairs: fwd.rows, fwd.keys, fwd.stages, fwd.warp_rows, fwd.k_ring, bwd.rows, bwd.keys, bwd.stages, bwd.split, bwd.dq_atomic, bwd.warp_keys, bwd.dq_cols, dec.split, dec.keys, dec.key_warps (empty: the kernels' defaults); with --filter attention, one configuration of a sweep")
	listAttn := fs.Bool("attention-configs", false, "cuda: print the attention configurations a tuning sweep tries (the tile sizes the kernels are compiled for), one per line as --attention-config takes them, and exit")
	gemm := fs.String("gemm", "", "cuda: the GEMM of the model steps and of every op but the kernel suite's own GEMMs: cublas (cuBLASLt) or own (turnwise's kernel); empty: cuBLASLt where one is found. The kernel suite always measures our GEMM kernel beside cuBLASLt")
	fs.IntVar(&o.Threads, "threads", 0, "CPU worker threads (0: one per CPU)")
	fs.StringVar(&o.Suite, "suite", "all", "kernels (every op at the shapes), step (a LoRA training step and generation) or all")
	fs.BoolVar(&o.Small, "small", false, "small shapes and the tiny model whatever the backend (the default under the emulator)")
	fs.StringVar(&o.Shapes, "shapes", "", "kernel shapes: llama8b (2k and 8k tokens), ref24m or small (default: llama8b on a GPU, small on the emulator, ref24m on the CPU)")
	fs.StringVar(&o.DType, "dtype", "", "f32 or bf16 (default: bf16 on cuda, f32 on the CPU)")
	fs.IntVar(&o.Reps, "reps", 0, "repetitions per measurement; medians are reported (default: 7 on a GPU, 5 on the CPU, 3 emulated)")
	fs.DurationVar(&o.MinTime, "min-time", 0, "the least time of one repetition of a kernel (default: 20ms on a GPU, 50ms on the CPU, one call emulated)")
	fs.StringVar(&o.Filter, "filter", "", "only kernels whose name matches this regular expression (with --baseline: only these are gated)")
	fs.StringVar(&o.Model, "preset", "", "model preset of the step suite (default: llama-3.1-8b on a GPU, else tiny)")
	fs.StringVar(&o.Model, "model", "", "the old name of --preset")
	_ = fs.MarkDeprecated("model", "use --preset")
	fs.IntSliceVar(&o.SeqLens, "seqs", nil, "step suite sequence lengths (default: 2048,8192 on a GPU)")
	fs.IntVar(&o.LoRARank, "lora-rank", 0, "LoRA rank of the step suite (default: 16 on a GPU)")
	fs.IntVar(&o.Steps, "steps", 0, "timed training steps per configuration, after one warm-up (default: 3)")
	fs.IntSliceVar(&o.GenBatch, "gen-batch", nil, "generation batch sizes (default: 1,16 on a GPU)")
	fs.IntVar(&o.Prompt, "prompt-tokens", 0, "prompt tokens per sequence of the generation measurements (default: 512 on a GPU)")
	fs.IntVar(&o.Prompt, "prompt", 0, "the old name of --prompt-tokens")
	_ = fs.MarkDeprecated("prompt", "use --prompt-tokens (--prompt is a prompt's text elsewhere)")
	fs.IntVar(&o.NewTokens, "new-tokens", 0, "decode steps timed (default: 64 on a GPU)")
	jsonOut := fs.String("out", "", "write the results as JSON to this file, for train bench report and --baseline")
	jsonPrint := fs.Bool("json", false, "print the results as JSON instead of the markdown tables")
	mdOut := fs.String("md", "", "write the results as markdown tables to this file")
	baseline := fs.String("baseline", "", "re-measure this result's kernels and fail naming every one slower than it by more than --max-slowdown")
	maxSlow := fs.String("max-slowdown", "5%", "the slowdown --baseline allows (raised, and said so, for kernels whose repeated runs are noisier)")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		if *jsonPrint {
			return fmt.Errorf("unexpected arguments %q: --json prints the JSON; write it to a file with --out %s", fs.Args(), fs.Arg(0))
		}
		return fmt.Errorf("unexpected arguments %q (train bench takes flags only)", fs.Args())
	}
	if *jsonPrint {
		if *jsonOut != "" {
			return errors.New("--json prints the results, --out writes them to a file: give one of them")
		}
		*jsonOut = "-"
	}
	if *listAttn {
		cs, err := attentionConfigs()
		if err != nil {
			return err
		}
		for _, c := range cs {
			fmt.Fprintln(stdout, c)
		}
		return nil
	}
	if *jsonOut == "-" && *baseline != "" {
		return errors.New("--json prints a measurement; with --baseline write the gate's to a file with --out")
	}
	if !*quiet {
		o.Log = stderr
	}
	t, err := target.Open(target.Options{Backend: o.Backend, GEMM: *gemm, Attention: *attn, Threads: o.Threads, Device: o.Device})
	if err != nil {
		return err
	}
	defer t.Close()
	start := time.Now()
	if *baseline != "" {
		return suite.GateFile(t, *baseline, *maxSlow, *jsonOut, o, stdout)
	}
	r, err := suite.Measure(t, o)
	if err != nil {
		return err
	}
	if o.Log != nil {
		fmt.Fprintf(o.Log, "measured in %s\n", time.Since(start).Round(time.Second))
	}
	return bench.WriteResult(r, *jsonOut, *mdOut, stdout)
}

// runBenchReport merges result files (ours and the peers') into one
// markdown report with ratios.
func runBenchReport(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("bench report", stderr)
	out := fs.String("out", "", "write the report to this file (default: stdout)")
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	return bench.ReportFiles(fs.Args(), *out, stdout)
}

// runBenchProfile prints one table of the kernels that Nsight Compute
// profiled: each file is a raw-page CSV (ncu --page raw --csv --print-units
// base) or a source page (--page source --csv --print-source sass) named
// after its case; the source pages follow the table, each as where its
// kernel's warp-state samples lie. --brief prints one line per kernel
// instead.
func runBenchProfile(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("bench profile", stderr)
	out := fs.String("out", "", "write the table to this file (default: stdout)")
	brief := fs.Bool("brief", false, "one line per kernel: its time, the shares of peak that bound it, its top stall")
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("bench profile: name at least one ncu raw-page or source-page CSV file")
	}
	var ks []ncu.Kernel
	var ss []ncu.Source
	for _, path := range fs.Args() {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		name := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(path), ".csv"), ".sass")
		if ncu.IsSourcePage(data) {
			s, err := ncu.ReadSource(bytes.NewReader(data), name)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			ss = append(ss, s)
			continue
		}
		k, err := ncu.Read(bytes.NewReader(data), name)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		ks = append(ks, k...)
	}
	w := stdout
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	if *brief {
		var lines []string
		for _, k := range ks {
			lines = append(lines, k.Brief())
		}
		for _, s := range ss {
			lines = append(lines, s.Brief())
		}
		_, err := fmt.Fprintln(w, strings.Join(lines, "\n"))
		return err
	}
	if len(ks) > 0 {
		if err := ncu.WriteTable(w, ks); err != nil {
			return err
		}
	}
	if len(ss) > 0 {
		if _, err := fmt.Fprintln(w, "\n## Where the warps wait, instruction by instruction\n\n"+
			"Of the warp-state samples (a warp's program counter, taken at a fixed interval), the share at each opcode and at the hottest instructions, with the stall reasons of those samples."); err != nil {
			return err
		}
		return ncu.WriteSourceTables(w, ss, 12)
	}
	return nil
}
