//go:build !cuda

package buildinfo

// cudaToolkit returns "": a build without -tags cuda has no CUDA toolkit
// (the emulator of -tags cudaemu mimics one).
func cudaToolkit() string { return "" }
