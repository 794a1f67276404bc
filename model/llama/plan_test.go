package llama

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/optim"
)

// llama31_8B is Llama-3.1-8B's architecture (DESIGN §4).
var llama31_8B = Config{Dim: 4096, Layers: 32, Heads: 32, KVHeads: 8, HeadDim: 128, FFN: 14336, Vocab: 128256,
	NormEps: 1e-5, RopeTheta: 500000, MaxSeqLen: 131072, BOS: 128000, EOS: []int32{128001, 128008, 128009}}

func item(t *testing.T, p Plan, key string) int64 {
	t.Helper()
	it, ok := p.Item(key)
	if !ok {
		t.Fatalf("plan has no %q line: %+v", key, p.Items)
	}
	return it.Bytes
}

func near(got, want, rel float64) bool { return math.Abs(got-want) <= rel*want }

// TestPlan8B checks the memory plan against the figures of DESIGN §4: 8.03 B
// parameters, 16.06 GB of bf16 weights, ≈ 42 M LoRA parameters at r = 16 on
// all seven projections. Full fine-tuning keeps 18 B per parameter, not the
// 16 B of DESIGN §4, because the trainers keep f32 gradients.
func TestPlan8B(t *testing.T) {
	c := llama31_8B
	if n := c.Params(); n != 8030261248 {
		t.Errorf("Params() = %d, want 8030261248", n)
	}
	full, err := c.Plan(PlanOptions{Batch: 1, SeqLen: 8192})
	if err != nil {
		t.Fatal(err)
	}
	if w := item(t, full, "weights"); !near(float64(w), 16.06e9, 0.001) {
		t.Errorf("bf16 weights = %d B, want ≈ 16.06 GB", w)
	}
	state := item(t, full, "weights") + item(t, full, "gradients") + item(t, full, "master_weights") + item(t, full, "optimizer_state")
	if state != 18*c.Params() {
		t.Errorf("full fine-tuning state = %d B, want 18 B × %d parameters", state, c.Params())
	}
	lora := LoRAConfig{Rank: 16, Alpha: 32, Targets: AllProjections}
	la, err := c.LoRAParams(lora)
	if err != nil || la != 41943040 {
		t.Errorf("LoRA r=16 parameters = %d, %v; want 41943040", la, err)
	}
	lp, err := c.Plan(PlanOptions{Batch: 1, SeqLen: 8192, LoRA: &lora, Recompute: true})
	if err != nil {
		t.Fatal(err)
	}
	if lp.Total >= 80e9 {
		t.Errorf("LoRA r=16 at sequence 8192 with recomputation needs %.1f GB; it must fit one 80 GB GPU", float64(lp.Total)/1e9)
	}
	if full.Total <= 18*c.Params() {
		t.Errorf("full fine-tuning total %.1f GB, want above the state alone", float64(full.Total)/1e9)
	}
	noRe, _ := c.Plan(PlanOptions{Batch: 1, SeqLen: 8192, LoRA: &lora})
	if item(t, noRe, "layer_activations") <= item(t, lp, "layer_activations") {
		t.Error("recomputation does not reduce activation memory")
	}
	var sb strings.Builder
	if err := lp.Write(&sb); err != nil || !strings.Contains(sb.String(), "total") {
		t.Errorf("Write: %v\n%s", err, sb.String())
	}
	if _, err := c.Plan(PlanOptions{Batch: 0, SeqLen: 1}); err == nil {
		t.Error("batch 0 accepted")
	}
	if _, err := c.LoRAParams(LoRAConfig{Rank: 8, Targets: []string{"qkv"}}); err == nil {
		t.Error("unknown LoRA target accepted")
	}
}

// countingBackend counts the bytes allocated and not yet freed.
type countingBackend struct {
	engine.Backend
	live int64
}

func (c *countingBackend) NewBuffer(n int) (engine.Buffer, error) {
	buf, err := c.Backend.NewBuffer(n)
	if err == nil {
		c.live += int64(buf.Size())
	}
	return buf, err
}

func (c *countingBackend) FreeBuffer(buf engine.Buffer) {
	c.live -= int64(buf.Size())
	c.Backend.FreeBuffer(buf)
}

// planTestConfig is a small architecture whose extents all differ (GQA 2:1,
// H·Dh ≠ D, an odd vocabulary), so that a plan that counts a tensor with the
// wrong extent, or forgets one, is off.
var planTestConfig = Config{Dim: 40, Layers: 3, Heads: 4, KVHeads: 2, HeadDim: 12, FFN: 72, Vocab: 97,
	NormEps: 1e-5, RopeTheta: 10000, MaxSeqLen: 512, BOS: 1, EOS: []int32{2}}

// TestPlanMatchesMeasured runs training steps as the trainers run them —
// a fused ForwardBackward (SFT) or ForwardTrain then Backward (preference
// losses) — with and without recomputation, full and LoRA, in f32 and bf16,
// and checks the plan against what the step measurably holds: the model
// pool's high-water mark equals the plan's pooled bytes, and the weights,
// adapter and gradients allocated equal the plan's lines (but for the RoPE
// frequencies, a few bytes the plan leaves out).
func TestPlanMatchesMeasured(t *testing.T) {
	type tc struct {
		dt        engine.DType
		lora      []string // LoRA targets; nil: full fine-tuning
		recompute bool
		fused     bool
		lens      []int // sequence lengths of the batch: all equal, as the plan assumes
		vocab     int   // 0: planTestConfig's
	}
	var cases []tc
	for _, dt := range []engine.DType{engine.F32, engine.BF16} {
		for _, lora := range [][]string{nil, AllProjections, {"q", "down"}} {
			for _, recompute := range []bool{false, true} {
				for _, fused := range []bool{false, true} {
					cases = append(cases, tc{dt, lora, recompute, fused, []int{150, 150}, 0})
				}
			}
		}
	}
	cases = append(cases,
		// fewer tokens than a logits chunk: the chunk is the whole batch
		tc{engine.F32, nil, false, true, []int{30, 30, 30}, 0}, tc{engine.BF16, AllProjections, true, false, []int{30, 30, 30}, 0},
		// a vocabulary so large that the logits chunk outweighs the backward's buffers
		tc{engine.F32, nil, false, true, []int{150, 150}, 2000}, tc{engine.BF16, []string{"v"}, true, false, []int{150, 150}, 2000},
		tc{engine.F32, []string{"o"}, false, false, []int{30, 30, 30}, 2000})
	for _, k := range cases {
		name := fmt.Sprintf("%v/lora=%v/recompute=%v/fused=%v/%dx%d/vocab=%d", k.dt, k.lora, k.recompute, k.fused, len(k.lens), k.lens[0], k.vocab)
		t.Run(name, func(t *testing.T) {
			c := planTestConfig
			if k.vocab > 0 {
				c.Vocab = k.vocab
			}
			cb := &countingBackend{Backend: cpu.New(cpu.Options{Threads: 2})}
			m, err := NewRandom(cb, c, k.dt, 0.1, 5)
			if err != nil {
				t.Fatal(err)
			}
			m.Recompute = k.recompute
			o := PlanOptions{Batch: len(k.lens), SeqLen: k.lens[0], WeightBytes: k.dt.Size(), Recompute: k.recompute}
			var ad, ga *Adapter
			var g *Weights
			if k.lora != nil {
				lc := LoRAConfig{Rank: 3, Alpha: 6, Targets: k.lora}
				o.LoRA = &lc
				if ad, err = m.NewAdapter(lc, 1); err != nil {
					t.Fatal(err)
				}
			}
			plan, err := c.Plan(o)
			if err != nil {
				t.Fatal(err)
			}
			const small = 12 / 2 * 4 // RoPE frequencies [Dh/2] f32
			want := item(t, plan, "weights") + small
			if ad != nil {
				want += item(t, plan, "lora_adapters")
			}
			if cb.live != want {
				t.Errorf("weights and adapter: %d bytes allocated, the plan says %d + %d", cb.live, want-small, small)
			}
			// The gradients, as the trainers keep them (f32). The optimizer's
			// moments and master weights are not measured here: the optim
			// package allocates them.
			before := cb.live
			if ad != nil {
				ga, err = m.NewAdapterGrads(ad, engine.F32)
			} else {
				g, err = m.NewGrads(engine.F32)
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cb.live - before; got != item(t, plan, "gradients") {
				t.Errorf("gradients: %d bytes allocated, the plan says %d", got, item(t, plan, "gradients"))
			}

			r := rand.New(rand.NewPCG(8, 9))
			var bt Batch
			for _, l := range k.lens {
				for range l {
					bt.IDs = append(bt.IDs, int32(r.IntN(c.Vocab)))
					bt.Targets = append(bt.Targets, int32(r.IntN(c.Vocab)))
				}
			}
			bt.Lens = k.lens
			dl := engine.MustAlloc(cb, engine.F32, len(bt.IDs))
			cb.Fill(dl, -1)
			for step := 0; step < 2; step++ { // the second step reuses the pool's buffers: no new peak
				var p *Pass
				if k.fused {
					p, err = m.ForwardBackward(bt, ad, dl, g, ga)
				} else if p, err = m.ForwardTrain(bt, ad); err == nil {
					err = p.Backward(dl, g, ga)
				}
				if err != nil {
					t.Fatal(err)
				}
				p.Release()
			}
			st := m.pool.Stats()
			if int64(st.HighWater) != plan.Pooled {
				var sb strings.Builder
				plan.Write(&sb)
				t.Errorf("pool high-water mark %d bytes, the plan's pooled bytes %d (off by %d)\n%s", st.HighWater, plan.Pooled, int64(st.HighWater)-plan.Pooled, sb.String())
			}
			if st.Requested != 0 {
				t.Errorf("%d bytes still held after Release", st.Requested)
			}
		})
	}
}

// TestPlanInferenceMatchesMeasured checks the inference plan against a
// prefill of every sequence's tokens into a KV cache: the pool's high-water
// mark equals the plan's prefill activations, and the cache and the f32
// logits are allocated as the plan says.
func TestPlanInferenceMatchesMeasured(t *testing.T) {
	for _, k := range []struct {
		dt     engine.DType
		lora   bool
		b, seq int
	}{{engine.F32, false, 3, 40}, {engine.BF16, true, 2, 57}} {
		t.Run(fmt.Sprintf("%v/lora=%v", k.dt, k.lora), func(t *testing.T) {
			c := planTestConfig
			cb := &countingBackend{Backend: cpu.New(cpu.Options{Threads: 2})}
			m, err := NewRandom(cb, c, k.dt, 0.1, 5)
			if err != nil {
				t.Fatal(err)
			}
			o := PlanOptions{Batch: k.b, SeqLen: k.seq, WeightBytes: k.dt.Size(), Inference: true}
			var ad *Adapter
			if k.lora {
				lc := LoRAConfig{Rank: 4, Alpha: 8, Targets: AllProjections}
				o.LoRA = &lc
				if ad, err = m.NewAdapter(lc, 1); err != nil {
					t.Fatal(err)
				}
			}
			plan, err := c.Plan(o)
			if err != nil {
				t.Fatal(err)
			}
			const small = 12 / 2 * 4 // RoPE frequencies [Dh/2] f32
			want := item(t, plan, "weights") + small
			if k.lora {
				want += item(t, plan, "lora_adapters")
			}
			if cb.live != want {
				t.Errorf("weights and adapter: %d bytes allocated, the plan says %d + %d", cb.live, want-small, small)
			}
			before := cb.live
			kc, err := m.NewCache(k.b, k.seq)
			if err != nil {
				t.Fatal(err)
			}
			if got := cb.live - before; got != item(t, plan, "kv_cache") {
				t.Errorf("KV cache: %d bytes allocated, the plan says %d", got, item(t, plan, "kv_cache"))
			}
			prompts := make([][]int32, k.b)
			for s := range prompts {
				for j := range k.seq {
					prompts[s] = append(prompts[s], int32((s*7+j)%c.Vocab))
				}
			}
			before = cb.live
			if _, err := m.Forward(kc, prompts, ad); err != nil {
				t.Fatal(err)
			}
			if got, want := m.pool.Stats().HighWater, item(t, plan, "prefill_activations"); int64(got) != want {
				t.Errorf("prefill: pool high-water mark %d bytes, the plan says %d", got, want)
			}
			// The f32 logits Forward returns; the sampler's four [B]
			// buffers (the rest of the plan's line) are Generate's.
			if got, want := cb.live-before-int64(m.pool.Stats().BytesCached), item(t, plan, "sampling")-int64(16*k.b); got != want {
				t.Errorf("logits: %d bytes allocated, the plan says %d", got, want)
			}
		})
	}
}

// TestPlanJSON checks that a plan encodes with its documented fields.
func TestPlanJSON(t *testing.T) {
	p, err := planTestConfig.Plan(PlanOptions{Batch: 2, SeqLen: 64, LoRA: &LoRAConfig{Rank: 4, Targets: AllProjections}})
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Items []struct {
			Key       string `json:"key"`
			What      string `json:"what"`
			Bytes     int64  `json:"bytes"`
			Note      string `json:"note"`
			Transient bool   `json:"transient"`
		} `json:"items"`
		Total  int64 `json:"total_bytes"`
		Pooled int64 `json:"pooled_bytes"`
	}
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.Total != p.Total || back.Pooled != p.Pooled || len(back.Items) != len(p.Items) {
		t.Fatalf("round trip: %s", data)
	}
	transient := 0
	for i, it := range back.Items {
		if it.Key != p.Items[i].Key || it.Bytes != p.Items[i].Bytes || it.Key == "" || it.What == "" {
			t.Errorf("item %d: %+v, want %+v", i, it, p.Items[i])
		}
		if it.Transient {
			transient++
		}
	}
	if transient != 2 {
		t.Errorf("%d transient items, want the logits chunk and the backward buffers: %s", transient, data)
	}
}

// rankOf is the rank and world size of a job for building a sharded
// optimizer, which asks only for these; its collectives fail.
type rankOf struct{ rank, size int }

func (c rankOf) Rank() int                               { return c.rank }
func (c rankOf) Size() int                               { return c.size }
func (c rankOf) AllReduce(*engine.Tensor) error          { return errNoCollectives }
func (c rankOf) ReduceScatter(_, _ *engine.Tensor) error { return errNoCollectives }
func (c rankOf) AllGather(_, _ *engine.Tensor) error     { return errNoCollectives }
func (c rankOf) Broadcast(*engine.Tensor, int) error     { return errNoCollectives }
func (c rankOf) Barrier() error                          { return errNoCollectives }
func (c rankOf) Close() error                            { return nil }

var errNoCollectives = fmt.Errorf("rankOf: no collectives")

// TestPlanZeRO1MatchesAllocated checks the plan's optimizer lines — the
// gradients, master weights and Adam moments — against the bytes the
// optimizer allocates on each rank, counted by the backend, in f32 and bf16
// with and without ZeRO-1 on 1, 2 and 3 ranks. The optimizer pads every
// parameter to 64 elements and, sharded, the flat buffer to 64 × ranks, so
// the allocation may exceed the plan by that padding and nothing more.
func TestPlanZeRO1MatchesAllocated(t *testing.T) {
	c := planTestConfig
	np := c.Params()
	for _, dt := range []engine.DType{engine.F32, engine.BF16} {
		for _, ranks := range []int{1, 2, 3} {
			plan, err := c.Plan(PlanOptions{Batch: 1, SeqLen: 8, WeightBytes: dt.Size(), Ranks: ranks, Zero: 1})
			if err != nil {
				t.Fatal(err)
			}
			want := item(t, plan, "gradients") + item(t, plan, "optimizer_state")
			if it, ok := plan.Item("master_weights"); ok {
				want += it.Bytes
			}
			for rank := range ranks {
				cb := &countingBackend{Backend: cpu.New(cpu.Options{Threads: 1})}
				m, err := NewRandom(cb, c, dt, 0.1, 5)
				if err != nil {
					t.Fatal(err)
				}
				params := map[string]*engine.Tensor{}
				m.Weights.Each(func(name string, w *engine.Tensor) { params[name] = w })
				before := cb.live
				var o *optim.AdamW
				if ranks == 1 {
					o, err = optim.NewAdamW(cb, optim.AdamWConfig{}, params)
				} else {
					o, err = optim.NewShardedAdamW(cb, optim.AdamWConfig{}, params, rankOf{rank, ranks})
				}
				if err != nil {
					t.Fatal(err)
				}
				got := cb.live - before
				t.Logf("%v, rank %d of %d: the optimizer allocated %d bytes (%d of masters and moments), the plan says %d", dt, rank, ranks, got, 4*o.StateElems(), want)
				// Padding: ≤ 63 elements per parameter and, sharded, ≤ 64 × ranks
				// for the shards, in the gradient (4 B) and, on each rank, its
				// 1/ranks in the summed shard, the master and the moments (16 B);
				// plus the 4 B of the norm's accumulator.
				pad := int64(64 * (len(params) + ranks))
				slack := 4*pad + 16*pad/int64(ranks) + 4
				if dt == engine.F32 && ranks == 1 {
					slack = 12*pad + 4
				}
				if got < want || got > want+slack {
					t.Errorf("%v, rank %d of %d: the optimizer allocated %d bytes, the plan says %d (+ up to %d of padding)", dt, rank, ranks, got, want, slack)
				}
				if st := int64(o.StateElems()) * 4; ranks > 1 && (st < 12*np/int64(ranks) || st > 12*(np+pad)/int64(ranks)+12) {
					t.Errorf("%v, rank %d of %d: %d bytes of masters and moments, want 12 B × %d parameters / %d", dt, rank, ranks, st, np, ranks)
				}
				o.Free()
				if cb.live != before {
					t.Errorf("%v, rank %d of %d: %d bytes still allocated after Free", dt, rank, ranks, cb.live-before)
				}
			}
		}
	}
}

func TestPlanTitle(t *testing.T) {
	lora := &LoRAConfig{Rank: 16, Targets: AllProjections}
	cases := []struct {
		o    PlanOptions
		want string
	}{
		{PlanOptions{}, "full fine-tuning"},
		{PlanOptions{LoRA: lora}, "LoRA r=16"},
		{PlanOptions{Inference: true}, "inference"},
		{PlanOptions{Inference: true, LoRA: lora}, "inference with a LoRA adapter of rank 16"},
	}
	for _, c := range cases {
		if got := c.o.Title(); got != c.want {
			t.Errorf("%+v: title %q, want %q", c.o, got, c.want)
		}
	}
}
