package llama_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/model/llama"
)

func TestParseLoRATargets(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  string // a part of the error; "" for none
	}{
		{"q,k,v,o", []string{"q", "k", "v", "o"}, ""},
		{"all-linear", llama.AllProjections, ""},
		{"q_proj, v_proj", []string{"q", "v"}, ""},
		{"down,q,q_proj", []string{"q", "down"}, ""}, // AllProjections' order, no repeats
		{"self_attn.o_proj,model.layers.0.mlp.gate_proj", []string{"o", "gate"}, ""},
		{"up,all-linear", llama.AllProjections, ""},
		{"q,wq", nil, `unknown LoRA target "wq"`},
		{"lm_head", nil, `unknown LoRA target "lm_head"`},
		{"q,,v", nil, "an empty name"},
		{"", nil, "an empty name"},
	}
	for _, tc := range tests {
		got, err := llama.ParseLoRATargets(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, %v; want an error with %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// TestChosenTargetsSaved checks that an adapter on chosen projections is
// written with exactly those in target_modules, under PEFT's names.
func TestChosenTargetsSaved(t *testing.T) {
	m, err := llama.NewRandom(cpu.New(cpu.Options{Threads: 1}), tinyConfig(false), engine.F32, 0.5, 6)
	if err != nil {
		t.Fatal(err)
	}
	targets, err := llama.ParseLoRATargets("v_proj,q,down")
	if err != nil {
		t.Fatal(err)
	}
	ad, err := m.NewAdapter(llama.LoRAFor(2, targets), 1)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := m.SavePEFT(ad, dir); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "adapter_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		TargetModules []string `json:"target_modules"`
		R             int      `json:"r"`
		Alpha         float64  `json:"lora_alpha"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	if want := []string{"q_proj", "v_proj", "down_proj"}; !slices.Equal(cfg.TargetModules, want) || cfg.R != 2 || cfg.Alpha != 4 {
		t.Errorf("adapter_config.json: %+v, want target_modules %v, r 2, lora_alpha 4", cfg, want)
	}
	if every := llama.LoRAFor(3, nil); !slices.Equal(every.Targets, llama.AllProjections) {
		t.Errorf("LoRAFor(3, nil) adapts %v, want every projection", every.Targets)
	}
}
