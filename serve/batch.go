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

// job is one request's generation, from the handler to the scheduler.
type job struct {
	ctx     context.Context
	adapter *llama.Adapter
	prompt  []int32 // token ids, BOS (or the chat header) included
	maxNew  int     // tokens to generate at most, ≥ 1, within the context
	sample  engine.SampleParams
	seed    uint64
	stops   []string
	// events receives the text as it is decoded, then one final event;
	// it is then closed. Its capacity (maxNew+1) means the scheduler
	// never waits on a slow reader.
	events chan event
}

// event is a piece of a job's output: text, or (final) the reason it
// ended and its token count, or an error.
type event struct {
	text       string
	final      bool
	finish     string // "stop" or "length"
	completion int    // tokens generated, a stop token included
	err        error
}

// batchKey is what jobs decoded together must share.
type batchKey struct {
	adapter *llama.Adapter
	sample  engine.SampleParams
}

func (j *job) key() batchKey {
	s := j.sample
	if s.Temperature <= 0 {
		s = engine.SampleParams{} // greedy: top_p plays no part
	}
	return batchKey{j.adapter, s}
}

// loop is the scheduler: it collects jobs for up to the batch window (or
// until maxBatch jobs wait), decodes the oldest job with every compatible
// waiting one, and repeats until quit is closed; the jobs left then are
// refused.
func (s *Server) loop() {
	defer close(s.loopDone)
	var pending []*job
	for {
		select {
		case <-s.quit:
			s.refuse(pending)
			return
		default:
		}
		if len(pending) == 0 {
			select {
			case j := <-s.queue:
				pending = append(pending, j)
			case <-s.quit:
				return
			}
		}
		if len(pending) < s.maxBatch && s.window > 0 {
			t := time.NewTimer(s.window)
		collect:
			for len(pending) < s.maxBatch {
				select {
				case j := <-s.queue:
					pending = append(pending, j)
				case <-t.C:
					break collect
				case <-s.quit:
					t.Stop()
					s.refuse(pending)
					return
				}
			}
			t.Stop()
		}
		// Take in whatever else is already waiting.
	drain:
		for len(pending) < 4*s.maxBatch {
			select {
			case j := <-s.queue:
				pending = append(pending, j)
			default:
				break drain
			}
		}
		var batch, rest []*job
		k := pending[0].key()
		for _, j := range pending {
			if len(batch) < s.maxBatch && j.key() == k {
				batch = append(batch, j)
			} else {
				rest = append(rest, j)
			}
		}
		s.decode(batch)
		pending = rest
	}
}

// refuse ends jobs that will not be decoded.
func (s *Server) refuse(jobs []*job) {
	for _, j := range jobs {
		j.events <- event{final: true, err: errShuttingDown}
		close(j.events)
	}
}

// slot is a job's decoding state.
type slot struct {
	*job
	rng       *rand.Rand
	dec       *tokenizer.StreamDecoder
	stop      textStop
	count     int
	lastToken int32
	done      bool
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

// decode generates for a batch of compatible jobs together: one prefill of
// every prompt, then a forward pass per step for the sequences still
// running (see the package comment).
func (s *Server) decode(jobs []*job) {
	start := time.Now()
	jobs = slices.DeleteFunc(jobs, func(j *job) bool {
		if err := j.ctx.Err(); err != nil { // the client went away while it waited
			j.events <- event{final: true, err: err}
			close(j.events)
			return true
		}
		return false
	})
	if len(jobs) == 0 {
		return
	}
	slots := make([]*slot, len(jobs))
	for i, j := range jobs {
		dec := tokenizer.NewStreamDecoder(s.tok)
		dec.SkipSpecial = true
		// Decode as a continuation of the prompt: SentencePiece keeps the
		// leading space of a token that does not start the text.
		dec.Next(j.prompt[len(j.prompt)-1])
		slots[i] = &slot{job: j, rng: rand.New(rand.NewPCG(j.seed, genSeedStream)), dec: dec, stop: textStop{stops: j.stops}}
	}
	steps, err := s.decodeSafely(slots)
	for _, sl := range slots {
		if !sl.done {
			sl.finish("", fmt.Errorf("generation failed: %w", err))
		}
	}
	if s.log != nil {
		fmt.Fprintf(s.log, "batch of %d (temperature %g, top_p %g): %d steps in %v\n",
			len(jobs), jobs[0].sample.Temperature, jobs[0].sample.TopP, steps, time.Since(start).Round(time.Millisecond))
	}
}

// decodeSafely runs decodeSlots, turning a panic (a bug, not a bad
// request: requests are checked before they are queued) into the batch's
// error, so that one batch cannot bring the server down.
func (s *Server) decodeSafely(slots []*slot) (steps int, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("internal error: %v", r)
		}
	}()
	return s.decodeSlots(slots)
}

// decodeSlots runs the decoding loop of decode and returns the steps taken;
// on error the slots not done are left for decode to fail.
func (s *Server) decodeSlots(slots []*slot) (int, error) {
	m := s.model
	b := m.Backend()
	n := len(slots)
	maxLen := 0
	prompts := make([][]int32, n)
	for i, sl := range slots {
		prompts[i] = sl.prompt
		maxLen = max(maxLen, len(sl.prompt)+sl.maxNew)
	}
	kc, err := m.NewCache(n, maxLen)
	if err != nil {
		return 0, err
	}
	defer func() {
		for l := range kc.K {
			b.FreeBuffer(kc.K[l].Buffer())
			b.FreeBuffer(kc.V[l].Buffer())
		}
	}()
	ids, err := engine.Alloc(b, engine.I32, n) // [n] i32: the sampled tokens
	if err != nil {
		return 0, err
	}
	defer b.FreeBuffer(ids.Buffer())
	u, err := engine.Alloc(b, engine.F32, n) // [n] f32: each slot's uniform
	if err != nil {
		return 0, err
	}
	defer b.FreeBuffer(u.Buffer())

	logits, err := m.Forward(kc, prompts, slots[0].adapter) // [n, V]
	if err != nil {
		return 0, err
	}
	uv := make([]float32, n)
	next := make([][]int32, n)
	for step := 0; ; step++ {
		if step > 0 {
			alive := false
			for i, sl := range slots {
				next[i] = nil
				if !sl.done && sl.ctx.Err() != nil {
					sl.finish("", sl.ctx.Err()) // the client went away
				}
				if !sl.done {
					next[i] = []int32{sl.lastToken}
					alive = true
				}
			}
			if !alive {
				return step, nil
			}
			if logits, err = m.Forward(kc, next, slots[0].adapter); err != nil {
				return step, err
			}
		}
		for i, sl := range slots {
			uv[i] = 0
			if !sl.done {
				uv[i] = float32(sl.rng.Float64())
			}
		}
		engine.SetF32(b, u, uv)
		b.Sample(ids, logits, u, slots[0].sample)
		toks := engine.ToI32(b, ids)
		for i, sl := range slots {
			if !sl.done {
				s.advance(sl, toks[i])
			}
		}
	}
}

// advance takes a slot's next token: it ends the slot at a stop token, a
// stop string or its token limit, and otherwise sends the text that is now
// certain.
func (s *Server) advance(sl *slot, tok int32) {
	sl.count++
	sl.lastToken = tok
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
	if out != "" {
		sl.events <- event{text: out}
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
