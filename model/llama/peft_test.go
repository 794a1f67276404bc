package llama_test

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/model/llama"
)

// TestPEFTConfig reads adapter_config.json files as PEFT reads them: its
// defaults for what a file leaves out, target_modules as a list, a regular
// expression or "all-linear", use_rslora, and a refusal naming the field
// for what turnwise does not compute as PEFT would.
func TestPEFTConfig(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 1})
	m, err := llama.NewRandom(b, tinyConfig(false), engine.F32, 0.5, 6)
	if err != nil {
		t.Fatal(err)
	}
	// Tensors for every projection at r = 8, so that any selection loads.
	ad, err := m.NewAdapter(llama.LoRAConfig{Rank: 8, Alpha: 16, Targets: llama.AllProjections}, 7)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := m.SavePEFT(ad, dir); err != nil {
		t.Fatal(err)
	}
	all := llama.AllProjections
	tests := []struct {
		name    string
		config  string
		want    llama.LoRAConfig
		wantErr string
	}{
		{"PEFT's defaults for r and lora_alpha", `{"peft_type":"LORA","target_modules":["q_proj","v_proj"]}`,
			llama.LoRAConfig{Rank: 8, Alpha: 8, Targets: []string{"q", "v"}}, ""},
		{"all-linear", `{"peft_type":"LORA","r":8,"lora_alpha":16,"target_modules":"all-linear"}`,
			llama.LoRAConfig{Rank: 8, Alpha: 16, Targets: all}, ""},
		{"a regular expression", `{"peft_type":"LORA","r":8,"lora_alpha":16,"target_modules":".*\\.(q_proj|down_proj)"}`,
			llama.LoRAConfig{Rank: 8, Alpha: 16, Targets: []string{"q", "down"}}, ""},
		{"a dotted suffix", `{"peft_type":"LORA","r":8,"target_modules":["mlp.up_proj"]}`,
			llama.LoRAConfig{Rank: 8, Alpha: 8, Targets: []string{"up"}}, ""},
		{"use_rslora", `{"peft_type":"LORA","r":8,"lora_alpha":16,"use_rslora":true,"target_modules":["k_proj"]}`,
			llama.LoRAConfig{Rank: 8, Alpha: 16, Targets: []string{"k"}, RSLoRA: true}, ""},
		{"unset fields of PEFT's own files", `{"peft_type":"LORA","r":8,"target_modules":["q_proj"],"use_dora":false,"modules_to_save":null,"rank_pattern":{},"alpha_pattern":{},"layers_to_transform":null}`,
			llama.LoRAConfig{Rank: 8, Alpha: 8, Targets: []string{"q"}}, ""},
		{"use_dora", `{"peft_type":"LORA","r":8,"target_modules":["q_proj"],"use_dora":true}`, llama.LoRAConfig{}, "use_dora"},
		{"modules_to_save", `{"peft_type":"LORA","r":8,"target_modules":["q_proj"],"modules_to_save":["lm_head"]}`, llama.LoRAConfig{}, "modules_to_save"},
		{"layers_to_transform", `{"peft_type":"LORA","r":8,"target_modules":["q_proj"],"layers_to_transform":[0]}`, llama.LoRAConfig{}, "layers_to_transform"},
		{"rank_pattern", `{"peft_type":"LORA","r":8,"target_modules":["q_proj"],"rank_pattern":{"q_proj":4}}`, llama.LoRAConfig{}, "rank_pattern"},
		{"alpha_pattern", `{"peft_type":"LORA","r":8,"target_modules":["q_proj"],"alpha_pattern":{"q_proj":4}}`, llama.LoRAConfig{}, "alpha_pattern"},
		{"no target_modules", `{"peft_type":"LORA","r":8}`, llama.LoRAConfig{}, "target_modules"},
		{"the output head", `{"peft_type":"LORA","r":8,"target_modules":["q_proj","lm_head"]}`, llama.LoRAConfig{}, `"lm_head"`},
		{"a regular expression over the output head", `{"peft_type":"LORA","r":8,"target_modules":".*"}`, llama.LoRAConfig{}, "does not adapt"},
		{"one layer only", `{"peft_type":"LORA","r":8,"target_modules":"model\\.layers\\.0\\.self_attn\\.q_proj"}`, llama.LoRAConfig{}, "layer 1"},
		{"a bad regular expression", `{"peft_type":"LORA","r":8,"target_modules":"(q_proj"}`, llama.LoRAConfig{}, "regular expression"},
		{"r of 0", `{"peft_type":"LORA","r":0,"target_modules":["q_proj"]}`, llama.LoRAConfig{}, "r = 0"},
		{"another PEFT method", `{"peft_type":"IA3","target_modules":["q_proj"]}`, llama.LoRAConfig{}, "peft_type"},
		{"a bias", `{"peft_type":"LORA","bias":"all","target_modules":["q_proj"]}`, llama.LoRAConfig{}, "bias"},
		{"lora_dropout", `{"peft_type":"LORA","r":8,"lora_dropout":0.05,"target_modules":["q_proj"]}`,
			llama.LoRAConfig{Rank: 8, Alpha: 8, Targets: []string{"q"}, Dropout: 0.05}, ""},
		{"lora_dropout of 1", `{"peft_type":"LORA","r":8,"lora_dropout":1,"target_modules":["q_proj"]}`, llama.LoRAConfig{}, "lora_dropout = 1"},
	}
	cfgPath := filepath.Join(dir, "adapter_config.json")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(cfgPath, []byte(tc.config), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := m.LoadPEFT(dir)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), cfgPath) {
					t.Fatalf("LoadPEFT: %v, want an error naming %s and %q", err, cfgPath, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c := got.Config
			if c.Rank != tc.want.Rank || c.Alpha != tc.want.Alpha || c.RSLoRA != tc.want.RSLoRA || c.Dropout != tc.want.Dropout || !slices.Equal(c.Targets, tc.want.Targets) {
				t.Errorf("config %+v, want %+v", c, tc.want)
			}
			want := tc.want.Alpha / float32(tc.want.Rank)
			if tc.want.RSLoRA {
				want = tc.want.Alpha / float32(math.Sqrt(float64(tc.want.Rank)))
			}
			if got.Scale() != want {
				t.Errorf("scale %v, want %v", got.Scale(), want)
			}
		})
	}
}

// TestPEFTSaveNamesBase checks that a saved adapter's config names its base
// model and keeps use_rslora, lora_alpha and lora_dropout, so that PEFT and
// turnwise read it back alike.
func TestPEFTSaveNamesBase(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 1})
	m, err := llama.NewRandom(b, tinyConfig(false), engine.F32, 0.5, 6)
	if err != nil {
		t.Fatal(err)
	}
	ad, err := m.NewAdapter(llama.LoRAConfig{Rank: 4, Alpha: 8, Targets: []string{"q", "v"}, RSLoRA: true, Dropout: 0.125}, 7)
	if err != nil {
		t.Fatal(err)
	}
	ad.Base = "meta-llama/Llama-3.1-8B-Instruct"
	dir := t.TempDir()
	if err := m.SavePEFT(ad, dir); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "adapter_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"base_model_name_or_path": "meta-llama/Llama-3.1-8B-Instruct"`, `"use_rslora": true`, `"target_modules": [`, `"lora_alpha": 8`, `"lora_dropout": 0.125`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("adapter_config.json lacks %s:\n%s", want, raw)
		}
	}
	back, err := m.LoadPEFT(dir)
	if err != nil {
		t.Fatal(err)
	}
	if back.Config.Dropout != 0.125 {
		t.Errorf("lora_dropout %v after loading, want 0.125", back.Config.Dropout)
	}
	if back.Scale() != ad.Scale() || ad.Scale() != 4 {
		t.Errorf("scale %v after loading, %v saved; want 8/√4 = 4", back.Scale(), ad.Scale())
	}
}

// TestPEFTBaseIsSource checks that an adapter of a model read from a
// Hugging Face directory names that directory as its base.
func TestPEFTBaseIsSource(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 1})
	m, err := llama.NewRandom(b, tinyConfig(false), engine.F32, 0.5, 6)
	if err != nil {
		t.Fatal(err)
	}
	hf := t.TempDir()
	if err := m.SaveHF(hf); err != nil {
		t.Fatal(err)
	}
	back, err := llama.LoadHF(b, hf, engine.F32)
	if err != nil {
		t.Fatal(err)
	}
	ad, err := back.NewAdapter(llama.LoRAConfig{Rank: 2, Alpha: 4, Targets: []string{"q"}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := back.SavePEFT(ad, dir); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "adapter_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `"base_model_name_or_path": "` + hf + `"`; !strings.Contains(string(raw), want) {
		t.Errorf("adapter_config.json lacks %s:\n%s", want, raw)
	}
}
