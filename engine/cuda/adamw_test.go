//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"math"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/engine/enginetest"
	"github.com/turnwise/turnwise/optim"
)

// Checks of the multi-tensor AdamW beyond the conformance suite: the kernel
// and the CPU backend compute the same operations, so their results must be
// the same bits; the device-side table is built once; and the optimizer,
// with clipping and a skipped step, runs on this backend as on the CPU.

// multiSpan is one parameter of TestAdamWMultiMatchesCPU.
type multiSpan struct {
	dt      engine.DType
	n       int
	byteOff int // the parameter's offset in its buffer: 0, or a multiple of the element size that is not 16-byte aligned (no vector path)
}

// runMulti builds the table of spans on b (flat offsets padded to 4 elements
// after a gap of 1, so some overlaps take the vector path and some not),
// takes three steps and returns the bytes of every parameter, m, v and
// master.
func runMulti(b engine.Backend, spans []multiSpan, gdt engine.DType) []byte {
	r := enginetest.Rand(11)
	var ts []engine.AdamWSpan
	end, mend := 0, 0
	for _, s := range spans {
		buf, err := b.NewBuffer(s.byteOff + s.n*s.dt.Size())
		if err != nil {
			panic(err)
		}
		w := engine.NewTensor(buf, s.byteOff, s.dt, s.n)
		engine.SetF32(b, w, enginetest.Values(r, s.dt, s.n, 1))
		sp := engine.AdamWSpan{W: w, Off: (end + 4) / 4 * 4, MasterOff: -1}
		end = sp.Off + s.n
		if s.dt != engine.F32 {
			sp.MasterOff, mend = mend+1, mend+1+s.n
		}
		ts = append(ts, sp)
	}
	table := engine.NewParamTable(ts)
	defer table.Free(b)
	grad := engine.MustAlloc(b, gdt, end)
	m, v := engine.MustAlloc(b, engine.F32, end), engine.MustAlloc(b, engine.F32, end)
	master := engine.MustAlloc(b, engine.F32, max(mend, 1))
	for _, s := range ts {
		if s.MasterOff >= 0 {
			b.Cast(engine.NewTensor(master.Buffer(), 4*s.MasterOff, engine.F32, s.W.Numel()), s.W)
		}
	}
	for step := 1; step <= 3; step++ {
		engine.SetF32(b, grad, enginetest.Values(r, gdt, end, 1))
		b.AdamWMulti(table, grad, m, v, master, engine.AdamWParams{LR: 1e-2, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8,
			WeightDecay: 0.1, Step: step, GradScale: 0.37 * float32(step)})
	}
	var out []byte
	for _, x := range append([]*engine.Tensor{m, v, master}, wsOf(ts)...) {
		bs := make([]byte, x.Bytes())
		b.Download(bs, x)
		out = append(out, bs...)
	}
	return out
}

func wsOf(spans []engine.AdamWSpan) []*engine.Tensor {
	var ws []*engine.Tensor
	for _, s := range spans {
		ws = append(ws, s.W)
	}
	return ws
}

// TestAdamWMultiMatchesCPU: spans that straddle the kernel's 4096-element
// chunks, parameters of every float dtype, aligned and not, and a table
// longer than a chunk holds: the same bits as the CPU backend.
func TestAdamWMultiMatchesCPU(t *testing.T) {
	g, c := newBackend(t), cpu.New(cpu.Options{})
	many := make([]multiSpan, 700)
	for i := range many {
		dt := []engine.DType{engine.F32, engine.BF16, engine.F16}[i%3]
		many[i] = multiSpan{dt: dt, n: 1 + i%9, byteOff: dt.Size() * (i % 2)}
	}
	cases := []struct {
		name  string
		gdt   engine.DType
		spans []multiSpan
	}{
		{"straddling", engine.F32, []multiSpan{{engine.F32, 5000, 0}, {engine.BF16, 1, 0}, {engine.F32, 4095, 4},
			{engine.BF16, 8193, 0}, {engine.F16, 3, 2}, {engine.BF16, 4100, 2}}},
		{"bf16_grad", engine.BF16, []multiSpan{{engine.BF16, 4097, 0}, {engine.F32, 9, 0}}},
		{"many_small", engine.F32, many},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, want := runMulti(g, tc.spans, tc.gdt), runMulti(c, tc.spans, tc.gdt)
			if i := firstDiff(got, want); i >= 0 {
				t.Errorf("byte %d of %d differs from the CPU backend's", i, len(want))
			}
		})
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// TestAdamWMultiTableCached: the table goes to the device on the first call
// only, and Free releases it.
func TestAdamWMultiTableCached(t *testing.T) {
	g := newBackend(t)
	w := engine.FromF32(g, engine.F32, []float32{1, 2, 3}, 3)
	table := engine.NewParamTable([]engine.AdamWSpan{{W: w, MasterOff: -1}})
	grad := engine.FromF32(g, engine.F32, []float32{0.5, 0.5, 0.5}, 3)
	m, v := engine.MustAlloc(g, engine.F32, 3), engine.MustAlloc(g, engine.F32, 3)
	p := engine.AdamWParams{LR: 1e-2, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, Step: 1, GradScale: 1}
	g.AdamWMulti(table, grad, m, v, nil, p)
	first := table.Cache()
	if first == nil {
		t.Fatal("no device table after the first call")
	}
	p.Step = 2
	g.AdamWMulti(table, grad, m, v, nil, p)
	if table.Cache() != first {
		t.Error("the second call built the table again")
	}
	table.Free(g)
	if table.Cache() != nil {
		t.Error("Free left the table's cache")
	}
}

// optimizerRun trains a small mixed-precision parameter set with clipping
// for four steps on b, the third with an infinite gradient, and returns the
// weights, the step results and the counts.
func optimizerRun(t *testing.T, b engine.Backend) ([]float32, []optim.StepResult, [2]int) {
	t.Helper()
	r := enginetest.Rand(21)
	params := map[string]*engine.Tensor{
		"a": engine.FromF32(b, engine.BF16, enginetest.Values(r, engine.BF16, 4099, 1), 4099),
		"b": engine.FromF32(b, engine.F32, enginetest.Values(r, engine.F32, 37, 1), 37),
		"c": engine.FromF32(b, engine.F16, enginetest.Values(r, engine.F16, 3, 1), 3),
	}
	o, err := optim.NewAdamW(b, optim.AdamWConfig{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, MaxGradNorm: 1}, params)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Free()
	var res []optim.StepResult
	for step := 0; step < 4; step++ {
		o.ZeroGrad()
		for _, p := range o.Params {
			gv := enginetest.Values(r, engine.F32, p.G.Numel(), 2)
			if step == 2 && p.Name == "b" {
				gv[5] = float32(math.Inf(-1))
			}
			engine.SetF32(b, p.G, gv)
		}
		res = append(res, o.Step(1e-2, 0.5))
	}
	var w []float32
	for _, p := range o.Params {
		w = append(w, engine.ToF32(b, p.W)...)
	}
	return w, res, [2]int{o.Steps, o.Skipped}
}

// TestOptimizerMatchesCPU runs the optimizer — one zeroing, one global norm
// and one AdamWMulti per step — on this backend and on the CPU: the same
// clipping, the same skipped step, the same weights (up to the order of the
// norm's f64 sum, which may move its f32 rounding by one unit).
func TestOptimizerMatchesCPU(t *testing.T) {
	gw, gres, gcount := optimizerRun(t, newBackend(t))
	cw, cres, ccount := optimizerRun(t, cpu.New(cpu.Options{}))
	if gcount != ccount || gcount != [2]int{3, 1} {
		t.Errorf("steps, skipped: %v here, %v on the CPU, want [3 1]", gcount, ccount)
	}
	for i := range gres {
		g, c := gres[i], cres[i]
		if g.Skipped != c.Skipped || math.Abs(float64(g.GradNorm-c.GradNorm)) > 1e-6*float64(c.GradNorm) ||
			math.Abs(float64(g.Clip-c.Clip)) > 1e-6 {
			t.Errorf("step %d: %+v here, %+v on the CPU", i, g, c)
		}
		if !c.Skipped && !(c.Clip < 1) {
			t.Errorf("step %d: clip %v: the case should clip", i, c.Clip)
		}
	}
	if len(gw) != len(cw) {
		t.Fatalf("%d weights here, %d on the CPU", len(gw), len(cw))
	}
	enginetest.Close(t, "weights", gw, enginetest.F64(cw), 1e-6)
}

// TestAdamWAlignment: AdamW takes vector loads only when its pointers are
// 16-byte aligned; a view that is not (at byte offset 4) must give the same
// bits.
func TestAdamWAlignment(t *testing.T) {
	g := newBackend(t)
	r := enginetest.Rand(6)
	for _, dt := range []engine.DType{engine.F32, engine.BF16, engine.F16} {
		const m = 1003
		pv, gv := enginetest.Values(r, engine.F32, m, 1), enginetest.Values(r, dt, m, 1)
		sq := make([]float32, m) // a valid second moment
		for i, x := range pv {
			sq[i] = x * x
		}
		p := engine.AdamWParams{LR: 1e-2, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, GradScale: 0.5, Step: 3}
		var outs [2][]float32
		for k, off := range []int{0, 4} {
			param, mt, vt := at(g, engine.F32, off, pv), at(g, engine.F32, off, gv), at(g, engine.F32, off, sq)
			g.AdamW(param, at(g, dt, off, gv), mt, vt, nil, p)
			outs[k] = append(append(engine.ToF32(g, param), engine.ToF32(g, mt)...), engine.ToF32(g, vt)...)
		}
		sameBits(t, fmt.Sprintf("%v AdamW misaligned (param, m, v)", dt), outs[1], outs[0])
	}
}

// TestAdamWMatchesCPUBits: AdamW and AdamWMulti give the CPU backend's bits
// for hyperparameters where the launcher's constants are sensitive to how
// they are formed: at lr 0.1 and weight decay 0.3, 1 − lr·wd is 0.97000003
// with the product rounded to f32 first (the CPU's way) and 0.96999997 when
// a compiler fuses the two into an FMA.
func TestAdamWMatchesCPUBits(t *testing.T) {
	g, c := newBackend(t), cpu.New(cpu.Options{})
	cases := []struct {
		name   string
		lr, wd float32
	}{
		{"lr_1e-2_wd_0.1", 1e-2, 0.1},
		{"lr_0.1_wd_0.3", 0.1, 0.3},
	}
	run := func(b engine.Backend, lr, wd float32, multi bool) []float32 {
		r := enginetest.Rand(13)
		const n = 1003
		w := engine.FromF32(b, engine.F32, enginetest.Values(r, engine.F32, n, 1), n)
		grad := engine.FromF32(b, engine.F32, enginetest.Values(r, engine.F32, n, 1), n)
		m, v := engine.MustAlloc(b, engine.F32, n), engine.MustAlloc(b, engine.F32, n)
		p := engine.AdamWParams{LR: lr, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: wd, Step: 1, GradScale: 1}
		if multi {
			table := engine.NewParamTable([]engine.AdamWSpan{{W: w, MasterOff: -1}})
			defer table.Free(b)
			b.AdamWMulti(table, grad, m, v, nil, p)
		} else {
			b.AdamW(w, grad, m, v, nil, p)
		}
		return engine.ToF32(b, w)
	}
	for _, tc := range cases {
		for _, multi := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/multi=%v", tc.name, multi), func(t *testing.T) {
				sameBits(t, "weights", run(g, tc.lr, tc.wd, multi), run(c, tc.lr, tc.wd, multi))
			})
		}
	}
}
