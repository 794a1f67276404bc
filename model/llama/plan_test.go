package llama

import (
	"math"
	"strings"
	"testing"
)

// llama31_8B is Llama-3.1-8B's architecture (DESIGN §4).
var llama31_8B = Config{Dim: 4096, Layers: 32, Heads: 32, KVHeads: 8, HeadDim: 128, FFN: 14336, Vocab: 128256,
	NormEps: 1e-5, RopeTheta: 500000, MaxSeqLen: 131072, BOS: 128000, EOS: []int32{128001, 128008, 128009}}

func item(t *testing.T, p Plan, what string) int64 {
	t.Helper()
	for _, it := range p.Items {
		if it.What == what {
			return it.Bytes
		}
	}
	t.Fatalf("plan has no %q line: %+v", what, p.Items)
	return 0
}

func near(got, want, rel float64) bool { return math.Abs(got-want) <= rel*want }

// TestPlan8B checks the memory plan against the figures of DESIGN §4: 8.03 B
// parameters, 16.06 GB of bf16 weights, ≈ 16 B per parameter for full
// fine-tuning (≈ 128 GB before activations), ≈ 42 M LoRA parameters at r = 16
// on all seven projections.
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
	state := item(t, full, "weights") + item(t, full, "gradients") + item(t, full, "master weights") + item(t, full, "optimizer state")
	if state != 16*c.Params() {
		t.Errorf("full fine-tuning state = %d B, want 16 B × %d parameters", state, c.Params())
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
	if full.Total <= 128e9 {
		t.Errorf("full fine-tuning total %.1f GB, want above the 128 GB of state alone", float64(full.Total)/1e9)
	}
	noRe, _ := c.Plan(PlanOptions{Batch: 1, SeqLen: 8192, LoRA: &lora})
	if item(t, noRe, "activations") <= item(t, lp, "activations") {
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
