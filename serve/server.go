package serve

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/tokenizer"
)

// Defaults of Config.
const (
	DefaultMaxBatch     = 8
	DefaultBatchWindow  = 0
	DefaultPrefillChunk = 512
)

// errShuttingDown ends the jobs the server will not decode.
var errShuttingDown = errors.New("the server is shutting down")

// Served is one model id the server answers to.
type Served struct {
	// ID is the name requests give as "model".
	ID string
	// Adapter is the LoRA adapter generation uses under this id (nil:
	// the base model).
	Adapter *llama.Adapter
}

// Config configures a Server.
type Config struct {
	// Model generates; only the server's scheduler uses it while the
	// server runs.
	Model *llama.Model
	// Tokenizer encodes prompts and decodes the output.
	Tokenizer tokenizer.Tokenizer
	// Models are the ids served, each with its adapter; at least one.
	Models []Served
	// MaxBatch is the most sequences decoded together (the slots of the
	// running batch); 0 means DefaultMaxBatch.
	MaxBatch int
	// PrefillChunk is the most prompt tokens one step prefills, beside a
	// token for each sequence that decodes; 0 means DefaultPrefillChunk.
	PrefillChunk int
	// BatchWindow is how long an idle scheduler waits for more requests
	// once one has arrived, so that a burst starts together; ≤ 0: none.
	BatchWindow time.Duration
	// DefaultMaxTokens is the max_tokens of a request that gives none;
	// 0 means what the model's context leaves after the prompt. Either
	// way it is capped at that. (The KV cache of a batch holds, per
	// request, its prompt and max_tokens.)
	DefaultMaxTokens int
	// Seed seeds the seeds drawn for requests that give none.
	Seed uint64
	// Log, when set, receives a line per request: method, path, status,
	// prompt and completion tokens, latency.
	Log io.Writer
	// APIKey, when set, is the bearer token every /v1 request must carry
	// (Authorization: Bearer KEY); /health and /metrics are open.
	APIKey string
	// ChatTemplate is the model's own chat template (tokenizer_config.json's
	// chat_template; "" for none). Chat requests are rendered with the
	// Llama 3.1 template; a template that is not one is refused (see
	// CheckChatTemplate) and chat requests are then answered 400.
	ChatTemplate string
}

// Server answers the OpenAI-compatible endpoints (see the package
// comment). Create it with New, serve its Handler, and Close it when done.
type Server struct {
	model        *llama.Model
	tok          tokenizer.Tokenizer
	models       []Served
	maxBatch     int
	window       time.Duration
	prefillChunk int
	apiKey       string
	chatErr      error // why chat requests are refused; nil: they are served
	maxNew       int   // the default max_tokens (0: the context's)
	stopIDs      []int32
	log          io.Writer
	created      int64

	queue    chan *job
	quit     chan struct{}
	loopDone chan struct{}
	closing  sync.Once
	cut      chan struct{} // closed when streams still running must end
	cutOnce  sync.Once
	metrics  metrics

	seedMu sync.Mutex
	seeds  *rand.Rand
	nextID atomic.Uint64
}

// New checks cfg and starts the server's scheduler.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Model == nil:
		return nil, errors.New("serve: no model")
	case cfg.Tokenizer == nil:
		return nil, errors.New("serve: no tokenizer")
	case len(cfg.Models) == 0:
		return nil, errors.New("serve: no model ids to serve")
	case cfg.DefaultMaxTokens < 0:
		return nil, fmt.Errorf("serve: default max tokens %d: want a count ≥ 0", cfg.DefaultMaxTokens)
	case cfg.MaxBatch < 0:
		return nil, fmt.Errorf("serve: maximum batch %d: want a positive count", cfg.MaxBatch)
	case cfg.PrefillChunk < 0:
		return nil, fmt.Errorf("serve: prefill chunk %d: want a positive count", cfg.PrefillChunk)
	case cfg.Tokenizer.VocabSize() > cfg.Model.Config.Vocab:
		return nil, fmt.Errorf("serve: the tokenizer has %d tokens, the model's vocabulary %d", cfg.Tokenizer.VocabSize(), cfg.Model.Config.Vocab)
	}
	seen := map[string]bool{}
	for _, m := range cfg.Models {
		if strings.TrimSpace(m.ID) == "" || seen[m.ID] {
			return nil, fmt.Errorf("serve: model id %q is empty or repeated", m.ID)
		}
		seen[m.ID] = true
	}
	s := &Server{
		model:        cfg.Model,
		tok:          cfg.Tokenizer,
		models:       slices.Clone(cfg.Models),
		maxBatch:     cfg.MaxBatch,
		window:       cfg.BatchWindow,
		prefillChunk: cfg.PrefillChunk,
		apiKey:       cfg.APIKey,
		chatErr:      CheckChatTemplate(cfg.ChatTemplate),
		cut:          make(chan struct{}),
		maxNew:       cfg.DefaultMaxTokens,
		log:          cfg.Log,
		created:      time.Now().Unix(),
		queue:        make(chan *job),
		quit:         make(chan struct{}),
		loopDone:     make(chan struct{}),
		seeds:        rand.New(rand.NewPCG(cfg.Seed, 0x73657276)),
	}
	if s.maxBatch == 0 {
		s.maxBatch = DefaultMaxBatch
	}
	if s.prefillChunk == 0 {
		s.prefillChunk = DefaultPrefillChunk
	}
	// Stop at the tokenizer's end-of-sequence and end-of-turn tokens and
	// at the model's.
	s.stopIDs = cfg.Tokenizer.EOS()
	for _, id := range append([]int32{cfg.Tokenizer.EOT()}, cfg.Model.Config.EOS...) {
		if !slices.Contains(s.stopIDs, id) {
			s.stopIDs = append(s.stopIDs, id)
		}
	}
	go s.loop()
	return s, nil
}

// Close stops the scheduler at the end of its step; the sequences running
// or waiting then end with a 503 (or an error event), and so do requests
// made later. Close the HTTP server first (http.Server.Shutdown) so that
// requests in flight finish.
func (s *Server) Close() {
	s.closing.Do(func() { close(s.quit) })
	<-s.loopDone
}

// CutStreams ends the streams still running, each with an error event and
// "data: [DONE]", and makes the requests still waiting for a whole reply
// answer 503: what a shutdown does when its grace period ends.
func (s *Server) CutStreams() { s.cutOnce.Do(func() { close(s.cut) }) }

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

// reqStats is what a handler reports of its request for the log and the
// metrics.
type reqStats struct {
	prompt, completion int
}

// statusWriter remembers the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *Server) serveHTTP(rw http.ResponseWriter, r *http.Request) {
	start := time.Now()
	w := &statusWriter{ResponseWriter: rw}
	var st reqStats
	s.route(w, r, &st)
	if w.status == 0 {
		w.status = http.StatusOK
	}
	lat := time.Since(start)
	s.metrics.request(w.status, st.prompt, st.completion, lat)
	if s.log != nil {
		fmt.Fprintf(s.log, "%s %s %d prompt_tokens=%d completion_tokens=%d latency=%v\n",
			r.Method, r.URL.Path, w.status, st.prompt, st.completion, lat.Round(100*time.Microsecond))
	}
}

func (s *Server) route(w http.ResponseWriter, r *http.Request, st *reqStats) {
	path := strings.TrimRight(r.URL.Path, "/")
	var handle func(http.ResponseWriter, *http.Request, *reqStats) *apiError
	method := http.MethodPost
	switch path {
	case "/v1/chat/completions":
		handle = s.chat
	case "/v1/completions":
		handle = s.completion
	case "/v1/models":
		handle, method = s.listModels, http.MethodGet
	case "/health":
		handle, method = s.health, http.MethodGet
	case "/metrics":
		handle, method = s.serveMetrics, http.MethodGet
	default:
		writeError(w, newError(http.StatusNotFound, "invalid_request_error", "", "unknown_url", "unknown path %s %s; this server answers POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /health and GET /metrics", r.Method, r.URL.Path))
		return
	}
	if s.apiKey != "" && strings.HasPrefix(path, "/v1/") {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(s.apiKey)) != 1 {
			w.Header().Set("WWW-Authenticate", "Bearer")
			writeError(w, newError(http.StatusUnauthorized, "invalid_request_error", "", "invalid_api_key", "missing or wrong API key: send the header Authorization: Bearer KEY"))
			return
		}
	}
	if r.Method != method {
		w.Header().Set("Allow", method)
		writeError(w, newError(http.StatusMethodNotAllowed, "invalid_request_error", "", "method_not_allowed", "%s %s: want %s", r.Method, path, method))
		return
	}
	if err := handle(w, r, st); err != nil {
		writeError(w, err)
	}
}

func writeError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.Status, errorBody{e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) // a failed write is the client's going away
}

// health answers 200 while the scheduler runs, 503 once it has stopped.
func (s *Server) health(w http.ResponseWriter, _ *http.Request, _ *reqStats) *apiError {
	select {
	case <-s.quit:
		return newError(http.StatusServiceUnavailable, "server_error", "", "", "%v", errShuttingDown)
	default:
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

func (s *Server) serveMetrics(w http.ResponseWriter, _ *http.Request, _ *reqStats) *apiError {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	s.metrics.write(w, time.Now()) // a failed write is the client's going away
	return nil
}

func (s *Server) listModels(w http.ResponseWriter, _ *http.Request, _ *reqStats) *apiError {
	l := modelList{Object: "list"}
	for _, m := range s.models {
		l.Data = append(l.Data, modelEntry{ID: m.ID, Object: "model", Created: s.created, OwnedBy: "turnwise"})
	}
	writeJSON(w, http.StatusOK, l)
	return nil
}

// readBody reads a request body, at most maxBodyBytes, into v.
func readBody(w http.ResponseWriter, r *http.Request, v any) *apiError {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return newError(http.StatusRequestEntityTooLarge, "invalid_request_error", "", "", "the request body is larger than %d bytes", maxBodyBytes)
		}
		return invalid("", "", "reading the request body: %v", err)
	}
	return decodeBody(body, v)
}

// served returns the entry of a request's model id; a request without one
// gets the only model of a server that serves one.
func (s *Server) served(id string) (Served, *apiError) {
	if id == "" {
		if len(s.models) == 1 {
			return s.models[0], nil
		}
		return Served{}, invalid("model", "", "model: required, as this server serves several; GET /v1/models lists them")
	}
	for _, m := range s.models {
		if m.ID == id {
			return m, nil
		}
	}
	ids := make([]string, len(s.models))
	for i, m := range s.models {
		ids[i] = m.ID
	}
	return Served{}, newError(http.StatusNotFound, "invalid_request_error", "model", "model_not_found", "the model %q does not exist; this server serves %s", id, strings.Join(ids, ", "))
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request, st *reqStats) *apiError {
	var req chatRequest
	if err := readBody(w, r, &req); err != nil {
		return err
	}
	m, aerr := s.served(req.Model)
	if aerr != nil {
		return aerr
	}
	maxTok, maxParam := req.MaxTokens, "max_tokens"
	if req.MaxCompletionTokens != nil {
		maxTok, maxParam = req.MaxCompletionTokens, "max_completion_tokens"
	}
	opt, aerr := req.sampling.check(maxTok, maxParam, s.model.Config.Vocab)
	if aerr != nil {
		return aerr
	}
	if aerr := req.check(&opt); aerr != nil {
		return aerr
	}
	if s.chatErr != nil {
		return invalid("messages", "unsupported_chat_template", "chat completions are not served: %v", s.chatErr)
	}
	msgs, aerr := req.messages()
	if aerr != nil {
		return aerr
	}
	ids, _, err := tokenizer.EncodeChat(s.tok, msgs, tokenizer.ChatOptions{AddGenerationPrompt: true})
	if err != nil {
		return invalid("messages", "", "messages: %v", err)
	}
	jobs, aerr := s.newJobs(r.Context(), m, [][]int32{ids}, opt, "messages")
	if aerr != nil {
		return aerr
	}
	st.prompt = len(ids)
	id := fmt.Sprintf("chatcmpl-%x-%d", s.created, s.nextID.Add(1))
	reply := func(choices []chatChoice, u *usage) chatReply {
		return chatReply{ID: id, Object: "chat.completion.chunk", Created: time.Now().Unix(), Model: m.ID, Choices: choices, Usage: u}
	}
	logprobs := func(lps []tokenLogprob) any {
		if opt.sample.logprobs < 0 {
			return nil
		}
		return s.chatLogprobs(lps)
	}
	if !opt.stream {
		res, aerr := s.collectAll(jobs)
		if aerr != nil {
			return aerr
		}
		out := reply(nil, &usage{PromptTokens: len(ids)})
		out.Object = "chat.completion"
		for i, c := range res {
			out.Choices = append(out.Choices, chatChoice{Index: i, Message: &textMessage{Role: "assistant", Content: &c.text}, Logprobs: logprobs(c.logprobs), FinishReason: &c.final.finish})
			out.Usage.CompletionTokens += c.final.completion
			st.completion += c.final.completion
		}
		out.Usage.TotalTokens = out.Usage.PromptTokens + out.Usage.CompletionTokens
		writeJSON(w, http.StatusOK, out)
		return nil
	}
	empty := ""
	return s.streamAll(w, jobs, st, streamer{
		start: func(i int) any {
			return reply([]chatChoice{{Index: i, Delta: &textMessage{Role: "assistant", Content: &empty}}}, nil)
		},
		piece: func(i int, e event) any {
			return reply([]chatChoice{{Index: i, Delta: &textMessage{Content: &e.text}, Logprobs: logprobs(e.logprobs)}}, nil)
		},
		final: func(i int, e event) any {
			return reply([]chatChoice{{Index: i, Delta: &textMessage{}, FinishReason: &e.finish}}, nil)
		},
		usage: func(completion int) any {
			return reply([]chatChoice{}, &usage{PromptTokens: len(ids), CompletionTokens: completion, TotalTokens: len(ids) + completion})
		},
	}, opt.usage)
}

func (s *Server) completion(w http.ResponseWriter, r *http.Request, st *reqStats) *apiError {
	var req completionRequest
	if err := readBody(w, r, &req); err != nil {
		return err
	}
	m, aerr := s.served(req.Model)
	if aerr != nil {
		return aerr
	}
	opt, aerr := req.sampling.check(req.MaxTokens, "max_tokens", s.model.Config.Vocab)
	if aerr != nil {
		return aerr
	}
	if aerr := req.check(&opt); aerr != nil {
		return aerr
	}
	prompts, aerr := req.promptIDs(s.tok, s.model.Config.BOS, s.model.Config.Vocab)
	if aerr != nil {
		return aerr
	}
	// With echo and logprobs, the scheduler scores each prompt first.
	jobs, aerr := s.newJobs(r.Context(), m, prompts, opt, "prompt", req.Echo && opt.sample.logprobs >= 0)
	if aerr != nil {
		return aerr
	}
	for _, p := range prompts {
		st.prompt += len(p)
	}
	// Choice i continues prompt i/n.
	echo := make([]string, len(jobs))
	if req.Echo {
		for i := range jobs {
			echo[i] = s.promptText(prompts[i/opt.n])
		}
	}
	id := fmt.Sprintf("cmpl-%x-%d", s.created, s.nextID.Add(1))
	reply := func(choices []completionChoice, u *usage) completionReply {
		return completionReply{ID: id, Object: "text_completion", Created: time.Now().Unix(), Model: m.ID, Choices: choices, Usage: u}
	}
	prompted := st.prompt
	if !opt.stream {
		res, aerr := s.collectAll(jobs)
		if aerr != nil {
			return aerr
		}
		out := reply(nil, &usage{PromptTokens: prompted})
		for i, c := range res {
			ch := completionChoice{Index: i, Text: echo[i] + c.text, FinishReason: &c.final.finish}
			if opt.sample.logprobs >= 0 {
				lp := &completionLogprobs{}
				if req.Echo {
					s.addPromptLogprobs(lp, prompts[i/opt.n], c.prompt)
				}
				s.addCompletionLogprobs(lp, c.logprobs)
				ch.Logprobs = lp
			}
			out.Choices = append(out.Choices, ch)
			out.Usage.CompletionTokens += c.final.completion
			st.completion += c.final.completion
		}
		out.Usage.TotalTokens = out.Usage.PromptTokens + out.Usage.CompletionTokens
		writeJSON(w, http.StatusOK, out)
		return nil
	}
	offsets := make([]int, len(jobs)) // each choice's text so far, for text_offset
	return s.streamAll(w, jobs, st, streamer{
		start: func(i int) any {
			if !req.Echo {
				return nil
			}
			ch := completionChoice{Index: i, Text: echo[i]}
			offsets[i] = len(echo[i])
			if opt.sample.logprobs >= 0 {
				lp := &completionLogprobs{}
				s.addPromptLogprobs(lp, prompts[i/opt.n], nil)
				ch.Logprobs = lp
			}
			return reply([]completionChoice{ch}, nil)
		},
		piece: func(i int, e event) any {
			if e.prompt != nil {
				return nil // streamed echo reports the prompt's tokens without their log-probabilities
			}
			ch := completionChoice{Index: i, Text: e.text}
			if opt.sample.logprobs >= 0 {
				lp := &completionLogprobs{}
				lp.offset = offsets[i]
				s.addCompletionLogprobs(lp, e.logprobs)
				ch.Logprobs = lp
			}
			offsets[i] += len(e.text)
			return reply([]completionChoice{ch}, nil)
		},
		final: func(i int, e event) any {
			return reply([]completionChoice{{Index: i, FinishReason: &e.finish}}, nil)
		},
		usage: func(completion int) any {
			return reply([]completionChoice{}, &usage{PromptTokens: prompted, CompletionTokens: completion, TotalTokens: prompted + completion})
		},
	}, opt.usage)
}

// promptText returns the text of a prompt's tokens, special tokens left
// out.
func (s *Server) promptText(ids []int32) string {
	dec := tokenizer.NewStreamDecoder(s.tok)
	dec.SkipSpecial = true
	var b strings.Builder
	for _, id := range ids {
		t, _ := dec.Next(id)
		b.WriteString(t)
	}
	b.WriteString(dec.Flush())
	return b.String()
}

// newJobs checks each prompt against the context, fits max_tokens into
// what it leaves, and queues opt.n jobs per prompt (choice k of a prompt
// seeded with the request's seed + k). scorePrompt asks the scheduler for
// each prompt's log-probabilities first.
func (s *Server) newJobs(ctx context.Context, m Served, prompts [][]int32, opt options, promptParam string, scorePrompt ...bool) ([]*job, *apiError) {
	c := s.model.Config
	want := opt.maxTokens
	if want == 0 {
		want = s.maxNew
	}
	if want == 0 {
		want = c.MaxSeqLen
	}
	var jobs []*job
	for _, ids := range prompts {
		n, _ := c.FitNew(len(ids), want)
		if n <= 0 {
			return nil, invalid(promptParam, "context_length_exceeded", "the prompt's %d tokens fill the model's context of %d tokens: nothing can be generated", len(ids), c.MaxSeqLen)
		}
		for k := range opt.n {
			j := &job{ctx: ctx, adapter: m.Adapter, prompt: ids, maxNew: n, stops: opt.stops, sample: opt.sample, queued: time.Now(),
				scorePrompt: len(scorePrompt) > 0 && scorePrompt[0]}
			if opt.seed != nil {
				j.seed = *opt.seed + uint64(k)
			} else {
				s.seedMu.Lock()
				j.seed = s.seeds.Uint64()
				s.seedMu.Unlock()
			}
			j.events = make(chan event, n+3)
			jobs = append(jobs, j)
		}
	}
	for _, j := range jobs {
		select {
		case s.queue <- j:
			continue
		case <-s.quit:
		case <-ctx.Done():
		}
		// The jobs already queued end with the request's context, when
		// the handler returns.
		if ctx.Err() != nil {
			return nil, newError(http.StatusServiceUnavailable, "server_error", "", "", "the request ended before it was queued: %v", ctx.Err())
		}
		return nil, newError(http.StatusServiceUnavailable, "server_error", "", "", "%v", errShuttingDown)
	}
	return jobs, nil
}

// jobError turns a job's failure into the API's error.
func jobError(err error) *apiError {
	if errors.Is(err, errShuttingDown) {
		return newError(http.StatusServiceUnavailable, "server_error", "", "", "%v", err)
	}
	return newError(http.StatusInternalServerError, "server_error", "", "", "%v", err)
}

// result is a job's whole output.
type result struct {
	text     string
	logprobs []tokenLogprob
	prompt   []float32 // the prompt's log-probabilities, when scored
	final    event
}

// collectAll waits for every job's whole output.
func (s *Server) collectAll(jobs []*job) ([]result, *apiError) {
	out := make([]result, len(jobs))
	for i, j := range jobs {
		var b strings.Builder
	wait:
		for {
			select {
			case e, ok := <-j.events:
				switch {
				case !ok:
					return nil, jobError(errors.New("generation ended without a result"))
				case e.final && e.err != nil:
					return nil, jobError(e.err)
				case e.final:
					out[i].final = e
					break wait
				}
				b.WriteString(e.text)
				out[i].logprobs = append(out[i].logprobs, e.logprobs...)
				if e.prompt != nil {
					out[i].prompt = e.prompt
				}
			case <-j.ctx.Done():
				return nil, newError(http.StatusServiceUnavailable, "server_error", "", "", "%v", j.ctx.Err())
			case <-s.cut:
				return nil, newError(http.StatusServiceUnavailable, "server_error", "", "", "%v: the grace period ended", errShuttingDown)
			}
		}
		out[i].text = b.String()
	}
	return out, nil
}

// streamer makes the chunks of a stream: start (nil: none) before choice
// i's output, piece for an event of text (nil: skip it), final for its
// end, usage for the usage chunk.
type streamer struct {
	start        func(i int) any
	piece, final func(i int, e event) any
	usage        func(completion int) any
}

// indexed is an event of choice i.
type indexed struct {
	i  int
	e  event
	ok bool
}

// streamAll sends the jobs' output as server-sent events: each choice's
// start chunk, a chunk per piece of text as it comes, each choice's final
// chunk, the usage chunk when asked, and "[DONE]". An error after the
// stream started — a job's failure, or the end of the shutdown's grace
// period — is sent as an error event, then "[DONE]".
func (s *Server) streamAll(w http.ResponseWriter, jobs []*job, st *reqStats, sm streamer, withUsage bool) *apiError {
	rc := http.NewResponseController(w)
	started := false
	send := func(v any) error {
		if !started {
			h := w.Header()
			h.Set("Content-Type", "text/event-stream")
			h.Set("Cache-Control", "no-cache")
			h.Set("Connection", "keep-alive")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		data := "[DONE]"
		if v != nil {
			b, err := json.Marshal(v)
			if err != nil {
				return err
			}
			data = string(b)
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", data); err != nil {
			return err
		}
		return rc.Flush()
	}
	fail := func(ae *apiError) *apiError {
		if !started {
			return ae
		}
		send(errorBody{ae})
		send(nil)
		return nil
	}
	for i := range jobs {
		if c := sm.start(i); c != nil {
			if err := send(c); err != nil {
				return nil // the client went away; its jobs leave the batch
			}
		}
	}
	// One channel for every choice's events, with room for all of them so
	// that no forwarder waits once the handler has returned.
	room := 0
	for _, j := range jobs {
		room += cap(j.events) + 1
	}
	merged := make(chan indexed, room)
	for i, j := range jobs {
		go func() {
			for e := range j.events {
				merged <- indexed{i, e, true}
			}
			merged <- indexed{i: i}
		}()
	}
	ctx := jobs[0].ctx
	left, completion := len(jobs), 0
	ended := make([]bool, len(jobs))
	for left > 0 {
		var m indexed
		select {
		case m = <-merged:
		case <-ctx.Done():
			return nil
		case <-s.cut:
			return fail(newError(http.StatusServiceUnavailable, "server_error", "", "", "%v: the grace period ended", errShuttingDown))
		}
		e := m.e
		switch {
		case !m.ok && ended[m.i]:
			continue
		case !m.ok:
			return fail(jobError(errors.New("generation ended without a result")))
		case e.final && e.err != nil:
			return fail(jobError(e.err))
		case e.final:
			ended[m.i] = true
			left--
			completion += e.completion
			st.completion += e.completion
			if send(sm.final(m.i, e)) != nil {
				return nil
			}
			continue
		}
		if c := sm.piece(m.i, e); c != nil {
			if send(c) != nil {
				return nil
			}
		}
	}
	if withUsage && send(sm.usage(completion)) != nil {
		return nil
	}
	send(nil)
	return nil
}

// ListenAndServe serves s on addr until ctx is done, then shuts down
// gracefully: it stops accepting connections and waits up to grace for
// the requests in flight (streams included) to finish; when grace ends, or
// earlier when force is closed (a second signal), the streams still
// running end with an error event and "data: [DONE]" (Server.CutStreams),
// the connections close, and s closes. ready, when not nil, receives the
// address listened on once it is.
func ListenAndServe(ctx context.Context, s *Server, addr string, grace time.Duration, ready func(net.Addr), force <-chan struct{}) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("serve: listening on %s: %w", addr, err)
	}
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	if ready != nil {
		ready(ln.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		s.Close()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	go func() {
		select {
		case <-force:
			cancel()
		case <-sctx.Done():
		}
	}()
	err = hs.Shutdown(sctx)
	if err != nil {
		// Let the streams still running say why they end, then close
		// what is left.
		s.CutStreams()
		cctx, ccancel := context.WithTimeout(context.Background(), time.Second)
		hs.Shutdown(cctx)
		ccancel()
		hs.Close()
	}
	<-errc
	s.Close()
	if err != nil {
		return fmt.Errorf("serve: shutting down: %w", err)
	}
	return nil
}

// ServedModels names what a server of one model serves: the base model as
// base and, with an adapter ad, the adapter first as name (default: the
// base name of its directory adapterDir); without one, the base model as
// name when it is given.
func ServedModels(base, name string, ad *llama.Adapter, adapterDir string) []Served {
	if ad == nil {
		if name != "" {
			base = name
		}
		return []Served{{ID: base}}
	}
	if name == "" {
		name = filepath.Base(filepath.Clean(adapterDir))
	}
	return []Served{{ID: name, Adapter: ad}, {ID: base}}
}
