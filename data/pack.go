package data

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/turnwise/turnwise/model/llama"
)

// PackOptions controls a Packer.
type PackOptions struct {
	// TokensPerBatch is the most tokens a batch holds. It must be positive.
	TokensPerBatch int
	// MaxLen is the most tokens one example keeps; longer examples are
	// truncated to their first MaxLen tokens. Zero means TokensPerBatch;
	// it may not exceed TokensPerBatch.
	MaxLen int
	// Seed seeds the order in which examples are visited.
	Seed uint64
	// NoShuffle visits the examples in their given order in every epoch.
	NoShuffle bool
}

// Position is where a Packer stands: the next batch starts at the Index-th
// example of epoch Epoch's order. Saving it with a checkpoint and passing
// it to Seek makes a resumed run see exactly the batches it would have.
type Position struct {
	Epoch int `json:"epoch"`
	Index int `json:"index"`
}

// PackStats counts what NewPacker did to the examples.
type PackStats struct {
	// Examples is the number of examples kept.
	Examples int
	// Truncated is the number of kept examples cut to MaxLen tokens.
	Truncated int
	// Dropped is the number of examples left out because no token in
	// them carries loss (after truncation) or they have fewer than two
	// tokens.
	Dropped int
}

// Packer packs tokenized examples into batches of whole, independent
// causal sequences. Each epoch visits every kept example once, in an order
// that depends only on the seed and the epoch. A batch never spans two
// epochs. A Packer is not safe for concurrent use.
type Packer struct {
	examples []Example
	opts     PackOptions
	stats    PackStats
	pos      Position
	order    []int // the order of epoch orderEpoch; nil until needed
	orderEp  int
}

// NewPacker returns a Packer over examples, positioned at the start of
// epoch 0. Examples longer than MaxLen are truncated, and examples with
// nothing to learn are dropped; Stats counts both. The IDs and Loss slices
// of examples must be of equal length; they are not copied or modified.
func NewPacker(examples []Example, opts PackOptions) (*Packer, error) {
	if opts.TokensPerBatch <= 0 {
		return nil, fmt.Errorf("data: packer: tokens per batch %d must be positive", opts.TokensPerBatch)
	}
	if opts.MaxLen == 0 {
		opts.MaxLen = opts.TokensPerBatch
	}
	if opts.MaxLen < 2 || opts.MaxLen > opts.TokensPerBatch {
		return nil, fmt.Errorf("data: packer: max length %d must be between 2 and the tokens per batch, %d", opts.MaxLen, opts.TokensPerBatch)
	}
	p := &Packer{opts: opts}
	for i, ex := range examples {
		if len(ex.IDs) != len(ex.Loss) {
			return nil, fmt.Errorf("data: packer: example %d has %d ids but %d mask entries", i, len(ex.IDs), len(ex.Loss))
		}
		truncated := len(ex.IDs) > opts.MaxLen
		if truncated {
			ex = Example{IDs: ex.IDs[:opts.MaxLen], Loss: ex.Loss[:opts.MaxLen]}
		}
		if !hasTarget(ex) {
			p.stats.Dropped++
			continue
		}
		if truncated {
			p.stats.Truncated++
		}
		p.examples = append(p.examples, ex)
	}
	p.stats.Examples = len(p.examples)
	if len(p.examples) == 0 {
		return nil, errors.New("data: packer: no example has a token to learn")
	}
	return p, nil
}

// hasTarget reports whether some token after the first carries loss.
func hasTarget(ex Example) bool {
	for i := 1; i < len(ex.Loss); i++ {
		if ex.Loss[i] {
			return true
		}
	}
	return false
}

// Stats returns what NewPacker did to the examples.
func (p *Packer) Stats() PackStats { return p.stats }

// Position returns the position of the next batch.
func (p *Packer) Position() Position { return p.pos }

// Seek moves the packer to pos, as returned by Position.
func (p *Packer) Seek(pos Position) error {
	if pos.Epoch < 0 || pos.Index < 0 || pos.Index >= len(p.examples) {
		return fmt.Errorf("data: packer: position %+v out of range for %d examples", pos, len(p.examples))
	}
	p.pos = pos
	return nil
}

// epochOrder returns the order in which epoch visits the examples.
func (p *Packer) epochOrder(epoch int) []int {
	if p.order != nil && p.orderEp == epoch {
		return p.order
	}
	n := len(p.examples)
	if p.order == nil {
		p.order = make([]int, n)
	}
	for i := range p.order {
		p.order[i] = i
	}
	if !p.opts.NoShuffle {
		r := rand.New(rand.NewPCG(p.opts.Seed, uint64(epoch)))
		r.Shuffle(n, func(i, j int) { p.order[i], p.order[j] = p.order[j], p.order[i] })
	}
	p.orderEp = epoch
	return p.order
}

// EpochBatches returns the number of batches Next returns over epochs
// 0, …, epochs−1 from the start of epoch 0, without moving the position:
// how many a run of that many passes over the examples takes.
func (p *Packer) EpochBatches(epochs int) int {
	n := 0
	for e := range epochs {
		order := p.epochOrder(e)
		for i := 0; i < len(order); n++ {
			tokens := len(p.examples[order[i]].IDs)
			for i++; i < len(order) && tokens+len(p.examples[order[i]].IDs) <= p.opts.TokensPerBatch; i++ {
				tokens += len(p.examples[order[i]].IDs)
			}
		}
	}
	return n
}

// Next returns the next batch and advances the position. A batch holds
// as many examples as fit in TokensPerBatch tokens, at least one, in the
// epoch's order; each example is its own sequence (Batch.Lens). The target
// of a position is the next token of the same sequence when that token
// carries loss, and −1 otherwise; the last position of each sequence has
// target −1.
func (p *Packer) Next() llama.Batch {
	order := p.epochOrder(p.pos.Epoch)
	var b llama.Batch
	for p.pos.Index < len(order) {
		ex := p.examples[order[p.pos.Index]]
		if len(b.Lens) > 0 && len(b.IDs)+len(ex.IDs) > p.opts.TokensPerBatch {
			break
		}
		b.Append(ex.IDs, func(i int) bool { return ex.Loss[i] })
		p.pos.Index++
	}
	if p.pos.Index >= len(order) {
		p.pos = Position{Epoch: p.pos.Epoch + 1}
	}
	return b
}

// Split divides examples into a training part and a held-out part of
// round(fraction·len(examples)) examples, chosen at random from seed. Both
// parts keep the examples' relative order. fraction must lie in [0, 1).
func Split[T any](examples []T, fraction float64, seed uint64) (train, heldOut []T, err error) {
	if !(fraction >= 0 && fraction < 1) {
		return nil, nil, fmt.Errorf("data: split: fraction %v must be in [0, 1)", fraction)
	}
	n := len(examples)
	k := int(math.Round(fraction * float64(n)))
	if k == 0 {
		return append([]T(nil), examples...), nil, nil
	}
	held := make([]bool, n)
	r := rand.New(rand.NewPCG(seed, 0x5eed5eed))
	for _, i := range r.Perm(n)[:k] {
		held[i] = true
	}
	for i, ex := range examples {
		if held[i] {
			heldOut = append(heldOut, ex)
		} else {
			train = append(train, ex)
		}
	}
	return train, heldOut, nil
}
