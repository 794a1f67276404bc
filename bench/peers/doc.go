// Package peers holds the PyTorch peers of train bench, torch_peers.py:
// PyTorch's SDPA attention and a Hugging Face Llama + PEFT LoRA step,
// measured on the same GPU in the same run and written in our result
// schema. Its Go tests check, without PyTorch, that the script's names,
// FLOP counts and result files agree with ours.
package peers
