package trainer

import "testing"

// TestFLOPsPerToken checks the FLOP count against a hand count of the test
// model (D 32, 2 layers, 4 query heads and 2 key/value heads of 8, FFN 64,
// vocabulary 258, untied): a layer multiplies by q and o, 32·32 each, k
// and v, 16·32 each, gate, up and down, 64·32 each: 9216; two layers and
// the classifier's 258·32 make N = 26688 (the embedding table, looked up,
// and the norms, which multiply elementwise, are not counted). A rank-4 adapter on every
// projection has 4·(in+out) per projection: 2048 a layer, 4096 in all.
func TestFLOPsPerToken(t *testing.T) {
	for _, tc := range []struct {
		lora bool
		want float64
	}{
		{false, 6 * 26688},
		{true, 4*26688 + 6*4096},
	} {
		m, ad, _ := setup(t, tc.lora)
		if got := FLOPsPerToken(m, ad); got != tc.want {
			t.Errorf("LoRA %v: %g FLOPs a token, want %g", tc.lora, got, tc.want)
		}
	}
}
