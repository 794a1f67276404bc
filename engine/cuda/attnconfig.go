//go:build cuda || cudaemu

package cuda

// #include "kernels.h"
import "C"

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/turnwise/turnwise/engine"
)

// AttentionConfig holds the attention kernels' tile sizes and pipeline
// depths (kernels.h's tw_attention_config): the knobs a GPU session sweeps.
// A zero field is the kernels' default; a value the kernels were not
// compiled for makes the op fail, naming the launch (kernels/attention.cu
// and kernels/attention_backward.cu list what each field accepts).
type AttentionConfig struct {
	FwdRows, FwdKeys, FwdStages           int // forward: query rows per block, keys per tile, tiles in flight
	FwdWarpRows                           int // forward: query rows per warp (16, or 32 as FlashAttention-2)
	FwdKRing                              int // forward: K fragments in flight in S = Q·Kᵀ (8; 4; 1: each loaded just before its products)
	BwdRows, BwdKeys, BwdStages, BwdSplit int // backward: query rows, keys, tiles in flight, query-axis split of dK/dV
	BwdDQAtomic                           int // backward: 1 sums dQ by float atomics (faster where blocks wait; not bit-identical run to run)
	BwdWarpKeys                           int // backward: keys per warp (16, or 32 as FlashAttention-2: Pᵀ through shared memory)
	BwdDQCols                             int // backward: dQ columns per warp's unit (32, or 64 as before 2026-11-29)
	DecSplit, DecKeys                     int // decoding: key chunks per sequence, keys per tile
	DecKeyWarps                           int // decoding: warps that split each key tile (1, or 4 with 16-row tiles)
}

// attentionFields names AttentionConfig's fields as ParseAttentionConfig
// and String spell them, in that order.
var attentionFields = []struct {
	name string
	get  func(*AttentionConfig) *int
}{
	{"fwd.rows", func(c *AttentionConfig) *int { return &c.FwdRows }},
	{"fwd.keys", func(c *AttentionConfig) *int { return &c.FwdKeys }},
	{"fwd.stages", func(c *AttentionConfig) *int { return &c.FwdStages }},
	{"fwd.warp_rows", func(c *AttentionConfig) *int { return &c.FwdWarpRows }},
	{"fwd.k_ring", func(c *AttentionConfig) *int { return &c.FwdKRing }},
	{"bwd.rows", func(c *AttentionConfig) *int { return &c.BwdRows }},
	{"bwd.keys", func(c *AttentionConfig) *int { return &c.BwdKeys }},
	{"bwd.stages", func(c *AttentionConfig) *int { return &c.BwdStages }},
	{"bwd.split", func(c *AttentionConfig) *int { return &c.BwdSplit }},
	{"bwd.dq_atomic", func(c *AttentionConfig) *int { return &c.BwdDQAtomic }},
	{"bwd.warp_keys", func(c *AttentionConfig) *int { return &c.BwdWarpKeys }},
	{"bwd.dq_cols", func(c *AttentionConfig) *int { return &c.BwdDQCols }},
	{"dec.split", func(c *AttentionConfig) *int { return &c.DecSplit }},
	{"dec.keys", func(c *AttentionConfig) *int { return &c.DecKeys }},
	{"dec.key_warps", func(c *AttentionConfig) *int { return &c.DecKeyWarps }},
}

// ParseAttentionConfig reads a configuration written as comma-separated
// name=value pairs, e.g. "fwd.rows=128,fwd.keys=64,fwd.stages=2"; the
// names are fwd.rows, fwd.keys, fwd.stages, fwd.warp_rows, fwd.k_ring,
// bwd.rows, bwd.keys, bwd.stages, bwd.split, bwd.dq_atomic, bwd.warp_keys,
// bwd.dq_cols, dec.split, dec.keys and dec.key_warps. "" is every default.
func ParseAttentionConfig(s string) (AttentionConfig, error) {
	var c AttentionConfig
	if strings.TrimSpace(s) == "" {
		return c, nil
	}
	for _, kv := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return AttentionConfig{}, fmt.Errorf("attention config %q: %q is not name=value", s, kv)
		}
		var p *int
		for _, f := range attentionFields {
			if f.name == name {
				p = f.get(&c)
			}
		}
		if p == nil {
			return AttentionConfig{}, fmt.Errorf("attention config %q: unknown name %q (want one of %s)", s, name, attentionNames())
		}
		n, err := strconv.Atoi(val)
		if err != nil || n < 0 {
			return AttentionConfig{}, fmt.Errorf("attention config %q: %s=%q is not a count ≥ 0", s, name, val)
		}
		*p = n
	}
	return c, nil
}

func attentionNames() string {
	var n []string
	for _, f := range attentionFields {
		n = append(n, f.name)
	}
	return strings.Join(n, ", ")
}

// String writes c as ParseAttentionConfig reads it, leaving out the
// defaults ("" when every field is).
func (c AttentionConfig) String() string {
	var parts []string
	for _, f := range attentionFields {
		if v := *f.get(&c); v != 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", f.name, v))
		}
	}
	return strings.Join(parts, ",")
}

// cConfig is c as the launchers take it.
func (c AttentionConfig) cConfig() C.tw_attention_config {
	return C.tw_attention_config{
		fwd_rows: C.int(c.FwdRows), fwd_keys: C.int(c.FwdKeys), fwd_stages: C.int(c.FwdStages), fwd_warp_rows: C.int(c.FwdWarpRows), fwd_k_ring: C.int(c.FwdKRing),
		bwd_rows: C.int(c.BwdRows), bwd_keys: C.int(c.BwdKeys), bwd_stages: C.int(c.BwdStages), bwd_split: C.int(c.BwdSplit),
		bwd_dq_atomic: C.int(c.BwdDQAtomic), bwd_warp_keys: C.int(c.BwdWarpKeys), bwd_dq_cols: C.int(c.BwdDQCols), dec_split: C.int(c.DecSplit), dec_keys: C.int(c.DecKeys), dec_key_warps: C.int(c.DecKeyWarps),
	}
}

// AttentionConfigs lists the configurations a tuning sweep tries: those the
// kernels are compiled for at Llama's bf16 head width 128 (kernels.h's
// tw_attention_configs), the defaults first. Each has at least one field
// set, so none prints as "".
func AttentionConfigs() []AttentionConfig {
	n := int(C.tw_attention_configs(nil, 0))
	if n == 0 {
		return nil
	}
	cs := make([]C.tw_attention_config, n)
	C.tw_attention_configs(&cs[0], C.int(n))
	out := make([]AttentionConfig, n)
	for i, c := range cs {
		out[i] = AttentionConfig{
			FwdRows: int(c.fwd_rows), FwdKeys: int(c.fwd_keys), FwdStages: int(c.fwd_stages), FwdWarpRows: int(c.fwd_warp_rows), FwdKRing: int(c.fwd_k_ring),
			BwdRows: int(c.bwd_rows), BwdKeys: int(c.bwd_keys), BwdStages: int(c.bwd_stages), BwdSplit: int(c.bwd_split),
			BwdDQAtomic: int(c.bwd_dq_atomic), BwdWarpKeys: int(c.bwd_warp_keys), BwdDQCols: int(c.bwd_dq_cols), DecSplit: int(c.dec_split), DecKeys: int(c.dec_keys), DecKeyWarps: int(c.dec_key_warps),
		}
	}
	return out
}

// sharedMemoryOptin is the shared memory a block may opt in to on the
// current device (0 if the query fails): the tests skip the attention
// configurations that need more than this device has.
func sharedMemoryOptin() int {
	var dev, v C.int
	if C.cudaGetDevice(&dev) != C.cudaSuccess ||
		C.cudaDeviceGetAttribute(&v, C.cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != C.cudaSuccess {
		return 0
	}
	return int(v)
}

// CheckAttention implements engine.AttentionChecker: an error naming the
// backend's attention configuration and what in it does not run attention
// of dt at head width headDim on this device (a value the kernels do not
// take, tiles not compiled for dt and headDim, more shared memory than the
// device has), or nil.
func (b *Backend) CheckAttention(dt engine.DType, headDim int) error {
	if dt != engine.F32 && dt != engine.BF16 {
		return fmt.Errorf("attention at %s: the kernels take f32 and bf16", dt)
	}
	cfg := b.attention.cConfig()
	b.enter() // the shared-memory limit is the current device's
	defer b.exit()
	cdt := C.tw_dtype(dt)
	for _, msg := range []*C.char{C.tw_attention_check(&cfg, cdt, C.int64_t(headDim)), C.tw_attention_backward_check(&cfg, cdt, C.int64_t(headDim))} {
		if msg != nil {
			what := b.attention.String()
			if what == "" {
				what = "the defaults"
			}
			return fmt.Errorf("attention configuration %q at %s, head width %d: %s", what, dt, headDim, C.GoString(msg))
		}
	}
	return nil
}
