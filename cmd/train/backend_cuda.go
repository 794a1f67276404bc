//go:build cuda || cudaemu

package main

import (
	"fmt"
	"time"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cuda"
)

// openNCCL joins an NCCL communicator on b, a cuda backend, through the
// job's store.
func openNCCL(b engine.Backend, store engine.Store, rank, size int, timeout time.Duration) (engine.Communicator, string, error) {
	cb, ok := b.(*cuda.Backend)
	if !ok {
		return nil, "", fmt.Errorf("NCCL needs the cuda backend, not %s", b.Name())
	}
	c, err := cuda.NewNCCL(cb, store, rank, size, "nccl/id", timeout)
	if err != nil {
		return nil, "", err
	}
	return c, c.Library(), nil
}

// openCUDA opens the cuda backend on GPU device with the GEMM named by
// --gemm ("": cuBLASLt where one is found, own or cublas) and the attention
// configuration of --attention-config ("": the kernels' defaults).
func openCUDA(gemm, attention string, device int) (engine.Backend, error) {
	attn, err := cuda.ParseAttentionConfig(attention)
	if err != nil {
		return nil, fmt.Errorf("--attention-config: %w", err)
	}
	b, err := cuda.New(cuda.Options{GEMM: gemm, Device: device, Attention: attn})
	if err != nil {
		return nil, fmt.Errorf("--backend cuda: %w", err)
	}
	return b, nil
}

// attentionConfigs lists the attention configurations a tuning sweep tries,
// as --attention-config takes them.
func attentionConfigs() ([]string, error) {
	var out []string
	for _, c := range cuda.AttentionConfigs() {
		out = append(out, c.String())
	}
	return out, nil
}
