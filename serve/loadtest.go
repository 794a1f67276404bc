package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"time"
)

// LoadConfig configures LoadTest.
type LoadConfig struct {
	// Model is the model id the requests name.
	Model string
	// Requests is the number of requests sent in all; Concurrency of them
	// are in flight at once.
	Requests, Concurrency int
	// Prompt is the prompt of every request: the user message of a chat
	// request (Chat) or a completion's prompt.
	Prompt string
	Chat   bool
	// Stream asks for streamed replies.
	Stream bool
	// MaxTokens and Temperature are sent with every request; request i
	// has seed i.
	MaxTokens   int
	Temperature float64
	// LongTokens, when positive, adds one long request: a streamed
	// completion of LongTokens tokens (the stop tokens barred by
	// logit_bias) that starts before the others and is cancelled once
	// they are answered, so that they are measured beside it.
	LongTokens int
}

// LoadResult is what LoadTest measured.
type LoadResult struct {
	Requests, Failed int
	FirstError       string
	Elapsed          time.Duration
	// CompletionTokens is the sum of the replies' completion tokens.
	CompletionTokens int
	// P50 and P99 are percentiles of the time from sending a request to
	// reading its whole reply.
	P50, P99 time.Duration
	// Goroutines and heap (bytes allocated and not yet freed, after a
	// garbage collection) with the server listening and idle, before the
	// load and after it.
	GoroutinesBefore, GoroutinesAfter int
	HeapBefore, HeapAfter             uint64
	// LongRan reports (with LoadConfig.LongTokens) that the long request
	// was still running when the last of the others was answered, and
	// LongTokens how many tokens it had streamed by then.
	LongRan    bool
	LongTokens int
}

// RequestsPerSec returns the requests answered per second.
func (r LoadResult) RequestsPerSec() float64 { return float64(r.Requests) / r.Elapsed.Seconds() }

// TokensPerSec returns the completion tokens generated per second.
func (r LoadResult) TokensPerSec() float64 {
	return float64(r.CompletionTokens) / r.Elapsed.Seconds()
}

// Write prints the result in a few lines.
func (r LoadResult) Write(w io.Writer) error {
	_, err := fmt.Fprintf(w, "%d requests (%d failed) in %v: %.1f requests/s, %.0f completion tokens/s\n"+
		"latency p50 %v, p99 %v\n"+
		"goroutines %d before, %d after; heap %.2f MiB before, %.2f MiB after\n",
		r.Requests, r.Failed, r.Elapsed.Round(time.Millisecond), r.RequestsPerSec(), r.TokensPerSec(),
		r.P50.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond),
		r.GoroutinesBefore, r.GoroutinesAfter, float64(r.HeapBefore)/(1<<20), float64(r.HeapAfter)/(1<<20))
	if err == nil && (r.LongRan || r.LongTokens > 0) {
		_, err = fmt.Fprintf(w, "beside one long request, still running at the end: %v (%d tokens streamed by then)\n", r.LongRan, r.LongTokens)
	}
	if err == nil && r.FirstError != "" {
		_, err = fmt.Fprintf(w, "first failure: %s\n", r.FirstError)
	}
	return err
}

// LoadTest serves s on a loopback port and sends it cfg.Requests requests
// from cfg.Concurrency clients, measuring throughput and latency, and the
// goroutines and heap of the process before and after (the server idle,
// its client connections closed). It leaves s running.
func LoadTest(ctx context.Context, s *Server, cfg LoadConfig) (LoadResult, error) {
	if cfg.Requests <= 0 || cfg.Concurrency <= 0 {
		return LoadResult{}, fmt.Errorf("serve: load test of %d requests from %d clients: want positive counts", cfg.Requests, cfg.Concurrency)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return LoadResult{}, fmt.Errorf("serve: load test: %w", err)
	}
	hs := &http.Server{Handler: s.Handler()}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	defer func() {
		hs.Close()
		<-served
	}()
	tr := &http.Transport{MaxIdleConnsPerHost: cfg.Concurrency}
	client := &http.Client{Transport: tr}
	url := "http://" + ln.Addr().String() + "/v1/completions"
	if cfg.Chat {
		url = "http://" + ln.Addr().String() + "/v1/chat/completions"
	}

	var res LoadResult
	res.GoroutinesBefore, res.HeapBefore = idleState(-1)

	var long *longRequest
	if cfg.LongTokens > 0 {
		if long, err = startLong(ctx, client, "http://"+ln.Addr().String()+"/v1/completions", cfg, s.stopIDs); err != nil {
			return res, err
		}
	}

	lat := make([]time.Duration, cfg.Requests)
	var mu sync.Mutex
	next := 0
	start := time.Now()
	var wg sync.WaitGroup
	for range cfg.Concurrency {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= cfg.Requests || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				n, err := loadRequest(ctx, client, url, cfg, i)
				lat[i] = time.Since(t0)
				mu.Lock()
				res.Requests++
				res.CompletionTokens += n
				if err != nil {
					res.Failed++
					if res.FirstError == "" {
						res.FirstError = err.Error()
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	if long != nil {
		res.LongRan, res.LongTokens = long.stop()
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	slices.Sort(lat)
	res.P50 = lat[(len(lat)-1)/2]
	res.P99 = lat[(len(lat)-1)*99/100]
	tr.CloseIdleConnections()
	res.GoroutinesAfter, res.HeapAfter = idleState(res.GoroutinesBefore)
	return res, nil
}

// idleState returns the goroutine count and the live heap after a
// collection, first waiting (up to a second) for the count to come down to
// want when want ≥ 0: connections closing end their goroutines a moment
// later.
func idleState(want int) (int, uint64) {
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(time.Second); want >= 0 && n > want && time.Now().Before(deadline); n = runtime.NumGoroutine() {
		time.Sleep(5 * time.Millisecond)
	}
	runtime.GC()
	runtime.GC() // the second empties sync.Pool caches the first kept
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return n, ms.HeapAlloc
}

// loadRequest sends request i of a load test and returns its completion
// tokens.
func loadRequest(ctx context.Context, c *http.Client, url string, cfg LoadConfig, i int) (int, error) {
	body := map[string]any{"model": cfg.Model, "max_tokens": cfg.MaxTokens, "temperature": cfg.Temperature, "seed": i, "stream": cfg.Stream}
	if cfg.Chat {
		body["messages"] = []map[string]string{{"role": "user", "content": cfg.Prompt}}
	} else {
		body["prompt"] = cfg.Prompt
	}
	if cfg.Stream {
		body["stream_options"] = map[string]bool{"include_usage": true}
	}
	data, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(data))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(out))
	}
	// The usage is in the reply, or in the last chunk before [DONE].
	if cfg.Stream {
		end := bytes.LastIndex(out, []byte("data: [DONE]"))
		if end < 0 {
			return 0, errors.New("stream without [DONE]")
		}
		out = bytes.TrimSpace(out[:end])
		out = out[bytes.LastIndex(out, []byte("data: "))+len("data: "):]
	}
	var r struct {
		Usage *usage `json:"usage"`
	}
	if err := json.Unmarshal(out, &r); err != nil || r.Usage == nil {
		return 0, fmt.Errorf("reply without usage: %.200s", out)
	}
	return r.Usage.CompletionTokens, nil
}

// LoadRounds runs rounds load tests of cfg against s one after the other
// (the first also warms the model's buffer pool), writing each result on w
// after "round N: ".
func LoadRounds(ctx context.Context, s *Server, cfg LoadConfig, rounds int, w io.Writer) error {
	for round := 1; round <= rounds; round++ {
		r, err := LoadTest(ctx, s, cfg)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "round %d: ", round)
		if err := r.Write(w); err != nil {
			return err
		}
	}
	return nil
}

// longRequest is a load test's long request, streaming in the background.
type longRequest struct {
	cancel context.CancelFunc
	mu     sync.Mutex
	tokens int  // chunks of text read so far
	ended  bool // the stream ended
	done   chan struct{}
}

// startLong sends the long request of cfg and returns once its first chunk
// of text has come: the request is then in the running batch.
func startLong(ctx context.Context, c *http.Client, url string, cfg LoadConfig, stopIDs []int32) (*longRequest, error) {
	bias := map[string]int{}
	for _, id := range stopIDs {
		bias[fmt.Sprint(id)] = -100
	}
	body := map[string]any{"model": cfg.Model, "prompt": cfg.Prompt, "max_tokens": cfg.LongTokens, "temperature": cfg.Temperature,
		"seed": -1, "stream": true, "logit_bias": bias}
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(lctx, http.MethodPost, url, bytes.NewReader(data))
	if err != nil {
		cancel()
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("serve: load test: the long request: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("serve: load test: the long request: status %d: %s", resp.StatusCode, bytes.TrimSpace(out))
	}
	l := &longRequest{cancel: cancel, done: make(chan struct{})}
	first := make(chan struct{})
	go func() {
		defer close(l.done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if !bytes.HasPrefix(sc.Bytes(), []byte("data: {")) {
				continue
			}
			l.mu.Lock()
			l.tokens++
			if l.tokens == 1 {
				close(first)
			}
			l.mu.Unlock()
		}
		l.mu.Lock()
		l.ended = true
		if l.tokens == 0 {
			close(first)
		}
		l.mu.Unlock()
	}()
	<-first
	return l, nil
}

// stop cancels the long request and reports whether it was still running,
// and the chunks it had streamed.
func (l *longRequest) stop() (running bool, tokens int) {
	l.mu.Lock()
	running, tokens = !l.ended, l.tokens
	l.mu.Unlock()
	l.cancel()
	<-l.done
	return running, tokens
}
