package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/internal/jsonerr"
	"github.com/turnwise/turnwise/optim"
	"github.com/turnwise/turnwise/safetensors"
)

// ErrNoCheckpoint is returned, wrapped, by Latest when a run directory holds
// no valid checkpoint (or does not exist).
var ErrNoCheckpoint = errors.New("no valid checkpoint")

// upload is one tensor to be restored.
type upload struct {
	dst  *engine.Tensor
	data []byte
	b    engine.Backend // dst's backend; nil: Load's
}

// Load restores the checkpoint in dir, after verifying every file against
// the manifest. Each group in groups is read from STEM.safetensors into the
// caller's tensors, which must be exactly the tensors of that file, with the
// same dtypes and shapes; groups the checkpoint has but groups lacks are not
// read. opt, when not nil, gets every parameter's moments and master weights
// and the step counts; the checkpoint must hold state for exactly opt's
// parameters. state, when not nil, is the target of json.Unmarshal of
// trainer.json.
//
// Every file is verified and every name, dtype and shape checked before the
// first tensor or count is written, so a refused Load leaves the tensors and
// the optimizer as they were. trainer.json is decoded into state before the
// tensors are written; a decoding error may leave state partly filled.
func Load(dir string, b engine.Backend, groups map[string]Tensors, opt *optim.AdamW, state any) error {
	dir = filepath.Clean(dir)
	m, err := verify(dir)
	if err != nil {
		return err
	}
	var ups []upload
	var closers []*safetensors.File
	defer func() {
		for _, f := range closers {
			f.Close()
		}
	}()

	stems := make([]string, 0, len(groups))
	for stem := range groups {
		stems = append(stems, stem)
	}
	slices.Sort(stems)
	for _, stem := range stems {
		name := stem + ".safetensors"
		if !groupStem.MatchString(stem) || m.file(name) == nil {
			return fmt.Errorf("checkpoint %s: no group %q (%s is not in the manifest)", dir, stem, name)
		}
		f, err := safetensors.Open(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("checkpoint %s: %w", dir, err)
		}
		closers = append(closers, f)
		u, err := match(f, groups[stem])
		if err != nil {
			return fmt.Errorf("checkpoint %s: %s: %w", dir, name, err)
		}
		ups = append(ups, u...)
	}

	var steps, skipped int
	if opt != nil {
		if opt.Sharded() {
			return fmt.Errorf("checkpoint %s: a sharded optimizer holds one rank's state; load into an unsharded one and take the shard (LoadShard)", dir)
		}
		f, name, err := openOptimizer(dir, m)
		if err != nil {
			return err
		}
		closers = append(closers, f)
		want := Tensors{}
		for _, p := range opt.Params {
			for _, s := range paramState(p) {
				if s.t != nil {
					want[s.name] = s.t
				}
			}
		}
		u, err := match(f, want)
		if err != nil {
			return fmt.Errorf("checkpoint %s: %s: %w", dir, name, err)
		}
		for i := range u {
			u[i].b = opt.Backend() // the optimizer's state may live elsewhere (optim.AdamW.GatherTo)
		}
		ups = append(ups, u...)
		if steps, err = metaInt(f, metaSteps); err != nil {
			return fmt.Errorf("checkpoint %s: %s: %w", dir, name, err)
		}
		if skipped, err = metaInt(f, metaSkipped); err != nil {
			return fmt.Errorf("checkpoint %s: %s: %w", dir, name, err)
		}
	}

	if state != nil {
		if m.file(TrainerName) == nil {
			return fmt.Errorf("checkpoint %s: %s is not in the manifest", dir, TrainerName)
		}
		raw, err := os.ReadFile(filepath.Join(dir, TrainerName))
		if err != nil {
			return fmt.Errorf("checkpoint %s: %w", dir, err)
		}
		if err := json.Unmarshal(raw, state); err != nil {
			return fmt.Errorf("checkpoint %s: %s: %w", dir, TrainerName, jsonerr.Reword(err))
		}
	}

	for _, u := range ups {
		if u.b != nil {
			u.b.Upload(u.dst, u.data)
		} else {
			b.Upload(u.dst, u.data)
		}
	}
	if err := b.Sync(); err != nil {
		return fmt.Errorf("checkpoint %s: uploading: %w", dir, err)
	}
	if opt != nil && opt.Backend() != b {
		if err := opt.Backend().Sync(); err != nil {
			return fmt.Errorf("checkpoint %s: uploading the optimizer state: %w", dir, err)
		}
	}
	if opt != nil {
		opt.Steps, opt.Skipped = steps, skipped
	}
	return nil
}

// openOptimizer opens the optimizer file the manifest lists, compressed or
// not.
func openOptimizer(dir string, m *Manifest) (*safetensors.File, string, error) {
	if m.file(OptimizerName) != nil {
		f, err := safetensors.Open(filepath.Join(dir, OptimizerName))
		if err != nil {
			return nil, "", fmt.Errorf("checkpoint %s: %w", dir, err)
		}
		return f, OptimizerName, nil
	}
	if m.file(OptimizerZstdName) == nil {
		return nil, "", fmt.Errorf("checkpoint %s: no optimizer state (neither %s nor %s is in the manifest)", dir, OptimizerName, OptimizerZstdName)
	}
	path := filepath.Join(dir, OptimizerZstdName)
	in, err := os.Open(path)
	if err != nil {
		return nil, "", fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	defer in.Close()
	zr, err := zstd.NewReader(in)
	if err != nil {
		return nil, "", fmt.Errorf("checkpoint %s: %s: %w", dir, OptimizerZstdName, err)
	}
	defer zr.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(zr); err != nil {
		return nil, "", fmt.Errorf("checkpoint %s: %s: decompressing: %w", dir, OptimizerZstdName, err)
	}
	f, err := safetensors.Parse(buf.Bytes(), path)
	if err != nil {
		return nil, "", fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	return f, OptimizerZstdName, nil
}

// match pairs every tensor of f with the tensor of want of the same name,
// checking that both hold the same names, dtypes and shapes.
func match(f *safetensors.File, want Tensors) ([]upload, error) {
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	slices.Sort(names)
	var ups []upload
	for _, name := range names {
		t := want[name]
		if t == nil {
			return nil, fmt.Errorf("tensor %q: the destination is nil", name)
		}
		data, info, err := f.Data(name)
		if err != nil {
			return nil, fmt.Errorf("tensor %q is not in the file", name)
		}
		dt, ok := stDType(t.DType())
		if !ok {
			return nil, fmt.Errorf("tensor %q: destination dtype %v cannot be loaded", name, t.DType())
		}
		shape := make([]int64, t.Rank())
		for i, d := range t.Shape() {
			shape[i] = int64(d)
		}
		if info.DType != dt || !slices.Equal(info.Shape, shape) {
			return nil, fmt.Errorf("tensor %q: the file holds %s%v, the destination is %s%v", name, info.DType, info.Shape, dt, shape)
		}
		ups = append(ups, upload{dst: t, data: data})
	}
	for _, name := range f.Names() {
		if _, ok := want[name]; !ok {
			return nil, fmt.Errorf("tensor %q of the file has no destination", name)
		}
	}
	return ups, nil
}

// metaInt reads a non-negative integer from f's metadata.
func metaInt(f *safetensors.File, key string) (int, error) {
	s, ok := f.Metadata[key]
	if !ok {
		return 0, fmt.Errorf("metadata %q is missing", key)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("metadata %q = %q is not a count", key, s)
	}
	return n, nil
}

// checkpoints lists the checkpoint directories of runDir, oldest (lowest
// step) first.
func checkpoints(runDir string) ([]string, error) {
	ents, err := os.ReadDir(runDir)
	if err != nil {
		return nil, err
	}
	type cp struct {
		name string
		step uint64
	}
	var cps []cp
	for _, e := range ents {
		m := stepDir.FindStringSubmatch(e.Name())
		if m == nil || !e.IsDir() {
			continue
		}
		n, err := strconv.ParseUint(m[1], 10, 64)
		if err != nil {
			continue // too many digits to be a step
		}
		cps = append(cps, cp{e.Name(), n})
	}
	slices.SortFunc(cps, func(a, b cp) int {
		if a.step != b.step {
			if a.step < b.step {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	dirs := make([]string, len(cps))
	for i, c := range cps {
		dirs[i] = filepath.Join(runDir, c.name)
	}
	return dirs, nil
}

// Latest returns the newest checkpoint of runDir (by step number) that
// verifies against its manifest, as Verify checks it. Newer checkpoints that
// fail are passed over; skipped lists why, newest first, each error naming
// the directory and the file at fault. When no checkpoint verifies, or
// runDir does not exist, the error wraps ErrNoCheckpoint. Hidden temporary
// directories of unfinished saves are never considered.
func Latest(runDir string) (dir string, skipped []error, err error) {
	dirs, err := checkpoints(runDir)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil, fmt.Errorf("checkpoint: %s: %w (no such directory)", runDir, ErrNoCheckpoint)
	}
	if err != nil {
		return "", nil, fmt.Errorf("checkpoint: %w", err)
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		err := Verify(dirs[i])
		if err == nil {
			return dirs[i], skipped, nil
		}
		skipped = append(skipped, err)
	}
	return "", skipped, fmt.Errorf("checkpoint: %s: %w", runDir, ErrNoCheckpoint)
}

// Prune keeps the newest keep checkpoints of runDir (by step number) that
// verify against their manifests (see Verify) and deletes every checkpoint
// older than the oldest of them, and the hidden temporary directories that
// interrupted saves left behind. A damaged checkpoint never counts toward
// keep, so that it cannot cost a valid older one; damaged checkpoints newer
// than the oldest kept one are left in place (Latest passes over them).
// When fewer than keep checkpoints verify, none is deleted. Only
// directories named step-<digits> are considered checkpoints; other
// entries are left alone. Prune reads the kept checkpoints in full to
// verify them. It must not run while a Save into runDir is in progress.
func Prune(runDir string, keep int) error {
	if keep < 1 {
		return fmt.Errorf("checkpoint: prune %s: keep %d: must keep at least one checkpoint", runDir, keep)
	}
	dirs, err := checkpoints(runDir)
	if err != nil {
		return fmt.Errorf("checkpoint: prune: %w", err)
	}
	valid, cut := 0, -1 // cut: index of the oldest checkpoint kept
	for i := len(dirs) - 1; i >= 0 && valid < keep; i-- {
		err := Verify(dirs[i])
		var ce *CorruptError
		switch {
		case err == nil:
			valid++
			if valid == keep {
				cut = i
			}
		case !errors.As(err, &ce):
			return fmt.Errorf("checkpoint: prune: %w", err)
		}
	}
	if cut > 0 {
		for _, d := range dirs[:cut] {
			if err := os.RemoveAll(d); err != nil {
				return fmt.Errorf("checkpoint: prune: %w", err)
			}
		}
	}
	ents, err := os.ReadDir(runDir)
	if err != nil {
		return fmt.Errorf("checkpoint: prune: %w", err)
	}
	for _, e := range ents {
		if e.IsDir() && isLeftover(e.Name()) {
			if err := os.RemoveAll(filepath.Join(runDir, e.Name())); err != nil {
				return fmt.Errorf("checkpoint: prune: %w", err)
			}
		}
	}
	if err := syncDir(runDir); err != nil {
		return fmt.Errorf("checkpoint: prune: %w", err)
	}
	return nil
}

// isLeftover reports whether name is that of a temporary directory Save
// makes: .step-N.tmp-X or .step-N.old-X.
func isLeftover(name string) bool {
	rest, ok := strings.CutPrefix(name, ".")
	if !ok {
		return false
	}
	for _, sep := range []string{".tmp-", ".old-"} {
		if i := strings.Index(rest, sep); i > 0 && stepDir.MatchString(rest[:i]) {
			return true
		}
	}
	return false
}
