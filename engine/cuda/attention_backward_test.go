//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/enginetest"
)

// attnBwdBackend opens a backend whose attention backward runs cfg.
func attnBwdBackend(t *testing.T, cfg AttentionConfig) *Backend {
	t.Helper()
	b, err := New(Options{GEMM: "own", Attention: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// attnBwdCase returns the enginetest.AttnBwdCases entry named name.
func attnBwdCase(name string) enginetest.AttnBwdCase {
	for _, c := range enginetest.AttnBwdCases {
		if c.Name == name {
			return c
		}
	}
	panic("no attention backward case " + name)
}

// TestAttentionBackwardConfigs runs every compiled configuration of the
// backward (kernels/attention_backward.cu: rows × keys × stages × keys per
// warp for bf16 at head width 128, the defaults elsewhere) with several splits of the query
// axis, each checked whole against the float64 gradient: a causal case
// whose sequences span several key blocks and query tiles (GQA 4, width
// 128), and a non-causal one (width 72: padded columns). The tuning sweep
// (AttentionConfigs) must list exactly these rows × keys × stages × keys
// per warp.
func TestAttentionBackwardConfigs(t *testing.T) {
	causal := attnBwdCase("causal packed 200,57,1 H8/G2 dh128")
	nonCausal := attnBwdCase("non-causal packed 130,20 H2/G2 dh72")
	type run struct {
		c     enginetest.AttnBwdCase
		dt    engine.DType
		cfg   AttentionConfig
		split []int
	}
	var runs []run
	// Rows, keys, stages, keys per warp (0: the default, 16) and dQ columns
	// per unit (0: the default, 32).
	compiled := [][5]int{{64, 64, 1, 0, 0}, {64, 64, 2, 0, 0}, {64, 128, 1, 0, 0}, {64, 128, 2, 0, 0}, {128, 64, 1, 0, 0},
		{128, 64, 2, 0, 0}, {128, 128, 1, 0, 0}, {128, 128, 2, 0, 0}, {64, 64, 2, 32, 0}, {64, 128, 2, 32, 0},
		{128, 128, 1, 32, 0}, {128, 128, 1, 0, 64}}
	for _, rks := range compiled {
		cfg := AttentionConfig{BwdRows: rks[0], BwdKeys: rks[1], BwdStages: rks[2], BwdWarpKeys: rks[3], BwdDQCols: rks[4]}
		runs = append(runs, run{causal, engine.BF16, cfg, []int{1, 3}}, run{nonCausal, engine.BF16, cfg, []int{2}})
	}
	// FlashAttention-2's layout with dQ by atomics, and over GQA 3 (query
	// tiles that end inside a key's rows).
	fa2 := AttentionConfig{BwdRows: 128, BwdKeys: 128, BwdStages: 1, BwdWarpKeys: 32}
	fa2atomic := fa2
	fa2atomic.BwdDQAtomic = 1
	fa2own := AttentionConfig{BwdRows: 64, BwdKeys: 128, BwdStages: 2, BwdWarpKeys: 32, BwdDQAtomic: 1} // its tile too
	runs = append(runs, run{causal, engine.BF16, fa2atomic, []int{1}}, run{causal, engine.BF16, fa2own, []int{1}},
		run{attnBwdCase("causal packed 90,41 H6/G2 dh128"), engine.BF16, fa2, []int{1, 2}})
	// The sweep (AttentionConfigs) lists every one of them, and no other.
	swept := map[[5]int]bool{}
	for _, c := range AttentionConfigs() {
		if c.BwdRows != 0 || c.BwdKeys != 0 || c.BwdStages != 0 || c.BwdWarpKeys != 0 || c.BwdDQCols != 0 {
			swept[[5]int{c.BwdRows, c.BwdKeys, c.BwdStages, c.BwdWarpKeys, c.BwdDQCols}] = true
		}
	}
	for _, rks := range compiled {
		if !swept[rks] {
			t.Errorf("AttentionConfigs() lacks the backward's rows, keys, stages, keys per warp, dQ columns %v", rks)
		}
		delete(swept, rks)
	}
	for rks := range swept {
		t.Errorf("AttentionConfigs() lists the backward's rows, keys, stages, keys per warp, dQ columns %v, which is not compiled", rks)
	}
	// dQ by atomics (bf16; f32 ignores the mode), with and without a split.
	atomic := AttentionConfig{BwdDQAtomic: 1}
	runs = append(runs, run{causal, engine.BF16, atomic, []int{1, 3}}, run{nonCausal, engine.BF16, atomic, []int{2}},
		run{attnBwdCase("causal T=300 H4/G1 dh64"), engine.BF16, atomic, []int{4}},
		run{attnBwdCase("uncovered rows H4/G1 dh16"), engine.BF16, atomic, []int{1}},
		run{attnBwdCase("uncovered rows H4/G1 dh16"), engine.F32, atomic, []int{1}})
	// The defaults of the other widths and of f32, and more splits.
	runs = append(runs,
		run{attnBwdCase("causal T=300 H4/G1 dh64"), engine.BF16, AttentionConfig{}, []int{1, 4, 7}},
		run{attnBwdCase("prefill and decode over caches H4/G2 dh32"), engine.BF16, AttentionConfig{}, []int{1, 5}},
		run{causal, engine.F32, AttentionConfig{BwdRows: 64, BwdKeys: 64, BwdStages: 1}, []int{1, 2, 5}},
		run{attnBwdCase("uncovered rows H4/G1 dh16"), engine.F32, AttentionConfig{}, []int{1, 3}},
	)
	for i, r := range runs {
		for _, split := range r.split {
			cfg := r.cfg
			cfg.BwdSplit = split
			t.Run(fmt.Sprintf("%s/%v/%s", r.c.Name, r.dt, cfg), func(t *testing.T) {
				need := bwdSmem128[[4]int{cfg.BwdRows, cfg.BwdKeys, cfg.BwdStages, cfg.BwdWarpKeys}]
				if r.dt == engine.BF16 && r.c.Dh > 64 && need > sharedMemoryOptin() {
					t.Skipf("needs %d KiB of shared memory per block; this device has %d", need>>10, sharedMemoryOptin()>>10)
				}
				enginetest.AttentionBackwardCheck(t, attnBwdBackend(t, cfg), r.c, r.dt, uint64(900+i))
			})
		}
	}
}

// bwdSmem128 is the shared memory, in bytes, a bf16 backward block of head
// width 128 needs per (rows, keys, stages, keys per warp)
// (kernels/attention_backward.cu's table, rounded up to whole KiB): the
// configurations over a device's opt-in limit (an A100's 163 KiB) cannot
// run there.
var bwdSmem128 = map[[4]int]int{
	{64, 64, 1, 0}: 73 << 10, {64, 64, 2, 0}: 106 << 10, {64, 128, 1, 0}: 113 << 10, {64, 128, 2, 0}: 146 << 10,
	{128, 64, 1, 0}: 114 << 10, {128, 64, 2, 0}: 179 << 10, {128, 128, 1, 0}: 162 << 10, {128, 128, 2, 0}: 227 << 10,
	{64, 64, 2, 32}: 114 << 10, {64, 128, 2, 32}: 162 << 10, {128, 128, 1, 32}: 194 << 10,
}

// TestAttentionBackwardRefusesConfigs: configurations the backward is not
// built for fail the op, naming it.
func TestAttentionBackwardRefusesConfigs(t *testing.T) {
	for _, x := range []struct {
		cfg AttentionConfig
		dt  engine.DType
		dh  int
	}{
		{AttentionConfig{BwdRows: 32}, engine.BF16, 128},
		{AttentionConfig{BwdRows: 96}, engine.BF16, 128},
		{AttentionConfig{BwdKeys: 32}, engine.BF16, 128},
		{AttentionConfig{BwdStages: 3}, engine.BF16, 128},
		{AttentionConfig{BwdRows: 128}, engine.BF16, 64}, // the sweep is built at width 128 only
		{AttentionConfig{BwdDQAtomic: 2}, engine.BF16, 128},
		{AttentionConfig{BwdDQAtomic: 2}, engine.F32, 128}, // ignored by f32, but not a value at all
		{AttentionConfig{BwdWarpKeys: 24}, engine.BF16, 128},
		{AttentionConfig{BwdWarpKeys: 32, BwdKeys: 64}, engine.BF16, 128}, // not compiled with 64 keys
		{AttentionConfig{BwdWarpKeys: 32}, engine.BF16, 64},               // nor below width 128
	} {
		b := attnBwdBackend(t, x.cfg)
		c := enginetest.AttnBwdCase{Name: "small", H: 2, G: 1, Dh: x.dh, Seqs: [][4]int{{0, 5, 0, 5}}}
		msg := catch(func() { enginetest.AttentionBackwardCheck(t, b, c, x.dt, 1) })
		if !strings.Contains(msg, "AttentionBackward") {
			t.Errorf("config %q, %v, width %d: panic %q, want a failure naming AttentionBackward", x.cfg, x.dt, x.dh, msg)
		}
	}
	// The tile fields tune bf16: f32 runs its one configuration whatever
	// they say, and still matches the reference.
	b := attnBwdBackend(t, AttentionConfig{BwdRows: 128, BwdKeys: 128, BwdStages: 1})
	c := enginetest.AttnBwdCase{Name: "small", H: 2, G: 1, Dh: 128, Seqs: [][4]int{{0, 5, 0, 5}}}
	if msg := catch(func() { enginetest.AttentionBackwardCheck(t, b, c, engine.F32, 1) }); msg != "" {
		t.Errorf("f32 under bf16's tiles: %s", msg)
	}
}

// TestAttentionBackwardDeterministic: the backward gives the same bits on
// every run, whatever order the blocks run in (dQ and the split parts of
// dK/dV are summed in a fixed order) and, under the emulator, with each
// block's threads run in order or reversed.
func TestAttentionBackwardDeterministic(t *testing.T) {
	if setReversedThreads(false) {
		t.Cleanup(func() { setReversedThreads(false) })
	}
	for _, x := range []struct {
		c   enginetest.AttnBwdCase
		dt  engine.DType
		cfg AttentionConfig
	}{
		{attnBwdCase("causal T=300 H4/G1 dh64"), engine.BF16, AttentionConfig{BwdSplit: 3}},
		{attnBwdCase("causal packed 200,57,1 H8/G2 dh128"), engine.BF16, AttentionConfig{}},
		{attnBwdCase("causal packed 200,57,1 H8/G2 dh128"), engine.BF16, AttentionConfig{BwdRows: 64, BwdKeys: 128, BwdStages: 2, BwdWarpKeys: 32, BwdSplit: 2}},
		{attnBwdCase("non-causal queries over more keys H4/G2 dh64"), engine.F32, AttentionConfig{BwdSplit: 2}},
	} {
		t.Run(fmt.Sprintf("%s/%v/%s", x.c.Name, x.dt, x.cfg), func(t *testing.T) {
			b := attnBwdBackend(t, x.cfg)
			var first [3][]float32
			for run, reverse := range []bool{false, true, false, true} {
				label := fmt.Sprintf("run %d", run)
				if setReversedThreads(reverse) {
					label += fmt.Sprintf(" (threads reversed: %v)", reversedThreads())
				}
				dq, dk, dv := enginetest.AttentionBackwardCheck(t, b, x.c, x.dt, 77)
				got := [3][]float32{dq, dk, dv}
				if run == 0 {
					first = got
					continue
				}
				for i, name := range []string{"dq", "dk", "dv"} {
					sameBits(t, label+": "+name, got[i], first[i])
				}
			}
		})
	}
}

// TestAttentionBackwardDQAtomic: with bwd.dq_atomic=1 the bf16 backward
// sums dQ by atomics, which a third launch turns into dq (the gradients are
// checked against the float64 reference by TestAttentionBackwardConfigs);
// f32 ignores the mode, as it does the tile fields.
func TestAttentionBackwardDQAtomic(t *testing.T) {
	for _, c := range []struct {
		cfg  AttentionConfig
		dt   engine.DType
		want int64
	}{
		{AttentionConfig{}, engine.BF16, 2},
		{AttentionConfig{BwdDQAtomic: 1}, engine.BF16, 3},
		{AttentionConfig{BwdDQAtomic: 1, BwdSplit: 2}, engine.BF16, 3},
		{AttentionConfig{BwdDQAtomic: 1}, engine.F32, 2},
	} {
		if got := runSmallAttention(attnBwdBackend(t, c.cfg), c.dt); got != c.want {
			t.Errorf("%v, config %q: the backward took %d launches, want %d", c.dt, c.cfg, got, c.want)
		}
	}
}

// TestAttentionRejectsHeadWidth checks that a head width the kernels do not
// take panics naming it, in both directions, before any launch.
func TestAttentionRejectsHeadWidth(t *testing.T) {
	b := newBackend(t)
	defer b.Close()
	for _, dh := range []int{12, 136} {
		q := engine.MustAlloc(b, engine.BF16, 3, 2, dh)
		k := engine.MustAlloc(b, engine.BF16, 3, 1, dh)
		v := engine.MustAlloc(b, engine.BF16, 3, 1, dh)
		out := engine.MustAlloc(b, engine.BF16, 3, 2, dh)
		dq := engine.MustAlloc(b, engine.BF16, 3, 2, dh)
		dk := engine.MustAlloc(b, engine.BF16, 3, 1, dh)
		dv := engine.MustAlloc(b, engine.BF16, 3, 1, dh)
		lse := engine.MustAlloc(b, engine.F32, 3, 2)
		seqs := engine.FromI32(b, []int32{0, 3, 0, 3}, 1, 4)
		p := engine.AttentionParams{Scale: 0.5}
		for op, f := range map[string]func(){
			"Attention":         func() { b.Attention(out, lse, q, k, v, seqs, p) },
			"AttentionBackward": func() { b.AttentionBackward(dq, dk, dv, out, out, lse, q, k, v, seqs, p) },
		} {
			want := fmt.Sprintf("cuda: %s: q [3, 2, %d] has heads of width %d", op, dh, dh)
			if msg := catch(f); !strings.Contains(msg, want) {
				t.Errorf("%s at head width %d panicked with %q, want it to contain %q", op, dh, msg, want)
			}
		}
	}
}
