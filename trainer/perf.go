package trainer

import (
	"github.com/turnwise/turnwise/metrics"
	"github.com/turnwise/turnwise/model/llama"
)

// FLOPsPerToken returns the model FLOPs one training token of m costs
// when ad is trained (nil: every weight), by metrics.TrainFLOPsPerToken
// over the weights the forward pass multiplies by:
//
//	full fine-tuning: 6·N
//	LoRA:             4·N + 6·N_lora
//
// with N the weights that multiply activations — Config.Params() less the
// embedding table when the classifier is a separate matrix (looking a
// token up costs no multiplication; a tied table is counted once, as the
// classifier) and less the 2·Layers+1 norm vectors — and N_lora =
// Config.LoRAParams of the adapter, as the bench's step suite counts them
// (bench/stepbench). Unlike the bench, which times sequences of one length,
// attention's 6·L·H·Dh·T a token is left out: the trainers pack sequences
// of varying lengths, so the MFU they record is a slight underestimate. It
// returns 0 when the adapter's targets are unknown.
func FLOPsPerToken(m *llama.Model, ad *llama.Adapter) float64 {
	c := m.Config
	n := c.Params() - int64(2*c.Layers+1)*int64(c.Dim)
	if !c.TiedEmbed {
		n -= int64(c.Vocab) * int64(c.Dim)
	}
	if ad == nil {
		return metrics.TrainFLOPsPerToken(0, n)
	}
	nl, err := c.LoRAParams(ad.Config)
	if err != nil {
		return 0
	}
	return metrics.TrainFLOPsPerToken(n, nl)
}

// NewMeter returns a metrics.Meter for training m's adapter ad (nil: every
// weight) against a peak of peakFLOPS (0: no MFU), reading m's pool.
func NewMeter(m *llama.Model, ad *llama.Adapter, peakFLOPS float64) *metrics.Meter {
	return NewMeterFLOPs(m, FLOPsPerToken(m, ad), peakFLOPS)
}

// NewMeterFLOPs is NewMeter for a trainer whose token costs flopsPerToken
// FLOPs, such as one whose backward skips the classifier.
func NewMeterFLOPs(m *llama.Model, flopsPerToken, peakFLOPS float64) *metrics.Meter {
	return metrics.NewMeter(metrics.MeterOptions{
		FLOPsPerToken: flopsPerToken,
		PeakFLOPS:     peakFLOPS,
		Pool: func() (int, int) {
			st := m.PoolStats()
			return st.PeakBytes, st.HighWater
		},
	})
}
