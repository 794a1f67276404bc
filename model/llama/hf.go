package llama

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/internal/jsonerr"
	"github.com/turnwise/turnwise/internal/shapecheck"
	"github.com/turnwise/turnwise/safetensors"
)

// HFConfigName is the file name of a Hugging Face model configuration.
const HFConfigName = "config.json"

// hfConfigIn is the part of a Hugging Face config.json a Llama needs.
// Pointers tell absent (or null) fields from zero ones.
type hfConfigIn struct {
	ModelType      *string         `json:"model_type"`
	HiddenSize     *int            `json:"hidden_size"`
	Layers         *int            `json:"num_hidden_layers"`
	Heads          *int            `json:"num_attention_heads"`
	KVHeads        *int            `json:"num_key_value_heads"`
	HeadDim        *int            `json:"head_dim"`
	FFN            *int            `json:"intermediate_size"`
	Vocab          *int            `json:"vocab_size"`
	NormEps        *float64        `json:"rms_norm_eps"`
	RopeTheta      *float64        `json:"rope_theta"`
	RopeScaling    *hfRope         `json:"rope_scaling"`
	RopeParameters *hfRope         `json:"rope_parameters"` // newer configs: θ and scaling together
	Tied           *bool           `json:"tie_word_embeddings"`
	MaxPos         *int            `json:"max_position_embeddings"`
	BOS            *int64          `json:"bos_token_id"`
	EOS            json.RawMessage `json:"eos_token_id"`
	HiddenAct      *string         `json:"hidden_act"`
	AttentionBias  *bool           `json:"attention_bias"`
	MLPBias        *bool           `json:"mlp_bias"`
}

// hfRope is a rope_scaling (or rope_parameters) object.
type hfRope struct {
	RopeType  *string  `json:"rope_type"`
	Type      *string  `json:"type"` // the older spelling of rope_type
	RopeTheta *float64 `json:"rope_theta"`
	Factor    *float64 `json:"factor"`
	Low       *float64 `json:"low_freq_factor"`
	High      *float64 `json:"high_freq_factor"`
	Original  *int     `json:"original_max_position_embeddings"`
}

// Hugging Face's LlamaConfig defaults for the optional fields.
const (
	hfDefaultTheta  = 10000
	hfDefaultEps    = 1e-6
	hfDefaultMaxPos = 2048
	hfDefaultBOS    = 1
	hfDefaultEOS    = 2
)

// LoadHFConfig reads a Hugging Face config.json (path is the file or the
// directory holding it) describing a Llama: model_type "llama", the sizes,
// RMSNorm epsilon, RoPE θ and llama3 frequency scaling, tied embeddings, and
// the BOS and EOS ids. Optional fields take LlamaConfig's defaults
// (num_key_value_heads = num_attention_heads, head_dim = hidden_size /
// num_attention_heads, rope_theta 10000, rms_norm_eps 1e-6, untied,
// max_position_embeddings 2048, bos 1, eos 2). Errors name the file and the
// field.
func LoadHFConfig(path string) (Config, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, HFConfigName)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return Config{}, err
	}
	c, err := parseHFConfig(raw)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// parseHFConfig converts the JSON of a config.json to a Config.
func parseHFConfig(raw []byte) (Config, error) {
	var in hfConfigIn
	if err := json.Unmarshal(raw, &in); err != nil {
		return Config{}, jsonerr.Reword(err)
	}
	switch {
	case in.ModelType == nil:
		return Config{}, errors.New(`model_type is missing, want "llama"`)
	case *in.ModelType != "llama":
		return Config{}, fmt.Errorf(`model_type is %q, want "llama"`, *in.ModelType)
	case in.HiddenAct != nil && *in.HiddenAct != "silu":
		return Config{}, fmt.Errorf(`hidden_act is %q; only "silu" (SwiGLU) is supported`, *in.HiddenAct)
	case in.AttentionBias != nil && *in.AttentionBias:
		return Config{}, errors.New("attention_bias is true; projections with biases are not supported")
	case in.MLPBias != nil && *in.MLPBias:
		return Config{}, errors.New("mlp_bias is true; projections with biases are not supported")
	}
	var errs []error
	need := func(name string, v *int) int {
		if v == nil {
			errs = append(errs, fmt.Errorf("%s is missing", name))
			return 0
		}
		return *v
	}
	c := Config{
		Dim:    need("hidden_size", in.HiddenSize),
		Layers: need("num_hidden_layers", in.Layers),
		Heads:  need("num_attention_heads", in.Heads),
		FFN:    need("intermediate_size", in.FFN),
		Vocab:  need("vocab_size", in.Vocab),
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	c.KVHeads = c.Heads
	if in.KVHeads != nil {
		c.KVHeads = *in.KVHeads
	}
	if c.Heads > 0 {
		c.HeadDim = c.Dim / c.Heads
	}
	if in.HeadDim != nil {
		c.HeadDim = *in.HeadDim
	}
	c.NormEps = hfDefaultEps
	if in.NormEps != nil {
		if !(*in.NormEps > 0) || *in.NormEps > math.MaxFloat32 {
			return Config{}, fmt.Errorf("rms_norm_eps = %g, must be positive", *in.NormEps)
		}
		c.NormEps = float32(*in.NormEps)
	}
	c.RopeTheta = hfDefaultTheta
	switch {
	case in.RopeTheta != nil:
		c.RopeTheta = *in.RopeTheta
	case in.RopeParameters != nil && in.RopeParameters.RopeTheta != nil:
		c.RopeTheta = *in.RopeParameters.RopeTheta
	}
	if !(c.RopeTheta > 0) {
		return Config{}, fmt.Errorf("rope_theta = %g, must be positive", c.RopeTheta)
	}
	rope, field := in.RopeScaling, "rope_scaling"
	if rope == nil {
		rope, field = in.RopeParameters, "rope_parameters"
	}
	var err error
	if c.RopeScale, err = parseHFRope(rope, field); err != nil {
		return Config{}, err
	}
	c.TiedEmbed = in.Tied != nil && *in.Tied
	c.MaxSeqLen = hfDefaultMaxPos
	if in.MaxPos != nil {
		c.MaxSeqLen = *in.MaxPos
	}
	bos := int64(hfDefaultBOS)
	if in.BOS != nil {
		bos = *in.BOS
	}
	if bos < 0 || bos > math.MaxInt32 {
		return Config{}, fmt.Errorf("bos_token_id = %d is not a token id", bos)
	}
	c.BOS = int32(bos)
	if c.EOS, err = parseHFEOS(in.EOS); err != nil {
		return Config{}, err
	}
	if err := c.validate(hfNames); err != nil {
		return Config{}, err
	}
	return c, nil
}

// hfNames are config.json's names of a Config's fields.
var hfNames = fieldNames{
	Dim: "hidden_size", Layers: "num_hidden_layers", Heads: "num_attention_heads", KVHeads: "num_key_value_heads",
	HeadDim: "head_dim", FFN: "intermediate_size", Vocab: "vocab_size", MaxSeqLen: "max_position_embeddings",
	NormEps: "rms_norm_eps", RopeTheta: "rope_theta", BOS: "bos_token_id", EOS: "eos_token_id",
}

// parseHFRope converts a rope_scaling object: null, "default" or a llama3
// scaling; other types are errors.
func parseHFRope(r *hfRope, field string) (*engine.RoPEScaling, error) {
	if r == nil {
		return nil, nil
	}
	typ := r.RopeType
	if typ == nil {
		typ = r.Type
	}
	switch {
	case typ == nil:
		if field == "rope_parameters" { // θ alone
			return nil, nil
		}
		return nil, fmt.Errorf("%s has no rope_type", field)
	case *typ == "default":
		return nil, nil
	case *typ != "llama3":
		return nil, fmt.Errorf(`%s.rope_type is %q; only "llama3" scaling is supported`, field, *typ)
	}
	num := func(v *float64) float64 {
		if v == nil {
			return math.NaN()
		}
		return *v
	}
	s := &engine.RoPEScaling{
		Factor:         num(r.Factor),
		LowFreqFactor:  num(r.Low),
		HighFreqFactor: num(r.High),
	}
	if r.Original != nil {
		s.OriginalContext = *r.Original
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"factor", s.Factor}, {"low_freq_factor", s.LowFreqFactor}, {"high_freq_factor", s.HighFreqFactor}} {
		if math.IsNaN(f.v) {
			return nil, fmt.Errorf("%s.%s is missing", field, f.name)
		}
		if !(f.v > 0) || math.IsInf(f.v, 0) {
			return nil, fmt.Errorf("%s.%s = %g, must be positive", field, f.name, f.v)
		}
	}
	switch {
	case r.Original == nil:
		return nil, fmt.Errorf("%s.original_max_position_embeddings is missing", field)
	case s.OriginalContext <= 0:
		return nil, fmt.Errorf("%s.original_max_position_embeddings = %d, must be positive", field, s.OriginalContext)
	case !(s.HighFreqFactor > s.LowFreqFactor):
		return nil, fmt.Errorf("%s: high_freq_factor = %g must exceed low_freq_factor = %g", field, s.HighFreqFactor, s.LowFreqFactor)
	}
	return s, nil
}

// parseHFEOS reads eos_token_id: one id or a list of ids (Validate checks
// them against the vocabulary).
func parseHFEOS(raw json.RawMessage) ([]int32, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return []int32{hfDefaultEOS}, nil
	}
	var ids []int64
	var one int64
	if err := json.Unmarshal(raw, &one); err == nil {
		ids = []int64{one}
	} else if err := json.Unmarshal(raw, &ids); err != nil {
		return nil, fmt.Errorf("eos_token_id is %.40s, want an integer or a list of integers", raw)
	}
	var eos []int32
	for _, id := range ids {
		if id < 0 || id > math.MaxInt32 {
			return nil, fmt.Errorf("eos_token_id %d is not a token id", id)
		}
		eos = append(eos, int32(id))
	}
	return eos, nil
}

// hfConfigOut is config.json as SaveHF writes it, keys in sorted order as
// Hugging Face writes them.
type hfConfigOut struct {
	Architectures []string    `json:"architectures"`
	AttentionBias bool        `json:"attention_bias"`
	BOS           int32       `json:"bos_token_id"`
	EOS           any         `json:"eos_token_id"`
	HeadDim       int         `json:"head_dim"`
	HiddenAct     string      `json:"hidden_act"`
	HiddenSize    int         `json:"hidden_size"`
	FFN           int         `json:"intermediate_size"`
	MaxPos        int         `json:"max_position_embeddings"`
	MLPBias       bool        `json:"mlp_bias"`
	ModelType     string      `json:"model_type"`
	Heads         int         `json:"num_attention_heads"`
	Layers        int         `json:"num_hidden_layers"`
	KVHeads       int         `json:"num_key_value_heads"`
	NormEps       json.Number `json:"rms_norm_eps"`
	RopeScaling   *hfRopeOut  `json:"rope_scaling"`
	RopeTheta     json.Number `json:"rope_theta"`
	Tied          bool        `json:"tie_word_embeddings"`
	TorchDType    string      `json:"torch_dtype"`
	Vocab         int         `json:"vocab_size"`
}

type hfRopeOut struct {
	Factor   json.Number `json:"factor"`
	High     json.Number `json:"high_freq_factor"`
	Low      json.Number `json:"low_freq_factor"`
	Original int         `json:"original_max_position_embeddings"`
	RopeType string      `json:"rope_type"`
}

// hfConfigJSON returns c as the JSON of a config.json for weights of dtype
// dt.
func hfConfigJSON(c Config, dt engine.DType) ([]byte, error) {
	torch := map[engine.DType]string{engine.F32: "float32", engine.BF16: "bfloat16", engine.F16: "float16"}[dt]
	out := hfConfigOut{
		Architectures: []string{"LlamaForCausalLM"},
		BOS:           c.BOS,
		HeadDim:       c.HeadDim,
		HiddenAct:     "silu",
		HiddenSize:    c.Dim,
		FFN:           c.FFN,
		MaxPos:        c.MaxSeqLen,
		ModelType:     "llama",
		Heads:         c.Heads,
		Layers:        c.Layers,
		KVHeads:       c.KVHeads,
		NormEps:       pyFloat(float64(c.NormEps), 32),
		RopeTheta:     pyFloat(c.RopeTheta, 64),
		Tied:          c.TiedEmbed,
		TorchDType:    torch,
		Vocab:         c.Vocab,
	}
	if len(c.EOS) == 1 {
		out.EOS = c.EOS[0]
	} else {
		out.EOS = append([]int32{}, c.EOS...)
	}
	if s := c.RopeScale; s != nil {
		out.RopeScaling = &hfRopeOut{Factor: pyFloat(s.Factor, 64), High: pyFloat(s.HighFreqFactor, 64),
			Low: pyFloat(s.LowFreqFactor, 64), Original: s.OriginalContext, RopeType: "llama3"}
	}
	js, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(js, '\n'), nil
}

// pyFloat formats v, a float of the given bits, in the shortest form that
// reads back exactly and that Python reads as a float (8 → "8.0"), as
// Hugging Face's configuration checks expect floats there.
func pyFloat(v float64, bits int) json.Number {
	s := strconv.FormatFloat(v, 'g', -1, bits)
	if !strings.ContainsAny(s, ".eEnN") {
		s += ".0"
	}
	return json.Number(s)
}

// hfDType maps the model's float dtypes to safetensors dtypes.
func hfDType(dt engine.DType) (safetensors.DType, bool) {
	if !dt.IsFloat() {
		return "", false
	}
	return safetensors.DType(dt.FileName()), true
}

// LoadHF reads a Hugging Face Llama checkpoint from dir — config.json and
// the weights as model.safetensors or as shards with
// model.safetensors.index.json — onto b, storing weights in dtype dt. Every
// parameter the configuration needs must be present with its shape, stored
// as F32, F16 or BF16 (converted to dt as needed); lm_head.weight is not
// needed when the embeddings are tied, and tensors the model has no use for
// (such as rotary_emb.inv_freq) are ignored. Hugging Face stores Q and K in
// the rotate-half RoPE layout the model uses, so no rows are permuted.
func LoadHF(b engine.Backend, dir string, dt engine.DType) (*Model, error) {
	if _, ok := hfDType(dt); !ok {
		return nil, fmt.Errorf("%s: weights of dtype %v are not supported (want f32, bf16 or f16)", dir, dt)
	}
	cfgPath := filepath.Join(dir, HFConfigName)
	c, err := LoadHFConfig(cfgPath)
	if err != nil {
		return nil, err
	}
	r, err := safetensors.OpenModel(dir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	held := stored{config: cfgPath, names: hfNames, weights: dir, layers: shapecheck.Layers(r.Names(), "model.layers."),
		tensor: func(hf string) (string, []int, string, bool) {
			info, ok := r.Info(hf)
			shape := make([]int, len(info.Shape))
			for i, d := range info.Shape {
				shape[i] = int(d)
			}
			return hf, shape, r.Location(hf), ok
		}}
	if err := held.checkHeld(c); err != nil {
		return nil, err
	}
	w, err := allocModel(b, c, dt)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	var buf convBuf
	w.each(func(name string, t **engine.Tensor) {
		if err != nil || (name == "lm_head.weight" && c.TiedEmbed) {
			return
		}
		err = loadHFTensor(b, r, dir, name, c.shape(name), *t, &buf)
	})
	if err != nil {
		w.free(b)
		return nil, err
	}
	return newModel(b, c, w, dt, dir)
}

// loadHFTensor checks tensor name of r against the shape the configuration
// needs and uploads it into t, converting its dtype.
func loadHFTensor(b engine.Backend, r safetensors.Reader, dir, name string, want []int, t *engine.Tensor, buf *convBuf) error {
	info, ok := r.Info(name)
	if !ok {
		return fmt.Errorf("%s: tensor %s is missing (the configuration needs one of shape %v)", dir, name, engine.Shape(want))
	}
	where := r.Location(name)
	got := make(engine.Shape, len(info.Shape))
	for i, d := range info.Shape {
		got[i] = int(d)
	}
	if !got.Equal(want) {
		return fmt.Errorf("%s: tensor %s has shape %v, the configuration needs %v", where, name, got, engine.Shape(want))
	}
	data, info, err := r.Data(name)
	if err != nil {
		return err
	}
	raw, err := convertWeights(t.DType(), info.DType, data, buf)
	if err != nil {
		return fmt.Errorf("%s: tensor %s: %w", where, name, err)
	}
	b.Upload(t, raw)
	return nil
}

// convBuf is output memory convertWeights reuses from one tensor to the
// next (Upload has consumed the previous result by then).
type convBuf struct{ words []uint32 }

func (c *convBuf) u32(n int) []uint32 {
	if cap(c.words) < n {
		c.words = make([]uint32, n)
	}
	return c.words[:n]
}

func (c *convBuf) u16(n int) []uint16 {
	w := c.u32((n + 1) / 2)
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(w))), n)
}

// convertWeights converts little-endian elements of safetensors dtype src
// to engine dtype dt, returning data itself when they already match, and
// otherwise bytes in buf's memory, valid until the next call with buf. The
// element loops run over native uint16/uint32 views of the bytes, so on a
// little-endian host the conversion is the only pass over the data.
func convertWeights(dt engine.DType, src safetensors.DType, data []byte, buf *convBuf) ([]byte, error) {
	if want, _ := hfDType(dt); want == src {
		return data, nil
	}
	switch src {
	case safetensors.F32:
		in := u32s(data)
		out := buf.u16(len(in))
		round := engine.F32ToBF16
		if dt == engine.F16 {
			round = engine.F32ToF16
		}
		parallelFor(len(in), func(lo, hi int) {
			o, s := out[lo:hi], in[lo:hi]
			for i := range o {
				o[i] = round(math.Float32frombits(s[i]))
			}
		})
		return u16Bytes(out), nil
	case safetensors.BF16, safetensors.F16:
		in := u16s(data)
		widen := engine.BF16ToF32
		if src == safetensors.F16 {
			widen = engine.F16ToF32
		}
		if dt == engine.F32 {
			out := buf.u32(len(in))
			parallelFor(len(in), func(lo, hi int) {
				o, s := out[lo:hi], in[lo:hi]
				if src == safetensors.BF16 { // a shift: the common case
					for i := range o {
						o[i] = uint32(s[i]) << 16
					}
					return
				}
				for i := range o {
					o[i] = math.Float32bits(widen(s[i]))
				}
			})
			return u32Bytes(out), nil
		}
		round := engine.F32ToBF16 // f16 to bf16, or bf16 to f16
		if dt == engine.F16 {
			round = engine.F32ToF16
		}
		out := buf.u16(len(in))
		parallelFor(len(in), func(lo, hi int) {
			o, s := out[lo:hi], in[lo:hi]
			for i := range o {
				o[i] = round(widen(s[i]))
			}
		})
		return u16Bytes(out), nil
	}
	return nil, fmt.Errorf("stored as %s; only F32, F16 and BF16 weights can be loaded", src)
}

// littleEndian reports whether the host stores integers little-endian, as
// the file and the backends' Upload do.
func littleEndian() bool { return binary.NativeEndian.Uint16([]byte{1, 0}) == 1 }

// u16s returns b's little-endian uint16s: a view of b when the host is
// little-endian and b is aligned, a decoded copy otherwise.
func u16s(b []byte) []uint16 {
	n := len(b) / 2
	if n == 0 {
		return nil
	}
	if p := unsafe.Pointer(unsafe.SliceData(b)); littleEndian() && uintptr(p)%2 == 0 {
		return unsafe.Slice((*uint16)(p), n)
	}
	s := make([]uint16, n)
	for i := range s {
		s[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return s
}

// u32s is u16s for uint32s.
func u32s(b []byte) []uint32 {
	n := len(b) / 4
	if n == 0 {
		return nil
	}
	if p := unsafe.Pointer(unsafe.SliceData(b)); littleEndian() && uintptr(p)%4 == 0 {
		return unsafe.Slice((*uint32)(p), n)
	}
	s := make([]uint32, n)
	for i := range s {
		s[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return s
}

// u16Bytes returns s as little-endian bytes: a view of s on a
// little-endian host, an encoded copy otherwise.
func u16Bytes(s []uint16) []byte {
	if len(s) == 0 {
		return []byte{}
	}
	if littleEndian() {
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 2*len(s))
	}
	b := make([]byte, 2*len(s))
	for i, v := range s {
		binary.LittleEndian.PutUint16(b[2*i:], v)
	}
	return b
}

// u32Bytes is u16Bytes for uint32s.
func u32Bytes(s []uint32) []byte {
	if len(s) == 0 {
		return []byte{}
	}
	if littleEndian() {
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 4*len(s))
	}
	b := make([]byte, 4*len(s))
	for i, v := range s {
		binary.LittleEndian.PutUint32(b[4*i:], v)
	}
	return b
}

// parallelFor splits [0, n) into chunks run on up to GOMAXPROCS goroutines;
// small n runs inline.
func parallelFor(n int, fn func(lo, hi int)) {
	const grain = 1 << 14
	p := min(runtime.GOMAXPROCS(0), (n+grain-1)/grain)
	if p <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	for k := 0; k < p; k++ {
		lo, hi := n*k/p, n*(k+1)/p
		wg.Go(func() { fn(lo, hi) })
	}
	wg.Wait()
}

// Save writes what a run trained to the directory dir so that others load
// it: adapter ad in PEFT's layout, naming its base (SavePEFT), or, when ad
// is nil, the whole model as a Hugging Face checkpoint (SaveHF) with the
// tokenizer and generation files of the directory the model was read from
// (CopyTokenizerFiles; a generation_config.json of its BOS and EOS ids
// when it has none).
func (m *Model) Save(ad *Adapter, dir string) error {
	if ad != nil {
		return m.SavePEFT(ad, dir)
	}
	if err := m.SaveHF(dir); err != nil {
		return err
	}
	src := ""
	if st, err := os.Stat(m.Source); m.Source != "" && err == nil && st.IsDir() {
		src = m.Source
	}
	return CopyTokenizerFiles(m.Config, src, dir)
}

// SaveHF writes the model to dir (created if needed) as a Hugging Face
// checkpoint: config.json and the weights in the model's dtype, as
// model.safetensors, or as 5 GB shards with an index when larger, as
// save_pretrained does (a tied classifier is stored once, as the
// embedding). LoadHF of the result gives back the same weights bit for bit.
// Weights are copied from the backend one tensor at a time.
func (m *Model) SaveHF(dir string) error { return m.SaveHFAs(dir, m.dt) }
