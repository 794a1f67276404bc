//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/enginetest"
)

// TestRecordReplay records a few ops whose inputs include device data (rows
// of ScatterRows, a GEMM's operand), replays the recording with new
// contents, and checks each replay against the same ops run one by one on a
// second backend with graphs off — bit for bit — and the launch counts.
//
// The bundle runs the suite with TW_CUDA_SYNC=1, under which Record
// refuses (a subtest checks that); the test clears it so that the GPU runs
// the graphs.
func TestRecordReplay(t *testing.T) {
	t.Setenv("TW_CUDA_SYNC", "")
	b := newBackend(t)
	defer b.Close()
	plain, err := New(Options{NoGraphs: true})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.Record(func() {}); err == nil {
		t.Fatal("Record with Options.NoGraphs succeeded")
	}
	t.Run("TW_CUDA_SYNC=1", func(t *testing.T) {
		t.Setenv("TW_CUDA_SYNC", "1")
		synced, err := New(Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer synced.Close()
		if _, err := synced.Record(func() {}); err == nil || !strings.Contains(err.Error(), "TW_CUDA_SYNC=1") {
			t.Fatalf("Record with TW_CUDA_SYNC=1: error %v, want one naming the variable", err)
		}
	})
	t.Run("TW_CUDA_GRAPHS=0", func(t *testing.T) {
		t.Setenv("TW_CUDA_GRAPHS", "0")
		off, err := New(Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer off.Close()
		if _, err := off.Record(func() {}); err == nil || !strings.Contains(err.Error(), "TW_CUDA_GRAPHS=0") {
			t.Fatalf("Record with TW_CUDA_GRAPHS=0: error %v, want one naming the variable", err)
		}
	})

	type state struct{ x, w, y, cache, rows *engine.Tensor }
	newState := func(be engine.Backend) state {
		return state{x: engine.MustAlloc(be, engine.BF16, 3, 40), w: engine.MustAlloc(be, engine.BF16, 24, 40),
			y: engine.MustAlloc(be, engine.BF16, 3, 24), cache: engine.MustAlloc(be, engine.BF16, 9, 24),
			rows: engine.MustAlloc(be, engine.I32, 3)}
	}
	ops := func(be engine.Backend, s state) {
		be.Gemm(s.y, s.x, s.w, engine.GemmParams{TransB: true, Alpha: 1})
		be.ScatterRows(s.cache, s.y, s.rows)
		be.Copy(s.y.Rows(0, 1), s.cache.Rows(8, 9))
	}
	sg, sp := newState(b), newState(plain)
	r := enginetest.Rand(1)
	values := func(n int) []float32 { return enginetest.Values(r, engine.BF16, n, 1) }
	set := func(s state, be engine.Backend, xv, wv []float32, rows []int32) {
		engine.SetF32(be, s.x, xv)
		engine.SetF32(be, s.w, wv)
		engine.SetI32(be, s.rows, rows)
	}
	wv := values(24 * 40)
	set(sg, b, values(3*40), wv, []int32{0, 1, 2})
	before, _ := b.Launches()
	rec, err := b.Record(func() { ops(b, sg) })
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Free()
	if after, _ := b.Launches(); after != before {
		t.Errorf("recording counted %d launches; nothing ran", after-before)
	}
	// The recording ran nothing: the cache still holds zeros.
	for _, v := range engine.ToF32(b, sg.cache) {
		if v != 0 {
			t.Fatal("the recorded ops ran while recording")
		}
	}
	for step, rows := range [][]int32{{0, 1, 2}, {8, 3, 5}, {4, 6, 7}} {
		xv := values(3 * 40)
		set(sg, b, xv, wv, rows)
		set(sp, plain, xv, wv, rows)
		ops0, calls0 := b.Launches()
		plainOps0, plainCalls0 := plain.Launches()
		if err := rec.Replay(); err != nil {
			t.Fatal(err)
		}
		ops(plain, sp)
		ops1, calls1 := b.Launches()
		plainOps1, plainCalls1 := plain.Launches()
		if got, want := ops1-ops0, plainOps1-plainOps0; got != want || got != 3 {
			t.Errorf("step %d: a replay counts %d ops, the ops one by one %d; want 3", step, got, want)
		}
		if got, want := calls1-calls0, plainCalls1-plainCalls0; got != 1 || want != 3 {
			t.Errorf("step %d: a replay takes %d calls, the ops one by one %d; want 1 and 3", step, got, want)
		}
		sameBits(t, "cache", engine.ToF32(b, sg.cache), engine.ToF32(plain, sp.cache))
		sameBits(t, "y", engine.ToF32(b, sg.y), engine.ToF32(plain, sp.y))
	}
}

// TestRecordFails checks that what a graph cannot hold fails the recording
// with an error, leaving the backend as it was: an upload, a download and an
// allocation inside the recorded function. (TW_CUDA_SYNC is cleared, as
// in TestRecordReplay: under it every recording fails before it starts.)
func TestRecordFails(t *testing.T) {
	t.Setenv("TW_CUDA_SYNC", "")
	b := newBackend(t)
	defer b.Close()
	x := engine.MustAlloc(b, engine.F32, 4)
	for name, fn := range map[string]func(){
		"upload":   func() { engine.SetF32(b, x, []float32{1, 2, 3, 4}) },
		"download": func() { b.Fill(x, 2); engine.ToF32(b, x) },
		"alloc":    func() { engine.MustAlloc(b, engine.F32, 1000) },
	} {
		rec, err := b.Record(fn)
		if err == nil {
			rec.Free()
			t.Errorf("%s: recorded", name)
			continue
		}
		if !strings.Contains(err.Error(), "recording") {
			t.Errorf("%s: error %q does not say it was recording", name, err)
		}
		engine.SetF32(b, x, []float32{5, 6, 7, 8})
		b.Fill(x.Rows(0, 2), 1)
		if got := engine.ToF32(b, x); got[0] != 1 || got[3] != 8 {
			t.Fatalf("%s: after the failed recording the backend computes %v", name, got)
		}
	}
	if b.recordings != 0 || b.rec != nil {
		t.Errorf("failed recordings left %d alive (under way: %v)", b.recordings, b.rec != nil)
	}
}

// TestRecordSplitGemm records a GEMM that our kernel splits along k, which
// passes its partial sums through the backend's shared workspace, and
// replays it with new operands: bit for bit what the GEMM gives run plainly
// on a backend without graphs, also after a larger workspace has replaced
// the one the recording points into (kept while the recording lives), with
// the launches of a plain run (the GEMM and the sum of its k-ranges). A
// split GEMM whose workspace would first have to grow cannot be recorded
// (memory cannot be allocated while capturing): the recording fails and the
// backend goes on; the decoder records a step only after running it once.
func TestRecordSplitGemm(t *testing.T) {
	t.Setenv("TW_CUDA_SYNC", "")
	const m, n, k = 16, 24, 2048
	if gemmWorkspace(engine.BF16, engine.BF16, false, true, m, n, k, 1) == 0 {
		t.Fatalf("a %d×%d×%d GEMM is not split: the test tests nothing", m, n, k)
	}
	b := ownGEMM(t)
	plain, err := New(Options{GEMM: "own", NoGraphs: true})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	type state struct{ x, w, y *engine.Tensor }
	newState := func(be engine.Backend) state {
		return state{x: engine.MustAlloc(be, engine.BF16, m, k), w: engine.MustAlloc(be, engine.BF16, n, k),
			y: engine.MustAlloc(be, engine.F32, m, n)}
	}
	gemm := func(be engine.Backend, s state) {
		be.Gemm(s.y, s.x, s.w, engine.GemmParams{TransB: true, Alpha: 1, Beta: 0.5})
	}
	r := enginetest.Rand(3)
	set := func(s state, be engine.Backend, x, w, y []float32) {
		engine.SetF32(be, s.x, x)
		engine.SetF32(be, s.w, w)
		engine.SetF32(be, s.y, y)
	}
	sg, sp := newState(b), newState(plain)

	if _, err := b.Record(func() { gemm(b, sg) }); err == nil || !strings.Contains(err.Error(), "recording") {
		t.Fatalf("recording a split GEMM before the workspace exists: error %v, want a failed recording", err)
	}
	gemm(b, sg) // grows the workspace
	rec, err := b.Record(func() { gemm(b, sg) })
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Free()
	for step := range 3 {
		if step == 2 { // a larger split GEMM run plainly replaces the workspace
			size := b.wsSize
			big := engine.MustAlloc(b, engine.BF16, 64, 4096)
			b.Gemm(engine.MustAlloc(b, engine.F32, 64, 64), big, big, engine.GemmParams{TransB: true, Alpha: 1})
			if b.wsSize <= size || len(b.retired) == 0 {
				t.Fatalf("the workspace was not replaced (%d bytes, then %d; %d retired)", size, b.wsSize, len(b.retired))
			}
		}
		x := enginetest.Values(r, engine.BF16, m*k, 1)
		w := enginetest.Values(r, engine.BF16, n*k, 1)
		y := enginetest.Values(r, engine.F32, m*n, 1)
		set(sg, b, x, w, y)
		set(sp, plain, x, w, y)
		ops0, _ := b.Launches()
		plainOps0, _ := plain.Launches()
		if err := rec.Replay(); err != nil {
			t.Fatal(err)
		}
		gemm(plain, sp)
		ops1, _ := b.Launches()
		plainOps1, _ := plain.Launches()
		if got, want := ops1-ops0, plainOps1-plainOps0; got != want || got != 2 {
			t.Errorf("step %d: a replay counts %d launches, the GEMM run plainly %d; want 2", step, got, want)
		}
		sameBits(t, fmt.Sprintf("step %d: y", step), engine.ToF32(b, sg.y), engine.ToF32(plain, sp.y))
	}
}
