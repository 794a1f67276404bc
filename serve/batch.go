package serve

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/tokenizer"
)

// genSeedStream is the stream constant of a job's generator: the one
// llama.Model.Generate uses, so that a request alone draws what
// `train generate` draws for the same seed.
const genSeedStream = 0x67656e

// cacheRound is the multiple of tokens the KV cache's slots grow by.
const cacheRound = 256

// job is one sequence to generate (a request's choice), from the handler to
// the scheduler.
type job struct {
	ctx     context.Context
	adapter *llama.Adapter
	prompt  []int32 // token ids, BOS (or the chat header) included
	maxNew  int     // tokens to generate at most, ≥ 1, within the context
	sample  sampler
	seed    uint64
	stops   []string
	queued  time.Time
	// scorePrompt asks for the prompt's log-probabilities (an event of
	// them before the output).
	scorePrompt bool
	// events receives the text as it is decoded, then one final event;
	// it is then closed. Its capacity (maxNew+2) means the scheduler
	// never waits on a slow reader.
	events chan event
}

// event is a piece of a job's output: text (with the log-probabilities of
// the tokens sampled since the last event, when asked for), or (final) the
// reason it ended and its token count, or an error.
type event struct {
	text       string
	logprobs   []tokenLogprob
	prompt     []float32 // the prompt's log-probabilities, its first token's left out
	final      bool
	finish     string // "stop" or "length"
	completion int    // tokens generated, a stop token included
	err        error
}

// sched is the scheduler's state, owned by the loop goroutine: the slots of
// the running batch, each a row of one KV cache, and the jobs waiting for a
// slot.
type sched struct {
	s       *Server
	kc      *llama.Cache // nil while nothing runs
	slots   []*slot      // nil: free
	waiting []*job
	admits  uint64 // jobs admitted so far: a slot's age
	ids     *engine.Tensor
	u       *engine.Tensor
}

// loop is the scheduler (iteration-level): between two forward steps it
// takes in the jobs that arrived, gives free slots to the oldest waiting
// ones, and runs one step for every running slot — one token for each that
// decodes, the next chunk of the prompt for those that prefill — until quit
// is closed; the jobs waiting or running then end with errShuttingDown.
func (s *Server) loop() {
	defer close(s.loopDone)
	sc := &sched{s: s, slots: make([]*slot, s.maxBatch)}
	defer sc.release()
	for {
		if sc.running() == 0 && len(sc.waiting) == 0 {
			sc.release() // the cache is not held while idle
			s.metrics.setBatch(0, 0)
			select {
			case j := <-s.queue:
				sc.waiting = append(sc.waiting, j)
			case <-s.quit:
				return
			}
			sc.collect()
		}
	drain:
		for {
			select {
			case j := <-s.queue:
				sc.waiting = append(sc.waiting, j)
			case <-s.quit:
				sc.shutdown()
				return
			default:
				break drain
			}
		}
		sc.admit()
		s.metrics.setBatch(sc.running(), len(sc.waiting))
		if sc.running() > 0 {
			sc.stepSafely()
		}
	}
}

// collect waits up to the batch window for more jobs, so that a burst
// arriving at an idle server starts together.
func (sc *sched) collect() {
	s := sc.s
	if s.window <= 0 {
		return
	}
	t := time.NewTimer(s.window)
	defer t.Stop()
	for len(sc.waiting) < len(sc.slots) {
		select {
		case j := <-s.queue:
			sc.waiting = append(sc.waiting, j)
		case <-t.C:
			return
		case <-s.quit:
			return
		}
	}
}

// running returns the number of busy slots.
func (sc *sched) running() int {
	n := 0
	for _, sl := range sc.slots {
		if sl != nil {
			n++
		}
	}
	return n
}

// shutdown ends every job waiting or running.
func (sc *sched) shutdown() {
	for _, j := range sc.waiting {
		j.events <- event{final: true, err: errShuttingDown}
		close(j.events)
	}
	sc.waiting = nil
	for i, sl := range sc.slots {
		if sl != nil {
			sl.finish("", errShuttingDown)
			sc.slots[i] = nil
		}
	}
}

// release frees the KV cache and the sampler's buffers.
func (sc *sched) release() {
	b := sc.s.model.Backend()
	if sc.kc != nil {
		sc.s.model.FreeCache(sc.kc)
		sc.kc = nil
	}
	for _, t := range []*engine.Tensor{sc.ids, sc.u} {
		if t != nil {
			b.FreeBuffer(t.Buffer())
		}
	}
	sc.ids, sc.u = nil, nil
}

// admit gives free slots to the oldest waiting jobs (dropping those whose
// client went away), growing the cache to hold each.
func (sc *sched) admit() {
	for len(sc.waiting) > 0 {
		free := slices.Index(sc.slots, nil)
		if free < 0 {
			return
		}
		j := sc.waiting[0]
		sc.waiting = sc.waiting[1:]
		if err := j.ctx.Err(); err != nil { // the client went away while it waited
			j.events <- event{final: true, err: err}
			close(j.events)
			continue
		}
		if err := sc.ensure(len(j.prompt) + j.maxNew); err != nil {
			j.events <- event{final: true, err: fmt.Errorf("generation failed: %w", err)}
			close(j.events)
			continue
		}
		if j.scorePrompt {
			if err := sc.score(j); err != nil {
				j.events <- event{final: true, err: fmt.Errorf("scoring the prompt: %w", err)}
				close(j.events)
				continue
			}
		}
		sc.admits++
		sc.slots[free] = sc.s.newSlot(j, sc.admits)
		sc.kc.Len[free] = 0
	}
}

// score sends the log-probabilities of j's prompt.
func (sc *sched) score(j *job) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("internal error: %v", r)
		}
	}()
	lps := []float32{}
	if len(j.prompt) > 1 {
		if lps, err = sc.s.model.LogProbs(j.prompt, j.adapter); err != nil {
			return err
		}
	}
	j.events <- event{prompt: lps}
	return nil
}

// ensure makes the cache's slots hold at least need tokens each: it
// allocates the cache (and the sampler's buffers) on first use, and when a
// slot needs more it moves the cached tokens to a longer cache.
func (sc *sched) ensure(need int) error {
	m := sc.s.model
	b := m.Backend()
	if sc.ids == nil {
		var err error
		if sc.ids, err = engine.Alloc(b, engine.I32, len(sc.slots)); err != nil {
			return err
		}
		if sc.u, err = engine.Alloc(b, engine.F32, len(sc.slots)); err != nil {
			return err
		}
	}
	if sc.kc != nil && sc.kc.MaxLen >= need {
		return nil
	}
	n := min((need+cacheRound-1)/cacheRound*cacheRound, max(m.Config.MaxSeqLen, need))
	kc, err := m.NewCache(len(sc.slots), n)
	if err != nil {
		return err
	}
	if old := sc.kc; old != nil {
		for i, l := range old.Len {
			if l == 0 {
				continue
			}
			for layer := range kc.K {
				b.Copy(kc.K[layer].Rows(i*n, i*n+l), old.K[layer].Rows(i*old.MaxLen, i*old.MaxLen+l))
				b.Copy(kc.V[layer].Rows(i*n, i*n+l), old.V[layer].Rows(i*old.MaxLen, i*old.MaxLen+l))
			}
			kc.Len[i] = l
		}
		m.FreeCache(old)
	}
	sc.kc = kc
	return nil
}

// slot is a running job's decoding state.
type slot struct {
	*job
	age       uint64 // admission order
	rng       *rand.Rand
	dec       *tokenizer.StreamDecoder
	stop      textStop
	fed       int // prompt tokens in the cache
	count     int
	lastToken int32
	counts    map[int32]int // tokens generated, for the penalties
	first     bool          // the first token was sent
	done      bool
}

// newSlot starts a job's decoding state.
func (s *Server) newSlot(j *job, age uint64) *slot {
	dec := tokenizer.NewStreamDecoder(s.tok)
	dec.SkipSpecial = true
	// Decode as a continuation of the prompt: SentencePiece keeps the
	// leading space of a token that does not start the text.
	dec.Next(j.prompt[len(j.prompt)-1])
	sl := &slot{job: j, age: age, lastToken: j.prompt[len(j.prompt)-1], rng: rand.New(rand.NewPCG(j.seed, genSeedStream)), dec: dec, stop: textStop{stops: j.stops}}
	if j.sample.penalized() {
		sl.counts = map[int32]int{}
	}
	return sl
}

// finish sends the final event of a slot's job and closes its events.
func (sl *slot) finish(reason string, err error) {
	if tail := sl.stop.flush(); tail != "" && err == nil {
		sl.events <- event{text: tail}
	}
	sl.events <- event{final: true, finish: reason, completion: sl.count, err: err}
	close(sl.events)
	sl.done = true
}

// stepSafely runs step, turning a panic (a bug, not a bad request: requests
// are checked before they are queued) or an error into the failure of every
// running job, so that one batch cannot bring the server down.
func (sc *sched) stepSafely() {
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("internal error: %v", r)
			}
		}()
		return sc.step()
	}()
	if err == nil {
		return
	}
	for i, sl := range sc.slots {
		if sl != nil {
			if !sl.done {
				sl.finish("", fmt.Errorf("generation failed: %w", err))
			}
			sc.slots[i] = nil
		}
	}
	sc.release() // its contents are unknown
}

// step runs one forward per adapter among the running slots: a token for
// each slot that decodes and, within the server's prefill budget, the next
// chunk of the prompts of slots that prefill (oldest first); then it
// samples a token for each slot that has its prompt in the cache.
func (sc *sched) step() error {
	tokens := make([][]int32, len(sc.slots))
	var prefill []int
	for i, sl := range sc.slots {
		if sl == nil {
			continue
		}
		if sl.ctx.Err() != nil {
			sl.finish("", sl.ctx.Err()) // the client went away
			sc.free(i)
			continue
		}
		if sl.fed == len(sl.prompt) {
			tokens[i] = []int32{sl.lastToken}
		} else {
			prefill = append(prefill, i)
		}
	}
	slices.SortFunc(prefill, func(a, b int) int { return int(sc.slots[a].age - sc.slots[b].age) })
	budget := sc.s.prefillChunk
	for _, i := range prefill {
		sl := sc.slots[i]
		n := min(len(sl.prompt)-sl.fed, budget)
		if n <= 0 {
			break
		}
		tokens[i] = sl.prompt[sl.fed : sl.fed+n]
		budget -= n
	}
	var adapters []*llama.Adapter
	for i, t := range tokens {
		if t != nil && !slices.Contains(adapters, sc.slots[i].adapter) {
			adapters = append(adapters, sc.slots[i].adapter)
		}
	}
	m := sc.s.model
	for _, ad := range adapters {
		group := make([][]int32, len(tokens))
		var sample []int // the slots whose next token this forward gives
		for i, t := range tokens {
			sl := sc.slots[i]
			if t == nil || sl == nil || sl.adapter != ad { // nil: it ended in an earlier group's sampling
				continue
			}
			group[i] = t
			if sl.fed < len(sl.prompt) {
				sl.fed += len(t)
			}
			if sl.fed == len(sl.prompt) {
				sample = append(sample, i)
			}
		}
		logits, err := m.Forward(sc.kc, group, ad)
		if err != nil {
			return err
		}
		if len(sample) > 0 {
			sc.sample(logits, sample)
		}
	}
	return nil
}

// sample draws the next token of each slot in rows from its row of logits
// [S, V] and advances the slot.
func (sc *sched) sample(logits *engine.Tensor, rows []int) {
	s := sc.s
	b := s.model.Backend()
	uv := make([]float32, len(sc.slots))
	same := true
	raw := make([][]float32, len(sc.slots)) // host copies, where needed
	for _, i := range rows {
		sl := sc.slots[i]
		uv[i] = float32(sl.rng.Float64())
		if sl.sample.params != sc.slots[rows[0]].sample.params {
			same = false
		}
		if sl.sample.host() || sl.sample.logprobs >= 0 {
			row := logits.Rows(i, i+1)
			raw[i] = engine.ToF32(b, row)
			if sl.sample.host() {
				engine.SetF32(b, row, sl.sample.adjust(slices.Clone(raw[i]), sl.counts))
			}
		}
	}
	engine.SetF32(b, sc.u, uv)
	if same && len(rows) == len(sc.slots) {
		b.Sample(sc.ids, logits, sc.u, sc.slots[rows[0]].sample.params)
	} else {
		for _, i := range rows {
			b.Sample(sc.ids.Rows(i, i+1), logits.Rows(i, i+1), sc.u.Rows(i, i+1), sc.slots[i].sample.params)
		}
	}
	toks := engine.ToI32(b, sc.ids)
	s.metrics.generated(len(rows), time.Now())
	for _, i := range rows {
		sl := sc.slots[i]
		var lp *tokenLogprob
		if raw[i] != nil && sl.sample.logprobs >= 0 {
			lp = logprobOf(raw[i], toks[i], sl.sample.logprobs)
			lp.prev = sl.lastToken
		}
		s.advance(sl, toks[i], lp)
		if sl.done {
			sc.free(i)
		}
	}
}

// free empties slot i for the next job.
func (sc *sched) free(i int) {
	sc.slots[i] = nil
	sc.kc.Len[i] = 0
}

// advance takes a slot's next token (with its log-probabilities when the
// job asks for them): it ends the slot at a stop token, a stop string or
// its token limit, and otherwise sends the text that is now certain.
func (s *Server) advance(sl *slot, tok int32, lp *tokenLogprob) {
	sl.count++
	sl.lastToken = tok
	if sl.counts != nil {
		sl.counts[tok]++
	}
	if !sl.first {
		sl.first = true
		s.metrics.firstToken(time.Since(sl.queued))
	}
	stopped := slices.Contains(s.stopIDs, tok)
	var text string
	if !stopped {
		// A token the tokenizer cannot decode (an id of a model's
		// vocabulary beyond the tokenizer's, such as padding) adds no
		// text; it is still counted.
		text, _ = sl.dec.Next(tok)
	}
	last := stopped || sl.count >= sl.maxNew
	if last {
		text += sl.dec.Flush() // an incomplete UTF-8 sequence at the end
	}
	out, hit := sl.stop.push(text)
	var lps []tokenLogprob
	if lp != nil && !stopped {
		lps = []tokenLogprob{*lp}
	}
	if out != "" || lps != nil {
		sl.events <- event{text: out, logprobs: lps}
	}
	switch {
	case hit || stopped:
		sl.finish("stop", nil)
	case last:
		sl.finish("length", nil)
	}
}

// textStop finds a request's stop strings in the text as it grows. It holds
// back the end of the text that could begin a stop string, so that no text
// it has let out is ever part of one.
type textStop struct {
	stops []string
	held  string
}

// push adds text and returns what may be sent now; hit reports that a stop
// string was found (out is then the text before it, and the rest is
// dropped).
func (t *textStop) push(text string) (out string, hit bool) {
	if len(t.stops) == 0 {
		return text, false
	}
	t.held += text
	first := -1
	for _, s := range t.stops {
		if i := strings.Index(t.held, s); i >= 0 && (first < 0 || i < first) {
			first = i
		}
	}
	if first >= 0 {
		out, t.held = t.held[:first], ""
		return out, true
	}
	keep := 0
	for _, s := range t.stops {
		for k := min(len(s)-1, len(t.held)); k > keep; k-- {
			if strings.HasSuffix(t.held, s[:k]) {
				keep = k
				break
			}
		}
	}
	out, t.held = t.held[:len(t.held)-keep], t.held[len(t.held)-keep:]
	return out, false
}

// flush returns the text held back and empties it.
func (t *textStop) flush() string {
	s := t.held
	t.held = ""
	return s
}
