//go:build !cuda && !cudaemu

package main

import (
	"strings"
	"testing"
)

// TestBackendCUDAWithoutCUDA checks that a binary built without CUDA says
// how to build one that has it.
func TestBackendCUDAWithoutCUDA(t *testing.T) {
	_, err := runCmd(t, runGenerate, "", "--preset", "tiny", "--bos-only", "--max-new", "1", "--backend", "cuda", "--gemm", "cublas")
	if err == nil || !strings.Contains(err.Error(), "build it with -tags cuda") {
		t.Errorf("--backend cuda without CUDA: %v", err)
	}
}
