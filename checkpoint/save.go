// Package checkpoint saves and restores training state so that a run can
// resume after a crash, bit for bit.
//
// A checkpoint is a directory named step-NNNNNN inside a run directory. It
// holds one safetensors file per named group of tensors (the trained
// weights, or LoRA adapters, with their bytes and dtype exactly as on the
// device), optimizer.safetensors (or optimizer.safetensors.zst, compressed
// with zstd) with every AdamW parameter's moments and f32 master weights and
// the optimizer's step counts, trainer.json with the caller's own state, and
// manifest.json, which records the size and SHA-256 checksum of every other
// file and what the binary that saved it was built from (train version).
//
// Save writes all of it into a hidden temporary directory next to the
// target, syncs every file and the directory, and renames it into place, so
// a crash never leaves a partly written step-* directory. Latest finds the
// newest checkpoint whose files match their manifest, passing over (and
// reporting) damaged ones; Load verifies a checkpoint again before it
// restores anything; Prune deletes all but the newest few that verify.
//
// The functions assume one writer per run directory at a time.
package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"

	"github.com/klauspost/compress/zstd"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/internal/buildinfo"
	"github.com/turnwise/turnwise/internal/outfile"
	"github.com/turnwise/turnwise/optim"
	"github.com/turnwise/turnwise/safetensors"
)

// Tensors is a group of named tensors saved to, and loaded from, one
// safetensors file of a checkpoint.
type Tensors map[string]*engine.Tensor

// File names inside a checkpoint directory, besides the groups'
// STEM.safetensors and the manifest.
const (
	OptimizerName     = "optimizer.safetensors"
	OptimizerZstdName = "optimizer.safetensors.zst"
	TrainerName       = "trainer.json"
)

// stepDir matches the base name of a checkpoint directory.
var stepDir = regexp.MustCompile(`^step-([0-9]+)$`)

// groupStem matches the name of a tensor group, its file's stem.
var groupStem = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// Dir returns the directory of the checkpoint of step in runDir:
// runDir/step-000123.
func Dir(runDir string, step int) string {
	if step < 0 {
		panic(fmt.Sprintf("checkpoint: Dir: negative step %d", step))
	}
	return filepath.Join(runDir, fmt.Sprintf("step-%06d", step))
}

// Step returns the step number of a checkpoint directory named by Dir; ok
// is false when dir's base name is not step-<digits>.
func Step(dir string) (step int, ok bool) {
	m := stepDir.FindStringSubmatch(filepath.Base(dir))
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return 0, false
	}
	return n, true
}

// stDType maps an engine dtype to its safetensors name.
func stDType(dt engine.DType) (safetensors.DType, bool) {
	n := dt.FileName()
	return safetensors.DType(n), n != ""
}

// Save writes a checkpoint to dir, whose base name must be step-<digits>
// (see Dir); the parent, the run directory, is created if need be.
//
// groups maps a file stem (letters, digits, '_', '-', '.'; not "optimizer",
// "trainer" or "manifest") to the tensors saved in STEM.safetensors, their
// bytes downloaded from b as they are. opt, when not nil, has every
// parameter's moments and master weights and its step counts saved in
// optimizer.safetensors, compressed with zstd into
// optimizer.safetensors.zst when compress is set; the parameters' weights
// themselves belong in a group. state is marshalled to trainer.json with
// encoding/json (a json.RawMessage is kept as it is).
//
// The files are written into a temporary directory next to dir, synced, and
// the directory renamed to dir; an existing dir is replaced. On error
// nothing is left behind, and an existing dir is left as it was.
func Save(dir string, b engine.Backend, groups map[string]Tensors, opt *optim.AdamW, state any, compress bool) (err error) {
	dir = filepath.Clean(dir)
	base := filepath.Base(dir)
	if _, ok := Step(dir); !ok {
		return fmt.Errorf("checkpoint: save %s: the directory's name must be step-<digits>", dir)
	}
	stems := make([]string, 0, len(groups))
	for stem := range groups {
		switch stem {
		case "optimizer", "trainer", "manifest":
			return fmt.Errorf("checkpoint: save %s: group name %q is reserved", dir, stem)
		}
		if !groupStem.MatchString(stem) {
			return fmt.Errorf("checkpoint: save %s: group name %q is not a plain file stem", dir, stem)
		}
		stems = append(stems, stem)
	}
	slices.Sort(stems)
	trainer, err := json.MarshalIndent(state, "", "  ")
	if err != nil {
		return fmt.Errorf("checkpoint: save %s: %s: %w", dir, TrainerName, err)
	}
	trainer = append(trainer, '\n')

	parent := filepath.Dir(dir)
	if _, err := os.Stat(parent); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return fmt.Errorf("checkpoint: save %s: %w", dir, err)
		}
		if err := syncDir(filepath.Dir(parent)); err != nil {
			return fmt.Errorf("checkpoint: save %s: %w", dir, err)
		}
	}
	tmp, err := os.MkdirTemp(parent, "."+base+".tmp-")
	if err != nil {
		return fmt.Errorf("checkpoint: save %s: %w", dir, err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("checkpoint: save %s: %w", dir, err)
	}

	m := Manifest{Format: Format, Version: Version, Build: buildinfo.Read()}
	add := func(name string, fill func(io.Writer) error) error {
		e, err := writeFile(tmp, name, fill)
		if err != nil {
			return fmt.Errorf("checkpoint: save %s: %s: %w", dir, name, err)
		}
		m.Files = append(m.Files, e)
		return nil
	}
	for _, stem := range stems {
		ts, err := groupTensors(b, groups[stem])
		if err != nil {
			return fmt.Errorf("checkpoint: save %s: group %q: %w", dir, stem, err)
		}
		if err := add(stem+".safetensors", func(w io.Writer) error {
			return safetensors.Write(w, ts, map[string]string{"format": Format})
		}); err != nil {
			return err
		}
	}
	if opt != nil {
		ts, meta, err := optimizerTensors(opt.Backend(), opt) // its state may live elsewhere (optim.AdamW.GatherTo)
		if err != nil {
			return fmt.Errorf("checkpoint: save %s: %s: %w", dir, OptimizerName, err)
		}
		name := OptimizerName
		if compress {
			name = OptimizerZstdName
		}
		if err := add(name, func(w io.Writer) error {
			if !compress {
				return safetensors.Write(w, ts, meta)
			}
			zw, err := zstd.NewWriter(w)
			if err != nil {
				return err
			}
			if err := safetensors.Write(zw, ts, meta); err != nil {
				zw.Close()
				return err
			}
			return zw.Close()
		}); err != nil {
			return err
		}
	}
	if err := add(TrainerName, func(w io.Writer) error {
		_, err := w.Write(trainer)
		return err
	}); err != nil {
		return err
	}
	mj, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("checkpoint: save %s: %s: %w", dir, ManifestName, err)
	}
	mj = append(mj, '\n')
	if _, err := writeFile(tmp, ManifestName, func(w io.Writer) error {
		_, err := w.Write(mj)
		return err
	}); err != nil {
		return fmt.Errorf("checkpoint: save %s: %s: %w", dir, ManifestName, err)
	}
	if err := syncDir(tmp); err != nil {
		return fmt.Errorf("checkpoint: save %s: %w", dir, err)
	}

	// Move an existing checkpoint of the same step out of the way, into a
	// hidden directory of its own, and delete it once the new one is in
	// place. In between, dir is absent rather than half written.
	var old string
	if _, err := os.Lstat(dir); err == nil {
		if old, err = os.MkdirTemp(parent, "."+base+".old-"); err != nil {
			return fmt.Errorf("checkpoint: save %s: %w", dir, err)
		}
		if err := os.Rename(dir, filepath.Join(old, base)); err != nil {
			os.Remove(old)
			return fmt.Errorf("checkpoint: save %s: moving the old checkpoint aside: %w", dir, err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if old != "" {
			os.Rename(filepath.Join(old, base), dir)
			os.Remove(old)
		}
		return fmt.Errorf("checkpoint: save %s: %w", dir, err)
	}
	if err := syncDir(parent); err != nil {
		return fmt.Errorf("checkpoint: save %s: %w", dir, err)
	}
	if old != "" {
		if err := os.RemoveAll(old); err != nil {
			return fmt.Errorf("checkpoint: save %s: removing the checkpoint it replaced: %w", dir, err)
		}
	}
	return nil
}

// groupTensors describes a group's tensors for safetensors.Write, sorted by
// name, each downloaded from b when the writer reaches it.
func groupTensors(b engine.Backend, g Tensors) ([]safetensors.Tensor, error) {
	names := make([]string, 0, len(g))
	for name := range g {
		names = append(names, name)
	}
	slices.Sort(names)
	ts := make([]safetensors.Tensor, 0, len(names))
	for _, name := range names {
		t := g[name]
		if t == nil {
			return nil, fmt.Errorf("tensor %q is nil", name)
		}
		st, err := tensor(b, name, t)
		if err != nil {
			return nil, err
		}
		ts = append(ts, st)
	}
	return ts, nil
}

// tensor describes t for safetensors.Write under name.
func tensor(b engine.Backend, name string, t *engine.Tensor) (safetensors.Tensor, error) {
	dt, ok := stDType(t.DType())
	if !ok {
		return safetensors.Tensor{}, fmt.Errorf("tensor %q: dtype %v cannot be saved", name, t.DType())
	}
	shape := make([]int64, t.Rank())
	for i, d := range t.Shape() {
		shape[i] = int64(d)
	}
	return safetensors.Tensor{Name: name, DType: dt, Shape: shape, Load: func() ([]byte, error) {
		raw := make([]byte, t.Bytes())
		b.Download(raw, t)
		return raw, nil
	}}, nil
}

// Metadata keys of the optimizer file.
const (
	metaSteps   = "steps"
	metaSkipped = "skipped"
)

// optimizerTensors describes opt's state for safetensors.Write: each
// parameter's moments and master weights, in parameter order, and the step
// counts as metadata.
func optimizerTensors(b engine.Backend, opt *optim.AdamW) ([]safetensors.Tensor, map[string]string, error) {
	if opt.Sharded() {
		return nil, nil, fmt.Errorf("a sharded optimizer holds one rank's state; save its GatherTo")
	}
	var ts []safetensors.Tensor
	for _, p := range opt.Params {
		for _, s := range paramState(p) {
			if s.t == nil {
				continue
			}
			st, err := tensor(b, s.name, s.t)
			if err != nil {
				return nil, nil, err
			}
			ts = append(ts, st)
		}
	}
	meta := map[string]string{
		"format":    Format,
		metaSteps:   strconv.Itoa(opt.Steps),
		metaSkipped: strconv.Itoa(opt.Skipped),
	}
	return ts, meta, nil
}

// namedTensor is one tensor of optimizer state under its name in the file.
type namedTensor struct {
	name string
	t    *engine.Tensor
}

// paramState lists p's moments and master weights with their names; the
// master is nil for an f32 parameter.
func paramState(p *optim.Param) []namedTensor {
	return []namedTensor{{p.Name + ".m", p.M}, {p.Name + ".v", p.V}, {p.Name + ".master", p.Master}}
}

// writeFile creates dir/name with what fill writes, synced to disk, and
// returns its manifest entry.
func writeFile(dir, name string, fill func(io.Writer) error) (FileEntry, error) {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return FileEntry{}, err
	}
	cw := &countingHash{w: f, h: sha256.New()}
	if err := fill(cw); err != nil {
		f.Close()
		return FileEntry{}, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return FileEntry{}, err
	}
	if err := f.Close(); err != nil {
		return FileEntry{}, err
	}
	return FileEntry{Name: name, Size: cw.n, SHA256: hex.EncodeToString(cw.h.Sum(nil))}, nil
}

// countingHash writes through to w, hashing and counting what w accepted.
type countingHash struct {
	w io.Writer
	h hash.Hash
	n int64
}

func (c *countingHash) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	return n, err
}

// syncDir makes the entries of dir durable (see outfile.SyncDir).
func syncDir(dir string) error { return outfile.SyncDir(dir) }
