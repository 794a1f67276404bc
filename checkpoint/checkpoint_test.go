package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/internal/buildinfo"
	"github.com/turnwise/turnwise/optim"
)

// trainerState stands for what a trainer keeps in trainer.json.
type trainerState struct {
	Step    int       `json:"step"`
	RNG     [2]uint64 `json:"rng"`
	DataPos int64     `json:"data_pos"`
	Config  string    `json:"config"`
}

// spec describes one parameter of a test model.
type spec struct {
	name  string
	dt    engine.DType
	shape []int
}

var mixed = []spec{
	{"embed.weight", engine.BF16, []int{5, 4}},
	{"layers.0.w", engine.F32, []int{4, 3}},
	{"layers.0.norm", engine.BF16, []int{4}},
	{"head.weight", engine.F16, []int{3, 4}},
}

// rig is a small model with an optimizer on the CPU backend.
type rig struct {
	b      engine.Backend
	w      Tensors
	opt    *optim.AdamW
	specs  []spec
	groups map[string]Tensors
}

// newRig allocates zeroed parameters for specs and a fresh AdamW over them.
func newRig(t *testing.T, b engine.Backend, specs []spec) *rig {
	t.Helper()
	r := &rig{b: b, w: Tensors{}, specs: specs}
	for _, s := range specs {
		r.w[s.name] = engine.MustAlloc(b, s.dt, s.shape...)
	}
	opt, err := optim.NewAdamW(b, optim.AdamWConfig{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.01, MaxGradNorm: 1}, r.w)
	if err != nil {
		t.Fatal(err)
	}
	r.opt = opt
	r.groups = map[string]Tensors{"model": r.w}
	return r
}

// randomize fills every parameter with random values and re-derives the
// masters from them.
func (r *rig) randomize(rng *rand.Rand) {
	for _, p := range r.opt.Params {
		engine.SetF32(r.b, p.W, randVals(rng, p.W.Numel()))
		if p.Master != nil {
			r.b.Cast(p.Master, p.W)
		}
	}
}

// step sets random gradients and takes one optimizer step.
func (r *rig) step(t *testing.T, rng *rand.Rand, lr float32) {
	t.Helper()
	for _, p := range r.opt.Params {
		engine.SetF32(r.b, p.G, randVals(rng, p.G.Numel()))
	}
	if res := r.opt.Step(lr, 0.5); res.Skipped {
		t.Fatal("step skipped")
	}
}

func randVals(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// raw downloads t's bytes.
func raw(b engine.Backend, t *engine.Tensor) []byte {
	out := make([]byte, t.Bytes())
	b.Download(out, t)
	return out
}

// snapshot returns the bytes of every tensor of r's state, by name.
func (r *rig) snapshot() map[string][]byte {
	s := map[string][]byte{}
	for _, p := range r.opt.Params {
		s[p.Name] = raw(r.b, p.W)
		s[p.Name+".m"] = raw(r.b, p.M)
		s[p.Name+".v"] = raw(r.b, p.V)
		if p.Master != nil {
			s[p.Name+".master"] = raw(r.b, p.Master)
		}
	}
	return s
}

func sameState(t *testing.T, what string, want, got map[string][]byte) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: %d tensors, want %d", what, len(got), len(want))
	}
	for name, w := range want {
		if !bytes.Equal(w, got[name]) {
			t.Errorf("%s: tensor %s differs:\n got %x\nwant %x", what, name, got[name], w)
		}
	}
}

// trained returns a rig with random weights and two optimizer steps taken.
func trained(t *testing.T, b engine.Backend, specs []spec, seed uint64) *rig {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	r := newRig(t, b, specs)
	r.randomize(rng)
	r.step(t, rng, 1e-2)
	r.step(t, rng, 1e-2)
	for _, p := range r.opt.Params {
		if !slices.ContainsFunc(engine.ToF32(b, p.M), func(f float32) bool { return f != 0 }) {
			t.Fatalf("%s: moments are zero after two steps", p.Name)
		}
	}
	return r
}

func TestRoundTrip(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 1})
	for _, tc := range []struct {
		name     string
		specs    []spec
		compress bool
	}{
		{"f32", []spec{{"a", engine.F32, []int{3, 4}}, {"b", engine.F32, []int{7}}}, false},
		{"f32-zstd", []spec{{"a", engine.F32, []int{3, 4}}, {"b", engine.F32, []int{7}}}, true},
		{"bf16", []spec{{"a", engine.BF16, []int{3, 4}}, {"b", engine.BF16, []int{2, 1, 3}}}, false},
		{"bf16-zstd", []spec{{"a", engine.BF16, []int{3, 4}}, {"b", engine.BF16, []int{2, 1, 3}}}, true},
		{"mixed", mixed, false},
		{"mixed-zstd", mixed, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := t.TempDir()
			src := trained(t, b, tc.specs, 7)
			src.opt.Skipped = 3 // as if some steps had been skipped
			// A second group, as LoRA training keeps adapters apart from
			// the base weights, and a scalar counter tensor.
			extra := Tensors{"counter": engine.FromI32(b, []int32{42, -1}, 2)}
			src.groups["extra"] = extra
			st := trainerState{Step: 2, RNG: [2]uint64{1 << 63, 5}, DataPos: 1234, Config: "lr=1e-2"}
			dir := Dir(run, 2)
			if err := Save(dir, b, src.groups, src.opt, st, tc.compress); err != nil {
				t.Fatal(err)
			}
			optFile := OptimizerName
			if tc.compress {
				optFile = OptimizerZstdName
			}
			if _, err := os.Stat(filepath.Join(dir, optFile)); err != nil {
				t.Fatalf("optimizer file: %v", err)
			}

			dst := newRig(t, b, tc.specs)
			dstExtra := Tensors{"counter": engine.MustAlloc(b, engine.I32, 2)}
			dst.groups["extra"] = dstExtra
			var got trainerState
			if err := Load(dir, b, dst.groups, dst.opt, &got); err != nil {
				t.Fatal(err)
			}
			sameState(t, "after load", src.snapshot(), dst.snapshot())
			if got != st {
				t.Errorf("trainer state %+v, want %+v", got, st)
			}
			if dst.opt.Steps != src.opt.Steps || dst.opt.Skipped != src.opt.Skipped {
				t.Errorf("steps %d skipped %d, want %d and %d", dst.opt.Steps, dst.opt.Skipped, src.opt.Steps, src.opt.Skipped)
			}
			if c := engine.ToI32(b, dstExtra["counter"]); !slices.Equal(c, []int32{42, -1}) {
				t.Errorf("counter %v, want [42 -1]", c)
			}

			// Resuming continues bit-exactly: the same gradients give the
			// same weights, moments and masters.
			for i := range 3 {
				src.step(t, rand.New(rand.NewPCG(uint64(i), 9)), 3e-3)
				dst.step(t, rand.New(rand.NewPCG(uint64(i), 9)), 3e-3)
			}
			sameState(t, "after resumed steps", src.snapshot(), dst.snapshot())
		})
	}
}

func TestRawTrainerState(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 1})
	dir := Dir(t.TempDir(), 0)
	in := json.RawMessage(`{"step":0,"rng":"abc"}`)
	if err := Save(dir, b, nil, nil, in, false); err != nil {
		t.Fatal(err)
	}
	var out json.RawMessage
	if err := Load(dir, b, nil, nil, &out); err != nil {
		t.Fatal(err)
	}
	var a, c map[string]any
	if err := json.Unmarshal(in, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &c); err != nil {
		t.Fatal(err)
	}
	if a["rng"] != c["rng"] || a["step"] != c["step"] {
		t.Errorf("trainer state %s, want %s", out, in)
	}
}

// entries lists the names in dir.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestSaveFailureLeavesNothing(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 1})
	r := trained(t, b, mixed, 1)
	for _, tc := range []struct {
		name   string
		groups map[string]Tensors
		state  any
		want   string
	}{
		// "model" is written before "zz" fails: a failure midway.
		{"nil tensor", map[string]Tensors{"model": r.w, "zz": {"x": nil}}, nil, `tensor "x" is nil`},
		{"reserved group", map[string]Tensors{"optimizer": r.w}, nil, "reserved"},
		{"bad group name", map[string]Tensors{"../evil": r.w}, nil, "not a plain file stem"},
		{"unmarshalable state", map[string]Tensors{"model": r.w}, func() {}, TrainerName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := t.TempDir()
			err := Save(Dir(run, 5), b, tc.groups, r.opt, tc.state, true)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Save: %v, want an error containing %q", err, tc.want)
			}
			if names := entries(t, run); len(names) != 0 {
				t.Errorf("run directory holds %v after a failed save", names)
			}
		})
	}

	t.Run("failure keeps the old checkpoint", func(t *testing.T) {
		run := t.TempDir()
		dir := Dir(run, 5)
		if err := Save(dir, b, r.groups, r.opt, 1, false); err != nil {
			t.Fatal(err)
		}
		if err := Save(dir, b, map[string]Tensors{"model": r.w, "zz": {"x": nil}}, r.opt, 2, false); err == nil {
			t.Fatal("Save succeeded")
		}
		if names := entries(t, run); !slices.Equal(names, []string{"step-000005"}) {
			t.Errorf("run directory holds %v", names)
		}
		var n int
		if err := Load(dir, b, nil, nil, &n); err != nil || n != 1 {
			t.Errorf("Load: state %d, %v; want 1", n, err)
		}
	})

	t.Run("run directory is a file", func(t *testing.T) {
		run := filepath.Join(t.TempDir(), "run")
		if err := os.WriteFile(run, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := Save(Dir(run, 1), b, r.groups, r.opt, nil, false); err == nil {
			t.Fatal("Save into a file succeeded")
		}
	})

	t.Run("bad directory name", func(t *testing.T) {
		run := t.TempDir()
		if err := Save(filepath.Join(run, "latest"), b, r.groups, r.opt, nil, false); err == nil {
			t.Fatal("Save succeeded")
		}
	})
}

func TestSaveReplaces(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 1})
	r := trained(t, b, mixed, 1)
	run := t.TempDir()
	dir := Dir(run, 9)
	for i := range 2 {
		if err := Save(dir, b, r.groups, r.opt, i, i == 1); err != nil {
			t.Fatal(err)
		}
	}
	if names := entries(t, run); !slices.Equal(names, []string{"step-000009"}) {
		t.Errorf("run directory holds %v", names)
	}
	if names := entries(t, dir); slices.Contains(names, OptimizerName) || !slices.Contains(names, OptimizerZstdName) {
		t.Errorf("checkpoint holds %v, want only the second save's files", names)
	}
	var n int
	if err := Load(dir, b, nil, nil, &n); err != nil || n != 1 {
		t.Errorf("Load: state %d, %v; want 1", n, err)
	}
}

func TestLatestIgnoresUnfinishedSaves(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 1})
	r := trained(t, b, mixed, 1)
	run := t.TempDir()
	for _, s := range []int{10, 20} {
		if err := Save(Dir(run, s), b, r.groups, r.opt, s, false); err != nil {
			t.Fatal(err)
		}
	}
	// A save of step 30 that crashed before its rename: a temporary
	// directory holding all its files.
	if err := Save(Dir(run, 30), b, r.groups, r.opt, 30, false); err != nil {
		t.Fatal(err)
	}
	crashed := filepath.Join(run, ".step-000030.tmp-123456")
	if err := os.Rename(Dir(run, 30), crashed); err != nil {
		t.Fatal(err)
	}
	// Things that are not checkpoints.
	for _, d := range []string{"logs", "step-abc", "step-"} {
		if err := os.Mkdir(filepath.Join(run, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir, skipped, err := Latest(run)
	if err != nil || dir != Dir(run, 20) || len(skipped) != 0 {
		t.Fatalf("Latest = %q, %v, %v; want %q", dir, skipped, err, Dir(run, 20))
	}
	if err := Prune(run, 5); err != nil {
		t.Fatal(err)
	}
	want := []string{"logs", "step-", "step-000010", "step-000020", "step-abc"}
	if names := entries(t, run); !slices.Equal(names, want) {
		t.Errorf("after Prune the run directory holds %v, want %v", names, want)
	}
}

func TestLatestEmpty(t *testing.T) {
	for _, run := range []string{t.TempDir(), filepath.Join(t.TempDir(), "absent")} {
		if dir, _, err := Latest(run); !errors.Is(err, ErrNoCheckpoint) {
			t.Errorf("Latest(%s) = %q, %v; want ErrNoCheckpoint", run, dir, err)
		}
	}
}

func TestCorruption(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 1})
	r := trained(t, b, mixed, 1)
	edit := func(name string, fn func([]byte) []byte) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			path := filepath.Join(dir, name)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, fn(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	remove := func(name string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	flip := func(i int) func([]byte) []byte {
		return func(d []byte) []byte {
			d[(len(d)+i)%len(d)] ^= 0x10
			return d
		}
	}
	for _, tc := range []struct {
		name     string
		compress bool
		damage   func(t *testing.T, dir string)
		file     string // named in the error
		problem  string // in the error
	}{
		{"truncated model", false, edit("model.safetensors", func(d []byte) []byte { return d[:len(d)-3] }), "model.safetensors", "truncated"},
		{"extended model", false, edit("model.safetensors", func(d []byte) []byte { return append(d, 0) }), "model.safetensors", "too long"},
		{"flipped model byte", false, edit("model.safetensors", flip(-5)), "model.safetensors", "altered"},
		{"flipped optimizer byte", false, edit(OptimizerName, flip(-1)), OptimizerName, "altered"},
		{"flipped zstd byte", true, edit(OptimizerZstdName, flip(20)), OptimizerZstdName, "altered"},
		{"truncated zstd", true, edit(OptimizerZstdName, func(d []byte) []byte { return d[:10] }), OptimizerZstdName, "truncated"},
		{"deleted trainer", false, remove(TrainerName), TrainerName, "missing"},
		{"deleted optimizer", false, remove(OptimizerName), OptimizerName, "missing"},
		{"deleted manifest", false, remove(ManifestName), ManifestName, "missing"},
		{"manifest not JSON", false, edit(ManifestName, func(d []byte) []byte { return d[:len(d)/2] }), ManifestName, "not a valid manifest"},
		{"manifest wrong version", false, edit(ManifestName, func(d []byte) []byte {
			return bytes.Replace(d, []byte(`"version": 1`), []byte(`"version": 99`), 1)
		}), ManifestName, "version 99"},
		{"manifest escapes", false, edit(ManifestName, func(d []byte) []byte {
			return bytes.Replace(d, []byte(`"trainer.json"`), []byte(`"../trainer.json"`), 1)
		}), ManifestName, "invalid file name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := t.TempDir()
			for _, s := range []int{1, 2} {
				if err := Save(Dir(run, s), b, r.groups, r.opt, s, tc.compress); err != nil {
					t.Fatal(err)
				}
			}
			bad := Dir(run, 2)
			tc.damage(t, bad)

			dst := newRig(t, b, mixed)
			var st int
			err := Load(bad, b, dst.groups, dst.opt, &st)
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.File != tc.file || !strings.Contains(err.Error(), tc.problem) {
				t.Fatalf("Load: %v; want a CorruptError for %s containing %q", err, tc.file, tc.problem)
			}
			if !strings.Contains(err.Error(), bad) {
				t.Errorf("error %q does not name the directory", err)
			}
			if st != 0 || dst.opt.Steps != 0 {
				t.Errorf("a refused Load changed the state")
			}

			dir, skipped, err := Latest(run)
			if err != nil || dir != Dir(run, 1) {
				t.Fatalf("Latest = %q, %v; want %q", dir, err, Dir(run, 1))
			}
			if len(skipped) != 1 || !errors.As(skipped[0], &ce) || ce.File != tc.file || ce.Dir != bad {
				t.Errorf("skipped = %v, want one error for %s", skipped, tc.file)
			}
			if err := Load(dir, b, dst.groups, dst.opt, &st); err != nil || st != 1 {
				t.Errorf("Load of the previous checkpoint: state %d, %v", st, err)
			}

			// With only damaged checkpoints there is none to resume from.
			tc.damage(t, Dir(run, 1))
			if _, skipped, err := Latest(run); !errors.Is(err, ErrNoCheckpoint) || len(skipped) != 2 {
				t.Errorf("Latest with every checkpoint damaged: %v, skipped %v", err, skipped)
			}
		})
	}
}

func TestPrune(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 1})
	for _, tc := range []struct {
		keep int
		want []string
	}{
		{1, []string{"notes", "step-000100"}},
		{2, []string{"notes", "step-000020", "step-000100"}},
		{5, []string{"notes", "step-000003", "step-000010", "step-000020", "step-000100"}},
		{9, []string{"notes", "step-000003", "step-000010", "step-000020", "step-000100"}},
	} {
		run := t.TempDir()
		// Steps compare as numbers: 100 is newer than 20.
		for _, s := range []int{20, 3, 100, 10} {
			if err := Save(Dir(run, s), b, nil, nil, s, false); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Mkdir(filepath.Join(run, "notes"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := Prune(run, tc.keep); err != nil {
			t.Fatal(err)
		}
		if names := entries(t, run); !slices.Equal(names, tc.want) {
			t.Errorf("Prune(keep %d) left %v, want %v", tc.keep, names, tc.want)
		}
	}
	if err := Prune(t.TempDir(), 0); err == nil {
		t.Error("Prune(keep 0) succeeded")
	}
}

// TestPruneSkipsDamaged damages two of five checkpoints: pruning to two
// must keep the two newest valid ones, not count the damaged.
func TestPruneSkipsDamaged(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 1})
	damage := []struct {
		name string
		do   func(dir string) error
	}{
		{"no manifest", func(dir string) error { return os.Remove(filepath.Join(dir, ManifestName)) }},
		{"truncated", func(dir string) error { return os.Truncate(filepath.Join(dir, TrainerName), 1) }},
		{"altered", func(dir string) error { return os.WriteFile(filepath.Join(dir, TrainerName), []byte("99\n"), 0o644) }},
	}
	for _, d := range damage {
		t.Run(d.name, func(t *testing.T) {
			run := t.TempDir()
			for _, s := range []int{2, 4, 6, 8, 10} {
				if err := Save(Dir(run, s), b, nil, nil, s, false); err != nil {
					t.Fatal(err)
				}
			}
			for _, s := range []int{6, 10} {
				if err := d.do(Dir(run, s)); err != nil {
					t.Fatal(err)
				}
			}
			if err := Prune(run, 2); err != nil {
				t.Fatal(err)
			}
			want := []string{"step-000004", "step-000006", "step-000008", "step-000010"}
			if names := entries(t, run); !slices.Equal(names, want) {
				t.Errorf("Prune(keep 2) left %v, want %v (the valid 4 and 8, and the damaged 6 and 10)", names, want)
			}
			// Fewer valid checkpoints than keep: nothing is deleted.
			if err := Prune(run, 3); err != nil {
				t.Fatal(err)
			}
			if names := entries(t, run); !slices.Equal(names, want) {
				t.Errorf("Prune(keep 3) with 2 valid left %v, want %v", names, want)
			}
		})
	}
}

func TestLoadMismatch(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 1})
	r := trained(t, b, mixed, 1)
	run := t.TempDir()
	dir := Dir(run, 1)
	if err := Save(dir, b, r.groups, r.opt, 1, false); err != nil {
		t.Fatal(err)
	}
	with := func(name string, s spec) []spec {
		out := slices.Clone(mixed)
		for i := range out {
			if out[i].name == name {
				out[i] = s
			}
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		specs  []spec
		groups func(r *rig) map[string]Tensors
		want   []string
	}{
		{"shape", with("layers.0.w", spec{"layers.0.w", engine.F32, []int{3, 4}}), nil,
			[]string{"model.safetensors", `"layers.0.w"`, "F32[4 3]", "F32[3 4]"}},
		{"dtype", with("embed.weight", spec{"embed.weight", engine.F32, []int{5, 4}}), nil,
			[]string{"model.safetensors", `"embed.weight"`, "BF16[5 4]", "F32[5 4]"}},
		{"master", with("layers.0.w", spec{"layers.0.w", engine.BF16, []int{4, 3}}), nil,
			[]string{"model.safetensors", `"layers.0.w"`}},
		{"missing tensor", append(slices.Clone(mixed), spec{"new", engine.F32, []int{2}}), nil,
			[]string{"model.safetensors", `"new" is not in the file`}},
		{"extra tensor", mixed[1:], nil,
			[]string{"model.safetensors", `"embed.weight" of the file has no destination`}},
		{"optimizer params", mixed, func(r *rig) map[string]Tensors {
			r.opt.Params = r.opt.Params[1:]
			return r.groups
		}, []string{OptimizerName, `"embed.weight.m" of the file has no destination`}},
		{"missing group", mixed, func(r *rig) map[string]Tensors {
			return map[string]Tensors{"model": r.w, "adapter": {}}
		}, []string{`no group "adapter"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := newRig(t, b, tc.specs)
			rng := rand.New(rand.NewPCG(3, 3))
			dst.randomize(rng)
			groups := dst.groups
			if tc.groups != nil {
				groups = tc.groups(dst)
			}
			before := dst.snapshot()
			var st int
			err := Load(dir, b, groups, dst.opt, &st)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			sameState(t, "after a refused load", before, dst.snapshot())
			if st != 0 || dst.opt.Steps != 0 {
				t.Error("a refused Load changed the state")
			}
		})
	}
	t.Run("no optimizer state", func(t *testing.T) {
		d := Dir(run, 2)
		if err := Save(d, b, r.groups, nil, 2, false); err != nil {
			t.Fatal(err)
		}
		dst := newRig(t, b, mixed)
		if err := Load(d, b, dst.groups, dst.opt, nil); err == nil || !strings.Contains(err.Error(), "no optimizer state") {
			t.Errorf("Load: %v, want an error about the missing optimizer state", err)
		}
		if err := Load(d, b, dst.groups, nil, nil); err != nil {
			t.Errorf("Load without an optimizer: %v", err)
		}
	})
}

func TestSaveCreatesRunDir(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 1})
	run := filepath.Join(t.TempDir(), "a", "run")
	// A trailing separator names the same directory.
	if err := Save(Dir(run, 4)+string(filepath.Separator), b, nil, nil, "x", false); err != nil {
		t.Fatal(err)
	}
	dir, skipped, err := Latest(run)
	if err != nil || dir != Dir(run, 4) || len(skipped) != 0 {
		t.Fatalf("Latest = %q, %v, %v", dir, skipped, err)
	}
	if step, ok := Step(dir); !ok || step != 4 {
		t.Errorf("Step(%q) = %d, %v", dir, step, ok)
	}
	if names := entries(t, dir); !slices.Equal(names, []string{ManifestName, TrainerName}) {
		t.Errorf("checkpoint holds %v", names)
	}
}

// twoRanks is rank 0 of a job of two for building a sharded optimizer,
// which asks only for these; its collectives fail.
type twoRanks struct{}

func (twoRanks) Rank() int                               { return 0 }
func (twoRanks) Size() int                               { return 2 }
func (twoRanks) AllReduce(*engine.Tensor) error          { return errors.New("no collectives") }
func (twoRanks) ReduceScatter(_, _ *engine.Tensor) error { return errors.New("no collectives") }
func (twoRanks) AllGather(_, _ *engine.Tensor) error     { return errors.New("no collectives") }
func (twoRanks) Broadcast(*engine.Tensor, int) error     { return errors.New("no collectives") }
func (twoRanks) Barrier() error                          { return errors.New("no collectives") }
func (twoRanks) Close() error                            { return nil }

// countingIO counts a backend's uploads and downloads.
type countingIO struct {
	engine.Backend
	uploads, downloads int
}

func (c *countingIO) Upload(dst *engine.Tensor, src []byte) { c.uploads++; c.Backend.Upload(dst, src) }
func (c *countingIO) Download(dst []byte, src *engine.Tensor) {
	c.downloads++
	c.Backend.Download(dst, src)
}

// TestOptimizerBackends checks that the optimizer's state moves through the
// optimizer's own backend — a sharded run's whole state lives on the host,
// its model on the device — and that a sharded optimizer, which holds one
// rank's state, is refused.
func TestOptimizerBackends(t *testing.T) {
	model := cpu.New(cpu.Options{Threads: 1})
	host := &countingIO{Backend: cpu.New(cpu.Options{Threads: 1})}
	src := trained(t, host, mixed, 7) // weights and state on the host
	w := Tensors{}                    // the weights on the model's backend
	for name, t := range src.w {
		w[name] = engine.FromF32(model, t.DType(), engine.ToF32(host, t), t.Shape()...)
	}
	dir := Dir(t.TempDir(), 3)
	down := host.downloads
	if err := Save(dir, model, map[string]Tensors{"model": w}, src.opt, struct{}{}, true); err != nil {
		t.Fatal(err)
	}
	if host.downloads == down {
		t.Error("Save did not read the optimizer's state through its backend")
	}
	dst := newRig(t, host, mixed)
	w2 := Tensors{}
	for name, t := range src.w {
		w2[name] = engine.MustAlloc(model, t.DType(), t.Shape()...)
	}
	up := host.uploads
	if err := Load(dir, model, map[string]Tensors{"model": w2}, dst.opt, nil); err != nil {
		t.Fatal(err)
	}
	if host.uploads == up {
		t.Error("Load did not write the optimizer's state through its backend")
	}
	for i, p := range dst.opt.Params {
		q := src.opt.Params[i]
		for _, k := range []struct {
			what      string
			got, want *engine.Tensor
		}{{"m", p.M, q.M}, {"v", p.V, q.V}, {"master", p.Master, q.Master}} {
			if k.want != nil && !slices.Equal(engine.ToF32(host, k.got), engine.ToF32(host, k.want)) {
				t.Errorf("%s.%s differs after a round trip", p.Name, k.what)
			}
		}
		if !slices.Equal(engine.ToF32(model, w2[p.Name]), engine.ToF32(host, q.W)) {
			t.Errorf("weights of %s differ after a round trip", p.Name)
		}
	}

	sharded, err := optim.NewShardedAdamW(host, optim.AdamWConfig{}, src.w, twoRanks{})
	if err != nil {
		t.Fatal(err)
	}
	defer sharded.Free()
	if err := Save(Dir(t.TempDir(), 1), host, map[string]Tensors{"model": src.w}, sharded, struct{}{}, false); err == nil ||
		!strings.Contains(err.Error(), "sharded") {
		t.Errorf("saving a sharded optimizer: %v, want an error naming it", err)
	}
	if err := Load(dir, host, map[string]Tensors{"model": src.w}, sharded, nil); err == nil || !strings.Contains(err.Error(), "sharded") {
		t.Errorf("loading into a sharded optimizer: %v, want an error naming it", err)
	}
}

// TestManifestBuild checks that a manifest records the binary that saved
// the checkpoint, and that a checkpoint saved before it did still loads.
func TestManifestBuild(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 1})
	dir := Dir(t.TempDir(), 3)
	if err := Save(dir, b, nil, nil, 3, false); err != nil {
		t.Fatal(err)
	}
	m, err := readManifest(dir)
	if err != nil || m.Build != buildinfo.Read() {
		t.Fatalf("manifest build %+v, %v; want %+v", m.Build, err, buildinfo.Read())
	}
	path := filepath.Join(dir, ManifestName)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil || doc["build"] == nil {
		t.Fatalf("manifest.json has no build: %v\n%s", err, raw)
	}
	delete(doc, "build")
	if raw, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	var step int
	if err := Load(dir, b, nil, nil, &step); err != nil || step != 3 {
		t.Errorf("a manifest without build: %v, step %d", err, step)
	}
}
