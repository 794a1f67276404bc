//go:build cuda || cudaemu

package cuda

import (
	"errors"
	"strings"
	"testing"
)

// TestChooseGEMM: cuBLASLt is the default GEMM where the build can run it
// and the library opens; the own kernel otherwise, with a one-line notice
// only where cuBLASLt was wanted and could not be opened.
func TestChooseGEMM(t *testing.T) {
	found := func() (*cublasLt, error) { return &cublasLt{}, nil }
	missing := func() (*cublasLt, error) { return nil, errors.New("no libcublasLt.so.N (N ≥ 11) found") }
	cases := []struct {
		requested  string
		have       bool
		open       func() (*cublasLt, error)
		want       string // the GEMM that runs
		wantNotice string // a substring of the notice ("": none)
		wantErr    string // a substring of the error ("": none)
	}{
		{"", true, found, "cublas", "", ""},
		{"", true, missing, "own", "own GEMM runs instead", ""},
		{"", false, found, "own", "", ""}, // the emulator: no notice, nothing opened
		{"cublas", true, found, "cublas", "", ""},
		{"cublas", true, missing, "own", "no libcublasLt", ""},
		{"cublas", false, found, "", "", "only available on a real GPU"},
		{"own", true, found, "own", "", ""},
		{"wmma", true, found, "own", "", ""},
		{"own", false, missing, "own", "", ""},
		{"fast", true, found, "", "", `unknown GEMM implementation "fast"`},
	}
	for _, c := range cases {
		opened := false
		open := func() (*cublasLt, error) { opened = true; return c.open() }
		gemm, lt, notice, err := chooseGEMM(c.requested, c.have, open)
		name := c.requested + "/" + map[bool]string{true: "gpu", false: "emu"}[c.have]
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: error %v, want one containing %q", name, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if gemm != c.want {
			t.Errorf("%s: runs %q, want %q", name, gemm, c.want)
		}
		if (lt != nil) != (gemm == "cublas") {
			t.Errorf("%s: runs %q with library %v", name, gemm, lt)
		}
		if opened && (c.requested == "own" || c.requested == "wmma" || !c.have) {
			t.Errorf("%s: opened cuBLASLt though it cannot run", name)
		}
		switch {
		case c.wantNotice == "" && notice != "":
			t.Errorf("%s: notice %q, want none", name, notice)
		case c.wantNotice != "" && !strings.Contains(notice, c.wantNotice):
			t.Errorf("%s: notice %q, want one containing %q", name, notice, c.wantNotice)
		case strings.Contains(notice, "\n"):
			t.Errorf("%s: notice %q is more than one line", name, notice)
		}
	}
}
