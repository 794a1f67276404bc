package engine_test

import (
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
)

// TestPoolHighWater checks that the pool counts the bytes its tensors asked
// for, before size-class rounding, and keeps the most ever live at once.
func TestPoolHighWater(t *testing.T) {
	pool := engine.NewPool(cpu.New(cpu.Options{Threads: 1}))
	a := pool.MustGet(engine.F32, 25)       // 100 B, a 256 B class
	b := pool.MustGet(engine.BF16, 3, 1000) // 6000 B, a 6144 B class
	type want struct{ requested, highWater int }
	check := func(step string, w want) {
		t.Helper()
		st := pool.Stats()
		if st.Requested != w.requested || st.HighWater != w.highWater {
			t.Errorf("%s: requested %d, high water %d; want %d, %d", step, st.Requested, st.HighWater, w.requested, w.highWater)
		}
		if st.Requested > st.BytesInUse {
			t.Errorf("%s: requested %d exceeds the %d bytes in use", step, st.Requested, st.BytesInUse)
		}
	}
	check("two live", want{6100, 6100})
	pool.Put(b)
	check("one put back", want{100, 6100})
	c := pool.MustGet(engine.I32, 1400) // 5600 B: reuses b's 6144 B buffer
	check("a smaller tensor in the cached buffer", want{5700, 6100})
	d := pool.MustGet(engine.F32, 1)
	check("below the peak", want{5704, 6100})
	e := pool.MustGet(engine.F32, 200)
	check("a new peak", want{6504, 6504})
	for _, x := range []*engine.Tensor{a, c, d, e} {
		pool.Put(x)
	}
	check("all put back", want{0, 6504})
}
