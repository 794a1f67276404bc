package llama

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/gguf"
)

// ggufRopeFreqs is the GGUF tensor of a RoPE-scaled Llama's per-frequency
// factors, as llama.cpp names it: a 1-D F32 tensor of head_dim/2 values by
// which llama.cpp divides the base frequencies θ^(−2j/head_dim).
const ggufRopeFreqs = "rope_freqs.weight"

// The GGUF metadata keys that carry Llama 3.1's scaling parameters, which
// llama.cpp's keys cannot say (its llama.rope.scaling.factor means linear
// scaling, which it would apply on top of rope_freqs.weight). They let a
// GGUF written here load back with exactly the configuration it was
// written from; a GGUF without them has its parameters recovered from
// rope_freqs.weight (ropeScalingFromFactors).
const (
	ggufRopeFactorKey   = "turnwise.rope.scaling.factor"
	ggufRopeLowKey      = "turnwise.rope.scaling.low_freq_factor"
	ggufRopeHighKey     = "turnwise.rope.scaling.high_freq_factor"
	ggufRopeOriginalKey = "turnwise.rope.scaling.original_context_length"
)

// ropeFactors returns the divisor of each of the headDim/2 base RoPE
// frequencies that Llama 3.1's scaling s applies: 1 for wavelengths
// shorter than OriginalContext/HighFreqFactor, Factor for those longer
// than OriginalContext/LowFreqFactor, and between them the reciprocal of
// the smooth interpolation of 1/Factor and 1 — the table llama.cpp's
// converter writes as rope_freqs.weight. The base frequencies are
// engine.RoPEFreqs's, in f32; the rule is evaluated in float64.
func ropeFactors(headDim int, theta float64, s engine.RoPEScaling) []float32 {
	base := engine.RoPEFreqs(headDim, theta, nil)
	out := make([]float32, len(base))
	lowWave := float64(s.OriginalContext) / s.LowFreqFactor
	highWave := float64(s.OriginalContext) / s.HighFreqFactor
	for j, f := range base {
		wave := 2 * math.Pi / float64(f)
		switch {
		case wave < highWave:
			out[j] = 1
		case wave > lowWave:
			out[j] = float32(s.Factor)
		default:
			smooth := (float64(s.OriginalContext)/wave - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
			out[j] = float32(1 / ((1-smooth)/s.Factor + smooth))
		}
	}
	return out
}

// ropeGGUFMeta returns the metadata SaveGGUF writes for scaling s
// (the ggufRope*Key keys).
func ropeGGUFMeta(s engine.RoPEScaling) map[string]any {
	return map[string]any{
		ggufRopeFactorKey:   s.Factor,
		ggufRopeLowKey:      s.LowFreqFactor,
		ggufRopeHighKey:     s.HighFreqFactor,
		ggufRopeOriginalKey: uint32(s.OriginalContext),
	}
}

// ggufRopeScaling reads the RoPE scaling of the GGUF file f, whose model
// has heads of headDim and base θ: none without rope_freqs.weight;
// otherwise the ggufRope*Key parameters when f has them, or those
// recovered from the factors (ropeScalingFromFactors), checked to give
// rope_freqs.weight's factors. Errors name the file, the tensor and the
// first factor that disagrees.
func ggufRopeScaling(f *gguf.File, headDim int, theta float64) (*engine.RoPEScaling, error) {
	info, ok := f.Tensor(ggufRopeFreqs)
	if !ok {
		if _, ok := f.Meta[ggufRopeFactorKey]; ok {
			return nil, fmt.Errorf("%s: %s is set but there is no %s tensor", f.Name, ggufRopeFactorKey, ggufRopeFreqs)
		}
		return nil, nil
	}
	if len(info.Dims) != 1 || info.Dims[0] != uint64(headDim/2) || info.Type != gguf.TypeF32 {
		return nil, fmt.Errorf("%s: tensor %s is %v of dims %v, want F32 of [%d] (half the head dimension %d)", f.Name, ggufRopeFreqs, info.Type, info.Dims, headDim/2, headDim)
	}
	data, _, err := f.TensorData(ggufRopeFreqs)
	if err != nil {
		return nil, err
	}
	got := make([]float32, headDim/2)
	for i := range got {
		got[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		if !(got[i] >= 1) || math.IsInf(float64(got[i]), 0) {
			return nil, fmt.Errorf("%s: %s[%d] = %g; a Llama 3.1 scaling divides frequencies by finite factors of at least 1", f.Name, ggufRopeFreqs, i, got[i])
		}
	}
	var s *engine.RoPEScaling
	from := "the parameters recovered from it"
	if _, ok := f.Meta[ggufRopeFactorKey]; ok {
		from = "the turnwise.rope.scaling.* parameters"
		if s, err = ggufRopeParams(f); err != nil {
			return nil, err
		}
	} else if s = ropeScalingFromFactors(headDim, theta, got); s == nil {
		return nil, nil // all factors 1: no scaling
	}
	want := ropeFactors(headDim, theta, *s)
	for j := range want {
		if d := math.Abs(float64(got[j]) - float64(want[j])); d > 1e-5*float64(want[j]) {
			return nil, fmt.Errorf("%s: %s[%d] = %g, but Llama 3.1's scaling with %s (factor %g, low_freq_factor %g, high_freq_factor %g, original context %d) gives %g",
				f.Name, ggufRopeFreqs, j, got[j], from, s.Factor, s.LowFreqFactor, s.HighFreqFactor, s.OriginalContext, want[j])
		}
	}
	return s, nil
}

// ggufRopeParams reads the ggufRope*Key parameters of f, checked as
// config.json's rope_scaling is.
func ggufRopeParams(f *gguf.File) (*engine.RoPEScaling, error) {
	num := func(key string) (float64, error) {
		switch v := f.Meta[key].(type) {
		case float64:
			return v, nil
		case float32:
			return float64(v), nil
		case nil:
			return 0, fmt.Errorf("%s: %s is missing (%s is set)", f.Name, key, ggufRopeFactorKey)
		default:
			return 0, fmt.Errorf("%s: %s is a %T, want a float", f.Name, key, v)
		}
	}
	var s engine.RoPEScaling
	var err error
	for _, p := range []struct {
		key string
		v   *float64
	}{{ggufRopeFactorKey, &s.Factor}, {ggufRopeLowKey, &s.LowFreqFactor}, {ggufRopeHighKey, &s.HighFreqFactor}} {
		if *p.v, err = num(p.key); err != nil {
			return nil, err
		}
		if !(*p.v > 0) || math.IsInf(*p.v, 0) {
			return nil, fmt.Errorf("%s: %s = %g, must be positive", f.Name, p.key, *p.v)
		}
	}
	orig, err := f.Int(ggufRopeOriginalKey)
	if err != nil {
		return nil, err
	}
	if orig <= 0 || orig > math.MaxInt32 {
		return nil, fmt.Errorf("%s: %s = %d, must be a positive context length", f.Name, ggufRopeOriginalKey, orig)
	}
	s.OriginalContext = int(orig)
	if !(s.HighFreqFactor > s.LowFreqFactor) {
		return nil, fmt.Errorf("%s: %s = %g must exceed %s = %g", f.Name, ggufRopeHighKey, s.HighFreqFactor, ggufRopeLowKey, s.LowFreqFactor)
	}
	return &s, nil
}

// ropeScalingFromFactors recovers Llama 3.1 scaling parameters from the
// divisors of a GGUF file's rope_freqs.weight (nil when every divisor is
// 1). The factor is the largest divisor. The rule depends on the other
// three parameters only through the band edges OriginalContext/High and
// OriginalContext/Low and the interpolation between them, which scaling
// all three by one constant leaves alike; so LowFreqFactor is taken to be
// 1, Llama 3.1's and 3.2's value, and HighFreqFactor and OriginalContext
// are solved from two frequencies inside the band — or, with fewer than
// two there, taken to be Llama 3.1's (4 and 8192). The caller checks the
// result against the factors.
func ropeScalingFromFactors(headDim int, theta float64, factors []float32) *engine.RoPEScaling {
	factor := 1.0
	for _, v := range factors {
		factor = max(factor, float64(v))
	}
	if factor == 1 {
		return nil
	}
	s := &engine.RoPEScaling{Factor: factor, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}
	// Inside the band, 1/divisor = (1−smooth)/factor + smooth with smooth
	// = (orig/wave − low)/(high − low), linear in x = 1/wave.
	base := engine.RoPEFreqs(headDim, theta, nil)
	var xs, ss []float64
	for j, v := range factors {
		d := float64(v)
		if d > 1+1e-6 && d < factor*(1-1e-6) {
			xs = append(xs, float64(base[j])/(2*math.Pi))
			ss = append(ss, (1/d-1/factor)/(1-1/factor))
		}
	}
	if n := len(xs); n >= 2 && xs[0] != xs[n-1] {
		slope := (ss[n-1] - ss[0]) / (xs[n-1] - xs[0]) // orig/(high−low)
		icept := ss[0] - slope*xs[0]                   // −low/(high−low)
		if icept < 0 && slope > 0 {
			width := -1 / icept                                // high − low, with low = 1
			s.HighFreqFactor = math.Round((1+width)*1e6) / 1e6 // the fit's noise off
			s.OriginalContext = int(math.Round(slope * width))
		}
	}
	return s
}
