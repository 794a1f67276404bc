package clip

import (
	"strings"
	"testing"
)

// FuzzParseConfig feeds config.json bytes to the CLIP config parser: it
// must return a Config or an error, never panic, and a Config it returns
// must pass its own validation.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		`{"model_type": "clip", "projection_dim": 512, "vision_config": {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "num_attention_heads": 12, "patch_size": 32, "image_size": 224}}`,
		`{"model_type": "clip_vision_model", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128, "patch_size": 8, "image_size": 32, "projection_dim": 16}`,
		`{"model_type": "clip", "vision_config": {"hidden_size": "768"}}`, `{"model_type": `, `7`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := parseConfig(raw)
		if err != nil {
			if strings.Contains(err.Error(), "cannot unmarshal") {
				t.Errorf("error %q uses encoding/json's words", err)
			}
			return
		}
		if err := c.validate(""); err != nil {
			t.Fatalf("parseConfig accepted a config its validation refuses: %v", err)
		}
	})
}
