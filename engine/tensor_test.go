package engine_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
)

func TestViews(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 1})
	vals := make([]float32, 24)
	for i := range vals {
		vals[i] = float32(i)
	}
	x := engine.FromF32(b, engine.F32, vals, 4, 3, 2)
	rows := x.Rows(1, 3)
	if !rows.Shape().Equal(engine.Shape{2, 3, 2}) {
		t.Fatalf("Rows shape %v", rows.Shape())
	}
	got := engine.ToF32(b, rows)
	if got[0] != 6 || got[11] != 17 {
		t.Errorf("Rows(1,3) = %v", got)
	}
	flat := rows.Reshape(-1, 4)
	if !flat.Shape().Equal(engine.Shape{3, 4}) {
		t.Errorf("Reshape(-1, 4) of %v = %v", rows.Shape(), flat.Shape())
	}
	// Writing through a view changes the parent.
	b.Fill(flat.Rows(0, 1), -1)
	if v := engine.ToF32(b, x); v[6] != -1 || v[9] != -1 || v[10] != 10 {
		t.Errorf("write through view: %v", v)
	}
}

func TestViewPanicsNameShapes(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 1})
	x := engine.MustAlloc(b, engine.BF16, 4, 6)
	cases := []struct {
		name string
		f    func()
		want string
	}{
		{"rows out of range", func() { x.Rows(2, 5) }, "[4, 6]"},
		{"reshape count", func() { x.Reshape(5, 5) }, "[5, 5]"},
		{"must shape", func() { engine.MustShape("Op", "w", x, 4, 7) }, "[4, 7]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, c.want) {
					t.Errorf("panic %q does not name %s", msg, c.want)
				}
			}()
			c.f()
		})
	}
}

// TestPoolStepAllocatesOnce runs a small step — chunked token log-probs
// forward and backward with temporaries from a pool — several times and
// checks that only the first iteration draws buffers from the backend.
func TestPoolStepAllocatesOnce(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	pool := engine.NewPool(b)
	const n, d, v = 10, 8, 50
	h := engine.FromF32(b, engine.F32, make([]float32, n*d), n, d)
	w := engine.FromF32(b, engine.F32, make([]float32, v*d), v, d)
	tg := engine.FromI32(b, make([]int32, n), n)
	step := func() {
		logp, lse := pool.MustGet(engine.F32, n), pool.MustGet(engine.F32, n)
		dh, dw := pool.MustGet(engine.F32, n, d), pool.MustGet(engine.F32, v, d)
		b.Fill(dw, 0)
		if err := engine.TokenLogProbs(b, pool, logp, lse, h, w, tg, 4); err != nil {
			t.Fatal(err)
		}
		b.Fill(logp, 1)
		if err := engine.TokenLogProbsBackward(b, pool, dh, dw, logp, h, w, lse, tg, 4); err != nil {
			t.Fatal(err)
		}
		for _, x := range []*engine.Tensor{logp, lse, dh, dw} {
			pool.Put(x)
		}
	}
	step()
	first := pool.Stats()
	for i := 0; i < 3; i++ {
		step()
	}
	st := pool.Stats()
	if st.NewBuffers != first.NewBuffers {
		t.Errorf("buffers allocated after the first step: %d, then %d", first.NewBuffers, st.NewBuffers)
	}
	if st.BytesInUse != 0 || st.Reused == 0 {
		t.Errorf("stats after steps: %+v", st)
	}
	pool.Trim()
	if pool.Stats().BytesCached != 0 {
		t.Errorf("Trim left %d bytes cached", pool.Stats().BytesCached)
	}
	defer func() {
		if recover() == nil {
			t.Error("Put of a foreign tensor did not panic")
		}
	}()
	pool.Put(h)
}

// TestNewTensorAlignment: an offset that is not a multiple of the dtype's
// size is a programmer's mistake (a GPU faults on the first element load),
// so NewTensor panics, naming the offset, dtype and shape; a multiple of
// the size that is not 16-byte aligned is a valid view.
func TestNewTensorAlignment(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 1})
	buf, err := b.NewBuffer(64)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		dt    engine.DType
		off   int
		shape []int
		bad   bool
	}{
		{engine.F32, 0, []int{3}, false},
		{engine.F32, 4, []int{2, 3}, false},
		{engine.F32, 2, []int{3}, true},
		{engine.F32, 1, []int{2, 2}, true},
		{engine.F32, 6, []int{1}, true},
		{engine.I32, 6, []int{5}, true},
		{engine.I32, 8, []int{5}, false},
		{engine.BF16, 2, []int{7}, false},
		{engine.BF16, 1, []int{7}, true},
		{engine.F16, 6, []int{3, 1}, false},
		{engine.F16, 3, []int{3, 1}, true},
		{engine.F32, 2, []int{0}, true}, // even an empty tensor: its address is still passed to kernels
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%v_%v_at_%d", c.dt, engine.Shape(c.shape), c.off), func(t *testing.T) {
			defer func() {
				r := recover()
				if !c.bad {
					if r != nil {
						t.Errorf("panicked: %v", r)
					}
					return
				}
				msg, _ := r.(string)
				if msg == "" {
					t.Fatalf("no panic (recovered %v)", r)
				}
				for _, want := range []string{fmt.Sprintf("offset %d", c.off), c.dt.String(), engine.Shape(c.shape).String(), "multiple"} {
					if !strings.Contains(msg, want) {
						t.Errorf("panic %q does not name %q", msg, want)
					}
				}
			}()
			x := engine.NewTensor(buf, c.off, c.dt, c.shape...)
			if x.Offset() != c.off {
				t.Errorf("Offset() = %d, want %d", x.Offset(), c.off)
			}
		})
	}
}

func TestStacked(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 1})
	buf, _ := b.NewBuffer(4 * 24)
	other, _ := b.NewBuffer(4 * 24)
	all := engine.NewTensor(buf, 0, engine.F32, 6, 4)
	x, y, z := all.Rows(0, 1), all.Rows(1, 3), all.Rows(3, 6)
	if s := engine.Stacked(x, y, z); s == nil || !s.Shape().Equal(engine.Shape{6, 4}) || s.Offset() != 0 {
		t.Errorf("Stacked(rows 0, 1–2, 3–5) = %v, want all 6 rows", s)
	}
	if s := engine.Stacked(y, z); s == nil || !s.Shape().Equal(engine.Shape{5, 4}) || s.Offset() != 16 {
		t.Errorf("Stacked(rows 1–2, 3–5) = %v, want rows 1–5", s)
	}
	for name, ts := range map[string][]*engine.Tensor{
		"out of order": {y, x}, "a gap": {x, z}, "a nil": {x, nil},
		"another buffer": {x, engine.NewTensor(other, 16, engine.F32, 2, 4)},
		"another width":  {x, engine.NewTensor(buf, 16, engine.F32, 4, 2)},
	} {
		if s := engine.Stacked(ts...); s != nil {
			t.Errorf("%s: Stacked = %v, want nil", name, s)
		}
	}
}
