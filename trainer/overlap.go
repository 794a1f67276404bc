package trainer

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/optim"
)

// Overlapping the gradient all-reduce with the backward. In the last
// micro-batch of a step a layer's gradients are final once the backward
// has passed it (llama.Model.LayerDone): a goroutine all-reduces each
// layer's part of the flat gradient as soon as the backward reports it,
// Layers−1 down to 0 — a fixed order, so runs repeat — while the backward
// goes on below it; the rest (embedding, final norm, classifier, extra
// parameters such as a value head) is all-reduced after the micro-batch,
// once that goroutine is done (a Communicator is not safe for concurrent
// use). Each layer's gradients lie in one range of the flat buffer, since
// the optimizer lays parameters out by name and a layer's names share the
// prefix "…layers.<l>.".
//
// It needs a backend whose writes are done when its calls return — the CPU
// backend — so that the collective reads finished gradients: on a GPU the
// backend queues the backward on one stream, and a collective overlapping
// it would need a stream of its own ordered after each layer's kernels by
// an event, which the CUDA backend does not have. Each element's sum is
// the same as the whole buffer's all-reduce gives when the job has two
// ranks (a+b in either order); with more, Gloo's ring adds an element's
// terms in an order that depends on where the element falls in the buffer
// it reduces, so the last bits may differ from the non-overlapped run's,
// though overlapped runs repeat.

// overlapReducer all-reduces the flat gradient of a data-parallel step,
// layer by layer during the last micro-batch's backward.
type overlapReducer struct {
	c      engine.Communicator
	m      *llama.Model
	grad   *engine.Tensor // the flat f32 gradient
	layers [][2]int       // per layer, its gradients' range [lo, hi) in elements; empty: none
	rest   [][2]int       // the ranges outside every layer, in buffer order
	work   chan int       // layers whose gradients are final, in the order the backward passed them
	done   chan error     // the goroutine's first error, once work is closed
	seen   []bool         // the layers reduced in this step
	armed  bool           // between arm and finish
}

// layerName matches the layer index of a parameter's name.
var layerName = regexp.MustCompile(`(?:^|\.)layers\.(\d+)\.`)

// newOverlapReducer returns the reducer of opt's flat gradient for model m
// in the job of c, or nil when the gradients cannot be reduced overlapped:
// one process, a backend other than the CPU's, a sharded optimizer, or
// layers whose gradients are not each one range of the buffer.
func newOverlapReducer(c engine.Communicator, m *llama.Model, opt *optim.AdamW) *overlapReducer {
	if c == nil || c.Size() == 1 || m.Backend().Device() != engine.CPU || opt.Sharded() {
		return nil
	}
	grad := opt.FlatGrad()
	layers := make([][2]int, m.Config.Layers)
	type part struct{ lo, hi, layer int }
	var parts []part
	for _, p := range opt.Params {
		lo := (p.G.Offset() - grad.Offset()) / 4
		l := -1
		if sub := layerName.FindStringSubmatch(p.Name); sub != nil {
			n, err := strconv.Atoi(sub[1])
			if err != nil || n >= len(layers) {
				return nil
			}
			l = n
		}
		parts = append(parts, part{lo, lo + p.G.Numel(), l})
	}
	slices.SortFunc(parts, func(a, b part) int { return a.lo - b.lo })
	// Each layer's range must hold its own parts alone.
	for i, pt := range parts {
		if pt.layer < 0 {
			continue
		}
		r := &layers[pt.layer]
		if r[0] == r[1] {
			r[0] = pt.lo
		} else if parts[i-1].layer != pt.layer {
			return nil // the layer's parts are not next to each other
		}
		r[1] = pt.hi
	}
	var rest [][2]int
	at := 0
	for _, r := range slices.SortedFunc(slices.Values(layers), func(a, b [2]int) int { return a[0] - b[0] }) {
		if r[0] == r[1] {
			continue
		}
		if r[0] > at {
			rest = append(rest, [2]int{at, r[0]})
		}
		at = r[1]
	}
	if at < grad.Numel() {
		rest = append(rest, [2]int{at, grad.Numel()})
	}
	return &overlapReducer{c: c, m: m, grad: grad, layers: layers, rest: rest}
}

// arm starts the goroutine that all-reduces each layer's gradients as the
// next backward reports them, the step's last; after layer 0 it reports
// no more.
func (o *overlapReducer) arm() {
	if o.armed {
		panic("trainer: the overlapped gradient reduction armed twice in one step")
	}
	o.armed = true
	o.work = make(chan int, len(o.layers))
	o.done = make(chan error, 1)
	o.seen = make([]bool, len(o.layers))
	work, done := o.work, o.done
	go func() {
		var err error
		for l := range work {
			if err == nil {
				err = o.reduce(o.layers[l])
			}
		}
		done <- err
	}()
	o.m.LayerDone = func(l int) {
		if !o.seen[l] {
			o.seen[l] = true
			work <- l
		}
		if l == 0 {
			o.m.LayerDone = nil
		}
	}
}

// finish waits for the layers' all-reduces, then all-reduces what remains
// of the flat gradient: the ranges outside every layer, and any layer the
// backward did not report. Every armed step calls it once.
//
// The ranks must issue the same collectives in the same order: a rank
// that ran no backward in the step (a preference step with fewer pairs
// than ranks leaves some without any) calls all, which reduces the layers
// Layers−1 down to 0, as the backward reports them, then the rest.
func (o *overlapReducer) finish() error {
	o.m.LayerDone = nil
	o.armed = false
	close(o.work)
	if err := <-o.done; err != nil {
		return err
	}
	for _, r := range o.rest {
		if err := o.reduce(r); err != nil {
			return err
		}
	}
	for l, r := range o.layers {
		if !o.seen[l] {
			if err := o.reduce(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// all all-reduces the whole flat gradient in the order an armed step does:
// the layers Layers−1 down to 0, then the rest.
func (o *overlapReducer) all() error {
	for l := len(o.layers) - 1; l >= 0; l-- {
		if err := o.reduce(o.layers[l]); err != nil {
			return err
		}
	}
	for _, r := range o.rest {
		if err := o.reduce(r); err != nil {
			return err
		}
	}
	return nil
}

// reduce all-reduces the range r of the flat gradient, in buckets of at
// most bucketElems.
func (o *overlapReducer) reduce(r [2]int) error {
	for off := r[0]; off < r[1]; off += bucketElems {
		n := min(bucketElems, r[1]-off)
		if err := o.c.AllReduce(engine.NewTensor(o.grad.Buffer(), o.grad.Offset()+4*off, engine.F32, n)); err != nil {
			return fmt.Errorf("trainer: all-reducing gradients: %w", err)
		}
	}
	return nil
}
