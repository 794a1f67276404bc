//go:build cuda || cudaemu

package cuda

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/turnwise/turnwise/dist"
	"github.com/turnwise/turnwise/engine/commtest"
)

// standInNCCL is the C source of a one-rank NCCL over host memory: what the
// kernel emulator's "device" memory is. Each collective of one rank is a
// copy from the send to the receive buffer. VERSION and OMIT (a symbol to
// leave out) are set when it is compiled.
const standInNCCL = `
#include <string.h>
#include <stddef.h>
typedef struct { char internal[128]; } id_t;
int ncclGetVersion(int *v) { *v = VERSION; return 0; }
int ncclGetUniqueId(id_t *id) { memset(id, 7, sizeof *id); return 0; }
int ncclCommInitRank(void **c, int n, id_t id, int r) {
	if (n != 1 || r != 0 || id.internal[127] != 7) return 4; /* ncclInvalidArgument */
	*c = (void *)1; return 0;
}
int ncclCommDestroy(void *c) { return 0; }
int ncclCommAbort(void *c) { return 0; }
int ncclCommGetAsyncError(void *c, int *e) { *e = 0; return 0; }
const char *ncclGetErrorString(int r) { return r == 4 ? "invalid argument" : "stand-in error"; }
static size_t esize(int t) { return t == 7 ? 4 : t == 9 ? 2 : 1; }
int ncclAllReduce(const void *s, void *r, size_t n, int t, int op, void *c, void *st) { memmove(r, s, n * esize(t)); return op == 0 ? 0 : 4; }
int ncclReduceScatter(const void *s, void *r, size_t n, int t, int op, void *c, void *st) { memmove(r, s, n * esize(t)); return op == 0 ? 0 : 4; }
int ncclAllGather(const void *s, void *r, size_t n, int t, void *c, void *st) { memmove(r, s, n * esize(t)); return 0; }
#ifndef OMIT_BROADCAST
int ncclBroadcast(const void *s, void *r, size_t n, int t, int root, void *c, void *st) { memmove(r, s, n * esize(t)); return root == 0 ? 0 : 4; }
#endif
`

// buildStandIn compiles the stand-in NCCL into dir/libnccl.so.2 with the
// given -D flags and returns its path.
func buildStandIn(t *testing.T, dir string, defs ...string) string {
	t.Helper()
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		t.Skipf("no C compiler (%s) to build the stand-in NCCL", cc)
	}
	src := filepath.Join(dir, "nccl_stand_in.c")
	if err := os.WriteFile(src, []byte(standInNCCL), 0o644); err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(dir, "libnccl.so.2")
	args := append([]string{"-shared", "-fPIC", "-o", lib, src}, defs...)
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", cc, args, err, out)
	}
	return lib
}

// TestNCCLCandidates: TW_NCCL_PATH first, then libnccl.so.2 through the
// dynamic loader, then the copies in toolkits and wheels (the search is
// cuBLASLt's; TestCUBLASLtCandidates checks it in full).
func TestNCCLCandidates(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{
		"opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2",
		"opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.1", // too old: left out
		"mine/libnccl.so.2.21.5",
	} {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"TW_NCCL_PATH": filepath.Join(root, "mine")}
	got := ncclLib.candidates(func(k string) string { return env[k] }, []string{root})
	want := []string{
		filepath.Join(root, "mine/libnccl.so.2.21.5"),
		"libnccl.so.2",
		filepath.Join(root, "opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"),
	}
	if !slices.Equal(got, want) {
		t.Errorf("candidates:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestOpenNCCL: the refusals each say why — nothing found (naming
// TW_NCCL_PATH), a file that is not a library, a library without an entry
// point we call, an NCCL older than 2.10 — and a stand-in with everything
// opens and reports its version.
func TestOpenNCCL(t *testing.T) {
	if _, err := openNCCL([]string{"libnccl.so.99"}); err == nil || !strings.Contains(err.Error(), "TW_NCCL_PATH") {
		t.Errorf("nothing found: error %v, want one naming TW_NCCL_PATH", err)
	}
	bogus := filepath.Join(t.TempDir(), "libnccl.so.2")
	if err := os.WriteFile(bogus, []byte("not a library"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := openNCCL([]string{bogus}); err == nil || !strings.Contains(err.Error(), bogus) {
		t.Errorf("a file that is not a library: error %v, want one naming it", err)
	}
	noBcast := buildStandIn(t, t.TempDir(), "-DVERSION=22105", "-DOMIT_BROADCAST")
	if _, err := openNCCL([]string{noBcast}); err == nil || !strings.Contains(err.Error(), "no symbol ncclBroadcast") {
		t.Errorf("a library without ncclBroadcast: error %v, want one naming it", err)
	}
	old := buildStandIn(t, t.TempDir(), "-DVERSION=20804")
	if _, err := openNCCL([]string{old}); err == nil || !strings.Contains(err.Error(), "version 2.8.4, want ≥ 2.10") {
		t.Errorf("NCCL 2.8.4: error %v, want one refusing the version", err)
	}
	good := buildStandIn(t, t.TempDir(), "-DVERSION=22105")
	lib, err := openNCCL([]string{bogus, good})
	if err != nil {
		t.Fatal(err)
	}
	if lib.path != good || lib.versionString() != "2.21.5" {
		t.Errorf("opened %s, version %s; want %s, 2.21.5", lib.path, lib.versionString(), good)
	}
}

// TestNCCLOneRank joins a job of one rank and runs every collective through
// commtest.Check: over the machine's NCCL on a GPU (skipped where none is
// found), over the one-rank stand-in under the emulator.
func TestNCCLOneRank(t *testing.T) {
	if !haveCUBLAS { // the emulator: its memory is host memory, which the stand-in copies
		t.Setenv("TW_NCCL_PATH", buildStandIn(t, t.TempDir(), "-DVERSION=22105"))
	}
	b, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	g, err := dist.Rendezvous(dist.Single, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	c, err := NewNCCL(b, g.Store, 0, 1, "nccl/id", time.Second)
	if err != nil {
		if haveCUBLAS && strings.Contains(err.Error(), "no NCCL") {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	defer c.Close()
	t.Log(c.Library())
	for _, n := range []int{1, 1001} {
		if err := commtest.Check(b, c, n); err != nil {
			t.Errorf("n=%d: %v", n, err)
		}
	}
}
