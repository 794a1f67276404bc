//go:build !cuda && !cudaemu

package main

import (
	"errors"
	"time"

	"github.com/turnwise/turnwise/engine"
)

func openCUDA(string, string, int) (engine.Backend, error) {
	return nil, errors.New("--backend cuda: this binary has no CUDA backend: build it with -tags cuda (GPU) or -tags cudaemu (kernel emulator)")
}

func openNCCL(engine.Backend, engine.Store, int, int, time.Duration) (engine.Communicator, string, error) {
	return nil, "", errors.New("NCCL: this binary has no CUDA backend: build it with -tags cuda")
}

func attentionConfigs() ([]string, error) {
	return nil, errors.New("--attention-configs: this binary has no CUDA backend: build it with -tags cuda (GPU) or -tags cudaemu (kernel emulator)")
}
