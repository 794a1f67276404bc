package main

import (
	"fmt"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
)

// openBackend returns the backend named by --backend: "cpu", or "cuda" in a
// binary built with -tags cuda (the GPU) or -tags cudaemu (the kernel
// emulator).
func openBackend(name string, threads int) (engine.Backend, error) {
	switch name {
	case "cpu":
		return cpu.New(cpu.Options{Threads: threads}), nil
	case "cuda":
		return openCUDA()
	}
	return nil, fmt.Errorf("unknown --backend %q (want cpu or cuda)", name)
}
