package llama

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/gguf"
	"github.com/turnwise/turnwise/internal/jsonerr"
	"github.com/turnwise/turnwise/internal/outfile"
	"github.com/turnwise/turnwise/safetensors"
	"github.com/turnwise/turnwise/tokenizer"
)

// SaveHFAs writes the model to dir as SaveHF does, with the weights
// converted to dtype dt (f32, f16 or bf16; rounding to nearest even when
// narrowing) and config.json's torch_dtype naming dt.
func (m *Model) SaveHFAs(dir string, dt engine.DType) error {
	sdt, ok := hfDType(dt)
	if !ok {
		return fmt.Errorf("saving to %s: weights of dtype %v cannot be saved (want f32, f16 or bf16)", dir, dt)
	}
	cfg, err := hfConfigJSON(m.Config, dt)
	if err != nil {
		return fmt.Errorf("saving to %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var tensors []safetensors.Tensor
	m.Weights.Each(func(name string, t *engine.Tensor) {
		shape := make([]int64, t.Rank())
		for i := range shape {
			shape[i] = int64(t.Dim(i))
		}
		tensors = append(tensors, safetensors.Tensor{
			Name: name, DType: sdt, Shape: shape,
			Load: func() ([]byte, error) {
				if t.DType() == dt {
					return m.tensorBytes(t, dt), nil
				}
				return narrow(name, engine.DecodeF32(t.DType(), m.tensorBytes(t, t.DType())), dt)
			},
		})
	})
	if err := safetensors.WriteModel(dir, tensors, map[string]string{"format": "pt"}, safetensors.DefaultMaxShardBytes); err != nil {
		return err
	}
	return outfile.WriteFile(filepath.Join(dir, HFConfigName), cfg, 0o644)
}

// tensorBytes returns t's values as the little-endian bytes of dtype dt.
func (m *Model) tensorBytes(t *engine.Tensor, dt engine.DType) []byte {
	raw := make([]byte, t.Bytes())
	m.b.Download(raw, t)
	if t.DType() == dt {
		return raw
	}
	return engine.EncodeF32(dt, engine.DecodeF32(t.DType(), raw))
}

// narrow returns vals, the values of tensor name, as the bytes of dtype
// dt, refusing a finite value that overflows dt (a weight beyond f16's
// ±65504) rather than writing it as infinity.
func narrow(name string, vals []float32, dt engine.DType) ([]byte, error) {
	out := engine.EncodeF32(dt, vals)
	back := engine.DecodeF32(dt, out)
	for i, v := range vals {
		if math.IsInf(float64(back[i]), 0) && !math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("tensor %s: value %g at index %d overflows %v; export in a wider dtype", name, v, i, dt)
		}
	}
	return out, nil
}

// ggufType maps the model's float dtypes to GGUF tensor types.
var ggufType = map[engine.DType]gguf.TensorType{engine.F32: gguf.TypeF32, engine.F16: gguf.TypeF16, engine.BF16: gguf.TypeBF16}

// SaveGGUF writes the model to the file path as a llama-architecture GGUF
// with tensors of dtype dt (f32, f16 or bf16) and the metadata LoadGGUF
// reads: the architecture, llama.vocab_size, and the BOS and first EOS
// ids. Q and K rows are permuted per head from the model's rotate-half
// RoPE layout to Meta's interleaved one, the inverse of LoadGGUF's, so
// that LoadGGUF gives back the same weights (rounded to dt). Keys of extra
// that the model's own metadata does not set are written too: a GGUF
// source's tokenizer.ggml.* keys carry its tokenizer over (Export does
// this); without them the file holds no tokenizer and one is named when
// loading it (--tokenizer). Llama 3.1's RoPE scaling is written as
// llama.cpp writes it, a rope_freqs.weight tensor of per-frequency
// divisors, with its parameters in turnwise.rope.scaling.* keys.
func (m *Model) SaveGGUF(path string, dt engine.DType, extra map[string]any) error {
	c := m.Config
	tt, ok := ggufType[dt]
	if !ok {
		return fmt.Errorf("saving %s: weights of dtype %v cannot be saved (want f32, f16 or bf16)", path, dt)
	}
	eos := uint32(0)
	if len(c.EOS) > 0 {
		eos = uint32(c.EOS[0])
	}
	meta := map[string]any{
		"general.architecture":                   "llama",
		"general.name":                           filepath.Base(strings.TrimSuffix(path, filepath.Ext(path))),
		"llama.embedding_length":                 uint32(c.Dim),
		"llama.block_count":                      uint32(c.Layers),
		"llama.attention.head_count":             uint32(c.Heads),
		"llama.attention.head_count_kv":          uint32(c.KVHeads),
		"llama.feed_forward_length":              uint32(c.FFN),
		"llama.context_length":                   uint32(c.MaxSeqLen),
		"llama.rope.dimension_count":             uint32(c.HeadDim),
		"llama.rope.freq_base":                   float32(c.RopeTheta),
		"llama.attention.layer_norm_rms_epsilon": c.NormEps,
		ggufVocabKey:                             uint32(c.Vocab),
		"tokenizer.ggml.bos_token_id":            uint32(c.BOS),
		"tokenizer.ggml.eos_token_id":            eos,
	}
	var tensors []gguf.Tensor
	if s := c.RopeScale; s != nil {
		// Llama 3.1's scaling as llama.cpp's converter writes it: the
		// divisor of each frequency as rope_freqs.weight; and its
		// parameters, for loading back the same configuration.
		tensors = append(tensors, gguf.Tensor{Name: ggufRopeFreqs, Dims: []uint64{uint64(c.HeadDim / 2)}, Type: gguf.TypeF32,
			Data: engine.EncodeF32(engine.F32, ropeFactors(c.HeadDim, c.RopeTheta, *s))})
		for k, v := range ropeGGUFMeta(*s) {
			meta[k] = v
		}
	}
	for k, v := range extra {
		if _, ok := meta[k]; !ok && k != gguf.AlignmentKey {
			meta[k] = v
		}
	}
	if c.HeadDim*c.Heads != c.Dim {
		return fmt.Errorf("saving %s: head dimension %d × %d heads is not the model dimension %d, which GGUF's llama metadata cannot say", path, c.HeadDim, c.Heads, c.Dim)
	}
	var err error
	m.Weights.Each(func(name string, t *engine.Tensor) {
		if err != nil || (name == "lm_head.weight" && c.TiedEmbed) {
			return
		}
		data := m.tensorBytes(t, engine.F32)
		switch {
		case strings.HasSuffix(name, "q_proj.weight"):
			data = interleaveRows(data, c.Heads, c.HeadDim, t.Dim(1))
		case strings.HasSuffix(name, "k_proj.weight"):
			data = interleaveRows(data, c.KVHeads, c.HeadDim, t.Dim(1))
		}
		// 1-D tensors (the norms' weights) stay F32 whatever dt, as
		// llama.cpp's converter keeps them.
		typ := tt
		if t.Rank() == 1 {
			typ = ggufType[engine.F32]
		} else if dt != engine.F32 && err == nil {
			data, err = narrow(name, engine.DecodeF32(engine.F32, data), dt)
		}
		dims := make([]uint64, t.Rank())
		for i := range dims {
			dims[i] = uint64(t.Dim(t.Rank() - 1 - i))
		}
		tensors = append(tensors, gguf.Tensor{Name: ggufName(name, c.Layers), Dims: dims, Type: typ, Data: data})
	})
	if err != nil {
		return fmt.Errorf("saving %s: %w", path, err)
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	return outfile.Write(path, 0o644, func(w io.Writer) error { return gguf.Write(w, meta, tensors) })
}

// interleaveRows permutes the rows of a Q or K projection [heads·dh, in],
// given as f32 bytes, from the rotate-half RoPE layout (pairs (i, i+dh/2))
// to the interleaved one (pairs (2i, 2i+1)): within each head, row i goes
// to 2i and row i+dh/2 to 2i+1 — the inverse of unInterleave.
func interleaveRows(w []byte, heads, dh, in int) []byte {
	out := make([]byte, len(w))
	half, row := dh/2, 4*in
	for h := 0; h < heads; h++ {
		for i := 0; i < half; i++ {
			for k, src := range [2]int{i, i + half} {
				dst := h*dh + 2*i + k
				copy(out[dst*row:(dst+1)*row], w[(h*dh+src)*row:(h*dh+src+1)*row])
			}
		}
	}
	return out
}

// tokenizerFiles are the files of a Hugging Face directory that describe
// its tokenizer and generation, copied beside exported weights.
var tokenizerFiles = []string{"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json"}

// CopyTokenizerFiles copies the tokenizer and generation files of the
// Hugging Face directory src (tokenizer.json, tokenizer_config.json,
// special_tokens_map.json, generation_config.json; those it has) to dst,
// writes a tokenizer_config.json carrying the Llama 3.1 chat template
// (tokenizer.ChatTemplate) when the tokenizer has the chat tokens and src
// gives no template, and a generation_config.json naming the
// configuration's BOS and EOS ids when src has none. A model without tokenizer.json whose
// vocabulary is the byte tokenizer's loads with that tokenizer
// (Source.Tokenizer), so nothing more is written for it here (an export
// writes its files: WriteTokenizerFiles).
func CopyTokenizerFiles(c Config, src, dst string) error {
	for _, name := range tokenizerFiles {
		if src == "" {
			break
		}
		raw, err := os.ReadFile(filepath.Join(src, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := outfile.WriteFile(filepath.Join(dst, name), raw, 0o644); err != nil {
			return err
		}
	}
	if err := writeChatTemplate(dst); err != nil {
		return err
	}
	gen := filepath.Join(dst, "generation_config.json")
	if _, err := os.Stat(gen); err == nil {
		return nil
	}
	eos := any(c.EOS)
	if len(c.EOS) == 1 {
		eos = c.EOS[0]
	}
	js, err := json.MarshalIndent(map[string]any{"bos_token_id": c.BOS, "eos_token_id": eos, "do_sample": false}, "", "  ")
	if err != nil {
		return err
	}
	return outfile.WriteFile(gen, append(js, '\n'), 0o644)
}

// writeChatTemplate adds tokenizer.ChatTemplate to dir's
// tokenizer_config.json (creating it) when dir/tokenizer.json has the
// Llama 3.1 chat tokens and the file has no chat_template.
func writeChatTemplate(dir string) error {
	tokPath := filepath.Join(dir, "tokenizer.json")
	if _, err := os.Stat(tokPath); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	tok, err := tokenizer.LoadFile(tokPath)
	if err != nil {
		return err
	}
	if !tokenizer.HasChatTokens(tok) {
		return nil
	}
	cfgPath := filepath.Join(dir, "tokenizer_config.json")
	cfg := map[string]any{}
	raw, err := os.ReadFile(cfgPath)
	switch {
	case err == nil:
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return fmt.Errorf("%s: %w", cfgPath, jsonerr.Reword(err))
		}
		if _, ok := cfg["chat_template"]; ok {
			return nil
		}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	cfg["chat_template"] = tokenizer.ChatTemplate
	for k, v := range map[string]string{"bos_token": tokenizer.BeginOfText, "eos_token": tokenizer.EOTID, "tokenizer_class": "PreTrainedTokenizerFast"} {
		if _, ok := cfg[k]; !ok {
			cfg[k] = v
		}
	}
	js, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	return outfile.WriteFile(cfgPath, append(js, '\n'), 0o644)
}

// WriteTokenizerFiles writes tok's Hugging Face tokenizer files
// (tokenizer.HFFiles: tokenizer.json, tokenizer_config.json,
// special_tokens_map.json) to dir, each that dir does not have yet, so that
// a directory exported from a GGUF file or from a model trained on bytes
// carries its tokenizer. A tokenizer without a Hugging Face form (a
// SentencePiece vocabulary that a Hugging Face BPE cannot encode with as
// turnwise does) writes nothing and returns an error wrapping
// tokenizer.ErrNoHFForm that says why, for the caller to report.
func WriteTokenizerFiles(tok tokenizer.Tokenizer, dir string) error {
	files, err := tokenizer.HFFiles(tok)
	if err != nil {
		return err
	}
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"} {
		path := filepath.Join(dir, name)
		if _, err := os.Stat(path); err == nil {
			continue
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := outfile.WriteFile(path, files[name], 0o644); err != nil {
			return err
		}
	}
	return nil
}

// AdapterBase returns the base model the PEFT adapter in dir names
// (adapter_config.json's base_model_name_or_path; "" when it names none).
func AdapterBase(dir string) (string, error) {
	path := filepath.Join(dir, "adapter_config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var pc peftConfig
	if err := json.Unmarshal(raw, &pc); err != nil {
		return "", fmt.Errorf("%s: %w", path, jsonerr.Reword(err))
	}
	return pc.BaseModel, nil
}
