//go:build cuda || cudaemu

package target

import (
	"fmt"
	"strings"

	"github.com/turnwise/turnwise/bench"
	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cuda"
)

// openCUDA opens the CUDA backend with our GEMM and, beside it, one whose
// GEMM is the vendor's (cuBLASLt), for the side-by-side GEMM figures. Each
// is timed by CUDA events on its own stream.
func openCUDA(o Options) (*Target, error) {
	b, err := cuda.New(cuda.Options{Device: o.Device})
	if err != nil {
		return nil, err
	}
	t := &Target{Backend: b, TimerName: "CUDA events on the backend's stream"}
	t.closers = append(t.closers, b.Close)
	t.NewTimer = func(eb engine.Backend) (Timer, error) {
		cb, ok := eb.(*cuda.Backend)
		if !ok {
			panic(fmt.Sprintf("target: a timer for a %T, not a CUDA backend", eb))
		}
		return cb.NewTimer()
	}
	// Where no cuBLASLt is found the backend asked for it runs our GEMM
	// instead: then there is no vendor to compare with.
	if v, err := cuda.New(cuda.Options{Device: o.Device, GEMM: "cublas"}); err != nil {
		t.VendorNote = err.Error()
	} else if name := v.GEMMName(); strings.HasPrefix(name, "cublaslt") {
		t.Vendor, t.VendorName = v, bench.CuBLASLt
		t.closers = append(t.closers, v.Close)
		t.Notes = append(t.Notes, "vendor GEMM: "+name)
	} else {
		v.Close()
		t.VendorNote = "no cuBLASLt was found; the backend asked for it runs " + name
	}
	if err := describe(t, o.Device); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}
