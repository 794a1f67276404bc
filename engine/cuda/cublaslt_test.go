//go:build cuda || cudaemu

package cuda

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
)

// TestCUBLASLtCandidates lays out cuBLASLt files where toolkits and Python
// wheels put them, under a temporary root, and checks the order in which
// they would be tried: TW_CUBLAS_PATH first, then newest major version
// first, the dynamic loader's search before the files of that version.
func TestCUBLASLtCandidates(t *testing.T) {
	root := t.TempDir()
	files := []string{
		"usr/local/cuda/lib64/libcublasLt.so.11",
		"usr/local/cuda/lib64/libcublasLt.so.11.11.3.6",
		"usr/local/cuda/lib64/libcublasLt.so.10", // too old: left out
		"usr/local/cuda/lib64/libcublasLt.so",    // no version: left out
		"usr/local/cuda-12.4/lib64/libcublasLt.so.12",
		"usr/local/cuda-14.0/targets/x86_64-linux/lib/libcublasLt.so.14",
		"opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcublasLt.so.13",
		"opt/torch/.venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublasLt.so.12",
		"venv/lib/python3.11/site-packages/nvidia/cublas/lib/libcublasLt.so.12",
		"home/.local/lib/python3.10/site-packages/nvidia/cu13/lib/libcublasLt.so.13",
		"mine/libcublasLt.so.12",
		"mine/libcublasLt.so.13.1.2",
	}
	for _, f := range files {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{
		"TW_CUBLAS_PATH": filepath.Join(root, "mine") + ":/elsewhere/libcublasLt.so",
		"VIRTUAL_ENV":    filepath.Join(root, "venv"),
		"HOME":           filepath.Join(root, "home"),
	}
	got := cublasLtCandidates(func(k string) string { return env[k] }, []string{root})
	want := []string{
		"@mine/libcublasLt.so.13.1.2",
		"@mine/libcublasLt.so.12",
		"/elsewhere/libcublasLt.so",
		"libcublasLt.so.14",
		"@usr/local/cuda-14.0/targets/x86_64-linux/lib/libcublasLt.so.14",
		"libcublasLt.so.13",
		"@home/.local/lib/python3.10/site-packages/nvidia/cu13/lib/libcublasLt.so.13",
		"@opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcublasLt.so.13",
		"libcublasLt.so.12",
		"@usr/local/cuda-12.4/lib64/libcublasLt.so.12",
		"@venv/lib/python3.11/site-packages/nvidia/cublas/lib/libcublasLt.so.12",
		"@opt/torch/.venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublasLt.so.12",
		"libcublasLt.so.11",
		"@usr/local/cuda/lib64/libcublasLt.so.11",
		"@usr/local/cuda/lib64/libcublasLt.so.11.11.3.6",
	}
	for i, w := range want {
		if rest, ok := strings.CutPrefix(w, "@"); ok {
			want[i] = filepath.Join(root, rest)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("candidates:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestOpenCUBLASLt: files that are not cuBLASLt are refused with a reason,
// and the machine's own cuBLASLt, where there is one, opens and reports a
// version ≥ 11 (no GPU is needed to open it).
func TestOpenCUBLASLt(t *testing.T) {
	bogus := filepath.Join(t.TempDir(), "libcublasLt.so.13")
	if err := os.WriteFile(bogus, []byte("not a library"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := openCUBLASLt([]string{"libcublasLt.so.99"}); err == nil || !strings.Contains(err.Error(), "TW_CUBLAS_PATH") {
		t.Errorf("nothing found: error %v, want one naming TW_CUBLAS_PATH", err)
	}
	if _, err := openCUBLASLt([]string{bogus}); err == nil || !strings.Contains(err.Error(), bogus) {
		t.Errorf("a file that is not a library: error %v, want one naming it", err)
	}

	cands := cublasLtCandidates(os.Getenv, []string{"/"})
	lib, err := openCUBLASLt(append([]string{bogus}, cands...))
	if err != nil {
		t.Skipf("no cuBLASLt on this machine (%v): only the refusals were checked", err)
	}
	if lib.version < 110000 || lib.path == bogus {
		t.Errorf("opened %s, version %d; want a cuBLASLt ≥ 11 other than the bogus file", lib.path, lib.version)
	}
	t.Logf("opened %s, version %d", lib.path, lib.version)

	// The descriptors and layouts of a plan are host objects: making them
	// checks every attribute number and value size we pass against the real
	// library. Without a handle (none can be made without a GPU) the
	// heuristic finds nothing.
	for _, k := range []ltKey{
		{m: 64, n: 48, k: 32, batch: 1, lda: 32, ldb: 48, ab: engine.BF16, c: engine.F32, alignA: 256, alignB: 256, alignC: 256},
		{m: 5, n: 7, k: 3, batch: 4, lda: 5, ldb: 3, strideA: 15, strideB: 21, transA: true, transB: true,
			ab: engine.F16, c: engine.F16, alignA: 2, alignB: 2, alignC: 2},
		{m: 8, n: 8, k: 8, batch: 2, lda: 8, ldb: 8, strideB: 64, ab: engine.F32, c: engine.F32, alignA: 4, alignB: 16, alignC: 8},
	} {
		p, found, err := lib.newPlan(nil, k)
		if err != nil {
			t.Errorf("plan %+v: %v", k, err)
			continue
		}
		if found {
			t.Errorf("plan %+v: an algorithm without a handle", k)
		}
		lib.destroyPlan(p)
	}
}
