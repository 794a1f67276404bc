package llama

import (
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/turnwise/turnwise/engine"
)

// NewRandom returns a model of configuration c with seeded random weights of
// dtype dt, for training from scratch: projections drawn from N(0, std²)
// (output projections scaled by 1/sqrt(2·layers), as GPT-2 does), norms at 1.
func NewRandom(b engine.Backend, c Config, dt engine.DType, std float64, seed uint64) (*Model, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	w, err := allocModel(b, c, dt)
	if err != nil {
		return nil, err
	}
	ti := uint64(0)
	w.each(func(name string, t **engine.Tensor) {
		if name == "lm_head.weight" && c.TiedEmbed {
			return
		}
		ti++
		vals := make([]float32, engine.Shape(c.shape(name)).Numel())
		p, inLayer := layerParamOf(name)
		switch {
		case name == "model.norm.weight" || inLayer && !p.isProjection():
			for i := range vals {
				vals[i] = 1
			}
		default:
			s := std
			if inLayer && p.residual {
				s /= math.Sqrt(2 * float64(c.Layers))
			}
			normalFill(vals, s, seed, ti)
		}
		engine.SetF32(b, *t, vals)
	})
	return newModel(b, c, w, dt, "")
}

// normalFill fills vals with N(0, std²) draws in parallel: fixed chunks of
// 1 Mi values, each from its own generator seeded by (seed, stream, chunk),
// so the values do not depend on the number of goroutines.
func normalFill(vals []float32, std float64, seed, stream uint64) {
	const chunk = 1 << 20
	nchunks := (len(vals) + chunk - 1) / chunk
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.NumCPU(), nchunks) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := int(next.Add(1) - 1); k < nchunks; k = int(next.Add(1) - 1) {
				r := rand.New(rand.NewPCG(seed, stream<<32|uint64(k)))
				for i := k * chunk; i < min((k+1)*chunk, len(vals)); i++ {
					vals[i] = float32(r.NormFloat64() * std)
				}
			}
		}()
	}
	wg.Wait()
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
