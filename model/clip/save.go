package clip

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/safetensors"
)

// SaveHF writes the tower as a Hugging Face CLIP directory that Load reads
// back: config.json (a CLIPModel configuration's vision part) and the
// weights in f32 as model.safetensors, under their Hugging Face names and
// shapes. A tower of NewRandom saved this way is a checkpoint of the real
// layout for tests of the commands that take --clip DIR.
func (m *Model) SaveHF(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	c := m.Config
	cfg := map[string]any{
		"architectures":  []string{"CLIPModel"},
		"model_type":     "clip",
		"projection_dim": c.Projection,
		"vision_config": map[string]any{
			"hidden_act": "quick_gelu", "hidden_size": c.Hidden, "image_size": c.ImageSize,
			"intermediate_size": c.FFN, "layer_norm_eps": c.NormEps, "model_type": "clip_vision_model",
			"num_attention_heads": c.Heads, "num_channels": 3, "num_hidden_layers": c.Layers,
			"patch_size": c.Patch, "projection_dim": c.Projection,
		},
	}
	raw, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ConfigName), append(raw, '\n'), 0o644); err != nil {
		return err
	}
	var ts []safetensors.Tensor
	m.Weights.each(func(name string, p *param, t **engine.Tensor) {
		vals := engine.ToF32(m.b, *t)
		data := make([]byte, 4*len(vals))
		for i, v := range vals {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
		}
		shape := c.shape(p.shape) // the file's shape: the patch convolution's [D, 3, P, P]
		dims := make([]int64, len(shape))
		for i, d := range shape {
			dims[i] = int64(d)
		}
		ts = append(ts, safetensors.Tensor{Name: name, DType: safetensors.F32, Shape: dims, Data: data})
	})
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), ts, map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("saving CLIP to %s: %w", dir, err)
	}
	return nil
}
