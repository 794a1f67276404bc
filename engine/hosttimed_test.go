package engine_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"reflect"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
)

// TestTimeOnHost profiles a GEMM, a fill and an attention on the CPU
// backend through TimeOnHost: the ops in order, each one call with a
// positive time, the GEMM's extents, FLOPs and bytes, attention's extents;
// the GEMM's result the unwrapped backend's, bit for bit; nothing recorded
// outside a profile; the errors of a profile started twice or stopped
// without one.
func TestTimeOnHost(t *testing.T) {
	plain := cpu.New(cpu.Options{Threads: 1})
	tb := engine.TimeOnHost(plain)
	if _, err := tb.StopOpProfile(); err == nil {
		t.Error("StopOpProfile without a profile succeeded")
	}
	a, w := engine.MustAlloc(tb, engine.F32, 64, 32), engine.MustAlloc(tb, engine.F32, 48, 32)
	c, want := engine.MustAlloc(tb, engine.F32, 64, 48), engine.MustAlloc(tb, engine.F32, 64, 48)
	av, wv := make([]float32, 64*32), make([]float32, 48*32)
	for i := range av {
		av[i] = float32(math.Sin(float64(i)))
	}
	for i := range wv {
		wv[i] = float32(math.Cos(float64(i)))
	}
	engine.SetF32(tb, a, av)
	engine.SetF32(tb, w, wv)
	tb.Gemm(c, a, w, engine.GemmParams{TransB: true, Alpha: 1}) // outside a profile: not recorded
	q, k := engine.MustAlloc(tb, engine.F32, 4, 2, 8), engine.MustAlloc(tb, engine.F32, 4, 1, 8)
	out, lse := engine.MustAlloc(tb, engine.F32, 4, 2, 8), engine.MustAlloc(tb, engine.F32, 4, 2)
	seqs := engine.MustAlloc(tb, engine.I32, 1, 4)
	engine.SetI32(tb, seqs, []int32{0, 4, 0, 4})

	ops, err := engine.ProfileOps(tb, func() error {
		if err := tb.StartOpProfile(); err == nil {
			t.Error("a second StartOpProfile succeeded")
		}
		tb.Gemm(c, a, w, engine.GemmParams{TransB: true, Alpha: 1})
		tb.Fill(q, 0.25)
		tb.Attention(out, lse, q, k, k, seqs, engine.AttentionParams{Scale: 0.5})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantOps := []engine.OpTime{
		{Op: "Gemm", Extents: "64×48×32", FLOPs: 2 * 64 * 48 * 32, Bytes: 4 * (64*32 + 48*32 + 64*48), Launches: 1},
		{Op: "Fill", Launches: 1},
		{Op: "Attention", Extents: "4×2×8, 4 keys", Launches: 1},
	}
	if len(ops) != len(wantOps) {
		t.Fatalf("profiled %v, want %d ops", ops, len(wantOps))
	}
	for i, o := range ops {
		if o.Time <= 0 {
			t.Errorf("op %d (%s): time %v", i, o.Op, o.Time)
		}
		o.Time = 0
		if o != wantOps[i] {
			t.Errorf("op %d: %+v, want %+v", i, o, wantOps[i])
		}
	}
	plain.Gemm(want, a, w, engine.GemmParams{TransB: true, Alpha: 1})
	got, ref := engine.ToF32(tb, c), engine.ToF32(plain, want)
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(ref[i]) {
			t.Fatalf("element %d: %v through TimeOnHost, %v without", i, got[i], ref[i])
		}
	}
}

// TestTimeOnHostTimesEveryOp checks that TimeOnHost's backend declares
// every op of engine.Backend itself — an op added to the interface and not
// to hosttimed.go would run untimed through the embedded backend — and
// nothing else: the buffers, transfers, Sync, Name and Device pass through.
func TestTimeOnHostTimesEveryOp(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "hosttimed.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{}
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv != nil && fn.Name.IsExported() {
			declared[fn.Name.Name] = true
		}
	}
	passed := map[string]bool{"Name": true, "Device": true, "NewBuffer": true, "FreeBuffer": true,
		"Upload": true, "Download": true, "Sync": true}
	bt := reflect.TypeOf((*engine.Backend)(nil)).Elem()
	for i := range bt.NumMethod() {
		m := bt.Method(i).Name
		if declared[m] == passed[m] {
			t.Errorf("engine.Backend.%s: timed by TimeOnHost %v, want %v", m, declared[m], !passed[m])
		}
	}
}
