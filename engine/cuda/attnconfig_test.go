//go:build cuda || cudaemu

package cuda

import (
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/enginetest"
)

func TestParseAttentionConfig(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    AttentionConfig
		wantErr string
	}{
		{"", AttentionConfig{}, ""},
		{"fwd.rows=128,fwd.keys=64,fwd.stages=2", AttentionConfig{FwdRows: 128, FwdKeys: 64, FwdStages: 2}, ""},
		{"fwd.warp_rows=32,fwd.keys=64", AttentionConfig{FwdWarpRows: 32, FwdKeys: 64}, ""},
		{"dec.key_warps=4", AttentionConfig{DecKeyWarps: 4}, ""},
		{"fwd.k_ring=1", AttentionConfig{FwdKRing: 1}, ""},
		{"bwd.dq_cols=64", AttentionConfig{BwdDQCols: 64}, ""},
		{"bwd.warp_keys=32,bwd.rows=128", AttentionConfig{BwdWarpKeys: 32, BwdRows: 128}, ""},
		{" bwd.split=4 , dec.split=8,dec.keys=128,bwd.rows=64,bwd.keys=128,bwd.stages=2",
			AttentionConfig{BwdSplit: 4, DecSplit: 8, DecKeys: 128, BwdRows: 64, BwdKeys: 128, BwdStages: 2}, ""},
		{"fwd.rows", AttentionConfig{}, "not name=value"},
		{"fwd.cols=3", AttentionConfig{}, `unknown name "fwd.cols"`},
		{"fwd.rows=-1", AttentionConfig{}, "not a count"},
		{"fwd.rows=x", AttentionConfig{}, "not a count"},
	} {
		got, err := ParseAttentionConfig(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("ParseAttentionConfig(%q): error %v, want one containing %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseAttentionConfig(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
			continue
		}
		if again, err := ParseAttentionConfig(got.String()); err != nil || again != got {
			t.Errorf("%+v: String %q reads back as %+v, %v", got, got.String(), again, err)
		}
	}
}

// TestAttentionConfigRefused: a configuration the kernels were not built
// for fails the op, naming it, and the defaults spelled out run.
func TestAttentionConfigRefused(t *testing.T) {
	for _, c := range []struct {
		cfg  AttentionConfig
		fail bool
	}{
		{AttentionConfig{}, false},
		{AttentionConfig{FwdRows: 64}, false},
		{AttentionConfig{FwdRows: 3}, true},
		{AttentionConfig{BwdSplit: 1000}, false}, // any split runs
		{AttentionConfig{BwdRows: 96}, true},
		{AttentionConfig{FwdRows: 128, FwdStages: 3}, false},
		{AttentionConfig{FwdStages: 4}, true},
		{AttentionConfig{FwdKeys: 128}, true}, // compiled for head width 128 only, and this is 8
		{AttentionConfig{DecSplit: 5000}, true},
		{AttentionConfig{DecKeys: 32}, true},
		{AttentionConfig{FwdWarpRows: 32}, true}, // compiled for head width 128 only
		{AttentionConfig{FwdWarpRows: 24}, true},
		{AttentionConfig{DecKeyWarps: 4}, false}, // a decoding field: this launch does not decode
		{AttentionConfig{DecKeyWarps: 2}, true},
		{AttentionConfig{FwdKRing: 8}, false}, // the default ring, compiled for every tile
		{AttentionConfig{FwdKRing: 1}, true},  // compiled for head width 128 only
		{AttentionConfig{FwdKRing: 3}, true},
	} {
		b, err := New(Options{Attention: c.cfg})
		if err != nil {
			t.Fatal(err)
		}
		msg := catch(func() { runSmallAttention(b, engine.BF16) })
		if c.fail != (msg != "") || (c.fail && !strings.Contains(msg, "Attention")) {
			t.Errorf("config %q: panic %q, want failure %v naming the op", c.cfg, msg, c.fail)
		}
		b.Close()
	}
}

// configParts reports whether c sets a field of the forward, of the
// backward, of decoding (by the names' prefixes, so that a field added to
// AttentionConfig is counted without a change here).
func configParts(c AttentionConfig) (fwd, bwd, dec bool) {
	for _, f := range attentionFields {
		if *f.get(&c) == 0 {
			continue
		}
		switch {
		case strings.HasPrefix(f.name, "fwd."):
			fwd = true
		case strings.HasPrefix(f.name, "bwd."):
			bwd = true
		case strings.HasPrefix(f.name, "dec."):
			dec = true
		default:
			panic("configParts: field " + f.name + " of no direction")
		}
	}
	return fwd, bwd, dec
}

// runSmallAttention runs the forward and the backward of one causal
// sequence of 5 tokens of dtype dt, 2 query heads over 1 key/value head of
// width 8, and returns the backward's launches.
func runSmallAttention(b *Backend, dt engine.DType) int64 {
	const n, h, g, dh = 5, 2, 1, 8
	val := func(k int) []float32 {
		v := make([]float32, k)
		for i := range v {
			v[i] = float32(i%7) / 7
		}
		return v
	}
	q := engine.FromF32(b, dt, val(n*h*dh), n, h, dh)
	k := engine.FromF32(b, dt, val(n*g*dh), n, g, dh)
	v := engine.FromF32(b, dt, val(n*g*dh), n, g, dh)
	out, dout, dq := engine.MustAlloc(b, dt, n, h, dh), engine.FromF32(b, dt, val(n*h*dh), n, h, dh), engine.MustAlloc(b, dt, n, h, dh)
	dk, dv := engine.MustAlloc(b, dt, n, g, dh), engine.MustAlloc(b, dt, n, g, dh)
	lse := engine.MustAlloc(b, engine.F32, n, h)
	seqs := engine.FromI32(b, []int32{0, n, 0, n}, 1, 4)
	for _, x := range []*engine.Tensor{q, k, v, out, dout, dq, dk, dv, lse, seqs} {
		defer b.FreeBuffer(x.Buffer())
	}
	p := engine.AttentionParams{Scale: 0.35}
	b.Attention(out, lse, q, k, v, seqs, p)
	_, before := b.Launches()
	b.AttentionBackward(dq, dk, dv, dout, out, lse, q, k, v, seqs, p)
	_, after := b.Launches()
	if err := b.Sync(); err != nil {
		panic(err)
	}
	return after - before
}

// TestAttentionConfigs runs enginetest.AttentionTunables, the forward's
// cases, once per forward or decoding configuration a sweep tries
// (AttentionConfigs: every compiled key tile, row count and stage count of
// the forward, and decoding's key tiles and splits): each must match the
// float64 reference, the same bits run after run. The backward's
// configurations leave the forward at its defaults: TestAttentionBackwardConfigs
// runs them.
func TestAttentionConfigs(t *testing.T) {
	cfgs := AttentionConfigs()
	if len(cfgs) < 2 {
		t.Fatalf("AttentionConfigs() = %v: want the defaults and more", cfgs)
	}
	seen := map[AttentionConfig]bool{}
	for _, c := range cfgs {
		if c.String() == "" {
			t.Errorf("configuration %+v prints as the defaults", c)
		}
		if seen[c] {
			t.Errorf("configuration %q listed twice", c)
		}
		seen[c] = true
		t.Run(c.String(), func(t *testing.T) {
			if fwd, _, dec := configParts(c); !fwd && !dec {
				t.Skip("a backward configuration: TestAttentionBackwardConfigs runs it")
			}
			// The forward's shared memory at head width 128, bf16
			// (kernels/attention.cu: Q, then the stages of K and V).
			if need := c.FwdRows*256 + c.FwdStages*c.FwdKeys*512; need > sharedMemoryOptin() {
				t.Skipf("needs %d KiB of shared memory per block; this device has %d", need>>10, sharedMemoryOptin()>>10)
			}
			b, err := New(Options{Attention: c})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			enginetest.AttentionTunables(t, b)
		})
	}
}

// TestCheckAttention: CheckAttention says, before any launch, which part of
// a configuration does not run a model's attention, and passes the ones that
// do.
func TestCheckAttention(t *testing.T) {
	for _, c := range []struct {
		cfg  AttentionConfig
		dt   engine.DType
		dh   int
		want string // "" for none
	}{
		{AttentionConfig{}, engine.BF16, 128, ""},
		{AttentionConfig{}, engine.BF16, 64, ""},
		{AttentionConfig{}, engine.F32, 128, ""},
		{AttentionConfig{FwdKeys: 64, FwdWarpRows: 32, DecKeyWarps: 4}, engine.BF16, 128, ""},
		{AttentionConfig{FwdKeys: 128, DecKeyWarps: 4, BwdRows: 64}, engine.F32, 16, ""}, // f32 runs its one tiling
		{AttentionConfig{FwdKeys: 128}, engine.BF16, 64, "the forward's tiles are not compiled"},
		{AttentionConfig{FwdWarpRows: 32, FwdKeys: 128}, engine.BF16, 128, "the forward's tiles are not compiled"},
		{AttentionConfig{FwdKRing: 1}, engine.BF16, 128, ""},
		{AttentionConfig{FwdKRing: 4, FwdKeys: 128, FwdRows: 64}, engine.BF16, 128, ""},
		{AttentionConfig{FwdKRing: 1, FwdKeys: 64}, engine.BF16, 128, "the forward's tiles are not compiled"},
		{AttentionConfig{FwdKRing: 1}, engine.BF16, 64, "the forward's tiles are not compiled"},
		{AttentionConfig{FwdKRing: 1}, engine.F32, 128, ""}, // f32 runs its one tiling
		{AttentionConfig{FwdKRing: 2}, engine.BF16, 128, "a value the kernels do not take"},
		{AttentionConfig{DecKeyWarps: 4}, engine.BF16, 64, "decoding's tiles are not compiled"},
		{AttentionConfig{BwdRows: 128}, engine.BF16, 64, "the backward's tiles are not compiled"},
		{AttentionConfig{BwdWarpKeys: 32, BwdRows: 128, BwdKeys: 128, BwdStages: 1}, engine.BF16, 128, ""},
		{AttentionConfig{BwdWarpKeys: 32, BwdKeys: 64}, engine.BF16, 128, "the backward's tiles are not compiled"},
		{AttentionConfig{BwdDQCols: 64, BwdRows: 128, BwdKeys: 128, BwdStages: 1}, engine.BF16, 128, ""},
		{AttentionConfig{BwdDQCols: 64, BwdRows: 64, BwdKeys: 128, BwdStages: 2}, engine.BF16, 128, "the backward's tiles are not compiled"},
		{AttentionConfig{BwdDQCols: 48}, engine.BF16, 128, "the backward's tiles are not compiled"},
		{AttentionConfig{BwdDQCols: 64}, engine.BF16, 64, "the backward's tiles are not compiled"},
		{AttentionConfig{BwdDQCols: 64}, engine.F32, 128, ""}, // f32 runs its one tiling
		{AttentionConfig{FwdStages: 4}, engine.BF16, 128, "a value the kernels do not take"},
		{AttentionConfig{}, engine.F16, 128, "the kernels take f32 and bf16"},
	} {
		b, err := New(Options{Attention: c.cfg})
		if err != nil {
			t.Fatal(err)
		}
		err = b.CheckAttention(c.dt, c.dh)
		b.Close()
		if c.want == "" && err != nil {
			t.Errorf("%q at %v, width %d: %v", c.cfg, c.dt, c.dh, err)
		}
		if c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%q at %v, width %d: error %v, want one containing %q", c.cfg, c.dt, c.dh, err, c.want)
		}
	}
}
