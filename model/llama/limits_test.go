package llama_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/gguf"
	"github.com/turnwise/turnwise/model/llama"
)

// The child process of loadLimited: this test binary, run again with these
// variables set, loads one checkpoint under an address-space limit instead
// of running the tests.
const (
	childKindEnv = "TURNWISE_LIMITED_LOAD_KIND" // "hf", "gguf" or "peft"
	childPathEnv = "TURNWISE_LIMITED_LOAD_PATH"
	childLimit   = 6 << 30 // bytes of address space
)

func TestMain(m *testing.M) {
	if kind := os.Getenv(childKindEnv); kind != "" {
		os.Exit(limitedChild(kind, os.Getenv(childPathEnv)))
	}
	os.Exit(m.Run())
}

// limitedChild limits the process's address space to childLimit, loads the
// checkpoint at path and prints "error: " and the loader's error, or
// "loaded". An allocation the limit refuses kills the process with Go's
// fatal out-of-memory error, which the parent sees.
func limitedChild(kind, path string) int {
	lim := syscall.Rlimit{Cur: childLimit, Max: childLimit}
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &lim); err != nil {
		fmt.Println("setrlimit:", err)
		return 2
	}
	b := cpu.New(cpu.Options{Threads: 1})
	var err error
	switch kind {
	case "hf":
		_, err = llama.LoadHF(b, path, engine.F32)
	case "gguf":
		_, err = llama.LoadGGUF(b, path, engine.F32)
	case "peft": // an adapter of the tiny preset
		var c llama.Config
		var m *llama.Model
		if c, err = llama.Preset("tiny"); err == nil {
			if m, err = llama.NewRandom(b, c, engine.F32, 0.5, 1); err == nil {
				_, err = m.LoadPEFT(path)
			}
		}
	default:
		err = fmt.Errorf("unknown kind %q", kind)
	}
	if err != nil {
		fmt.Println("error:", err)
		return 0
	}
	fmt.Println("loaded")
	return 0
}

// loadLimited loads the checkpoint at path (kind "hf", "gguf", or "peft":
// an adapter of the tiny preset) in a child
// process limited to childLimit bytes of address space, and returns what
// the loader said: "loaded" or "error: " and its message. The test fails
// when the child dies, as a runtime out-of-memory kills it.
func loadLimited(t *testing.T, kind, path string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childKindEnv+"="+kind, childPathEnv+"="+path)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		msg := out.String()
		if len(msg) > 2000 {
			msg = msg[:2000] + "…"
		}
		t.Fatalf("loading %s under a %d GiB address-space limit: the child died (%v):\n%s", path, childLimit>>30, err, msg)
	}
	return strings.TrimSpace(out.String())
}

// withConfig copies the Hugging Face checkpoint in src to a new directory
// with config.json's field set to v.
func withConfig(t *testing.T, src, field string, v any) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(src, llama.HFConfigName))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var cfg map[string]any
	if err := dec.Decode(&cfg); err != nil {
		t.Fatal(err)
	}
	cfg[field] = v
	out, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if err := os.WriteFile(filepath.Join(dst, llama.HFConfigName), out, 0o644); err != nil {
		t.Fatal(err)
	}
	weights, err := os.ReadFile(filepath.Join(src, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, "model.safetensors"), weights, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestOversizedHFConfig loads the tiny model's checkpoint with one size of
// its config.json made absurd, each under a 6 GiB address-space limit: an
// allocation sized by the configuration would kill the child. Each must be
// a clear error naming config.json (or the weights) and the field, raised
// before any weight is allocated.
func TestOversizedHFConfig(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	src := t.TempDir()
	if err := newTiny(t, b, false, engine.BF16).SaveHF(src); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(src, llama.HFConfigName)); err != nil || st.Size() > 1024 {
		t.Fatalf("the tiny model's config.json: %v, %v", st, err)
	}
	if got := loadLimited(t, "hf", src); got != "loaded" {
		t.Fatalf("the unchanged checkpoint: %s", got)
	}
	tests := []struct {
		field string
		v     int64
		want  string // besides the file's name
	}{
		// The values, each alone: past the limits.
		{"num_hidden_layers", 1e9, "num_hidden_layers = 1000000000 exceeds the limit of 1024"},
		{"vocab_size", 2e9, "vocab_size = 2000000000 exceeds the limit of 16777216"},
		{"intermediate_size", 1e9, "intermediate_size = 1000000000 exceeds the limit of 1048576"},
		{"head_dim", 1 << 30, "head_dim = 1073741824 exceeds the limit of 4096"},
		{"hidden_size", 1 << 40, "hidden_size = 1099511627776 exceeds the limit of 65536"},
		// Within the limits but not backed by the weights: 1000 layers, a
		// 16 M-token vocabulary (8 GB of f32 embeddings and head), the
		// widest FFN, a wide head, a wide model.
		{"num_hidden_layers", 1000, "num_hidden_layers = 1000, but the checkpoint holds tensors for 2 layers"},
		{"vocab_size", 16_000_000, "model.embed_tokens.weight has shape [512, 64], the configuration needs [16000000, 64] (vocab_size gives 16000000 where the tensor has 512"},
		{"intermediate_size", 1 << 20, "model.layers.0.mlp.gate_proj.weight has shape [172, 64], the configuration needs [1048576, 64] (intermediate_size gives 1048576 where the tensor has 172"},
		{"head_dim", 4096, "model.layers.0.self_attn.q_proj.weight has shape [64, 64], the configuration needs [16384, 64] (num_attention_heads×head_dim gives 16384 where the tensor has 64"},
		{"hidden_size", 65536, "model.embed_tokens.weight has shape [512, 64], the configuration needs [512, 65536] (hidden_size gives 65536 where the tensor has 64"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s=%d", tt.field, tt.v), func(t *testing.T) {
			dir := withConfig(t, src, tt.field, tt.v)
			got := loadLimited(t, "hf", dir)
			if !strings.HasPrefix(got, "error: ") || !strings.Contains(got, tt.want) || !strings.Contains(got, dir) ||
				!strings.Contains(got, llama.HFConfigName) {
				t.Errorf("got %q, want an error naming %s and containing %q", got, filepath.Join(dir, llama.HFConfigName), tt.want)
			}
		})
	}
}

// tinyGGUF writes a llama-architecture GGUF of the tiny preset's shapes
// (zero F32 weights) with the metadata edits applied, and returns its path.
func tinyGGUF(t *testing.T, edit map[string]any) string {
	t.Helper()
	c := mustPreset(t, "tiny")
	meta := map[string]any{
		"general.architecture":                   "llama",
		"llama.embedding_length":                 uint32(c.Dim),
		"llama.block_count":                      uint32(c.Layers),
		"llama.attention.head_count":             uint32(c.Heads),
		"llama.attention.head_count_kv":          uint32(c.KVHeads),
		"llama.feed_forward_length":              uint32(c.FFN),
		"llama.context_length":                   uint32(c.MaxSeqLen),
		"llama.vocab_size":                       uint32(c.Vocab),
		"llama.rope.freq_base":                   float32(c.RopeTheta),
		"llama.attention.layer_norm_rms_epsilon": c.NormEps,
	}
	for k, v := range edit {
		meta[k] = v
	}
	// GGUF dims run fastest first: a [rows, cols] matrix is {cols, rows}.
	tensor := func(name string, dims ...int) gguf.Tensor {
		n := 4
		var d []uint64
		for _, x := range dims {
			d, n = append(d, uint64(x)), n*x
		}
		return gguf.Tensor{Name: name, Dims: d, Type: gguf.TypeF32, Data: make([]byte, n)}
	}
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	ts := []gguf.Tensor{
		tensor("token_embd.weight", c.Dim, c.Vocab),
		tensor("output_norm.weight", c.Dim),
		tensor("output.weight", c.Dim, c.Vocab),
	}
	for l := range c.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		ts = append(ts,
			tensor(p+"attn_norm.weight", c.Dim), tensor(p+"attn_q.weight", c.Dim, q),
			tensor(p+"attn_k.weight", c.Dim, kv), tensor(p+"attn_v.weight", c.Dim, kv),
			tensor(p+"attn_output.weight", q, c.Dim), tensor(p+"ffn_norm.weight", c.Dim),
			tensor(p+"ffn_gate.weight", c.Dim, c.FFN), tensor(p+"ffn_up.weight", c.Dim, c.FFN),
			tensor(p+"ffn_down.weight", c.FFN, c.Dim))
	}
	var buf bytes.Buffer
	if err := gguf.Write(&buf, meta, ts); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestOversizedGGUF is TestOversizedHFConfig for GGUF metadata.
func TestOversizedGGUF(t *testing.T) {
	if got := loadLimited(t, "gguf", tinyGGUF(t, nil)); got != "loaded" {
		t.Fatalf("the unchanged file: %s", got)
	}
	tests := []struct {
		name string
		edit map[string]any
		want string
	}{
		{"block_count 1e9", map[string]any{"llama.block_count": uint32(1e9)}, "llama.block_count = 1000000000 exceeds the limit of 1024"},
		{"block_count 2^63-1", map[string]any{"llama.block_count": uint64(1<<63 - 1)}, "llama.block_count = 9223372036854775807 exceeds the limit"},
		{"block_count past int64", map[string]any{"llama.block_count": uint64(1 << 63)}, `metadata key "llama.block_count": value 9223372036854775808 does not fit in int64`},
		{"block_count negative", map[string]any{"llama.block_count": int32(-2)}, "llama.block_count = -2, must be positive"},
		{"embedding_length 1e9", map[string]any{"llama.embedding_length": uint32(1e9)}, "llama.embedding_length = 1000000000 exceeds the limit of 65536"},
		{"embedding_length 2^40", map[string]any{"llama.embedding_length": uint64(1 << 40)}, "llama.embedding_length = 1099511627776 exceeds the limit"},
		{"feed_forward_length 1e9", map[string]any{"llama.feed_forward_length": uint32(1e9)}, "llama.feed_forward_length = 1000000000 exceeds the limit of 1048576"},
		{"head_count 2^31", map[string]any{"llama.attention.head_count": uint64(1 << 31)}, "llama.attention.head_count = 2147483648 exceeds the limit of 1024"},
		{"vocab_size 2e9", map[string]any{"llama.vocab_size": uint32(2e9)}, "llama.vocab_size = 2000000000 exceeds the limit of 16777216"},
		{"context_length 2^40", map[string]any{"llama.context_length": uint64(1 << 40)}, "llama.context_length = 1099511627776 exceeds the limit"},
		{"bos 2^32", map[string]any{"tokenizer.ggml.bos_token_id": uint64(1 << 32)}, "tokenizer.ggml.bos_token_id = 4294967296 is not a token id"},
		{"block_count a string", map[string]any{"llama.block_count": "2"}, `metadata key "llama.block_count" has type string, want an integer`},
		// Within the limits but not backed by the file's tensors.
		{"block_count 1000", map[string]any{"llama.block_count": uint32(1000)}, "llama.block_count = 1000, but the checkpoint holds tensors for 2 layers"},
		{"embedding_length 16384", map[string]any{"llama.embedding_length": uint32(16384)}, "token_embd.weight has shape [512, 64], the configuration needs [512, 16384] (llama.embedding_length gives 16384 where the tensor has 64"},
		{"vocab_size 16M", map[string]any{"llama.vocab_size": uint32(16_000_000)}, "token_embd.weight has shape [512, 64], the configuration needs [16000000, 64] (llama.vocab_size gives 16000000"},
		{"feed_forward_length 2^20", map[string]any{"llama.feed_forward_length": uint32(1 << 20)}, "blk.0.ffn_gate.weight has shape [172, 64], the configuration needs [1048576, 64] (llama.feed_forward_length gives 1048576"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tinyGGUF(t, tt.edit)
			got := loadLimited(t, "gguf", path)
			if !strings.HasPrefix(got, "error: ") || !strings.Contains(got, tt.want) || !strings.Contains(got, path) {
				t.Errorf("got %q, want an error naming %s and containing %q", got, path, tt.want)
			}
		})
	}
}

// TestGGUFAliasedTensors checks that tensors described over the same bytes
// cannot stand for more weights than the file holds: the file is refused
// before the model allocates anything.
func TestGGUFAliasedTensors(t *testing.T) {
	data, err := os.ReadFile(tinyGGUF(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	// Point the second layer's FFN gate at the first layer's bytes.
	a, _ := f.Tensor("blk.0.ffn_gate.weight")
	b, _ := f.Tensor("blk.1.ffn_gate.weight")
	at := bytes.Index(data, []byte(b.Name))
	if at < 0 {
		t.Fatal("tensor description not found")
	}
	// name, then n_dims (u32), dims (u64 each), type (u32), offset (u64)
	off := at + len(b.Name) + 4 + 8*len(b.Dims) + 4
	binary.LittleEndian.PutUint64(data[off:], a.Offset)
	path := filepath.Join(t.TempDir(), "aliased.gguf")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = llama.LoadGGUF(cpu.New(cpu.Options{Threads: 1}), path, engine.F32)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "overlaps") {
		t.Errorf("error %v, want one naming %s and saying that tensors overlap", err, path)
	}
}

// TestOversizedPEFTRank is TestOversizedHFConfig for the rank of a LoRA
// adapter's adapter_config.json.
func TestOversizedPEFTRank(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	m := newTiny(t, b, false, engine.F32)
	ad, err := m.NewAdapter(llama.LoRAConfig{Rank: 4, Alpha: 8, Targets: llama.AllProjections}, 1)
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	if err := m.SavePEFT(ad, src); err != nil {
		t.Fatal(err)
	}
	if got := loadLimited(t, "peft", src); got != "loaded" {
		t.Fatalf("the unchanged adapter: %s", got)
	}
	cfgPath := filepath.Join(src, "adapter_config.json")
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		r    int64
		want string
	}{
		{1e9, "r = 1000000000, want 1 to 65536"},
		{-1, "r = -1, want 1 to 65536"},
		{65536, "tensor base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight has shape [4 64], the model and r = 65536 in " + cfgPath + " need [65536 64]"},
	} {
		edited := bytes.Replace(raw, []byte(`"r": 4`), []byte(fmt.Sprintf(`"r": %d`, tt.r)), 1)
		if bytes.Equal(edited, raw) {
			t.Fatalf("no \"r\": 4 in %s", raw)
		}
		if err := os.WriteFile(cfgPath, edited, 0o644); err != nil {
			t.Fatal(err)
		}
		if got := loadLimited(t, "peft", src); !strings.HasPrefix(got, "error: ") || !strings.Contains(got, tt.want) || !strings.Contains(got, cfgPath) {
			t.Errorf("r = %d: got %q, want an error naming %s and containing %q", tt.r, got, cfgPath, tt.want)
		}
	}
}
