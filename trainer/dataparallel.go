package trainer

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/turnwise/turnwise/checkpoint"
	"github.com/turnwise/turnwise/data"
	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/optim"
)

// Data parallelism: W ranks, each with the whole model and optimizer, run
// one step together.
//   - Data: every rank packs the same batches in the same order; of each W
//     consecutive batches rank r trains on the r-th. A step of M
//     micro-batches on W ranks thus sees the W·M batches one process with
//     M·W micro-batches would, and the data position saved in a checkpoint
//     is the same on every rank.
//   - Gradients: after the micro-batches, the flat gradient buffer is
//     summed across ranks in buckets of bucketElems, in buffer order (a
//     fixed order: runs repeat), and the update averages over M·W; with
//     Config.OverlapReduce, layer by layer during the last micro-batch's
//     backward instead (overlap.go).
//   - The loss and token count of the step are gathered from every rank and
//     summed in rank order in float64.
//   - Rank 0 evaluates and writes metrics and checkpoints; every rank
//     resumes from the run directory, which all must see.
//   - ZeRO-1 (Config.Zero 1): the optimizer is sharded (optim.NewShardedAdamW);
//     its step reduce-scatters the gradient instead of all-reducing it and
//     all-gathers the weights. A checkpoint holds the whole, unsharded
//     optimizer state, gathered from the ranks into host memory
//     (optim.AdamW.GatherTo, a window at a time) and written by rank 0 — the
//     same files as without ZeRO, so any world size, sharded or not, resumes
//     from it; on resume each rank loads the whole state into host memory
//     and takes its shard. The device needs no more than its shard.
//   - The weights are broadcast from rank 0 when the trainer is made, so
//     every rank starts from the same ones.
type dataParallel struct {
	c          engine.Communicator // nil: one process
	b          engine.Backend
	rank, size int
}

// bucketElems is the size of one gradient all-reduce: 4 Mi f32 (16 MiB),
// large enough that a collective's fixed cost is small beside it.
const bucketElems = 4 << 20

func newDataParallel(c engine.Communicator, b engine.Backend) *dataParallel {
	if c == nil || c.Size() == 1 {
		return &dataParallel{b: b, size: 1}
	}
	return &dataParallel{c: c, b: b, rank: c.Rank(), size: c.Size()}
}

// writes reports whether this rank writes metrics and checkpoints.
func (d *dataParallel) writes() bool { return d.rank == 0 }

// next returns this rank's next batch: the rank-th of the next size.
func (d *dataParallel) next(p *data.Packer) llama.Batch {
	var mine llama.Batch
	for r := range d.size {
		if bt := p.Next(); r == d.rank {
			mine = bt
		}
	}
	return mine
}

// newOptimizer returns the optimizer of a run over params: sharded across
// comm's ranks for ZeRO stage 1 in a job of several ranks, else whole.
func newOptimizer(b engine.Backend, c optim.AdamWConfig, params checkpoint.Tensors, comm engine.Communicator, zero int) (*optim.AdamW, error) {
	switch {
	case zero < 0 || zero > 1:
		return nil, fmt.Errorf("trainer: ZeRO stage %d; want 0 or 1", zero)
	case zero == 1 && comm != nil && comm.Size() > 1:
		return optim.NewShardedAdamW(b, c, params, comm)
	}
	return optim.NewAdamW(b, c, params)
}

// SaveCheckpoint writes a checkpoint of step to runDir (checkpoint.Save:
// the trained tensors as the group "model", the optimizer, and state as
// trainer.json) and prunes runDir to its newest keep checkpoints. In a job
// of several ranks (c; nil: one process) rank 0 alone writes; with a
// sharded optimizer SaveCheckpoint is a collective (it gathers the whole
// state to rank 0's host memory first), which every rank calls. Weights
// that are not finite are not saved: the error wraps ErrDiverged
// (CheckFinite).
func (p *Params) SaveCheckpoint(c engine.Communicator, runDir string, step, keep int, state any, compress bool) error {
	if err := p.CheckFinite(step, runDir); err != nil {
		return err
	}
	opt, done, err := p.savedOptimizer(c, step)
	if err != nil || opt == nil {
		return err
	}
	defer done()
	dir := checkpoint.Dir(runDir, step)
	if err := checkpoint.Save(dir, p.m.Backend(), map[string]checkpoint.Tensors{"model": p.Tensors}, opt, state, compress); err != nil {
		return err
	}
	return checkpoint.Prune(runDir, max(keep, 1))
}

// savedOptimizer returns the optimizer a checkpoint saves and a function
// that releases it; nil on the ranks that do not write. A sharded
// optimizer's state is gathered from every rank first (a collective).
func (p *Params) savedOptimizer(c engine.Communicator, step int) (*optim.AdamW, func(), error) {
	writes := c == nil || c.Rank() == 0
	if !p.Opt.Sharded() {
		if !writes {
			return nil, nil, nil
		}
		return p.Opt, func() {}, nil
	}
	full, err := p.Opt.GatherTo(hostBackend(p.m.Backend()), writes)
	if err != nil {
		return nil, nil, fmt.Errorf("trainer: saving step %d: %w", step, err)
	}
	if !writes {
		return nil, nil, nil
	}
	return full, full.Free, nil
}

// hostBackend returns the backend in host memory that a sharded
// optimizer's whole state passes through on its way to and from a
// checkpoint: b itself on the CPU, else a CPU backend.
func hostBackend(b engine.Backend) engine.Backend {
	if b.Device() == engine.CPU {
		return b
	}
	return cpu.New(cpu.Options{})
}

// LoadCheckpoint restores the checkpoint in dir that SaveCheckpoint wrote:
// the trained tensors, the optimizer and state (unmarshalled from
// trainer.json). Every rank of c (nil: one process) loads it; a sharded
// optimizer takes its shard of the whole state the checkpoint holds, which
// each rank loads into host memory in turn (a collective), so that a
// node's host holds one whole state at a time.
func (p *Params) LoadCheckpoint(c engine.Communicator, dir string, state any) error {
	b := p.m.Backend()
	model := map[string]checkpoint.Tensors{"model": p.Tensors}
	if !p.Opt.Sharded() {
		return checkpoint.Load(dir, b, model, p.Opt, state)
	}
	mine := func() error {
		full, err := p.Opt.Twin(hostBackend(b))
		if err != nil {
			return fmt.Errorf("checkpoint %s: %w", dir, err)
		}
		defer full.Free()
		if err := checkpoint.Load(dir, b, model, full, state); err != nil {
			return err
		}
		p.Opt.LoadShard(full)
		return nil
	}
	var err error
	for r := range c.Size() {
		if r == c.Rank() {
			err = mine()
		}
		if berr := c.Barrier(); berr != nil && err == nil {
			err = fmt.Errorf("checkpoint %s: waiting for rank %d to load: %w", dir, r, berr)
		}
	}
	return err
}

// reduce sums the flat gradient across the ranks — unless opt is sharded,
// whose step reduces it — and returns the step's loss (the mean of the
// ranks' losses), token count (their sum) and whether any rank asked to
// stop after the step, so that the ranks stop together.
func (d *dataParallel) reduce(p *Params, loss float64, tokens int, stop bool) (float64, int, bool, error) {
	if d.c == nil {
		return loss, tokens, stop, nil
	}
	if !p.Opt.Sharded() { // a sharded optimizer's step reduce-scatters it
		if err := p.reduceGrads(d.c); err != nil {
			return 0, 0, false, err
		}
	}
	// [loss as float64 bits, tokens as int64, stop as int64] per rank,
	// moved as i32 pairs.
	mine := binary.LittleEndian.AppendUint64(nil, math.Float64bits(loss))
	mine = binary.LittleEndian.AppendUint64(mine, uint64(tokens))
	mine = binary.LittleEndian.AppendUint64(mine, map[bool]uint64{true: 1}[stop])
	got, err := gatherBytes(d.c, d.b, mine)
	if err != nil {
		return 0, 0, false, fmt.Errorf("trainer: gathering the ranks' losses: %w", err)
	}
	var sum float64
	tokens = 0
	for r := range d.size {
		sum += math.Float64frombits(binary.LittleEndian.Uint64(got[24*r:]))
		tokens += int(binary.LittleEndian.Uint64(got[24*r+8:]))
		stop = stop || binary.LittleEndian.Uint64(got[24*r+16:]) != 0
	}
	return sum / float64(d.size), tokens, stop, nil
}

// allReduceGrad sums opt's flat gradient across the ranks of c in buckets
// of bucketElems, in buffer order (a fixed order: runs repeat).
func allReduceGrad(c engine.Communicator, opt *optim.AdamW) error {
	grad := opt.FlatGrad()
	for off := 0; off < grad.Numel(); off += bucketElems {
		n := min(bucketElems, grad.Numel()-off)
		bucket := engine.NewTensor(grad.Buffer(), grad.Offset()+4*off, engine.F32, n)
		if err := c.AllReduce(bucket); err != nil {
			return fmt.Errorf("trainer: all-reducing gradients: %w", err)
		}
	}
	return nil
}

// gatherBytes gathers every rank's mine (the same length on every rank) on
// every rank, concatenated in rank order.
func gatherBytes(c engine.Communicator, b engine.Backend, mine []byte) ([]byte, error) {
	all, err := engine.GatherBytes(c, b, mine)
	if err != nil {
		return nil, err
	}
	return slices.Concat(all...), nil
}

// Reduce makes one data-parallel step of the ranks of c (nil or of one
// rank: one process) out of each rank's gradients and vals: it sums the
// gradients across the ranks (in buckets, in buffer order) — unless the
// optimizer is sharded, whose Step reduce-scatters them — and replaces
// vals with their sums over the ranks, added in rank order in float64, so
// every rank holds the same. vals must have the same length on every rank.
func (p *Params) Reduce(c engine.Communicator, vals []float64) error {
	if c == nil || c.Size() == 1 {
		return nil
	}
	if !p.Opt.Sharded() {
		if err := p.reduceGrads(c); err != nil {
			return err
		}
	}
	var mine []byte
	for _, v := range vals {
		mine = binary.LittleEndian.AppendUint64(mine, math.Float64bits(v))
	}
	got, err := gatherBytes(c, p.m.Backend(), mine)
	if err != nil {
		return fmt.Errorf("trainer: gathering the ranks' values: %w", err)
	}
	for i := range vals {
		vals[i] = 0
		for r := range c.Size() {
			vals[i] += math.Float64frombits(binary.LittleEndian.Uint64(got[8*(r*len(vals)+i):]))
		}
	}
	return nil
}

// Broadcast gives every rank of c (nil: one process) rank 0's parameters.
func (p *Params) Broadcast(c engine.Communicator) error {
	if c == nil || c.Size() == 1 {
		return nil
	}
	return broadcastParams(c, p.Tensors)
}

// broadcastParams gives every rank rank 0's weights, in name order.
func broadcastParams(c engine.Communicator, params checkpoint.Tensors) error {
	names := make([]string, 0, len(params))
	for n := range params {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if err := c.Broadcast(params[n], 0); err != nil {
			return fmt.Errorf("trainer: broadcasting %s from rank 0: %w", n, err)
		}
	}
	return nil
}
