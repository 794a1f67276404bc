package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/turnwise/turnwise/serve"
)

// runServe implements "train serve".
func runServe(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("serve", stderr)
	var p policyFlags
	p.register(fs)
	addr := fs.String("addr", "127.0.0.1:8000", "address to listen on")
	name := fs.String("name", "", "model id clients request (default: the adapter's, else the model's directory or file name)")
	baseName := fs.String("base-name", "", "with --adapter, the id under which the base model is served too (default: the model's name)")
	maxBatch := fs.Int("max-batch", serve.DefaultMaxBatch, "sequences decoded together at most (the running batch's slots)")
	prefill := fs.Int("prefill-chunk", serve.DefaultPrefillChunk, "prompt tokens prefilled per step at most, beside the decoding sequences")
	window := fs.Duration("batch-window", serve.DefaultBatchWindow, "how long an idle server waits for more requests once one arrives (0: none)")
	apiKey := fs.String("api-key", "", "require Authorization: Bearer KEY on /v1 requests (default: $TURNWISE_API_KEY; none if unset)")
	maxTokens := fs.Int("max-tokens", 1024, "max_tokens of a request that gives none (0: what the context leaves); capped at the context")
	grace := fs.Duration("grace", time.Minute, "on SIGINT or SIGTERM, how long requests in flight may take to finish")
	quiet := fs.Bool("quiet", false, "log no line per request")
	loadN := fs.Int("load-test", 0, "run a load test of this many requests on loopback instead of serving")
	loadC := fs.Int("load-concurrency", 8, "load test: clients sending at once")
	loadTokens := fs.Int("load-max-tokens", 32, "load test: max_tokens of each request")
	loadPrompt := fs.String("load-prompt", "Once upon a time", "load test: the prompt of each request")
	loadChat := fs.Bool("load-chat", false, "load test: send chat requests instead of completions")
	loadStream := fs.Bool("load-stream", false, "load test: ask for streamed replies")
	loadLong := fs.Int("load-long", 0, "load test: run the requests beside one long streamed request of this many tokens (0: none)")
	loadRounds := fs.Int("load-rounds", 3, "load test: rounds of --load-test requests, each reported (the first also warms the model's buffer pool)")
	if err := parse(fs, args); err != nil {
		return err
	}
	switch {
	case *maxBatch < 1:
		return fmt.Errorf("--max-batch %d: want a positive count", *maxBatch)
	case *prefill < 1:
		return fmt.Errorf("--prefill-chunk %d: want a positive count", *prefill)
	case *maxTokens < 0:
		return fmt.Errorf("--max-tokens %d: want a count ≥ 0", *maxTokens)
	case *window < 0:
		return fmt.Errorf("--batch-window %v: want a duration ≥ 0", *window)
	case *loadLong < 0:
		return fmt.Errorf("--load-long %d: want a count ≥ 0", *loadLong)
	case *loadN < 0 || *loadC < 1 || *loadTokens < 1 || *loadRounds < 1:
		return fmt.Errorf("--load-test %d, --load-concurrency %d, --load-max-tokens %d, --load-rounds %d: want counts ≥ 0, ≥ 1, ≥ 1, ≥ 1", *loadN, *loadC, *loadTokens, *loadRounds)
	}
	m, ad, tok, err := p.load()
	if err != nil {
		return err
	}
	base := *baseName
	if base == "" {
		base = p.Name()
	}
	models := serve.ServedModels(base, *name, ad, p.adapter)
	bw := *window
	if bw == 0 {
		bw = -1 // serve.Config's "none"
	}
	key := *apiKey
	if key == "" {
		key = os.Getenv("TURNWISE_API_KEY")
	}
	cfg := serve.Config{Model: m, Tokenizer: tok, Models: models, MaxBatch: *maxBatch, PrefillChunk: *prefill, BatchWindow: bw,
		DefaultMaxTokens: *maxTokens, Seed: p.seed, APIKey: key}
	if p.HF != "" {
		if cfg.ChatTemplate, err = serve.ReadChatTemplate(p.HF); err != nil {
			return err
		}
		if err := serve.CheckChatTemplate(cfg.ChatTemplate); err != nil {
			fmt.Fprintf(stderr, "warning: chat completions will be refused: %v\n", err)
		}
	}
	if !*quiet && *loadN == 0 {
		cfg.Log = stderr
	}
	s, err := serve.New(cfg)
	if err != nil {
		return err
	}
	// The first SIGINT or SIGTERM starts the shutdown, a second forces it.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	force := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for n := 0; ; n++ {
			select {
			case <-sigs:
			case <-done:
				return
			}
			if n == 0 {
				fmt.Fprintln(stderr, "shutting down: the requests in flight may finish; a second signal ends them now")
				stop()
			} else {
				close(force)
				return
			}
		}
	}()
	if *loadN > 0 {
		defer s.Close()
		fmt.Fprintf(stdout, "load test: %d requests from %d clients, max_tokens %d, temperature 1, max batch %d, window %v\n", *loadN, *loadC, *loadTokens, *maxBatch, *window)
		return serve.LoadRounds(ctx, s, serve.LoadConfig{Model: models[0].ID, Requests: *loadN, Concurrency: *loadC, Prompt: *loadPrompt,
			Chat: *loadChat, Stream: *loadStream, MaxTokens: *loadTokens, Temperature: 1, LongTokens: *loadLong}, *loadRounds, stdout)
	}
	ids := make([]string, len(models))
	for i, sm := range models {
		ids[i] = sm.ID
	}
	err = serve.ListenAndServe(ctx, s, *addr, *grace, func(a net.Addr) {
		fmt.Fprintf(stdout, "serving %s on http://%s/v1 (max batch %d, prefill chunk %d); SIGINT or SIGTERM stops\n", strings.Join(ids, ", "), a, *maxBatch, *prefill)
	}, force)
	if err == nil {
		fmt.Fprintln(stdout, "stopped: the requests in flight finished")
	}
	return err
}
