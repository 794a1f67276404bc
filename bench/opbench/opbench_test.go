package opbench

import (
	"reflect"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/bench"
	"github.com/turnwise/turnwise/engine"
)

// TestEveryOpHasACase checks that the cases cover every op of
// engine.Backend, so that an op added later is not left unmeasured.
func TestEveryOpHasACase(t *testing.T) {
	notOps := map[string]bool{"Name": true, "Device": true, "NewBuffer": true, "FreeBuffer": true,
		"Upload": true, "Download": true, "Sync": true}
	prefix := map[string]string{
		"Copy": "copy/", "ScatterRows": "scatter_rows/", "Fill": "fill/", "Cast": "cast_", "Add": "add/",
		"Gemm": "gemm/", "Embedding": "embedding/", "EmbeddingBackward": "embedding_backward/",
		"RMSNorm": "rmsnorm/", "AddRMSNorm": "add_rmsnorm/", "RMSNormBackward": "rmsnorm_backward/",
		"RoPE": "rope/", "RoPEBackward": "rope_backward/", "Attention": "attention/fwd/",
		"AttentionBackward": "attention/bwd/", "SwiGLU": "swiglu/", "SwiGLUBackward": "swiglu_backward/",
		"LogSoftmaxGather": "logsoftmax_gather/", "LogSoftmaxGatherBackward": "logsoftmax_gather_backward/",
		"SumSquares": "sum_squares/", "AdamW": "adamw/", "AdamWMulti": "adamw_multi/", "Sample": "sample_",
		"LayerNorm": "layernorm/", "LayerNormBackward": "layernorm_backward/", "AddBias": "add_bias/",
		"AddBiasBackward": "add_bias_backward/", "GELU": "gelu_", "GELUBackward": "gelu_quick_backward/",
		"Dropout": "dropout/",
	}
	cases := append(Cases(Small, engine.BF16), CopyCase(1<<20))
	bt := reflect.TypeOf((*engine.Backend)(nil)).Elem()
	for i := range bt.NumMethod() {
		m := bt.Method(i).Name
		if notOps[m] {
			continue
		}
		p, ok := prefix[m]
		if !ok {
			t.Errorf("engine.Backend.%s has no benchmark case: add one to opbench and to this table", m)
			continue
		}
		found := false
		for _, c := range cases {
			found = found || strings.HasPrefix(c.Name, p)
		}
		if !found {
			t.Errorf("no case named %s… for engine.Backend.%s", p, m)
		}
	}
}

// TestCounts checks the stated work of cases against hand counts.
func TestCounts(t *testing.T) {
	byName := map[string]Case{}
	for _, c := range Cases(Llama8B2K, engine.BF16) {
		if _, dup := byName[c.Name]; dup {
			t.Errorf("two cases named %s", c.Name)
		}
		byName[c.Name] = c
		if c.Bound != bench.Compute && c.Bound != bench.Memory {
			t.Errorf("%s: bound %q", c.Name, c.Bound)
		}
	}
	for _, c := range []struct {
		name  string
		flops float64
		bytes int64
	}{
		// 2·M·N·K; A, B and C once each in bf16.
		{"gemm/llama8b-2k/gate_up/fwd/bf16/2048x28672x4096", 2 * 2048 * 28672 * 4096, 2 * (2048*4096 + 28672*4096 + 2048*28672)},
		// y += s·t·Bᵀ reads and writes y.
		{"gemm/llama8b-2k/lora_b_q/fwd/bf16/2048x4096x16", 2 * 2048 * 4096 * 16, 2 * (2048*16 + 4096*16 + 2*2048*4096)},
		// The stacked A of q, k, v times xᵀ; gB += s·dyᵀ·tᵀ over the tokens.
		{"gemm/llama8b-2k/lora_a_qkv/fwd/bf16/48x2048x4096", 2 * 48 * 2048 * 4096, 2 * (48*4096 + 2048*4096 + 48*2048)},
		{"gemm/llama8b-2k/lora_gB_q/bwd/bf16/4096x16x2048", 2 * 4096 * 16 * 2048, 2 * (2048*4096 + 16*2048 + 2*4096*16)},
		// The MLP's input gradient as the model runs it (up's accumulated into
		// gate's: dh2 read and written) and fused over a feature-major [2F, N].
		{"gemm/llama8b-2k/mlp_now_up/dx/bf16/2048x4096x14336", 2 * 2048 * 4096 * 14336, 2 * (2048*14336 + 14336*4096 + 2*2048*4096)},
		{"gemm/llama8b-2k/mlp_fm_gate_up/dx/bf16/2048x4096x28672", 2 * 2048 * 4096 * 28672, 2 * (28672*2048 + 28672*4096 + 2048*4096)},
		// The LoRA term written first (y not read), and the base product
		// added to it (y read and written).
		{"gemm/llama8b-2k/lora_b_q_first/fwd/bf16/2048x4096x16", 2 * 2048 * 4096 * 16, 2 * (2048*16 + 4096*16 + 2048*4096)},
		{"gemm/llama8b-2k/gate_fwd_acc/fwd/bf16/2048x14336x4096", 2 * 2048 * 14336 * 4096, 2 * (2048*4096 + 14336*4096 + 2*2048*14336)},
		// A decoding step's down projection at batch 1 and the classifier at
		// 16: the weights, x and y once each.
		{"gemm/llama8b-2k/decode_down/fwd/bf16/1x4096x14336", 2 * 4096 * 14336, 2 * (14336 + 4096*14336 + 4096)},
		{"gemm/llama8b-2k/decode_classifier/fwd/bf16/16x128256x4096", 2 * 16 * 128256 * 4096, 2 * (16*4096 + 128256*4096 + 16*128256)},
		// Causal half of QKᵀ and PV: 2·2·T²/2·Dh per head.
		{"attention/fwd/bf16/b1xT2048/H32/G8/D128", 2 * 2048 * 2048 * 128 * 32, 2*2*2048*32*128 + 2*2*2048*8*128 + 4*2048*32},
		// bf16 weights and gradient; f32 moments and master copy, read and written.
		{"adamw/llama8b-2k/bf16", 0, 4096 * 14336 * (2 + 2 + 8 + 8 + 8)},
		// Llama-3.1-8B's LoRA r=16 adapter (41.9 M parameters): an f32 gradient
		// read, a bf16 weight written, f32 m, v and master read and written.
		{"adamw_multi/llama8b-2k/bf16/448x", 0, 41_943_040 * (4 + 2 + 8 + 8 + 8)},
		// 16 sequences' keys and values of 2048 tokens read once.
		{"attention/decode/bf16/b16xK2048/H32/G8/D128", 16 * 32 * 4 * 2048 * 128, 2*16*2048*8*128*2 + 2*16*32*128*2 + 4*16*32},
	} {
		got, ok := byName[c.name]
		if !ok {
			t.Errorf("no case %s", c.name)
			continue
		}
		if got.FLOPs != c.flops || got.Bytes != c.bytes {
			t.Errorf("%s: %v FLOPs, %d bytes; want %v, %d", c.name, got.FLOPs, got.Bytes, c.flops, c.bytes)
		}
	}
	// The decoding projections: bound by memory, 6 per batch size (q, k, o,
	// gate, down, classifier; batches 1, 4 and 16), in the 2k set only.
	decode := func(cs []Case) (n int) {
		for _, c := range cs {
			if strings.Contains(c.Name, "/decode_") {
				n++
				if c.Bound != bench.Memory {
					t.Errorf("%s: bound %s, want memory", c.Name, c.Bound)
				}
			}
		}
		return n
	}
	if n2, n8 := decode(Cases(Llama8B2K, engine.BF16)), decode(Cases(Llama8B8K, engine.BF16)); n2 != 18 || n8 != 0 {
		t.Errorf("%d decoding projections in the 2k set, %d in the 8k; want 18 and 0", n2, n8)
	}
}
