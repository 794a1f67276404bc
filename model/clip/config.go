// Package clip is CLIP's image tower (ViT) and the image-similarity metric
// built on it: the cosine of two images' embeddings, as Hugging Face's
// CLIPModel computes get_image_features for openai/clip-vit-base-patch32.
// The model is written against engine alone, so it runs on every backend.
//
// The package holds, by file:
//
//	config.go      Config and LoadConfig (a Hugging Face config.json)
//	params.go      the parameter table: names, shapes, fields
//	hf.go          Load: weights from a Hugging Face directory
//	save.go        SaveHF: a tower written as a Hugging Face directory
//	model.go       Model, Embed (the forward) and Cosine
//	preprocess.go  Preprocess: CLIPImageProcessor's resize, crop, normalise
//	bicubic.go     PIL's 8-bit bicubic resampling, reproduced exactly
package clip

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/turnwise/turnwise/internal/jsonerr"
)

// ConfigName is the file name of a Hugging Face model configuration.
const ConfigName = "config.json"

// Config is the shape of a CLIP image tower.
type Config struct {
	Hidden     int     // D, the residual stream's width (hidden_size)
	FFN        int     // F, the MLP's hidden width (intermediate_size)
	Layers     int     // encoder blocks (num_hidden_layers)
	Heads      int     // H, attention heads (num_attention_heads); Dh = D/H
	Patch      int     // P, the side of a square patch (patch_size)
	ImageSize  int     // S, the side of the square input image (image_size)
	Projection int     // E, the embedding's width (projection_dim)
	NormEps    float32 // LayerNorm's epsilon (layer_norm_eps)
}

// MaxImageSize bounds image_size: the input image's memory (3·S² f32 per
// image) is not backed by the weight files, so a configuration may not ask
// for more than this side.
const MaxImageSize = 4096

// ViTB32 is openai/clip-vit-base-patch32's image tower.
var ViTB32 = Config{Hidden: 768, FFN: 3072, Layers: 12, Heads: 12, Patch: 32, ImageSize: 224, Projection: 512, NormEps: 1e-5}

// HeadDim is the width of one attention head, D/H.
func (c Config) HeadDim() int { return c.Hidden / c.Heads }

// Grid is the number of patches along a side, S/P.
func (c Config) Grid() int { return c.ImageSize / c.Patch }

// Tokens is the sequence length of one image: the class token and the
// patches, 1 + (S/P)².
func (c Config) Tokens() int { return 1 + c.Grid()*c.Grid() }

// PatchLen is the length of one flattened patch, 3·P·P, in the order
// (channel, row, column) of the patch convolution's weight.
func (c Config) PatchLen() int { return 3 * c.Patch * c.Patch }

// validate checks c's fields, naming them as config.json does: the
// tower's fields with the prefix vp ("vision_config." in a CLIPModel's
// file), projection_dim without it.
func (c Config) validate(vp string) error {
	for _, f := range []struct {
		name string
		v    int
	}{{vp + "hidden_size", c.Hidden}, {vp + "intermediate_size", c.FFN}, {vp + "num_hidden_layers", c.Layers},
		{vp + "num_attention_heads", c.Heads}, {vp + "patch_size", c.Patch}, {vp + "image_size", c.ImageSize},
		{"projection_dim", c.Projection}} {
		if f.v <= 0 {
			return fmt.Errorf("%s = %d, must be positive", f.name, f.v)
		}
	}
	switch {
	case c.Hidden%c.Heads != 0:
		return fmt.Errorf("%shidden_size = %d is not a multiple of %snum_attention_heads = %d", vp, c.Hidden, vp, c.Heads)
	case c.ImageSize > MaxImageSize:
		return fmt.Errorf("%simage_size = %d exceeds %d", vp, c.ImageSize, MaxImageSize)
	case c.ImageSize%c.Patch != 0:
		return fmt.Errorf("%simage_size = %d is not a multiple of %spatch_size = %d", vp, c.ImageSize, vp, c.Patch)
	case !(c.NormEps > 0):
		return fmt.Errorf("%slayer_norm_eps = %g, must be positive", vp, c.NormEps)
	}
	return nil
}

// hfVision is the part of vision_config the image tower needs. Pointers
// tell absent fields from zero ones.
type hfVision struct {
	Hidden     *int     `json:"hidden_size"`
	FFN        *int     `json:"intermediate_size"`
	Layers     *int     `json:"num_hidden_layers"`
	Heads      *int     `json:"num_attention_heads"`
	Patch      *int     `json:"patch_size"`
	ImageSize  *int     `json:"image_size"`
	NormEps    *float64 `json:"layer_norm_eps"`
	HiddenAct  *string  `json:"hidden_act"`
	Channels   *int     `json:"num_channels"`
	Projection *int     `json:"projection_dim"`
}

// hfConfig is a CLIPModel's (or a CLIPVisionModelWithProjection's)
// config.json.
type hfConfig struct {
	ModelType    *string   `json:"model_type"`
	Projection   *int      `json:"projection_dim"`
	VisionConfig *hfVision `json:"vision_config"`
}

// Hugging Face's CLIPVisionConfig defaults for the fields a file may omit.
var hfDefaults = Config{Hidden: 768, FFN: 3072, Layers: 12, Heads: 12, Patch: 32, ImageSize: 224, Projection: 512, NormEps: 1e-5}

// LoadConfig reads a Hugging Face config.json (path is the file or the
// directory holding it) of a CLIPModel (model_type "clip", the tower in
// vision_config, projection_dim at the top level) or of a vision model
// with projection (model_type "clip_vision_model", fields at the top
// level). Absent fields take CLIPVisionConfig's defaults, which are
// ViT-B/32's. hidden_act must be quick_gelu and num_channels 3. Errors
// name the file and the field.
func LoadConfig(path string) (Config, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, ConfigName)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return Config{}, err
	}
	c, err := parseConfig(raw)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// parseConfig converts the JSON of a config.json to a Config.
func parseConfig(raw []byte) (Config, error) {
	var top hfConfig
	if err := json.Unmarshal(raw, &top); err != nil {
		return Config{}, jsonerr.Reword(err)
	}
	var v hfVision
	prefix := ""
	switch {
	case top.ModelType == nil:
		return Config{}, errors.New(`model_type is missing, want "clip" or "clip_vision_model"`)
	case *top.ModelType == "clip":
		if top.VisionConfig == nil {
			return Config{}, errors.New("vision_config is missing")
		}
		v, prefix = *top.VisionConfig, "vision_config."
		v.Projection = top.Projection
	case *top.ModelType == "clip_vision_model":
		if err := json.Unmarshal(raw, &v); err != nil {
			return Config{}, jsonerr.Reword(err)
		}
	default:
		return Config{}, fmt.Errorf(`model_type is %q, want "clip" or "clip_vision_model"`, *top.ModelType)
	}
	c := hfDefaults
	set := func(dst *int, src *int) {
		if src != nil {
			*dst = *src
		}
	}
	set(&c.Hidden, v.Hidden)
	set(&c.FFN, v.FFN)
	set(&c.Layers, v.Layers)
	set(&c.Heads, v.Heads)
	set(&c.Patch, v.Patch)
	set(&c.ImageSize, v.ImageSize)
	set(&c.Projection, v.Projection)
	if v.NormEps != nil {
		if !(*v.NormEps > 0) || *v.NormEps > math.MaxFloat32 {
			return Config{}, fmt.Errorf("%slayer_norm_eps = %g, must be positive", prefix, *v.NormEps)
		}
		c.NormEps = float32(*v.NormEps)
	}
	if v.HiddenAct != nil && *v.HiddenAct != "quick_gelu" {
		return Config{}, fmt.Errorf(`%shidden_act is %q; only "quick_gelu" (CLIP's) is supported`, prefix, *v.HiddenAct)
	}
	if v.Channels != nil && *v.Channels != 3 {
		return Config{}, fmt.Errorf("%snum_channels = %d; only RGB images (3) are supported", prefix, *v.Channels)
	}
	if err := c.validate(prefix); err != nil {
		return Config{}, err
	}
	return c, nil
}
