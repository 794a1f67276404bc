package llama

import (
	"fmt"
	"math/rand/v2"

	"github.com/turnwise/turnwise/engine"
)

// GenerateOptions control Generate.
type GenerateOptions struct {
	MaxNew  int                 // tokens to generate per prompt at most
	Sample  engine.SampleParams // Temperature 0: greedy
	Seed    uint64              // seeds the uniforms the sampler draws with
	Stop    []int32             // tokens that end a sequence (kept in the output)
	Adapter *Adapter            // LoRA adapter to generate with (nil: the base)
}

// Generation is one prompt's continuation.
type Generation struct {
	Tokens  []int32   // generated tokens, the stop token included
	LogProb []float32 // log-probability of each under the model (temperature 1)
	Stopped bool      // ended by a stop token rather than MaxNew
}

// Generate continues each prompt, all in one batch with a KV cache: the
// prompts are prefilled together, then every unfinished sequence advances one
// token per step.
func (m *Model) Generate(prompts [][]int32, opt GenerateOptions) ([]Generation, error) {
	b := m.b
	maxLen := 0
	for i, p := range prompts {
		if len(p) == 0 {
			return nil, fmt.Errorf("generate: prompt %d is empty", i)
		}
		maxLen = max(maxLen, len(p)+opt.MaxNew)
	}
	kc, err := m.NewCache(len(prompts), maxLen)
	if err != nil {
		return nil, err
	}
	defer m.freeCache(kc)
	s := len(prompts)
	ids, err := engine.Alloc(b, engine.I32, s)
	if err != nil {
		return nil, err
	}
	defer b.FreeBuffer(ids.Buffer())
	u, _ := engine.Alloc(b, engine.F32, s)
	defer b.FreeBuffer(u.Buffer())
	logp, _ := engine.Alloc(b, engine.F32, s)
	defer b.FreeBuffer(logp.Buffer())
	lse, _ := engine.Alloc(b, engine.F32, s)
	defer b.FreeBuffer(lse.Buffer())

	rng := rand.New(rand.NewPCG(opt.Seed, 0x67656e))
	out := make([]Generation, s)
	done := make([]bool, s)
	next := prompts
	uv := make([]float32, s)
	for step := 0; step < opt.MaxNew; step++ {
		logits, err := m.Forward(kc, next, opt.Adapter)
		if err != nil {
			return nil, err
		}
		for i := range uv {
			uv[i] = float32(rng.Float64())
		}
		engine.SetF32(b, u, uv)
		b.Sample(ids, logits, u, opt.Sample)
		b.LogSoftmaxGather(logp, lse, logits, ids)
		tok, lp := engine.ToI32(b, ids), engine.ToF32(b, logp)
		next = make([][]int32, s)
		alive := false
		for i := range out {
			if done[i] {
				continue
			}
			out[i].Tokens = append(out[i].Tokens, tok[i])
			out[i].LogProb = append(out[i].LogProb, lp[i])
			for _, st := range opt.Stop {
				if tok[i] == st {
					done[i], out[i].Stopped = true, true
				}
			}
			if !done[i] {
				next[i] = []int32{tok[i]}
				alive = true
			}
		}
		if !alive {
			break
		}
	}
	return out, nil
}

func (m *Model) freeCache(kc *Cache) {
	for l := range kc.K {
		m.b.FreeBuffer(kc.K[l].Buffer())
		m.b.FreeBuffer(kc.V[l].Buffer())
	}
}
