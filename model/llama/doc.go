// Package llama is the Llama model family (Llama 2 tiny checkpoints through
// Llama 3.1/3.2), written against engine.Backend alone, so that the same
// code runs on the CPU backend, on the CUDA kernel emulator and on a GPU.
// It holds, file by file:
//
//   - config.go: Config, the architecture; the named presets (Preset); its
//     parameter count and description (Params, Describe);
//   - params.go, weights.go: the one parameter table from which every
//     weight's shape, Hugging Face name, GGUF name and PEFT module derive;
//     Weights and Layer, the tensors;
//   - hf.go, gguf.go: reading Hugging Face checkpoints (config.json and
//     safetensors, sharded or not) and GGUF files; writing Hugging Face
//     checkpoints (SaveHF, and Save for whatever a run trained);
//   - init.go: random weights (NewRandom);
//   - source.go, tokenizer.go: which model a command names (Source: a GGUF
//     file, a Hugging Face directory or a preset), its architecture, its
//     loading and its tokenizer (LoadTokenizer);
//   - lora.go, peft.go: LoRA adapters (LoRAConfig, Adapter) and their files
//     in PEFT's layout;
//   - layer.go, linear.go: the one transformer layer body, an attention half
//     and an MLP half each mirrored by its backward, shared by training and
//     generation;
//   - train.go: training batches (Batch, built by Batch.Append), the
//     training forward that keeps its activations (Pass, ForwardTrain,
//     ForwardBackward) and the backward;
//   - arena.go: the scratch memory of one pass, drawn from the model's
//     buffer pool and given back together;
//   - model.go, generate.go: Model, the KV cache and its forward step, and
//     batched generation (Generate, GenerateN);
//   - plan.go, context.go: the memory a job needs (Config.Plan) and how many
//     tokens fit the context (FitNew);
//   - views.go: gradient buffers as views of an optimizer's (Weights.Map,
//     Adapter.Map);
//   - score.go: per-token log-probabilities of a sequence (LogProbs) and of
//     a JSONL file of them (ScoreLines), a text prompt's ids (PromptIDs)
//     and a generation written as text or JSON (WriteGeneration).
package llama
