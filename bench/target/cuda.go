//go:build cuda || cudaemu

package target

import (
	"fmt"
	"strings"

	"github.com/turnwise/turnwise/bench"
	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cuda"
)

// openCUDA opens the CUDA backend with the GEMM o names (by default
// cuBLASLt where one is found) and whatever else the measurements need: a
// backend whose GEMM is our own kernel, for the kernel suite's GEMMs of
// ours, and one whose GEMM is the vendor's (cuBLASLt), for the
// side-by-side GEMM figures. A backend serves as several of these where its
// GEMM allows. Each is timed by CUDA events on its own stream.
func openCUDA(o Options) (*Target, error) {
	attn, err := cuda.ParseAttentionConfig(o.Attention)
	if err != nil {
		return nil, err
	}
	t := &Target{TimerName: "CUDA events on the backend's stream"}
	if attn != (cuda.AttentionConfig{}) {
		t.Notes = append(t.Notes, "attention config: "+attn.String())
	}
	open := func(gemm string) (*cuda.Backend, error) {
		b, err := cuda.New(cuda.Options{Device: o.Device, GEMM: gemm, Attention: attn})
		if err != nil {
			return nil, err
		}
		t.closers = append(t.closers, b.Close)
		return b, nil
	}
	b, err := open(o.GEMM)
	if err != nil {
		return nil, err
	}
	t.Backend, t.GEMMName = b, b.GEMMName()
	t.NewTimer = func(eb engine.Backend) (Timer, error) {
		cb, ok := eb.(*cuda.Backend)
		if !ok {
			panic(fmt.Sprintf("target: a timer for a %T, not a CUDA backend", eb))
		}
		tm, err := cb.NewTimer()
		if err != nil || cb.Name() != "cudaemu" {
			return tm, err
		}
		// The emulator's kernels run as they are queued: its device never
		// waits for the host, and a hold would only spend the host's time.
		return struct{ Timer }{tm}, nil
	}
	isVendor := func(b *cuda.Backend) bool { return strings.HasPrefix(b.GEMMName(), "cublaslt") }
	if isVendor(b) {
		t.Vendor, t.VendorName = b, bench.CuBLASLt
		if t.Own, err = open("own"); err != nil {
			t.Close()
			return nil, err
		}
	} else {
		t.Own = b
		// Where no cuBLASLt is found the backend asked for it runs our GEMM
		// instead: then there is no vendor to compare with.
		if v, err := open("cublas"); err != nil {
			t.VendorNote = err.Error()
		} else if isVendor(v) {
			t.Vendor, t.VendorName = v, bench.CuBLASLt
		} else {
			t.VendorNote = "no cuBLASLt was found; the backend asked for it runs " + v.GEMMName()
		}
	}
	if t.Vendor != nil {
		t.Notes = append(t.Notes, "vendor GEMM: "+t.Vendor.(*cuda.Backend).GEMMName())
	}
	if err := describe(t, o.Device); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}
