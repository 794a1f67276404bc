package serve

import (
	"container/heap"
	"math"

	"github.com/turnwise/turnwise/engine"
)

// maxTopLogprobs bounds the alternatives a request may ask for per token,
// as OpenAI's API does.
const maxTopLogprobs = 20

// sampler is how a job draws its tokens. The backend's sampler
// (engine.SampleParams: temperature, top_k and top_p) draws from a row of
// logits that, when the job asks for penalties or a logit bias, is first
// adjusted on the host.
type sampler struct {
	params engine.SampleParams
	// presence and frequency are subtracted from the logit of each token
	// generated so far: presence once, frequency once per occurrence.
	presence, frequency float32
	// bias is added to the logits of its tokens.
	bias map[int32]float32
	// logprobs is the number of most likely alternatives reported with
	// each token's log-probability; −1: none reported.
	logprobs int
}

// penalized reports whether the sampler needs the counts of the tokens
// generated.
func (p *sampler) penalized() bool { return p.presence != 0 || p.frequency != 0 }

// host reports whether the logits are adjusted before the draw.
func (p *sampler) host() bool { return p.penalized() || len(p.bias) > 0 }

// adjust applies the logit bias and the penalties (counts: the tokens
// generated so far) to row, and returns it.
func (p *sampler) adjust(row []float32, counts map[int32]int) []float32 {
	for id, v := range p.bias {
		if int(id) < len(row) {
			row[id] += v
		}
	}
	for id, n := range counts {
		if int(id) < len(row) {
			row[id] -= p.presence + p.frequency*float32(n)
		}
	}
	return row
}

// topIndices returns the indices of the k largest values of row, largest
// first, the lower index first among equal values.
func topIndices(row []float32, k int) []int {
	h := &rankHeap{row: row}
	for j := range row {
		if h.Len() < k {
			heap.Push(h, j)
		} else if h.less(h.idx[0], j) {
			h.idx[0] = j
			heap.Fix(h, 0)
		}
	}
	out := make([]int, h.Len())
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = heap.Pop(h).(int)
	}
	return out
}

// rankHeap is a min-heap of indices of row by rank: its root is the
// weakest of the indices kept.
type rankHeap struct {
	row []float32
	idx []int
}

// less reports whether index a ranks below index b: a smaller value, or an
// equal one at a higher index.
func (h *rankHeap) less(a, b int) bool {
	if h.row[a] != h.row[b] {
		return h.row[a] < h.row[b]
	}
	return a > b
}

func (h *rankHeap) Len() int           { return len(h.idx) }
func (h *rankHeap) Less(i, j int) bool { return h.less(h.idx[i], h.idx[j]) }
func (h *rankHeap) Swap(i, j int)      { h.idx[i], h.idx[j] = h.idx[j], h.idx[i] }
func (h *rankHeap) Push(x any)         { h.idx = append(h.idx, x.(int)) }
func (h *rankHeap) Pop() any {
	x := h.idx[len(h.idx)-1]
	h.idx = h.idx[:len(h.idx)-1]
	return x
}

// tokenLogprob is a sampled token's log-probability under the model
// (temperature 1, before any penalty, bias, top-k or top-p), with the most
// likely tokens' log-probabilities.
type tokenLogprob struct {
	prev    int32 // the token before, for its text
	token   int32
	logprob float32
	top     []tokenAlt
}

// tokenAlt is one of the most likely tokens at a position.
type tokenAlt struct {
	token   int32
	logprob float32
}

// logprobOf returns the log-probability of token tok under the logits row,
// with the top most likely tokens'.
func logprobOf(row []float32, tok int32, top int) *tokenLogprob {
	m := math.Inf(-1)
	for _, x := range row {
		m = math.Max(m, float64(x))
	}
	var sum float64
	for _, x := range row {
		sum += math.Exp(float64(x) - m)
	}
	lse := m + math.Log(sum)
	lp := &tokenLogprob{token: tok, logprob: float32(float64(row[tok]) - lse)}
	if top > 0 {
		for _, j := range topIndices(row, top) {
			lp.top = append(lp.top, tokenAlt{int32(j), float32(float64(row[j]) - lse)})
		}
	}
	return lp
}
