// Command llamastep measures one training step (forward + backward + AdamW)
// of a Llama configuration on the CPU backend, plus prefill and decode
// throughput, and prints one JSON line: the Go side of bench/llama_cpu.sh,
// whose peer is bench/llama_step.py (PyTorch).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/model/llama"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "llamastep:", err)
		os.Exit(1)
	}
}

func median(d []time.Duration) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2].Seconds()
}

func run() error {
	preset := flag.String("preset", "ref24M", "model configuration")
	batch := flag.Int("batch", 4, "sequences per step")
	seq := flag.Int("seq", 256, "tokens per sequence")
	steps := flag.Int("steps", 5, "timed steps (after one warm-up)")
	threads := flag.Int("threads", 2, "CPU threads")
	flag.Parse()

	c, err := llama.Preset(*preset)
	if err != nil {
		return err
	}
	b := cpu.New(cpu.Options{Threads: *threads})
	m, err := llama.NewRandom(b, c, engine.F32, 0.02, 1)
	if err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(1, 2))
	var bt llama.Batch
	for s := 0; s < *batch; s++ {
		for j := 0; j < *seq; j++ {
			bt.IDs = append(bt.IDs, int32(r.IntN(c.Vocab)))
			bt.Targets = append(bt.Targets, int32(r.IntN(c.Vocab)))
		}
		bt.Lens = append(bt.Lens, *seq)
	}
	n := len(bt.IDs)

	// Gradients and AdamW state for every parameter.
	g, err := m.NewGrads(engine.F32)
	if err != nil {
		return err
	}
	type state struct{ w, g, m, v *engine.Tensor }
	grads := map[string]*engine.Tensor{}
	g.Each(func(name string, t *engine.Tensor) { grads[name] = t })
	var params []state
	m.Weights.Each(func(name string, w *engine.Tensor) {
		params = append(params, state{w, grads[name], engine.MustAlloc(b, engine.F32, w.Shape()...), engine.MustAlloc(b, engine.F32, w.Shape()...)})
	})
	dl := engine.MustAlloc(b, engine.F32, n)
	b.Fill(dl, -1/float32(n)) // mean cross-entropy

	var fb, opt []time.Duration
	for step := 0; step <= *steps; step++ {
		t0 := time.Now()
		for _, p := range params {
			b.Fill(p.g, 0)
		}
		pass, err := m.ForwardTrain(bt, nil)
		if err != nil {
			return err
		}
		if err := pass.Backward(dl, g, nil); err != nil {
			return err
		}
		pass.Release()
		t1 := time.Now()
		for _, p := range params {
			b.AdamW(p.w, p.g, p.m, p.v, nil, engine.AdamWParams{LR: 1e-4, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Step: step + 1, GradScale: 1})
		}
		t2 := time.Now()
		if step > 0 {
			fb, opt = append(fb, t1.Sub(t0)), append(opt, t2.Sub(t1))
		}
	}

	prompt := bt.IDs[:*seq]
	if _, err := m.Generate([][]int32{prompt}, llama.GenerateOptions{MaxNew: 1}); err != nil {
		return err
	}
	t0 := time.Now()
	if _, err := m.Generate([][]int32{prompt}, llama.GenerateOptions{MaxNew: 1}); err != nil {
		return err
	}
	prefill := float64(*seq) / time.Since(t0).Seconds()
	const newTok = 16
	t0 = time.Now()
	if _, err := m.Generate([][]int32{prompt[:32]}, llama.GenerateOptions{MaxNew: newTok + 1}); err != nil {
		return err
	}
	whole := time.Since(t0).Seconds()
	t0 = time.Now()
	if _, err := m.Generate([][]int32{prompt[:32]}, llama.GenerateOptions{MaxNew: 1}); err != nil {
		return err
	}
	decode := newTok / (whole - time.Since(t0).Seconds())

	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return json.NewEncoder(os.Stdout).Encode(map[string]any{
		"peer":          "turnwise cpu",
		"params":        c.Params(),
		"fwd_bwd_s":     median(fb),
		"adamw_s":       median(opt),
		"step_s":        median(fb) + median(opt),
		"prefill_tok_s": prefill,
		"decode_tok_s":  decode,
		"peak_rss_mb":   float64(ru.Maxrss) / 1024,
	})
}
