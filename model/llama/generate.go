package llama

import (
	"fmt"
	"math/rand/v2"
	"slices"

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
	logits, err := m.Forward(kc, prompts, opt.Adapter)
	if err != nil {
		return nil, err
	}
	return m.decode(kc, logits, opt)
}

// GenerateN draws n continuations of one prompt (best-of-N sampling): the
// prompt is prefilled once, its keys and values copied to n cache slots, and
// the n sequences decoded together, each with its own random draws.
func (m *Model) GenerateN(prompt []int32, n int, opt GenerateOptions) ([]Generation, error) {
	if len(prompt) == 0 || n <= 0 {
		return nil, fmt.Errorf("generate: %d continuations of a %d-token prompt", n, len(prompt))
	}
	kc, err := m.NewCache(n, len(prompt)+opt.MaxNew)
	if err != nil {
		return nil, err
	}
	defer m.freeCache(kc)
	first := make([][]int32, n)
	first[0] = prompt
	logits, err := m.Forward(kc, first, opt.Adapter)
	if err != nil {
		return nil, err
	}
	// Fork: slot 0's cache and logits to every other slot.
	p := len(prompt)
	for s := 1; s < n; s++ {
		for l := range kc.K {
			m.b.Copy(kc.K[l].Rows(s*kc.MaxLen, s*kc.MaxLen+p), kc.K[l].Rows(0, p))
			m.b.Copy(kc.V[l].Rows(s*kc.MaxLen, s*kc.MaxLen+p), kc.V[l].Rows(0, p))
		}
		kc.Len[s] = p
		m.b.Copy(logits.Rows(s, s+1), logits.Rows(0, 1))
	}
	return m.decode(kc, logits, opt)
}

// decode samples from logits [S, V] and advances every unfinished slot one
// token per step until each stops or has MaxNew tokens.
func (m *Model) decode(kc *Cache, logits *engine.Tensor, opt GenerateOptions) ([]Generation, error) {
	b, s := m.b, len(kc.Len)
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
	uv := make([]float32, s)
	for step := 0; step < opt.MaxNew; step++ {
		if step > 0 {
			next := make([][]int32, s)
			for i := range out {
				if !done[i] {
					next[i] = out[i].Tokens[len(out[i].Tokens)-1:]
				}
			}
			if logits, err = m.Forward(kc, next, opt.Adapter); err != nil {
				return nil, err
			}
		}
		for i := range uv {
			uv[i] = float32(rng.Float64())
		}
		engine.SetF32(b, u, uv)
		b.Sample(ids, logits, u, opt.Sample)
		b.LogSoftmaxGather(logp, lse, logits, ids)
		tok, lp := engine.ToI32(b, ids), engine.ToF32(b, logp)
		alive := false
		for i := range out {
			if done[i] {
				continue
			}
			out[i].Tokens = append(out[i].Tokens, tok[i])
			out[i].LogProb = append(out[i].LogProb, lp[i])
			if slices.Contains(opt.Stop, tok[i]) {
				done[i], out[i].Stopped = true, true
			}
			alive = alive || !done[i]
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
