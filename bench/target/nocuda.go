//go:build !cuda && !cudaemu

package target

import "errors"

func openCUDA(Options) (*Target, error) {
	return nil, errors.New("this binary has no CUDA backend: build it with -tags cuda (GPU) or -tags cudaemu (kernel emulator)")
}
