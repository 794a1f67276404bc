//go:build !cuda && !cudaemu

package main

import (
	"errors"

	"github.com/turnwise/turnwise/engine"
)

func openCUDA(string) (engine.Backend, error) {
	return nil, errors.New("--backend cuda: this binary has no CUDA backend: build it with -tags cuda (GPU) or -tags cudaemu (kernel emulator)")
}
