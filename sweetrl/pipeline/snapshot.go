package pipeline

import (
	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/sweetrl/rl"
)

// snapshot is a copy of an adapter's (and a value head's) weights, to keep
// the best epoch of a run.
type snapshot map[string][]float32

// take copies the weights of ad and, if set, head.
func take(b engine.Backend, ad *llama.Adapter, head *rl.ValueHead) snapshot {
	s := snapshot{}
	ad.Each(func(n string, t *engine.Tensor) { s[n] = engine.ToF32(b, t) })
	if head != nil {
		s["value_head.weight"] = engine.ToF32(b, head.W)
		s["value_head.bias"] = engine.ToF32(b, head.B)
	}
	return s
}

// restore writes the copied weights back.
func (s snapshot) restore(b engine.Backend, ad *llama.Adapter, head *rl.ValueHead) {
	ad.Each(func(n string, t *engine.Tensor) { engine.SetF32(b, t, s[n]) })
	if head != nil {
		engine.SetF32(b, head.W, s["value_head.weight"])
		engine.SetF32(b, head.B, s["value_head.bias"])
	}
}
