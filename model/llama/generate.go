package llama

import (
	"fmt"
	"math"
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
	defer m.FreeCache(kc)
	logits, err := m.Forward(kc, prompts, opt.Adapter)
	if err != nil {
		return nil, err
	}
	return m.Decode(kc, logits, opt)
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
	defer m.FreeCache(kc)
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
	return m.Decode(kc, logits, opt)
}

// Decode samples from logits [S, V] f32 — Forward's result for the prompts
// in kc, whose buffer each step's logits then overwrite — and advances every
// unfinished slot one token per step until each stops or has MaxNew tokens
// (MaxNew − 1 forwards at most). While every slot is
// unfinished, a step is the same ops each time on buffers that keep their
// place — the forward of one token per slot, sampling and the sampled
// tokens' log-probabilities — with only the contents of its inputs changing
// (see forwardCached): where the backend can record ops (engine.Recorder, a
// CUDA graph) the step is recorded once, after one step run plainly has
// allocated what it needs, and replayed for each later token, with the same
// results. Each step uploads its inputs and downloads its outputs once.
func (m *Model) Decode(kc *Cache, logits *engine.Tensor, opt GenerateOptions) ([]Generation, error) {
	d, err := m.newDecoder(kc, logits, opt)
	if err != nil {
		return nil, err
	}
	defer d.free()
	rng := rand.New(rand.NewPCG(opt.Seed, 0x67656e))
	s := len(kc.Len)
	out := make([]Generation, s)
	done := make([]bool, s)
	alive := s
	uv := make([]float32, s)
	for step := 0; step < opt.MaxNew; step++ {
		for i := range uv {
			uv[i] = float32(rng.Float64())
		}
		var tok []int32
		var lp []float32
		if step == 0 {
			tok, lp = d.sample(logits, uv)
		} else {
			next := make([][]int32, s)
			for i := range out {
				if !done[i] {
					next[i] = out[i].Tokens[len(out[i].Tokens)-1:]
				}
			}
			if tok, lp, err = d.step(next, alive == s, uv); err != nil {
				return nil, err
			}
		}
		for i := range out {
			if done[i] {
				continue
			}
			out[i].Tokens = append(out[i].Tokens, tok[i])
			out[i].LogProb = append(out[i].LogProb, lp[i])
			if slices.Contains(opt.Stop, tok[i]) {
				done[i], out[i].Stopped = true, true
				alive--
			}
		}
		if alive == 0 {
			break
		}
	}
	return out, nil
}

// decoder runs the steps of Decode.
type decoder struct {
	m       *Model
	kc      *Cache
	opt     GenerateOptions
	res     *engine.Tensor // [2S] i32: the sampled tokens, then their log-probabilities' f32 bits
	ids     *engine.Tensor // [S] i32, a view of res
	logp    *engine.Tensor // [S] f32, a view of res
	lse     *engine.Tensor // [S] f32
	logits  *engine.Tensor // [S, V] f32: the step's logits, in the prefill's buffer
	u       *engine.Tensor // [S] f32: the first sampling's uniforms
	plain   int            // steps of every slot run plainly so far
	rec     engine.Recording
	recIn   *stepInputs // the recorded step's inputs
	recMem  arena       // its activations, held while it lives
	noGraph bool        // recording failed: run plainly from now on
}

// newDecoder returns a decoder of the slots of kc whose steps write their
// logits to logits [S, V] f32 (Forward's result for the prompts).
func (m *Model) newDecoder(kc *Cache, logits *engine.Tensor, opt GenerateOptions) (*decoder, error) {
	b, s := m.b, len(kc.Len)
	d := &decoder{m: m, kc: kc, opt: opt, logits: logits, recMem: arena{pool: m.pool}}
	var err error
	alloc := func(t **engine.Tensor, dt engine.DType, shape ...int) {
		if err == nil {
			*t, err = engine.Alloc(b, dt, shape...)
		}
	}
	alloc(&d.res, engine.I32, 2*s)
	alloc(&d.lse, engine.F32, s)
	alloc(&d.u, engine.F32, s)
	if err != nil {
		d.free()
		return nil, err
	}
	d.ids = d.res.Rows(0, s)
	d.logp = engine.NewTensor(d.res.Buffer(), d.res.Offset()+4*s, engine.F32, s)
	return d, nil
}

// free releases what the decoder holds.
func (d *decoder) free() {
	d.dropRecording()
	for _, t := range []*engine.Tensor{d.res, d.lse, d.u} {
		if t != nil {
			d.m.b.FreeBuffer(t.Buffer())
		}
	}
}

func (d *decoder) dropRecording() {
	if d.rec != nil {
		d.rec.Free()
		d.rec = nil
	}
	d.recMem.release()
}

// sample draws one token per slot from logits with uniforms u, and returns
// the tokens and their log-probabilities.
func (d *decoder) sample(logits *engine.Tensor, u []float32) ([]int32, []float32) {
	engine.SetF32(d.m.b, d.u, u)
	d.sampleOps(logits, d.u)
	return d.results()
}

// sampleOps queues the sampling of logits with uniforms u.
func (d *decoder) sampleOps(logits, u *engine.Tensor) {
	b := d.m.b
	b.Sample(d.ids, logits, u, d.opt.Sample)
	b.LogSoftmaxGather(d.logp, d.lse, logits, d.ids)
}

// results downloads the sampled tokens and their log-probabilities.
func (d *decoder) results() ([]int32, []float32) {
	s := d.ids.Numel()
	words := engine.ToI32(d.m.b, d.res)
	lp := make([]float32, s)
	for i := range lp {
		lp[i] = math.Float32frombits(uint32(words[s+i]))
	}
	return words[:s], lp
}

// step feeds next (a token per unfinished slot) to the model and samples
// the following tokens with uniforms u. every says that every slot has a
// token: only then is the step the one that is recorded and replayed.
func (d *decoder) step(next [][]int32, every bool, u []float32) ([]int32, []float32, error) {
	m := d.m
	st, err := m.planStep(d.kc, next)
	if err != nil {
		return nil, nil, err
	}
	if every && d.rec == nil && d.plain >= 1 && !d.noGraph {
		d.record(st)
	}
	if every && d.rec != nil {
		d.recIn.upload(m.b, st, u)
		if err := d.rec.Replay(); err != nil {
			return nil, nil, err
		}
		st.advance(d.kc)
		tok, lp := d.results()
		return tok, lp, nil
	}
	if !every {
		d.dropRecording() // its shape no longer comes back
	}
	err = func() (err error) {
		defer catchOOM(&err, fmt.Sprintf("decoding step of %d slots", len(next)))
		mem := arena{pool: m.pool}
		defer mem.release()
		in := newStepInputs(mem.take, st, len(u))
		in.upload(m.b, st, u)
		d.stepOps(mem.take, in, st.last)
		return nil
	}()
	if err != nil {
		return nil, nil, err
	}
	if every {
		d.plain++
	}
	st.advance(d.kc)
	tok, lp := d.results()
	return tok, lp, nil
}

// stepOps queues a decoding step's ops: the forward, then the sampling of
// its logits.
func (d *decoder) stepOps(take func(engine.DType, ...int) *engine.Tensor, in *stepInputs, last []int) {
	d.m.forwardCached(take, d.kc, d.opt.Adapter, in, last, d.logits)
	d.sampleOps(d.logits, in.u)
}

// record records the step of plan st's shape, or gives up recording for
// this decode when the backend cannot (the steps then run plainly).
func (d *decoder) record(st stepPlan) {
	var err error
	func() {
		defer catchOOM(&err, "recording a decoding step")
		d.recIn = newStepInputs(d.recMem.take, st, len(st.last))
		d.rec, err = engine.Record(d.m.b, func() { d.stepOps(d.recMem.take, d.recIn, st.last) })
	}()
	if err != nil {
		d.rec = nil
		d.recMem.release()
		d.noGraph = true
	}
}
