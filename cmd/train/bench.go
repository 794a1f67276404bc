package main

import (
	"fmt"
	"io"
	"regexp"
	"sort"
	"time"

	"github.com/turnwise/turnwise/bench/opbench"
	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
)

// runBench times every op of the engine on the CPU backend at the shapes of
// a model configuration and prints a table of GFLOP/s and GB/s.
func runBench(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("bench", stderr)
	cfgName := fs.String("config", "ref24M", "shapes to benchmark: ref24M (the 24.4M CPU reference model) or llama8B (one Llama-3.1-8B layer)")
	dtName := fs.String("dtype", "f32", "activation and weight dtype: f32 or bf16")
	filter := fs.String("filter", "", "only cases whose name matches this regular expression")
	threads := fs.Int("threads", 0, "worker threads (0: one per CPU)")
	minTime := fs.Duration("min-time", 300*time.Millisecond, "time each case for at least this long per repetition")
	reps := fs.Int("reps", 3, "repetitions per case; the median is reported")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: train bench [flags]\n\nTimes every engine op on the CPU backend and prints GFLOP/s (GEMM, attention) or GB/s (memory-bound ops).\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	var cfg opbench.Config
	switch *cfgName {
	case "ref24M":
		cfg = opbench.Reference24M
	case "llama8B":
		cfg = opbench.Llama8BLayer
	default:
		return fmt.Errorf("unknown --config %q (want ref24M or llama8B)", *cfgName)
	}
	dt, err := engine.ParseDType(*dtName)
	if err != nil || !dt.IsFloat() || dt == engine.F16 {
		return fmt.Errorf("--dtype %q: want f32 or bf16", *dtName)
	}
	re, err := regexp.Compile(*filter)
	if err != nil {
		return fmt.Errorf("--filter: %w", err)
	}
	if *reps < 1 {
		return fmt.Errorf("--reps %d: want at least 1", *reps)
	}

	b := cpu.New(cpu.Options{Threads: *threads})
	cases := append(opbench.GemmCases(cfg, dt), opbench.AttentionCases(cfg, dt)...)
	cases = append(cases, opbench.MemoryCases(cfg, dt)...)
	fmt.Fprintf(stdout, "backend cpu, %d threads, config %s, dtype %v; median of %d repetitions\n\n", b.Threads(), cfg.Name, dt, *reps)
	const row = "%-52s %12s %9s %8s\n"
	fmt.Fprintf(stdout, row, "case", "time/op", "GFLOP/s", "GB/s")
	for _, c := range cases {
		if !re.MatchString(c.Name) {
			continue
		}
		per := timeCase(c.Setup(b), *minTime, *reps)
		gflops, gbs := "", ""
		if c.FLOPs > 0 {
			gflops = fmt.Sprintf("%.1f", c.FLOPs/per.Seconds()/1e9)
		}
		if c.Bytes > 0 && c.FLOPs == 0 {
			gbs = fmt.Sprintf("%.2f", float64(c.Bytes)/per.Seconds()/1e9)
		}
		fmt.Fprintf(stdout, row, c.Name, per.Round(time.Microsecond/10), gflops, gbs)
	}
	return nil
}

// timeCase runs op once to warm up, then reps times for at least minTime
// each, and returns the median time per call.
func timeCase(op func(), minTime time.Duration, reps int) time.Duration {
	op()
	per := make([]time.Duration, reps)
	for r := range per {
		n := 0
		start := time.Now()
		for time.Since(start) < minTime || n == 0 {
			op()
			n++
		}
		per[r] = time.Since(start) / time.Duration(n)
	}
	sort.Slice(per, func(i, j int) bool { return per[i] < per[j] })
	return per[reps/2]
}
