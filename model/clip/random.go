package clip

import (
	"math/rand/v2"
	"strings"

	"github.com/turnwise/turnwise/engine"
)

// NewRandom returns a tower of configuration c with seeded random weights,
// for benchmarks and tests that need a model of a real size without its
// weights: matrices and embeddings drawn from N(0, 0.02²), LayerNorm
// weights 1 and biases 0. Its embeddings mean nothing as a metric.
func NewRandom(b engine.Backend, c Config, seed uint64) (*Model, error) {
	if err := c.validate(""); err != nil {
		return nil, err
	}
	m := &Model{Config: c, Weights: Weights{Layers: make([]Layer, c.Layers)}, b: b, pool: engine.NewPool(b)}
	r := rand.New(rand.NewPCG(seed, 0))
	var err error
	m.Weights.each(func(name string, p *param, t **engine.Tensor) {
		if err != nil {
			return
		}
		if *t, err = engine.Alloc(b, engine.F32, c.storedShape(p)...); err != nil {
			return
		}
		vals := make([]float32, (*t).Numel())
		switch {
		case strings.Contains(name, "norm") && strings.HasSuffix(name, ".weight"):
			for i := range vals {
				vals[i] = 1
			}
		case strings.HasSuffix(name, ".bias"):
		default:
			for i := range vals {
				vals[i] = float32(0.02 * r.NormFloat64())
			}
		}
		engine.SetF32(b, *t, vals)
	})
	if err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}
