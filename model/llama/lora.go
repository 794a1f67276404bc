package llama

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/safetensors"
)

// LoRAConfig describes low-rank adapters: for each targeted projection
// W [out, in], A [r, in] and B [out, r], adding (α/r)·x·Aᵀ·Bᵀ to x·Wᵀ.
type LoRAConfig struct {
	Rank    int
	Alpha   float32
	Targets []string // projection names: q, k, v, o, gate, up, down
	RSLoRA  bool     // rank-stabilised: the update is scaled by α/√r instead of α/r
	// Dropout is PEFT's lora_dropout, in [0, 1): in a training pass each
	// adapted projection computes s·B·A·dropout(x), with a mask of its own
	// drawn from the batch's Batch.DropoutSeed; evaluation and generation
	// use x itself. 0: none.
	Dropout float32
}

// projIndex returns projection p's index in AllProjections.
func projIndex(p string) int { return slices.Index(AllProjections, p) }

// LoRAParams returns the number of adapter parameters of l on c.
func (c Config) LoRAParams(l LoRAConfig) (int64, error) {
	var n int64
	for _, t := range l.Targets {
		out, in, ok := c.projDims(t)
		if !ok {
			return 0, fmt.Errorf("unknown LoRA target %q (want one of %v)", t, AllProjections)
		}
		n += int64(l.Rank) * int64(in+out)
	}
	return n * int64(c.Layers), nil
}

// LoRAEvery is the adapter the project's trainers add unless told
// otherwise: rank r, α = 2r, on every projection.
func LoRAEvery(r int) LoRAConfig {
	return LoRAConfig{Rank: r, Alpha: 2 * float32(r), Targets: AllProjections}
}

// LoRAFor is LoRAEvery's adapter of rank r and α = 2r on the projections
// targets names (ParseLoRATargets); nil targets mean every projection.
func LoRAFor(r int, targets []string) LoRAConfig {
	lc := LoRAEvery(r)
	if targets != nil {
		lc.Targets = targets
	}
	return lc
}

// AllLinear is PEFT's name of every linear layer of a block, which
// ParseLoRATargets takes for every projection.
const AllLinear = "all-linear"

// ParseLoRATargets reads a comma-separated list of the projections a LoRA
// adapter adapts, as a --lora-targets flag gives it: turnwise's names (q,
// k, v, o, gate, up, down), PEFT's target_modules names (q_proj, …, or a
// module path ending in one, such as self_attn.q_proj), or "all-linear"
// (every projection). The result is in AllProjections' order without
// repeats; an unknown or empty name is an error naming it.
func ParseLoRATargets(s string) ([]string, error) {
	seen := map[string]bool{}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		switch {
		case name == AllLinear:
			for _, p := range AllProjections {
				seen[p] = true
			}
			continue
		case name == "":
			return nil, fmt.Errorf("LoRA targets %q: an empty name (want a comma-separated list of %s, their PEFT names such as q_proj, or %s)",
				s, strings.Join(AllProjections, ", "), AllLinear)
		}
		p, ok := loraTarget(name)
		if !ok {
			return nil, fmt.Errorf("unknown LoRA target %q (want %s, their PEFT names %s, or %s)",
				name, strings.Join(AllProjections, ", "), strings.Join(peftTargetNames(), ", "), AllLinear)
		}
		seen[p] = true
	}
	var out []string
	for _, p := range AllProjections {
		if seen[p] {
			out = append(out, p)
		}
	}
	return out, nil
}

// loraTarget returns the projection a target name names: its own name, its
// PEFT name (q_proj) or a module path ending in that (self_attn.q_proj).
func loraTarget(name string) (string, bool) {
	for _, p := range AllProjections {
		if name == p || name == peftTarget(p) || name == peftModule(p) || strings.HasSuffix(name, "."+peftModule(p)) {
			return p, true
		}
	}
	return "", false
}

// LoRAPair is the adapter of one projection W [out, in]: the projection
// becomes y = x·Wᵀ + s·(x·Aᵀ)·Bᵀ with s = α/r.
type LoRAPair struct {
	A *engine.Tensor // [r, in]
	B *engine.Tensor // [out, r]
}

// Adapter is one named set of LoRA weights over a model's frozen base. Several
// adapters can share one base (actor, critic); passing none to the model's
// calls gives the base alone (the reference policy).
type Adapter struct {
	Config LoRAConfig
	Layers []map[string]*LoRAPair // per layer, by projection name (q, k, v, o, gate, up, down)
	Base   string                 // the base model's name or directory, for adapter_config.json
}

// scale is Scale for a possibly nil adapter.
func (a *Adapter) scale() float32 {
	if a == nil {
		return 0
	}
	return a.Scale()
}

// pair returns the adapter of layer l's projection, or nil.
func (a *Adapter) pair(l int, proj string) *LoRAPair {
	if a == nil {
		return nil
	}
	return a.Layers[l][proj]
}

// peftModule returns projection p's Hugging Face module path within a layer
// ("self_attn.q_proj"); its last element is PEFT's target_modules name.
func peftModule(p string) string {
	e, ok := projection(p)
	if !ok {
		panic(fmt.Sprintf("llama: unknown projection %q", p))
	}
	return e.hf
}

// peftTarget returns PEFT's target_modules name of projection p ("q_proj").
func peftTarget(p string) string {
	m := peftModule(p)
	return m[strings.LastIndexByte(m, '.')+1:]
}

// peftNames returns the PEFT names of the A and B matrices adapting
// projection p of layer l.
func peftNames(l int, p string) (a, b string) {
	base := fmt.Sprintf("base_model.model.model.layers.%d.%s", l, peftModule(p))
	return base + ".lora_A.weight", base + ".lora_B.weight"
}

// Each calls fn on every adapter tensor with its PEFT name, in layer order.
func (a *Adapter) Each(fn func(name string, t *engine.Tensor)) {
	for l, m := range a.Layers {
		for _, p := range AllProjections {
			if pr, ok := m[p]; ok {
				na, nb := peftNames(l, p)
				fn(na, pr.A)
				fn(nb, pr.B)
			}
		}
	}
}

// maxLoRARank bounds the rank of an adapter read from a file, far above any
// in use, so that sizes computed from it cannot overflow.
const maxLoRARank = 1 << 16

// newAdapter allocates a zeroed adapter of configuration lc in dtype dt.
func (m *Model) newAdapter(lc LoRAConfig, dt engine.DType) (*Adapter, error) {
	if lc.Rank <= 0 {
		return nil, fmt.Errorf("LoRA rank %d: must be positive", lc.Rank)
	}
	if _, err := m.Config.LoRAParams(lc); err != nil {
		return nil, err
	}
	// The A matrices of the projections that read one input lie stacked,
	// in one buffer [k·r, in] (see linear); every tensor is still its own
	// [r, in] or [out, r] view, as saved and loaded.
	a := &Adapter{Config: lc, Layers: make([]map[string]*LoRAPair, m.Config.Layers)}
	r := lc.Rank
	for l := range a.Layers {
		a.Layers[l] = map[string]*LoRAPair{}
		for _, g := range sharedInput(lc.Targets) {
			_, in, _ := m.Config.projDims(g[0])
			stack, err := engine.Alloc(m.b, dt, len(g)*r, in)
			if err != nil {
				return nil, fmt.Errorf("LoRA adapter: %w", err)
			}
			for i, p := range g {
				out, _, _ := m.Config.projDims(p)
				bt, err := engine.Alloc(m.b, dt, out, r)
				if err != nil {
					return nil, fmt.Errorf("LoRA adapter: %w", err)
				}
				a.Layers[l][p] = &LoRAPair{A: stack.Rows(i*r, (i+1)*r), B: bt}
			}
		}
	}
	return a, nil
}

// widestGroup returns the most projections lc adapts that read one input
// (3 for q, k and v).
func (lc LoRAConfig) widestGroup() int {
	k := 0
	for _, g := range sharedInput(lc.Targets) {
		k = max(k, len(g))
	}
	return k
}

// CheckLoRARank returns an error when l's rank is not positive or exceeds
// the smaller dimension of a projection it adapts: the update B·A of a
// projection W [out, in] has rank at most min(out, in), so a larger r adds
// parameters and work but nothing the adapter can express.
func (c Config) CheckLoRARank(l LoRAConfig) error {
	if !(l.Dropout >= 0 && l.Dropout < 1) {
		return fmt.Errorf("LoRA dropout %v: want a probability in [0, 1)", l.Dropout)
	}
	if l.Rank <= 0 {
		return fmt.Errorf("LoRA rank %d: must be positive", l.Rank)
	}
	for _, t := range l.Targets {
		out, in, ok := c.projDims(t)
		if !ok {
			return fmt.Errorf("unknown LoRA target %q (want one of %v)", t, AllProjections)
		}
		if n := min(out, in); l.Rank > n {
			return fmt.Errorf("LoRA rank %d exceeds projection %s's smaller dimension (%d×%d): an update B·A has rank at most %d, want a rank of 1 to %d",
				l.Rank, t, out, in, n, c.maxLoRARank(l.Targets))
		}
	}
	return nil
}

// maxLoRARank returns the largest rank CheckLoRARank accepts on targets.
func (c Config) maxLoRARank(targets []string) int {
	n := math.MaxInt
	for _, t := range targets {
		if out, in, ok := c.projDims(t); ok {
			n = min(n, out, in)
		}
	}
	return n
}

// NewAdapter returns a fresh adapter in the model's dtype: A uniform in
// ±1/sqrt(in) (PEFT's default), B zero, so that it changes no output until
// trained. Its rank must pass Config.CheckLoRARank.
func (m *Model) NewAdapter(lc LoRAConfig, seed uint64) (*Adapter, error) {
	if err := m.Config.CheckLoRARank(lc); err != nil {
		return nil, err
	}
	a, err := m.newAdapter(lc, m.dt)
	if err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(seed, 0x6c6f7261))
	a.Each(func(name string, t *engine.Tensor) {
		if strings.HasSuffix(name, ".lora_A.weight") {
			bound := 1 / math.Sqrt(float64(t.Dim(1)))
			vals := make([]float32, t.Numel())
			for i := range vals {
				vals[i] = float32((2*r.Float64() - 1) * bound)
			}
			engine.SetF32(m.b, t, vals)
		}
	})
	return a, nil
}

// NewAdapterGrads returns zeroed gradient buffers shaped like a, in dtype dt.
func (m *Model) NewAdapterGrads(a *Adapter, dt engine.DType) (*Adapter, error) {
	return m.newAdapter(a.Config, dt)
}

// LoadPEFT reads a PEFT LoRA adapter (adapter_config.json and
// adapter_model.safetensors) for this model, converting it to the model's
// dtype. Every tensor is checked against the model's shapes.
func (m *Model) LoadPEFT(dir string) (*Adapter, error) {
	cfgPath := filepath.Join(dir, "adapter_config.json")
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		return nil, err
	}
	lc, err := m.parsePEFTConfig(raw, cfgPath)
	if err != nil {
		return nil, err
	}
	wPath := filepath.Join(dir, "adapter_model.safetensors")
	f, err := safetensors.Open(wPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Every tensor is checked before any is allocated, so that an r the
	// file does not back is an error, not an allocation.
	for l := range m.Config.Layers {
		for _, p := range lc.Targets {
			out, in, _ := m.Config.projDims(p)
			na, nb := peftNames(l, p)
			for _, x := range []struct {
				name  string
				shape []int64
			}{{na, []int64{int64(lc.Rank), int64(in)}}, {nb, []int64{int64(out), int64(lc.Rank)}}} {
				info, ok := f.Info(x.name)
				switch {
				case !ok:
					return nil, fmt.Errorf("%s: tensor %s is missing (%s needs one of shape %v)", wPath, x.name, cfgPath, x.shape)
				case !slices.Equal(info.Shape, x.shape):
					return nil, fmt.Errorf("%s: tensor %s has shape %v, the model and r = %d in %s need %v", wPath, x.name, info.Shape, lc.Rank, cfgPath, x.shape)
				}
			}
		}
	}
	a, err := m.newAdapter(lc, m.dt)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfgPath, err)
	}
	buf := &convBuf{}
	a.Each(func(name string, t *engine.Tensor) {
		if err == nil {
			err = loadHFTensor(m.b, f, wPath, name, []int{t.Dim(0), t.Dim(1)}, t, buf)
		}
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// Merge folds a into the base weights: W += s·B·A for every adapted
// projection. The model then computes without the adapter what it computed
// with it (up to rounding in the weight dtype).
func (m *Model) Merge(a *Adapter) {
	s := a.Scale()
	for l := range m.Weights.Layers {
		w := &m.Weights.Layers[l]
		for _, p := range a.Config.Targets {
			pr := a.Layers[l][p]
			m.b.Gemm(w.proj(p), pr.B, pr.A, engine.GemmParams{Alpha: s, Beta: 1})
		}
	}
}
