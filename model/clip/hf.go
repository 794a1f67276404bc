package clip

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/internal/shapecheck"
	"github.com/turnwise/turnwise/safetensors"
)

// noMetric ends the error Load gives when there are no weights to load.
const noMetric = "the image-similarity metric needs CLIP ViT-B/32 weights (a Hugging Face " +
	"openai/clip-vit-base-patch32 directory: config.json and model.safetensors, given with --clip DIR); " +
	"without them there is no metric"

// Load reads CLIP's image tower from a Hugging Face directory — config.json
// and the weights as model.safetensors (or shards with
// model.safetensors.index.json), as CLIPModel or
// CLIPVisionModelWithProjection saves them — onto b, in f32. The text
// tower's tensors a CLIPModel file also holds are ignored. Before anything
// is allocated every weight the configuration needs is checked to be in
// the files with its shape and a float dtype (F32, F16 or BF16; converted
// to f32), so the memory allocated is bounded by what the files hold.
// Errors name the file and the field; an empty dir or one that does not
// exist is an error saying that there is no metric without weights.
func Load(b engine.Backend, dir string) (*Model, error) {
	if dir == "" {
		return nil, errors.New("no CLIP weights directory given: " + noMetric)
	}
	if st, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("CLIP weights directory %s: %v: %s", dir, errors.Unwrap(err), noMetric)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("CLIP weights %s is not a directory: %s", dir, noMetric)
	}
	c, err := LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	r, err := safetensors.OpenModel(dir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if err := checkHeld(r, dir, c); err != nil {
		return nil, err
	}
	m := &Model{Config: c, Weights: Weights{Layers: make([]Layer, c.Layers)}, b: b, pool: engine.NewPool(b)}
	m.Weights.each(func(name string, p *param, t **engine.Tensor) {
		if err != nil {
			return
		}
		if *t, err = engine.Alloc(b, engine.F32, c.storedShape(p)...); err != nil {
			err = fmt.Errorf("%s: allocating %s: %w", dir, name, err)
			return
		}
		err = loadTensor(b, r, name, *t)
	})
	if err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// checkHeld checks, before anything is allocated, that r holds every
// weight c needs with the shape c gives it and a float dtype. The reader
// has checked that each tensor lies inside its file, so what a loader
// allocates afterwards is bounded by the files' bytes (times 2 for f16 or
// bf16 widened to f32): a config.json claiming more layers or wider ones
// than the files back is an error naming the file and the field.
func checkHeld(r safetensors.Reader, dir string, c Config) error {
	cfg := filepath.Join(dir, ConfigName)
	if held := shapecheck.Layers(r.Names(), layerPrefix); c.Layers > held {
		return fmt.Errorf("%s: num_hidden_layers = %d, but the weights in %s hold %d encoder layers", cfg, c.Layers, dir, held)
	}
	var err error
	(&Weights{Layers: make([]Layer, c.Layers)}).each(func(name string, p *param, _ **engine.Tensor) {
		if err != nil {
			return
		}
		want := c.shape(p.shape)
		info, ok := r.Info(name)
		if !ok {
			err = fmt.Errorf("%s: tensor %s is missing (%s needs one of shape %v)", dir, name, cfg, want)
			return
		}
		got := make(engine.Shape, len(info.Shape))
		for i, d := range info.Shape {
			got[i] = int(d)
		}
		switch {
		case !got.Equal(want):
			err = fmt.Errorf("%s: tensor %s has shape %v, %s needs %v (%s)", r.Location(name), name, got, cfg, want, shapecheck.Blame(c.extents(p.shape), got))
		case info.DType != safetensors.F32 && info.DType != safetensors.F16 && info.DType != safetensors.BF16:
			err = fmt.Errorf("%s: tensor %s is stored as %s; only F32, F16 and BF16 weights can be loaded", r.Location(name), name, info.DType)
		}
	})
	return err
}

// loadTensor uploads tensor name of r, checked by checkHeld, into the f32
// tensor t, widening F16 and BF16.
func loadTensor(b engine.Backend, r safetensors.Reader, name string, t *engine.Tensor) error {
	data, info, err := r.Data(name)
	if err != nil {
		return err
	}
	if info.DType == safetensors.F32 {
		b.Upload(t, data)
		return nil
	}
	widen := engine.F16ToF32
	if info.DType == safetensors.BF16 {
		widen = engine.BF16ToF32
	}
	out := make([]byte, 4*(len(data)/2))
	for i := range len(data) / 2 {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(widen(binary.LittleEndian.Uint16(data[2*i:]))))
	}
	b.Upload(t, out)
	return nil
}
