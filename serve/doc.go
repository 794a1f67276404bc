// Package serve is an OpenAI-compatible HTTP server for one model and its
// LoRA adapters: POST /v1/chat/completions, POST /v1/completions and
// GET /v1/models, with or without streaming (server-sent events).
//
// # Requests
//
// A chat request's messages are rendered with the Llama 3.1 chat template
// (tokenizer.EncodeChat; the compact byte chat format for the byte
// tokenizer) ending in an assistant header; a completion's prompt is
// encoded after the beginning-of-sequence token, or given as token ids.
// Tokens the tokenizer cannot decode (ids of a model vocabulary beyond the
// tokenizer's) add no text. Generation stops at the tokenizer's
// end-of-sequence and end-of-turn tokens (and the model's), at one of the
// request's stop strings (the text before it is returned), or after
// max_tokens tokens. max_tokens defaults to Config.DefaultMaxTokens, or to
// what the model's context leaves after the prompt, and is capped at that;
// a prompt that fills the context is refused. temperature (default 1; 0 is
// greedy) and top_p (default 1) select the sampler (engine.SampleParams);
// seed seeds the request's own random draws, so that one seed gives one
// output whatever else the server is doing. Without a seed the server draws
// one. Usage counts the prompt's tokens and the tokens generated, a stop
// token included.
//
// # Batching
//
// Every request becomes a job on one queue, served by one goroutine, the
// only one that touches the model (a backend is not safe for concurrent
// use). When a job arrives the scheduler waits up to the batch window for
// more, up to the maximum batch. It then takes the oldest job and every
// waiting job compatible with it, up to the maximum batch, and decodes them
// together: one prefill of all their prompts into one KV cache, then one
// forward pass per step for every sequence still running. Jobs are
// compatible when they use the same adapter and the same sampler: the same
// temperature and top_p, or both greedy (temperature 0, whatever their
// top_p). They may differ in prompt, max_tokens, stop strings and seed:
// each job draws its uniforms from its own generator, seeded with its seed
// exactly as llama.Model.Generate seeds a single prompt's, and leaves the
// batch as soon as it stops. A job in a batch therefore gets the tokens it
// gets alone, and a request alone gets what `train generate` gives for the
// same prompt, seed and sampler. Incompatible jobs wait for a later batch.
//
// A client that goes away (its request's context ends) leaves the batch at
// the next step. Errors are answered in the API's shape,
// {"error": {"message", "type", "param", "code"}}, with the matching HTTP
// status.
package serve
