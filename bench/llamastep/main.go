// Command llamastep measures one training step (forward + backward + AdamW)
// of a Llama configuration on the CPU backend, plus prefill and decode
// throughput, and prints one JSON line: the Go side of bench/llama_cpu.sh,
// whose peer is bench/llama_step.py (PyTorch).
//
// With --lora-rank the base is frozen (no gradient buffers) and only LoRA
// adapters on every projection train; this is how Llama-3.1-8B fits one
// 24 GiB machine:
//
//	go run ./bench/llamastep --preset llama-3.1-8b --dtype bf16 --lora-rank 16 --batch 1 --seq 32 --steps 1 --no-generate
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"slices"
	"strings"
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

// limitHeap caps the Go heap at 90% of physical memory unless GOMEMLIMIT
// says otherwise: the CPU backend's buffers are Go memory, and with a large
// live heap the default GC target (twice the live heap) would let temporaries
// pile up past physical memory.
func limitHeap() {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	raw, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return
	}
	var kb int64
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "MemTotal:") {
			fmt.Sscanf(strings.TrimPrefix(line, "MemTotal:"), "%d", &kb)
		}
	}
	if kb > 0 {
		debug.SetMemoryLimit(kb * 1024 / 10 * 9)
	}
}

func run() error {
	limitHeap()
	preset := flag.String("preset", "ref24M", "model configuration")
	batch := flag.Int("batch", 4, "sequences per step")
	seq := flag.Int("seq", 256, "tokens per sequence")
	steps := flag.Int("steps", 5, "timed steps (after one warm-up)")
	threads := flag.Int("threads", 2, "CPU threads")
	dtName := flag.String("dtype", "f32", "weight and activation dtype: f32 or bf16")
	rank := flag.Int("lora-rank", 0, "train LoRA adapters of this rank on a frozen base (0: full training)")
	noGen := flag.Bool("no-generate", false, "skip the prefill and decode measurements")
	longPrompt := flag.Int("long-prompt", 1024, "prompt tokens of the second decode measurement (decode_long_tok_s)")
	flag.Parse()

	c, err := llama.Preset(*preset)
	if err != nil {
		return err
	}
	dt, err := engine.ParseDType(*dtName)
	if err != nil {
		return err
	}
	b := cpu.New(cpu.Options{Threads: *threads})
	t0 := time.Now()
	m, err := llama.NewRandom(b, c, dt, 0.02, 1)
	if err != nil {
		return err
	}
	initTime := time.Since(t0)
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

	// Gradients and AdamW state for every trained parameter: all weights, or
	// only the adapters (bf16 adapters keep f32 master copies).
	type state struct{ w, g, m, v, master *engine.Tensor }
	var params []state
	var g *llama.Weights
	var ad, ga *llama.Adapter
	track := func(w, gr *engine.Tensor) {
		st := state{w: w, g: gr, m: engine.MustAlloc(b, engine.F32, w.Shape()...), v: engine.MustAlloc(b, engine.F32, w.Shape()...)}
		if w.DType() != engine.F32 {
			st.master = engine.MustAlloc(b, engine.F32, w.Shape()...)
			b.Cast(st.master, w)
		}
		params = append(params, st)
	}
	if *rank > 0 {
		if ad, err = m.NewAdapter(llama.LoRAEvery(*rank), 1); err != nil {
			return err
		}
		if ga, err = m.NewAdapterGrads(ad, engine.F32); err != nil {
			return err
		}
		grads := map[string]*engine.Tensor{}
		ga.Each(func(name string, t *engine.Tensor) { grads[name] = t })
		ad.Each(func(name string, w *engine.Tensor) { track(w, grads[name]) })
	} else {
		if g, err = m.NewGrads(engine.F32); err != nil {
			return err
		}
		grads := map[string]*engine.Tensor{}
		g.Each(func(name string, t *engine.Tensor) { grads[name] = t })
		m.Weights.Each(func(name string, w *engine.Tensor) { track(w, grads[name]) })
	}
	dl := engine.MustAlloc(b, engine.F32, n)
	b.Fill(dl, -1/float32(n)) // mean cross-entropy

	var fb, opt []time.Duration
	for step := 0; step <= *steps; step++ {
		t0 := time.Now()
		for _, p := range params {
			b.Fill(p.g, 0)
		}
		// Cross-entropy's gradient is known before the forward: the fused
		// pass forms the classifier's logits once.
		pass, err := m.ForwardBackward(bt, ad, dl, g, ga)
		if err != nil {
			return err
		}
		pass.Release()
		t1 := time.Now()
		for _, p := range params {
			b.AdamW(p.w, p.g, p.m, p.v, p.master, engine.AdamWParams{LR: 1e-4, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Step: step + 1, GradScale: 1})
		}
		t2 := time.Now()
		if step > 0 {
			fb, opt = append(fb, t1.Sub(t0)), append(opt, t2.Sub(t1))
		}
	}

	out := map[string]any{
		"peer":      "turnwise cpu",
		"config":    *preset,
		"dtype":     dt.String(),
		"lora_rank": *rank,
		"tokens":    n,
		"params":    c.Params(),
		"init_s":    initTime.Seconds(),
		"fwd_bwd_s": median(fb),
		"adamw_s":   median(opt),
		"step_s":    median(fb) + median(opt),
	}
	if *noGen {
		return report(out)
	}
	prompt := bt.IDs[:*seq]
	if _, err := m.Generate([][]int32{prompt}, llama.GenerateOptions{MaxNew: 1}); err != nil {
		return err
	}
	t0 = time.Now()
	if _, err := m.Generate([][]int32{prompt}, llama.GenerateOptions{MaxNew: 1}); err != nil {
		return err
	}
	prefill := float64(*seq) / time.Since(t0).Seconds()
	const newTok = 64 // as bench/llama_step.py
	decode, err := decodeRate(m, prompt[:32], newTok)
	if err != nil {
		return err
	}
	// Again after a long prompt, where each step's attention reads a long
	// cache: a multi-turn dialogue's decoding.
	long := make([]int32, *longPrompt)
	for i := range long {
		long[i] = int32(r.IntN(c.Vocab))
	}
	decodeLong, err := decodeRate(m, long, newTok)
	if err != nil {
		return err
	}

	out["prefill_tok_s"] = prefill
	out["decode_tok_s"] = decode
	out["decode_long_tok_s"] = decodeLong
	return report(out)
}

// decodeRate returns the tokens per second of n greedy decoding steps after
// prompt, timed from the end of its prefill (untimed) to the last step, as
// bench/llama_step.py times PyTorch's.
func decodeRate(m *llama.Model, prompt []int32, n int) (float64, error) {
	kc, err := m.NewCache(1, len(prompt)+n+1)
	if err != nil {
		return 0, err
	}
	defer m.FreeCache(kc)
	logits, err := m.Forward(kc, [][]int32{prompt}, nil)
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	if _, err := m.Decode(kc, logits, llama.GenerateOptions{MaxNew: n + 1}); err != nil {
		return 0, err
	}
	return float64(n) / time.Since(t0).Seconds(), nil
}

// report adds the peak resident memory and prints out as one JSON line.
func report(out map[string]any) error {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	out["peak_rss_mb"] = float64(ru.Maxrss) / 1024
	return json.NewEncoder(os.Stdout).Encode(out)
}
