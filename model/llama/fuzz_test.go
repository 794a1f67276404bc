package llama

import (
	"strings"
	"testing"
)

// FuzzParseHFConfig feeds config.json bytes to the Hugging Face config
// parser: it must return a Config or an error, never panic, and a Config
// it returns must pass Validate (parseHFConfig validates) and count its
// parameters without overflowing into a negative number.
func FuzzParseHFConfig(f *testing.F) {
	for _, s := range []string{
		`{"model_type":"llama","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"intermediate_size":128,"vocab_size":300}`,
		`{"model_type":"llama","hidden_size":4096,"num_hidden_layers":32,"num_attention_heads":32,"num_key_value_heads":8,"intermediate_size":14336,"vocab_size":128256,"rope_theta":500000.0,"rope_scaling":{"factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,"original_max_position_embeddings":8192,"rope_type":"llama3"},"eos_token_id":[128001,128008,128009],"tie_word_embeddings":false}`,
		`{"model_type":"llama","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"intermediate_size":128,"vocab_size":300,"head_dim":32,"eos_token_id":2}`,
		`{"model_type":"mistral"}`, `[]`, `{"hidden_size": "64"}`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := parseHFConfig(raw)
		if err != nil {
			if strings.Contains(err.Error(), "cannot unmarshal") {
				t.Errorf("error %q uses encoding/json's words", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("parseHFConfig accepted a config Validate refuses: %v", err)
		}
		if n := c.Params(); n <= 0 {
			t.Fatalf("Params() = %d for %+v", n, c)
		}
	})
}

// FuzzParsePEFTConfig feeds adapter_config.json bytes to the PEFT config
// parser: a LoRAConfig or an error naming the file, never a panic; a
// config it returns has a rank in range and at least one target.
func FuzzParsePEFTConfig(f *testing.F) {
	for _, s := range []string{
		`{"peft_type": "LORA", "r": 16, "lora_alpha": 32, "lora_dropout": 0.05, "target_modules": ["q_proj", "v_proj"], "bias": "none"}`,
		`{"peft_type": "LORA", "r": 8, "lora_alpha": 8, "target_modules": "all-linear", "use_rslora": true}`,
		`{"peft_type": "LORA", "r": 8, "target_modules": ".*q_proj"}`,
		`{"peft_type": "LORA", "r": 8, "target_modules": ["q_proj"], "use_dora": true}`,
		`{"peft_type": "PREFIX_TUNING"}`, `{"r": -1}`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		lc, err := (&Model{}).parsePEFTConfig(raw, "adapter_config.json")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "adapter_config.json: ") || strings.Contains(err.Error(), "cannot unmarshal") {
				t.Errorf("error %q does not name the file, or uses encoding/json's words", err)
			}
			return
		}
		if lc.Rank < 1 || lc.Rank > maxLoRARank || len(lc.Targets) == 0 {
			t.Fatalf("accepted %+v", lc)
		}
	})
}
