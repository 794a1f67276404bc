//go:build cuda || cudaemu

package target

import (
	"github.com/turnwise/turnwise/bench"
	"github.com/turnwise/turnwise/engine/cuda"
)

// openCUDA opens the CUDA backend with our GEMM and, beside it, one whose
// GEMM is the vendor's, for the side-by-side GEMM figures.
func openCUDA(o Options) (*Target, error) {
	b, err := cuda.New(cuda.Options{Device: o.Device})
	if err != nil {
		return nil, err
	}
	t := &Target{Backend: b}
	if v, err := cuda.New(cuda.Options{Device: o.Device, GEMM: "cublas"}); err != nil {
		t.VendorNote = err.Error()
	} else {
		t.Vendor, t.VendorName = v, bench.CuBLAS
	}
	t.NewTimer = func() (Timer, error) { return &hostTimer{b: b}, nil }
	t.TimerName = "host clock around stream synchronisations"
	if err := describe(t, o.Device); err != nil {
		return nil, err
	}
	return t, nil
}
