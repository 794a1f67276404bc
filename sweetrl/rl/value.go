package rl

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/safetensors"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/trainer"
)

// ValueHead is the critic of SWEET-RL's value-head ablation: a scalar
//
//	V(τ) = w · h_last(τ) + b
//
// of the model's final hidden state at a sequence's last token, trained
// with the Bradley–Terry loss −log σ(V(τ⁺) − V(τ⁻)) on the same trajectory
// pairs and the same view (ground truth, then dialogue) as the
// log-probability critic, but with no reference model. The paper reports
// it as the weaker parameterisation.
type ValueHead struct {
	W *engine.Tensor // [D] f32
	B *engine.Tensor // [1] f32
}

// NewValueHead returns a zero head for model m.
func NewValueHead(m *llama.Model) (*ValueHead, error) {
	w, err := engine.Alloc(m.Backend(), engine.F32, m.Config.Dim)
	if err != nil {
		return nil, err
	}
	bias, err := engine.Alloc(m.Backend(), engine.F32, 1)
	if err != nil {
		return nil, err
	}
	m.Backend().Fill(w, 0)
	m.Backend().Fill(bias, 0)
	return &ValueHead{W: w, B: bias}, nil
}

// ValueHeadFile is the name of a value head's file in a critic directory.
const ValueHeadFile = "value_head.safetensors"

// Save writes the head as safetensors ("value_head.weight" [D],
// "value_head.bias" [1]).
func (v *ValueHead) Save(b engine.Backend, path string) error {
	return safetensors.WriteFile(path, []safetensors.Tensor{
		{Name: "value_head.weight", DType: safetensors.F32, Shape: []int64{int64(v.W.Numel())}, Data: engine.EncodeF32(engine.F32, engine.ToF32(b, v.W))},
		{Name: "value_head.bias", DType: safetensors.F32, Shape: []int64{1}, Data: engine.EncodeF32(engine.F32, engine.ToF32(b, v.B))},
	}, nil)
}

// LoadValueHead reads a head written by Save for model m.
func LoadValueHead(m *llama.Model, path string) (*ValueHead, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	v, err := NewValueHead(m)
	if err != nil {
		return nil, err
	}
	for name, t := range map[string]*engine.Tensor{"value_head.weight": v.W, "value_head.bias": v.B} {
		data, info, err := f.Data(name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if info.DType != safetensors.F32 || len(info.Shape) != 1 || info.Shape[0] != int64(t.Numel()) {
			return nil, fmt.Errorf("%s: %s is %v %v; want F32 [%d] for a model of dimension %d", path, name, info.DType, info.Shape, t.Numel(), m.Config.Dim)
		}
		engine.SetF32(m.Backend(), t, engine.DecodeF32(engine.F32, data))
	}
	return v, nil
}

// LoadHead loads the value head a critic directory holds
// (dir/ValueHeadFile), if it holds one, making c the value-head critic;
// it returns the head's path, or "" when there is none.
func (c *Critic) LoadHead(dir string) (string, error) {
	path := filepath.Join(dir, ValueHeadFile)
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil
		}
		return "", err
	}
	h, err := LoadValueHead(c.Model, path)
	if err != nil {
		return "", err
	}
	c.Head = h
	return path, nil
}

// lastHidden runs a forward pass over seqs packed and returns the pass and
// each sequence's final hidden state, [len(seqs)][D].
func lastHidden(m *llama.Model, ad *llama.Adapter, seqs []Seq) (*llama.Pass, packed, [][]float32, error) {
	p := pack(seqs)
	for i := range p.bt.Targets {
		p.bt.Targets[i] = -1 // no log-probabilities are needed
	}
	pass, err := m.ForwardTrain(p.bt, ad)
	if err != nil {
		return nil, p, nil, err
	}
	h := engine.ToF32(m.Backend(), pass.Hidden()) // [N, D]
	d := m.Config.Dim
	out := make([][]float32, len(seqs))
	for k, s := range seqs {
		last := p.off[k] + len(s.IDs) - 1
		out[k] = h[last*d : (last+1)*d]
	}
	return pass, p, out, nil
}

// value returns w·h + bias for the head's weights w and bias, copied to
// the host once by the caller.
func value(w []float32, bias float32, h []float32) float64 {
	s := float64(bias)
	for i, x := range h {
		s += float64(w[i]) * float64(x)
	}
	return s
}

// Values returns V of each sequence (its weights are not used).
func (v *ValueHead) Values(m *llama.Model, ad *llama.Adapter, seqs []Seq, batchTokens int) ([]float64, error) {
	out := make([]float64, len(seqs))
	w, bias := engine.ToF32(m.Backend(), v.W), engine.ToF32(m.Backend(), v.B)[0]
	for _, r := range batches(seqs, batchTokens) {
		pass, _, hs, err := lastHidden(m, ad, seqs[r[0]:r[1]])
		if err != nil {
			return nil, err
		}
		pass.Release()
		for k, h := range hs {
			out[r[0]+k] = value(w, bias, h)
		}
	}
	return out, nil
}

// TrainValueCritic trains the head and the adapter ad (nil: every weight of
// m) with −log σ(V(c) − V(r)) averaged over each step's pairs, with the
// schedule and optimizer of TrainPreferences (Beta, NLLCoef and the
// reference play no part), stopping as TrainPreferences does when it
// diverges.
func TrainValueCritic(m *llama.Model, ad *llama.Adapter, v *ValueHead, pairs []PrefPair, o PrefOptions) (PrefStats, error) {
	return TrainValueCriticContext(context.Background(), m, ad, v, pairs, o)
}

// TrainValueCriticContext is TrainValueCritic, stopping early when ctx is
// cancelled, as TrainPreferencesContext does.
func TrainValueCriticContext(ctx context.Context, m *llama.Model, ad *llama.Adapter, v *ValueHead, pairs []PrefPair, o PrefOptions) (PrefStats, error) {
	st := PrefStats{Pairs: len(pairs)}
	if len(pairs) == 0 {
		return st, errors.New("no preference pairs to train on")
	}
	if o.Epochs <= 0 || o.PairsPerStep <= 0 || o.BatchTokens <= 0 {
		return st, fmt.Errorf("value critic: %d epochs, %d pairs per step, %d tokens per batch", o.Epochs, o.PairsPerStep, o.BatchTokens)
	}
	b := m.Backend()
	tp, err := trainer.NewParamsZero(m, ad, o.AdamW, map[string]*engine.Tensor{"value_head.weight": v.W, "value_head.bias": v.B}, o.Comm, o.Zero)
	if err != nil {
		return st, err
	}
	defer tp.Free()
	if err := tp.Broadcast(o.Comm); err != nil {
		return st, err
	}
	gw, gb := tp.Opt.Grad(v.W), tp.Opt.Grad(v.B)
	d := m.Config.Dim
	// The classifier runs forward only: its backward (the input gradient,
	// and with every weight trained its own) is not taken, so its V·D
	// weights cost 2 FLOPs a token, not FLOPsPerToken's 4 or 6.
	vd := float64(m.Config.Vocab) * float64(m.Config.Dim)
	fpt := trainer.FLOPsPerToken(m, ad) - 2*vd
	if ad == nil {
		fpt -= 2 * vd
	}
	meter := trainer.NewMeterFLOPs(m, fpt, o.PeakFLOPS*float64(ranks(o.Comm))) // tokens summed over the ranks
	return pairLoop(ctx, pairs, tp, o, 0x76616c7565, meter, func(idx []int, scale float64) (ms microStats, err error) {
		var seqs []Seq
		for _, k := range idx {
			seqs = append(seqs, pairs[k].Chosen, pairs[k].Rejected)
		}
		pass, p, hs, err := lastHidden(m, ad, seqs)
		if err != nil {
			return ms, err
		}
		defer pass.Release()
		w, bias := engine.ToF32(b, v.W), engine.ToF32(b, v.B)[0]
		dW, dB := engine.ToF32(b, gw), engine.ToF32(b, gb) // accumulated over the step's passes
		dh := make([]float32, len(p.bt.IDs)*d)             // [N, D]
		for j := 0; j < len(seqs); j += 2 {
			vc, vr := value(w, bias, hs[j]), value(w, bias, hs[j+1])
			l, dC, dR := sweetrl.PreferenceLoss(vc, 0, vr, 0, 1) // −log σ(V(c) − V(r))
			ms.loss += scale * l
			ms.margin += vc - vr
			if vc > vr {
				ms.right++
			}
			for side, gv := range [2]float64{scale * dC, scale * dR} {
				k := j + side
				last := p.off[k] + len(seqs[k].IDs) - 1
				for i := range d {
					dh[last*d+i] += float32(gv * float64(w[i]))
					dW[i] += float32(gv * float64(hs[k][i]))
				}
				dB[0] += float32(gv)
			}
		}
		engine.SetF32(b, gw, dW)
		engine.SetF32(b, gb, dB)
		dht, err := engine.Alloc(b, m.DType(), len(p.bt.IDs), d)
		if err != nil {
			return ms, err
		}
		defer b.FreeBuffer(dht.Buffer())
		engine.SetF32(b, dht, dh)
		if err := pass.BackwardHidden(dht, tp.Grads, tp.AdapterGrads); err != nil {
			return ms, err
		}
		ms.tokens = len(p.bt.IDs)
		return ms, nil
	})
}
