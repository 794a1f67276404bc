//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"testing"

	"github.com/turnwise/turnwise/engine/enginetest"
)

// suiteFamilies maps each conformance suite to the kernel families it needs.
var suiteFamilies = map[string][]string{
	"elementwise":   {"elementwise"},
	"cast":          {"elementwise"},
	"gemm":          {"gemm"},
	"embedding":     {"embedding"},
	"rmsnorm":       {"rmsnorm"},
	"rope":          {"rope"},
	"attention":     {"attention"},
	"swiglu":        {"swiglu"},
	"logsoftmax":    {"logsoftmax"},
	"tokenlogprobs": {"gemm", "logsoftmax", "reduce"},
	"segmentsum":    {"reduce"},
	"sumsquares":    {"reduce", "elementwise"},
	"adamw":         {"adamw"},
	"sample":        {"sample"},
}

// TestConformance runs the whole op suite — every kernel, forward and
// backward, against the float64 reference — on this backend: on the CPU
// emulator under -tags cudaemu, on a GPU under -tags cuda. Suites whose
// kernel families are not written yet are skipped, naming them.
func TestConformance(t *testing.T) {
	b, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	pending := map[string]bool{}
	for _, f := range PendingFamilies() {
		pending[f] = true
	}
	skip := map[string]string{}
	for suite, fams := range suiteFamilies {
		for _, f := range fams {
			if pending[f] {
				skip[suite] = fmt.Sprintf("kernel family %q (kernels/%s.cu) is not written yet", f, f)
			}
		}
	}
	enginetest.RunSkipping(t, b, skip)
}
