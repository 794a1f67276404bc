package optim

import (
	"fmt"
	"math"

	"github.com/turnwise/turnwise/engine"
)

// ZeRO-1 (the sharded mode of AdamW). The flat gradient keeps its full
// layout on every rank — the model accumulates into it — padded to a
// multiple of align·W elements; rank r owns the contiguous shard
// [r·S, (r+1)·S) of it, S = padded length / W. A step
//  1. reduce-scatters the flat gradient, so that the rank holds the summed
//     gradient of its shard only;
//  2. takes the global gradient norm as the square root of the shards' sums
//     of squares, all-reduced;
//  3. updates the parameters, or the parts of parameters, that lie in its
//     shard (one AdamWMulti over the spans cut to the shard), with moments
//     and f32 master weights allocated for the shard only — S elements each,
//     a master for every element (f32 parameters too), since the masters
//     are what the ranks gather;
//  4. all-gathers the updated masters into the flat gradient buffer (its
//     gradient is spent) and casts each parameter's part into its weights,
//     so that every rank holds the whole model again.
// Every element sees the same sums and the same update as unsharded data
// parallelism; only the gradient norm is summed in another order (it
// matters when clipping). A checkpoint holds the whole, unsharded state:
// GatherTo collects it, LoadShard takes a rank's shard of it.

// NewShardedAdamW returns an optimizer over params in the sharded mode
// above, for one rank of comm: the moments and masters of this rank's shard,
// initialised as NewAdamW initialises them. Its steps are collectives
// (StepSharded): every rank calls them in the same order.
func NewShardedAdamW(b engine.Backend, c AdamWConfig, params map[string]*engine.Tensor, comm engine.Communicator) (*AdamW, error) {
	o, spans, n, _, err := layout(b, c, params)
	if err != nil {
		return nil, err
	}
	w := comm.Size()
	n = roundUp(n, align*w)
	s := n / w
	lo, hi := comm.Rank()*s, (comm.Rank()+1)*s
	o.comm, o.shardOff, o.shardLen, o.window = comm, lo, s, gatherWindow
	var shard []engine.AdamWSpan // the spans cut to [lo, hi), offsets from lo
	for _, sp := range spans {
		a, e := max(sp.Off, lo), min(sp.Off+sp.W.Numel(), hi)
		if a >= e {
			continue
		}
		part := engine.NewTensor(sp.W.Buffer(), sp.W.Offset()+sp.W.DType().Size()*(a-sp.Off), sp.W.DType(), e-a)
		shard = append(shard, engine.AdamWSpan{W: part, Off: a - lo, MasterOff: a - lo})
	}
	o.spans = spans
	for _, buf := range []struct {
		t **engine.Tensor
		n int
	}{{&o.grad, n}, {&o.gshard, s}, {&o.m, s}, {&o.v, s}, {&o.master, s}, {&o.acc, 1}} {
		if *buf.t, err = engine.Alloc(b, engine.F32, buf.n); err != nil {
			o.Free()
			return nil, fmt.Errorf("optim: shard %d of %d of %d elements: %w", comm.Rank(), w, n, err)
		}
	}
	o.table = engine.NewParamTable(shard)
	for _, sp := range shard {
		b.Cast(engine.NewTensor(o.master.Buffer(), 4*sp.Off, engine.F32, sp.W.Numel()), sp.W)
	}
	for i, p := range o.Params {
		p.G = view(o.grad, spans[i].Off, p.W)
	}
	return o, nil
}

// Sharded reports whether o is in the sharded (ZeRO-1) mode: then its
// Params carry no moments or masters (M, V and Master are nil) and it steps
// with StepSharded.
func (o *AdamW) Sharded() bool { return o.comm != nil }

// Ranks returns the number of ranks a sharded optimizer's state is split
// across; 1 when it is not sharded.
func (o *AdamW) Ranks() int {
	if o.comm == nil {
		return 1
	}
	return o.comm.Size()
}

// StateElems returns the number of f32 elements of optimizer state this
// rank holds: its moments and masters (the flat gradient not counted).
func (o *AdamW) StateElems() int {
	n := o.m.Numel() + o.v.Numel()
	if o.master != nil {
		n += o.master.Numel()
	}
	return n
}

// StepSharded is Step for a sharded optimizer, a collective of its
// communicator: reduce-scatter of the gradient, the update of this rank's
// shard, all-gather of the weights. Afterwards the flat gradient buffer
// holds no gradient (ZeroGrad before the next accumulation). An error is the
// communicator's: the job cannot go on.
func (o *AdamW) StepSharded(lr, gradScale float32) (StepResult, error) {
	if o.comm == nil {
		panic("optim: StepSharded of an optimizer made by NewAdamW; use Step")
	}
	if err := o.comm.ReduceScatter(o.gshard, o.grad); err != nil {
		return StepResult{}, fmt.Errorf("optim: reduce-scattering the gradients: %w", err)
	}
	o.b.Fill(o.acc, 0)
	o.b.SumSquares(o.acc, o.gshard)
	if err := o.comm.AllReduce(o.acc); err != nil {
		return StepResult{}, fmt.Errorf("optim: summing the gradient norm: %w", err)
	}
	norm := float32(math.Sqrt(float64(engine.ToF32(o.b, o.acc)[0]))) * gradScale
	clip := engine.ClipScale(norm, o.Config.MaxGradNorm)
	if math.IsNaN(float64(clip)) || math.IsNaN(float64(norm)) {
		o.Skipped++
		return StepResult{GradNorm: norm, Skipped: true}, nil
	}
	o.Steps++
	o.b.AdamWMulti(o.table, o.gshard, o.m, o.v, o.master, engine.AdamWParams{LR: lr, Beta1: o.Config.Beta1,
		Beta2: o.Config.Beta2, Eps: o.Config.Eps, WeightDecay: o.Config.WeightDecay, Step: o.Steps,
		GradScale: gradScale * clip})
	if err := o.comm.AllGather(o.grad, o.master); err != nil {
		return StepResult{}, fmt.Errorf("optim: gathering the updated weights: %w", err)
	}
	for i, p := range o.Params {
		o.b.Cast(p.W, view(o.grad, o.spans[i].Off, p.W))
	}
	return StepResult{GradNorm: norm, Clip: clip}, nil
}

// gatherWindow is the most elements of each rank's shard one all-gather of
// GatherTo moves: the device scratch is gatherWindow × ranks f32 (32 MiB
// on 8 ranks).
const gatherWindow = 1 << 20

// Twin returns an unsharded optimizer on hb — the host, say — over zeroed
// copies of o's parameters there (same names, dtypes and shapes): what a
// checkpoint's optimizer state is loaded into for LoadShard, and what
// GatherTo fills. Its weights are not the model's. Free releases them with
// the rest.
func (o *AdamW) Twin(hb engine.Backend) (*AdamW, error) {
	hp := make(map[string]*engine.Tensor, len(o.Params))
	free := func() {
		for _, t := range hp {
			hb.FreeBuffer(t.Buffer())
		}
	}
	for _, p := range o.Params {
		t, err := engine.Alloc(hb, p.W.DType(), p.W.Shape()...)
		if err != nil {
			free()
			return nil, fmt.Errorf("optim: a copy of %s: %w", p.Name, err)
		}
		hp[p.Name] = t
	}
	full, err := NewAdamW(hb, o.Config, hp)
	if err != nil {
		free()
		return nil, err
	}
	for _, t := range hp {
		full.owned = append(full.owned, t)
	}
	return full, nil
}

// GatherTo collects the whole state of the sharded o — every rank's moments
// and masters, and its step counts — into an unsharded optimizer on hb (a
// Twin): what a checkpoint saves, so that any world size resumes it. It is a
// collective, which every rank calls; only where keep is set does it build
// and return the result (the caller frees it), elsewhere nil. The state
// moves in windows of gatherWindow elements per rank, so the device needs
// no more than one window's scratch; hb holds the whole state.
func (o *AdamW) GatherTo(hb engine.Backend, keep bool) (*AdamW, error) {
	if o.comm == nil {
		panic("optim: GatherTo of an optimizer made by NewAdamW")
	}
	w, s := o.comm.Size(), o.shardLen
	var full *AdamW
	var stage []float32 // [padded n]: one kind of state, flat, on the host
	if keep {
		var err error
		if full, err = o.Twin(hb); err != nil {
			return nil, err
		}
		full.Steps, full.Skipped = o.Steps, o.Skipped
		stage = make([]float32, o.grad.Numel())
	}
	fail := func(err error) (*AdamW, error) {
		if full != nil {
			full.Free()
		}
		return nil, fmt.Errorf("optim: gathering the optimizer state: %w", err)
	}
	window := min(s, o.window)
	tmp, err := engine.Alloc(o.b, engine.F32, w*window) // [W·window] f32
	if err != nil {
		return fail(err)
	}
	defer o.b.FreeBuffer(tmp.Buffer())
	for _, k := range []struct {
		shard *engine.Tensor
		dst   func(p *Param) *engine.Tensor
	}{{o.m, func(p *Param) *engine.Tensor { return p.M }}, {o.v, func(p *Param) *engine.Tensor { return p.V }},
		{o.master, func(p *Param) *engine.Tensor { return p.Master }}} {
		for j := 0; j < s; j += window {
			c := min(window, s-j)
			out := engine.NewTensor(tmp.Buffer(), tmp.Offset(), engine.F32, w*c)
			if err := o.comm.AllGather(out, engine.NewTensor(k.shard.Buffer(), k.shard.Offset()+4*j, engine.F32, c)); err != nil {
				return fail(err)
			}
			if keep {
				vals := engine.ToF32(o.b, out)
				for r := range w {
					copy(stage[r*s+j:r*s+j+c], vals[r*c:(r+1)*c])
				}
			}
		}
		if !keep {
			continue
		}
		for i, p := range full.Params {
			if d := k.dst(p); d != nil {
				off := o.spans[i].Off
				engine.SetF32(hb, d, stage[off:off+p.W.Numel()])
			}
		}
	}
	return full, nil
}

// LoadShard sets the sharded o's moments, masters and step counts to this
// rank's shard of full's, an unsharded optimizer over parameters of the
// same names and shapes (a Twin, as a checkpoint restores it), on any
// backend. The masters of f32 parameters, which full does not keep, are
// o's weights.
func (o *AdamW) LoadShard(full *AdamW) {
	if o.comm == nil || full.comm != nil || len(full.Params) != len(o.Params) {
		panic(fmt.Sprintf("optim: LoadShard wants a sharded optimizer and an unsharded one over the same %d parameters", len(o.Params)))
	}
	o.Steps, o.Skipped = full.Steps, full.Skipped
	lo, hi := o.shardOff, o.shardOff+o.shardLen
	for i, p := range full.Params {
		q, off := o.Params[i], o.spans[i].Off
		if p.Name != q.Name || p.W.Numel() != q.W.Numel() {
			panic(fmt.Sprintf("optim: LoadShard: parameter %d is %s %v here, %s %v in the state loaded", i, q.Name, q.W, p.Name, p.W))
		}
		a, e := max(off, lo), min(off+p.W.Numel(), hi)
		if a >= e {
			continue
		}
		part := func(t *engine.Tensor) *engine.Tensor {
			return engine.NewTensor(t.Buffer(), t.Offset()+t.DType().Size()*(a-off), t.DType(), e-a)
		}
		mine := func(t *engine.Tensor) *engine.Tensor {
			return engine.NewTensor(t.Buffer(), t.Offset()+4*(a-lo), engine.F32, e-a)
		}
		engine.SetF32(o.b, mine(o.m), engine.ToF32(full.b, part(p.M)))
		engine.SetF32(o.b, mine(o.v), engine.ToF32(full.b, part(p.V)))
		if p.Master != nil {
			engine.SetF32(o.b, mine(o.master), engine.ToF32(full.b, part(p.Master)))
		} else {
			o.b.Cast(mine(o.master), part(q.W))
		}
	}
}
