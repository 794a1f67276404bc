//go:build cuda || cudaemu

package target

import (
	"strings"

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
	t.closers = append(t.closers, closer(b))
	if v, err := cuda.New(cuda.Options{Device: o.Device, GEMM: "cublas"}); err != nil {
		t.VendorNote = err.Error()
	} else {
		t.closers = append(t.closers, closer(v))
		t.Vendor, t.VendorName = v, bench.CuBLAS
		// A backend that can say which GEMM it runs may have fallen back to
		// ours when it found no cuBLASLt: then there is no vendor to compare.
		if n, ok := any(v).(interface{ GEMMName() string }); ok {
			switch name := n.GEMMName(); {
			case strings.HasPrefix(name, "cublaslt"):
				t.VendorName = bench.CuBLASLt
				t.Notes = append(t.Notes, "vendor GEMM: "+name)
			default:
				t.Vendor, t.VendorName = nil, ""
				t.VendorNote = "no cuBLASLt was found; the backend asked for it runs " + name
			}
		}
	}
	t.NewTimer = hostTimers
	t.TimerName = "host clock around stream synchronisations"
	if err := describe(t, o.Device); err != nil {
		return nil, err
	}
	return t, nil
}

// closer returns b's Close where the backend has one.
func closer(b any) func() error {
	if c, ok := b.(interface{ Close() error }); ok {
		return c.Close
	}
	return func() error { return nil }
}
