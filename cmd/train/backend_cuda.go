//go:build cuda || cudaemu

package main

import (
	"fmt"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cuda"
)

// cudaGEMM maps --gemm to cuda.Options.GEMM.
var cudaGEMM = map[string]string{"": "", "own": "wmma", "cublas": "cublas"}

// openCUDA opens the cuda backend with the GEMM named by --gemm ("", own or
// cublas).
func openCUDA(gemm string) (engine.Backend, error) {
	b, err := cuda.New(cuda.Options{GEMM: cudaGEMM[gemm]})
	if err != nil {
		return nil, fmt.Errorf("--backend cuda: %w", err)
	}
	return b, nil
}
