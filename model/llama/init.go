package llama

import (
	"math"
	"math/rand/v2"
	"strings"

	"github.com/turnwise/turnwise/engine"
)

// NewRandom returns a model of configuration c with seeded random weights of
// dtype dt, for training from scratch: projections drawn from N(0, std²)
// (output projections scaled by 1/sqrt(2·layers), as GPT-2 does), norms at 1.
func NewRandom(b engine.Backend, c Config, dt engine.DType, std float64, seed uint64) (*Model, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	w, err := allocWeights(b, c, dt)
	if err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(seed, 0x6c6c616d61))
	shapes := c.shapes()
	w.each(func(name string, t **engine.Tensor) {
		if name == "lm_head.weight" && c.TiedEmbed {
			return
		}
		vals := make([]float32, engine.Shape(shapes[name]).Numel())
		switch {
		case strings.HasSuffix(name, "norm.weight") || strings.HasSuffix(name, "layernorm.weight"):
			for i := range vals {
				vals[i] = 1
			}
		default:
			s := std
			if strings.HasSuffix(name, "o_proj.weight") || strings.HasSuffix(name, "down_proj.weight") {
				s /= math.Sqrt(2 * float64(c.Layers))
			}
			for i := range vals {
				vals[i] = float32(r.NormFloat64() * s)
			}
		}
		engine.SetF32(b, *t, vals)
	})
	return newModel(b, c, w, dt)
}

// Each calls fn on every distinct parameter tensor with its Hugging Face
// name (a tied classifier is visited once, as the embedding).
func (w *Weights) Each(fn func(name string, t *engine.Tensor)) {
	w.each(func(name string, t **engine.Tensor) {
		if name == "lm_head.weight" && w.Head == w.Embed {
			return
		}
		fn(name, *t)
	})
}
