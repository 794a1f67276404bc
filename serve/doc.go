// Package serve is an OpenAI-compatible HTTP server for one model and its
// LoRA adapters: POST /v1/chat/completions, POST /v1/completions and
// GET /v1/models, with or without streaming (server-sent events), and
// GET /health and GET /metrics.
//
// # Requests
//
// A chat request's messages are rendered with the Llama 3.1 chat template
// (tokenizer.EncodeChat; the compact byte chat format for the byte
// tokenizer) ending in an assistant header; a model whose own chat_template
// is another template has its chat requests refused (CheckChatTemplate). A
// completion's prompt is encoded after the beginning-of-sequence token, or
// given as token ids, or is a list of either (choice i then continues
// prompt i/n). Tokens the tokenizer cannot decode add no text. Generation
// stops at the tokenizer's end-of-sequence and end-of-turn tokens (and the
// model's), at one of the request's stop strings (the text before it is
// returned), or after max_tokens tokens. max_tokens defaults to
// Config.DefaultMaxTokens, or to what the model's context leaves after the
// prompt, and is capped at that; a prompt that fills the context is
// refused. temperature (default 1; 0 is greedy), top_k (default 0: every
// token) and top_p (default 1) select the backend's sampler
// (engine.SampleParams: top-k, then top-p); presence_penalty,
// frequency_penalty (over the tokens generated) and logit_bias adjust a
// host copy of the row of logits first. seed seeds the request's own
// random draws (choice k of n draws with seed + k), so that one seed gives
// one output whatever else the server is doing. Without a seed the server
// draws one. logprobs (completions: a count of alternatives; chat:
// logprobs and top_logprobs) reports each generated token's
// log-probability under the model (temperature 1, before any adjustment)
// in OpenAI's shapes, streamed too; echo returns the prompt first, with
// its tokens' log-probabilities when logprobs is 0. Every other field of
// OpenAI's requests (tools, response_format other than text, suffix, …) is
// refused with a 400 naming it. Usage counts the prompts' tokens and the
// tokens generated, a stop token included.
//
// # Batching
//
// Every sequence to generate (a request's choice) becomes a job on one
// queue, served by one goroutine, the only one that touches the model (a
// backend is not safe for concurrent use). Scheduling is at the level of
// steps (continuous batching): the running batch is Config.MaxBatch slots
// of one KV cache (llama.Cache, whose slots hold sequences of any length;
// its length grows to what the longest running job needs and it is freed
// when the server is idle). Between two steps the scheduler takes the jobs
// that arrived and gives each free slot to the oldest waiting one. A step
// is one forward per adapter among the running jobs: one token for each
// job that decodes and, within Config.PrefillChunk tokens, the next chunk
// of the prompts that are being prefilled (oldest first), so that a long
// prompt does not stall the decoding ones. A job whose prompt is in the
// cache draws its next token from its own row of logits with its own
// sampler and generator, seeded as llama.Model.Generate seeds a single
// prompt's; it leaves its slot as soon as it stops, and the slot is given
// to the next job. A job's tokens therefore do not depend on what else
// runs or on how its prompt was chunked (on the CPU backend, whose rows
// are computed independently), and a request alone gets what `train
// generate` gives for the same prompt, seed and sampler.
//
// A client that goes away (its request's context ends) leaves the batch at
// the next step. Errors are answered in the API's shape,
// {"error": {"message", "type", "param", "code"}}, with the matching HTTP
// status.
//
// # Operations
//
// GET /health answers 200 while the server runs; GET /metrics exposes
// counters in Prometheus' text format (requests by status, prompt and
// generated tokens, queue depth, running batch size, tokens per second,
// histograms of time to first token and of request latency). With
// Config.APIKey every /v1 request must carry it as a bearer token (401
// otherwise). Config.Log receives one line per request. A request without
// "model" is served by the only model of a server of one.
package serve
