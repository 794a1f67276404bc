//go:build cuda || cudaemu

package main

import (
	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cuda"
)

func openCUDA() (engine.Backend, error) { return cuda.New(cuda.Options{}) }
