package llama

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/internal/jsonerr"
	"github.com/turnwise/turnwise/internal/outfile"
	"github.com/turnwise/turnwise/safetensors"
)

// PEFT's defaults for the fields of adapter_config.json that a file may
// leave out (peft.LoraConfig).
const (
	peftDefaultRank  = 8
	peftDefaultAlpha = 8
)

// PEFTDefaultAlpha is PEFT's default lora_alpha (peft.LoraConfig), the
// default of train sft's --lora-alpha.
const PEFTDefaultAlpha = peftDefaultAlpha

// peftConfig is adapter_config.json, in the fields turnwise writes and
// reads. Fields PEFT has that change what an adapter computes, and that
// turnwise does not implement, are refused when set (see peftRefused).
type peftConfig struct {
	PeftType      string          `json:"peft_type"`
	TaskType      string          `json:"task_type,omitempty"`
	R             *int            `json:"r"`
	LoraAlpha     *float32        `json:"lora_alpha"`
	LoraDropout   float32         `json:"lora_dropout"`
	Bias          string          `json:"bias"`
	TargetModules json.RawMessage `json:"target_modules"`
	FanInFanOut   bool            `json:"fan_in_fan_out"`
	InferenceMode bool            `json:"inference_mode"`
	UseRSLoRA     bool            `json:"use_rslora"`
	BaseModel     string          `json:"base_model_name_or_path"`
}

// peftRefused are the fields of adapter_config.json that change what an
// adapter computes in ways turnwise does not implement: a file that sets
// one (to anything but null, false, an empty list or an empty object) is
// refused rather than read as something it is not.
var peftRefused = []string{
	"use_dora", "modules_to_save", "layers_to_transform", "layers_pattern",
	"rank_pattern", "alpha_pattern", "lora_bias", "exclude_modules",
	"target_parameters", "trainable_token_indices",
}

// Scale returns the factor s of the adapter's update s·B·A: α/r, or α/√r
// for rank-stabilised LoRA (use_rslora).
func (a *Adapter) Scale() float32 {
	if a.Config.RSLoRA {
		return a.Config.Alpha / float32(math.Sqrt(float64(a.Config.Rank)))
	}
	return a.Config.Alpha / float32(a.Config.Rank)
}

// SavePEFT writes a in PEFT's layout: dir/adapter_config.json and
// dir/adapter_model.safetensors, in the adapter's dtype. The config names
// a.Base as the base model, or else the directory or file the model was
// read from (Model.Source).
func (m *Model) SavePEFT(a *Adapter, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var tensors []safetensors.Tensor
	var err error
	a.Each(func(name string, t *engine.Tensor) {
		st, ok := hfDType(t.DType())
		if !ok {
			err = fmt.Errorf("save adapter: no safetensors dtype for %v", t.DType())
			return
		}
		raw := make([]byte, t.Bytes())
		m.b.Download(raw, t)
		shape := []int64{int64(t.Dim(0)), int64(t.Dim(1))}
		tensors = append(tensors, safetensors.Tensor{Name: name, DType: st, Shape: shape, Data: raw})
	})
	if err != nil {
		return err
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "adapter_model.safetensors"), tensors, map[string]string{"format": "pt"}); err != nil {
		return err
	}
	targets := make([]string, len(a.Config.Targets))
	for i, p := range a.Config.Targets {
		targets[i] = peftTarget(p)
	}
	tm, err := json.Marshal(targets)
	if err != nil {
		return err
	}
	base := a.Base
	if base == "" {
		base = m.Source
	}
	r, alpha := a.Config.Rank, a.Config.Alpha
	pc := peftConfig{PeftType: "LORA", TaskType: "CAUSAL_LM", R: &r, LoraAlpha: &alpha, LoraDropout: a.Config.Dropout, Bias: "none",
		TargetModules: tm, InferenceMode: true, UseRSLoRA: a.Config.RSLoRA, BaseModel: base}
	raw, err := json.MarshalIndent(pc, "", "  ")
	if err != nil {
		return err
	}
	return outfile.WriteFile(filepath.Join(dir, "adapter_config.json"), append(raw, '\n'), 0o644)
}

// parsePEFTConfig reads adapter_config.json (raw, from path) as PEFT reads
// it: r and lora_alpha default to PEFT's 8, lora_dropout to 0 (applied in
// training passes, see LoRAConfig.Dropout); target_modules is a list of
// module names (a module matches an entry equal to its full name or to a
// suffix of it after a dot), a regular expression matched against each
// module's full name ("model.layers.3.self_attn.q_proj"), or "all-linear";
// use_rslora scales by α/√r. What turnwise cannot compute as PEFT would is
// refused with an error naming the field.
func (m *Model) parsePEFTConfig(raw []byte, path string) (LoRAConfig, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return LoRAConfig{}, fmt.Errorf("%s: %w", path, jsonerr.Reword(err))
	}
	for _, k := range peftRefused {
		if v, ok := fields[k]; ok && isSet(v) {
			return LoRAConfig{}, fmt.Errorf("%s: %s = %s is not supported by turnwise (only plain LoRA adapters are)", path, k, v)
		}
	}
	var pc peftConfig
	if err := json.Unmarshal(raw, &pc); err != nil {
		return LoRAConfig{}, fmt.Errorf("%s: %w", path, jsonerr.Reword(err))
	}
	if pc.PeftType != "LORA" {
		return LoRAConfig{}, fmt.Errorf("%s: peft_type %q, want LORA", path, pc.PeftType)
	}
	if pc.Bias != "" && pc.Bias != "none" {
		return LoRAConfig{}, fmt.Errorf("%s: bias %q is not supported (want none)", path, pc.Bias)
	}
	if pc.FanInFanOut {
		return LoRAConfig{}, fmt.Errorf("%s: fan_in_fan_out adapters are not supported", path)
	}
	lc := LoRAConfig{Rank: peftDefaultRank, Alpha: peftDefaultAlpha, RSLoRA: pc.UseRSLoRA, Dropout: pc.LoraDropout}
	if !(lc.Dropout >= 0 && lc.Dropout < 1) {
		return LoRAConfig{}, fmt.Errorf("%s: lora_dropout = %v, want a probability in [0, 1)", path, lc.Dropout)
	}
	if pc.R != nil {
		lc.Rank = *pc.R
	}
	if pc.LoraAlpha != nil {
		lc.Alpha = *pc.LoraAlpha
	}
	if lc.Rank <= 0 || lc.Rank > maxLoRARank {
		return LoRAConfig{}, fmt.Errorf("%s: r = %d, want 1 to %d", path, lc.Rank, maxLoRARank)
	}
	if math.IsNaN(float64(lc.Alpha)) || math.IsInf(float64(lc.Alpha), 0) {
		return LoRAConfig{}, fmt.Errorf("%s: lora_alpha = %v, want a finite number", path, lc.Alpha)
	}
	targets, err := m.peftTargets(pc.TargetModules)
	if err != nil {
		return LoRAConfig{}, fmt.Errorf("%s: target_modules: %w", path, err)
	}
	lc.Targets = targets
	return lc, nil
}

// isSet reports whether a JSON value sets a field: anything but null,
// false, "", an empty list or an empty object.
func isSet(v json.RawMessage) bool {
	switch string(bytes.Join(bytes.Fields(v), nil)) {
	case "", "null", "false", `""`, "[]", "{}":
		return false
	}
	return true
}

// peftTargets returns the projections target_modules (raw JSON) adapts, in
// AllProjections' order. Every layer must adapt the same projections, and
// no entry may select a module turnwise does not adapt (the embedding, the
// output head) or nothing at all.
func (m *Model) peftTargets(raw json.RawMessage) ([]string, error) {
	if !isSet(raw) {
		return nil, fmt.Errorf("missing (PEFT needs the modules to adapt)")
	}
	var match func(module string) bool
	var list []string
	var one string
	switch {
	case json.Unmarshal(raw, &list) == nil:
		for _, e := range list {
			if !m.peftMatchesAny(func(module string) bool { return module == e || strings.HasSuffix(module, "."+e) }) {
				return nil, fmt.Errorf("%q names no projection of a Llama layer (turnwise adapts %v)", e, peftTargetNames())
			}
		}
		match = func(module string) bool {
			return slices.ContainsFunc(list, func(e string) bool { return module == e || strings.HasSuffix(module, "."+e) })
		}
	case json.Unmarshal(raw, &one) == nil && one == "all-linear":
		return slices.Clone(AllProjections), nil
	case json.Unmarshal(raw, &one) == nil:
		re, err := regexp.Compile(`^(?:` + one + `)$`)
		if err != nil {
			return nil, fmt.Errorf("regular expression %q: %w", one, err)
		}
		match = re.MatchString
	default:
		return nil, fmt.Errorf("%s: want a list of module names, a regular expression or \"all-linear\"", raw)
	}
	for _, other := range []string{"model.embed_tokens", "lm_head"} {
		if match(other) {
			return nil, fmt.Errorf("%s selects %s, which turnwise does not adapt", raw, other)
		}
	}
	var targets []string
	for l := range m.Config.Layers {
		var here []string
		for _, p := range AllProjections {
			if match(peftModulePath(l, p)) {
				here = append(here, p)
			}
		}
		if l == 0 {
			targets = here
		} else if !slices.Equal(here, targets) {
			return nil, fmt.Errorf("%s adapts %v in layer %d but %v in layer 0; turnwise adapts the same projections in every layer", raw, here, l, targets)
		}
	}
	if len(targets) == 0 {
		return nil, fmt.Errorf("%s selects no projection of the model", raw)
	}
	return targets, nil
}

// peftMatchesAny reports whether match selects any projection of layer 0.
func (m *Model) peftMatchesAny(match func(string) bool) bool {
	return slices.ContainsFunc(AllProjections, func(p string) bool { return match(peftModulePath(0, p)) })
}

// peftModulePath returns the full module name of projection p of layer l
// in a Hugging Face Llama ("model.layers.3.self_attn.q_proj"), the name
// PEFT matches target_modules against.
func peftModulePath(l int, p string) string {
	return fmt.Sprintf("model.layers.%d.%s", l, peftModule(p))
}

// peftTargetNames returns PEFT's names of every projection ("q_proj", ...).
func peftTargetNames() []string {
	names := make([]string, len(AllProjections))
	for i, p := range AllProjections {
		names[i] = peftTarget(p)
	}
	return names
}
