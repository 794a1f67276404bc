package serve

import (
	"testing"

	"github.com/turnwise/turnwise/engine"
)

// TestTopKOnBackend checks that a request's top_k is the backend sampler's
// TopK, so that top_k alone needs no host copy of the logits, and that
// greedy requests and top_k 0 or −1 keep every token.
func TestTopKOnBackend(t *testing.T) {
	k := func(v int) *int { return &v }
	f := func(v float64) *float64 { return &v }
	for _, c := range []struct {
		name string
		req  sampling
		want engine.SampleParams
		host bool
	}{
		{"top_k alone", sampling{TopK: k(5)}, engine.SampleParams{Temperature: 1, TopP: 1, TopK: 5}, false},
		{"top_k and top_p", sampling{TopK: k(40), TopP: f(0.9), Temperature: f(0.7)}, engine.SampleParams{Temperature: 0.7, TopP: 0.9, TopK: 40}, false},
		{"top_k -1", sampling{TopK: k(-1)}, engine.SampleParams{Temperature: 1, TopP: 1}, false},
		{"top_k 0", sampling{TopK: k(0)}, engine.SampleParams{Temperature: 1, TopP: 1}, false},
		{"greedy", sampling{TopK: k(3), TopP: f(0.5), Temperature: f(0)}, engine.SampleParams{}, false},
		{"with a bias", sampling{TopK: k(2), LogitBias: map[string]float64{"7": 1}}, engine.SampleParams{Temperature: 1, TopP: 1, TopK: 2}, true},
		{"with a penalty", sampling{TopK: k(9), PresencePenalty: f(0.5)}, engine.SampleParams{Temperature: 1, TopP: 1, TopK: 9}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			o, err := c.req.check(nil, "max_tokens", 100)
			if err != nil {
				t.Fatalf("check: %v", err)
			}
			if o.sample.params != c.want {
				t.Errorf("params %+v, want %+v", o.sample.params, c.want)
			}
			if got := o.sample.host(); got != c.host {
				t.Errorf("host copy %t, want %t", got, c.host)
			}
		})
	}
}
