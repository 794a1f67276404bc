package rl

import "github.com/turnwise/turnwise/optim"

// The SWEET-RL reference implementation's hyper-parameters (the released
// scripts' settings for Llama-3.1-8B), in one place. Trainers start from
// ReferencePrefOptions and change what their setting needs (a LoRA
// adapter's learning rate, a demo's epochs).
const (
	RefBeta         = 0.1  // β of the critic's and the actor's losses
	RefLR           = 2e-7 // peak learning rate, full fine-tuning
	RefCriticEpochs = 4    // the critic's passes over its pairs
	RefActorEpochs  = 1    // the actor's passes over its pairs
	RefPairsPerStep = 8    // pairs per optimizer step (train_batch_size)
	RefWarmupFrac   = 0.03 // fraction of the steps warming up
	RefMinLRRatio   = 0.1  // the cosine schedule's floor, as a fraction of the peak
	RefActorNLL     = 0.01 // the actor's NLL coefficient (nll_loss_coef)
	RefCandidates   = 16   // candidates sampled per turn (best_of_n)
	RefPairsPerTurn = 4    // pairs formed per turn (num_pairs)
	RefDataFraction = 0.1  // fraction of the agent turns the actor trains on
	RefTemperature  = 1.0  // the agent's sampling temperature
	RefMaxNew       = 1024 // tokens per agent turn at most
	RefMaxGradNorm  = 1.0  // gradient clipping
	RefAdamBeta1    = 0.9  // Adam β₁
	RefAdamBeta2    = 0.95 // Adam β₂
	RefAdamEps      = 1e-8 // Adam ε
	RefWeightDecay  = 0.0  // no weight decay
)

// LoRALR is the peak learning rate the trainers use for a LoRA adapter
// unless told otherwise: the reference trains every weight (RefLR), and an
// adapter's low-rank update needs a far larger step.
const LoRALR = 1e-4

// ReferenceAdamW returns the reference's optimizer settings.
func ReferenceAdamW() optim.AdamWConfig {
	return optim.AdamWConfig{Beta1: RefAdamBeta1, Beta2: RefAdamBeta2, Eps: RefAdamEps, WeightDecay: RefWeightDecay, MaxGradNorm: RefMaxGradNorm}
}

// ReferencePrefOptions returns the reference's preference-training options
// (the critic's: 4 epochs, no NLL term; set Epochs and NLLCoef for the
// actor), with its NLL term over the whole chosen sequence. BatchTokens,
// Seed, Progress and Label are left for the caller.
func ReferencePrefOptions() PrefOptions {
	return PrefOptions{Beta: RefBeta, Epochs: RefCriticEpochs, PairsPerStep: RefPairsPerStep, LR: RefLR,
		WarmupFrac: RefWarmupFrac, MinLRRatio: RefMinLRRatio, AdamW: ReferenceAdamW(), NLLSequence: true}
}
