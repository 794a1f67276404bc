package serve

import (
	"context"
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

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/tokenizer"
)

// Defaults of Config.
const (
	DefaultMaxBatch    = 8
	DefaultBatchWindow = 5 * time.Millisecond
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
	// MaxBatch is the most requests decoded together; 0 means
	// DefaultMaxBatch.
	MaxBatch int
	// BatchWindow is how long the scheduler waits for more requests once
	// one has arrived; 0 means DefaultBatchWindow, negative means none.
	BatchWindow time.Duration
	// DefaultMaxTokens is the max_tokens of a request that gives none;
	// 0 means what the model's context leaves after the prompt. Either
	// way it is capped at that. (The KV cache of a batch holds, per
	// request, its prompt and max_tokens.)
	DefaultMaxTokens int
	// Seed seeds the seeds drawn for requests that give none.
	Seed uint64
	// Log, when set, receives a line per batch decoded.
	Log io.Writer
}

// Server answers the OpenAI-compatible endpoints (see the package
// comment). Create it with New, serve its Handler, and Close it when done.
type Server struct {
	model    *llama.Model
	tok      tokenizer.Tokenizer
	models   []Served
	maxBatch int
	window   time.Duration
	maxNew   int // the default max_tokens (0: the context's)
	stopIDs  []int32
	log      io.Writer
	created  int64

	queue    chan *job
	quit     chan struct{}
	loopDone chan struct{}
	closing  sync.Once

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
		model:    cfg.Model,
		tok:      cfg.Tokenizer,
		models:   slices.Clone(cfg.Models),
		maxBatch: cfg.MaxBatch,
		window:   cfg.BatchWindow,
		maxNew:   cfg.DefaultMaxTokens,
		log:      cfg.Log,
		created:  time.Now().Unix(),
		queue:    make(chan *job),
		quit:     make(chan struct{}),
		loopDone: make(chan struct{}),
		seeds:    rand.New(rand.NewPCG(cfg.Seed, 0x73657276)),
	}
	if s.maxBatch == 0 {
		s.maxBatch = DefaultMaxBatch
	}
	if s.window == 0 {
		s.window = DefaultBatchWindow
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

// Close stops the scheduler once the batch it is decoding ends; requests
// still waiting, and any made later, are answered 503. Close the HTTP
// server first (http.Server.Shutdown) so that requests in flight finish.
func (s *Server) Close() {
	s.closing.Do(func() { close(s.quit) })
	<-s.loopDone
}

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimRight(r.URL.Path, "/")
	var handle func(http.ResponseWriter, *http.Request) *apiError
	method := http.MethodPost
	switch path {
	case "/v1/chat/completions":
		handle = s.chat
	case "/v1/completions":
		handle = s.completion
	case "/v1/models":
		handle, method = s.listModels, http.MethodGet
	default:
		writeError(w, newError(http.StatusNotFound, "invalid_request_error", "", "unknown_url", "unknown path %s %s; this server answers POST /v1/chat/completions, POST /v1/completions and GET /v1/models", r.Method, r.URL.Path))
		return
	}
	if r.Method != method {
		w.Header().Set("Allow", method)
		writeError(w, newError(http.StatusMethodNotAllowed, "invalid_request_error", "", "method_not_allowed", "%s %s: want %s", r.Method, path, method))
		return
	}
	if err := handle(w, r); err != nil {
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

func (s *Server) listModels(w http.ResponseWriter, _ *http.Request) *apiError {
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

// served returns the entry of a request's model id.
func (s *Server) served(id string) (Served, *apiError) {
	if id == "" {
		return Served{}, invalid("model", "", "model: required; GET /v1/models lists the ids served")
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

func (s *Server) chat(w http.ResponseWriter, r *http.Request) *apiError {
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
	opt, aerr := req.check(maxTok, maxParam)
	if aerr != nil {
		return aerr
	}
	msgs, aerr := req.messages()
	if aerr != nil {
		return aerr
	}
	ids, _, err := tokenizer.EncodeChat(s.tok, msgs, tokenizer.ChatOptions{AddGenerationPrompt: true})
	if err != nil {
		return invalid("messages", "", "messages: %v", err)
	}
	j, aerr := s.newJob(r.Context(), m, ids, opt, "messages")
	if aerr != nil {
		return aerr
	}
	id := fmt.Sprintf("chatcmpl-%x-%d", s.created, s.nextID.Add(1))
	u := usage{PromptTokens: len(ids)}
	if !opt.stream {
		text, finish, err := s.collect(j)
		if err != nil {
			return err
		}
		u.CompletionTokens, u.TotalTokens = finish.completion, len(ids)+finish.completion
		writeJSON(w, http.StatusOK, chatReply{ID: id, Object: "chat.completion", Created: time.Now().Unix(), Model: m.ID,
			Choices: []chatChoice{{Message: &textMessage{Role: "assistant", Content: &text}, FinishReason: &finish.finish}}, Usage: &u})
		return nil
	}
	chunk := func(delta textMessage, finish *string) chatReply {
		return chatReply{ID: id, Object: "chat.completion.chunk", Created: time.Now().Unix(), Model: m.ID,
			Choices: []chatChoice{{Delta: &delta, FinishReason: finish}}}
	}
	empty := ""
	return s.stream(w, j, chunk(textMessage{Role: "assistant", Content: &empty}, nil),
		func(text string) any { return chunk(textMessage{Content: &text}, nil) },
		func(f event) any { return chunk(textMessage{}, &f.finish) },
		func(f event) any {
			u.CompletionTokens, u.TotalTokens = f.completion, u.PromptTokens+f.completion
			return chatReply{ID: id, Object: "chat.completion.chunk", Created: time.Now().Unix(), Model: m.ID, Choices: []chatChoice{}, Usage: &u}
		}, opt.usage)
}

func (s *Server) completion(w http.ResponseWriter, r *http.Request) *apiError {
	var req completionRequest
	if err := readBody(w, r, &req); err != nil {
		return err
	}
	m, aerr := s.served(req.Model)
	if aerr != nil {
		return aerr
	}
	opt, aerr := req.check(req.MaxTokens, "max_tokens")
	if aerr != nil {
		return aerr
	}
	ids, aerr := req.promptIDs(s.tok, s.model.Config.BOS, s.model.Config.Vocab)
	if aerr != nil {
		return aerr
	}
	j, aerr := s.newJob(r.Context(), m, ids, opt, "prompt")
	if aerr != nil {
		return aerr
	}
	id := fmt.Sprintf("cmpl-%x-%d", s.created, s.nextID.Add(1))
	u := usage{PromptTokens: len(ids)}
	chunk := func(text string, finish *string) completionReply {
		return completionReply{ID: id, Object: "text_completion", Created: time.Now().Unix(), Model: m.ID,
			Choices: []completionChoice{{Text: text, FinishReason: finish}}}
	}
	if !opt.stream {
		text, finish, err := s.collect(j)
		if err != nil {
			return err
		}
		u.CompletionTokens, u.TotalTokens = finish.completion, len(ids)+finish.completion
		reply := chunk(text, &finish.finish)
		reply.Usage = &u
		writeJSON(w, http.StatusOK, reply)
		return nil
	}
	return s.stream(w, j, nil,
		func(text string) any { return chunk(text, nil) },
		func(f event) any { return chunk("", &f.finish) },
		func(f event) any {
			u.CompletionTokens, u.TotalTokens = f.completion, u.PromptTokens+f.completion
			return completionReply{ID: id, Object: "text_completion", Created: time.Now().Unix(), Model: m.ID, Choices: []completionChoice{}, Usage: &u}
		}, opt.usage)
}

// newJob checks a prompt against the context, fits max_tokens into what
// it leaves, and queues the job.
func (s *Server) newJob(ctx context.Context, m Served, ids []int32, opt options, promptParam string) (*job, *apiError) {
	c := s.model.Config
	want := opt.maxTokens
	if want == 0 {
		want = s.maxNew
	}
	if want == 0 {
		want = c.MaxSeqLen
	}
	n, _ := c.FitNew(len(ids), want)
	if n <= 0 {
		return nil, invalid(promptParam, "context_length_exceeded", "the prompt's %d tokens fill the model's context of %d tokens: nothing can be generated", len(ids), c.MaxSeqLen)
	}
	j := &job{ctx: ctx, adapter: m.Adapter, prompt: ids, maxNew: n, stops: opt.stops,
		sample: engine.SampleParams{Temperature: opt.temperature, TopP: opt.topP}}
	if opt.seed != nil {
		j.seed = *opt.seed
	} else {
		s.seedMu.Lock()
		j.seed = s.seeds.Uint64()
		s.seedMu.Unlock()
	}
	j.events = make(chan event, n+2)
	select {
	case s.queue <- j:
		return j, nil
	case <-s.quit:
		return nil, newError(http.StatusServiceUnavailable, "server_error", "", "", "%v", errShuttingDown)
	case <-ctx.Done():
		return nil, newError(http.StatusServiceUnavailable, "server_error", "", "", "the request ended before it was queued: %v", ctx.Err())
	}
}

// jobError turns a job's failure into the API's error.
func jobError(err error) *apiError {
	if errors.Is(err, errShuttingDown) {
		return newError(http.StatusServiceUnavailable, "server_error", "", "", "%v", err)
	}
	return newError(http.StatusInternalServerError, "server_error", "", "", "%v", err)
}

// collect waits for a job's whole output.
func (s *Server) collect(j *job) (string, event, *apiError) {
	var b strings.Builder
	for {
		select {
		case e, ok := <-j.events:
			switch {
			case !ok:
				return "", event{}, jobError(errors.New("generation ended without a result"))
			case e.final && e.err != nil:
				return "", e, jobError(e.err)
			case e.final:
				return b.String(), e, nil
			}
			b.WriteString(e.text)
		case <-j.ctx.Done():
			return "", event{}, newError(http.StatusServiceUnavailable, "server_error", "", "", "%v", j.ctx.Err())
		}
	}
}

// stream sends a job's output as server-sent events: first (if not nil),
// a chunk per piece of text, the final chunk, the usage chunk when asked,
// and "[DONE]". An error after the stream started is sent as an error
// event.
func (s *Server) stream(w http.ResponseWriter, j *job, first any, text func(string) any, final, usageChunk func(event) any, withUsage bool) *apiError {
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
	if first != nil {
		if err := send(first); err != nil {
			return nil // the client went away; the job leaves its batch
		}
	}
	for {
		var e event
		var ok bool
		select {
		case e, ok = <-j.events:
		case <-j.ctx.Done():
			return nil
		}
		switch {
		case !ok:
			e = event{final: true, err: errors.New("generation ended without a result")}
			fallthrough
		case e.final && e.err != nil:
			ae := jobError(e.err)
			if !started {
				return ae
			}
			send(errorBody{ae})
			send(nil)
			return nil
		case e.final:
			if send(final(e)) != nil {
				return nil
			}
			if withUsage && send(usageChunk(e)) != nil {
				return nil
			}
			send(nil)
			return nil
		}
		if send(text(e.text)) != nil {
			return nil
		}
	}
}

// ListenAndServe serves s on addr until ctx is done, then shuts down
// gracefully: it stops accepting connections, waits up to grace for the
// requests in flight (streams included) to finish, and closes s. ready,
// when not nil, receives the address listened on once it is.
func ListenAndServe(ctx context.Context, s *Server, addr string, grace time.Duration, ready func(net.Addr)) error {
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
	err = hs.Shutdown(sctx)
	if err != nil {
		hs.Close() // ends the requests still running; their jobs leave their batches
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
