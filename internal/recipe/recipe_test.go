package recipe

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/turnwise/turnwise/internal/buildinfo"
)

// flags returns a flag set like a training command's.
func flags() (*pflag.FlagSet, *float64, *int, *[]string, *bool) {
	fs := pflag.NewFlagSet("train critic", pflag.ContinueOnError)
	fs.String(FlagName, "", "recipe")
	lr := fs.Float64("lr", 1e-4, "learning rate")
	epochs := fs.Int("epochs", 1, "epochs")
	targets := fs.StringSlice("lora-targets", []string{"q", "v"}, "targets")
	full := fs.Bool("full", false, "full fine-tuning")
	fs.String("out", "runs/x", "output")
	return fs, lr, epochs, targets, full
}

func write(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "recipe.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestApply sets flags from a recipe, the command line winning.
func TestApply(t *testing.T) {
	fs, lr, epochs, targets, full := flags()
	if err := fs.Parse([]string{"--epochs", "7"}); err != nil {
		t.Fatal(err)
	}
	path := write(t, "# reference\nlr: 2e-7\nepochs: 4\nlora-targets: [q, k, v, o]\nfull: true\n")
	if err := Apply(fs, path, "out"); err != nil {
		t.Fatal(err)
	}
	if *lr != 2e-7 || *epochs != 7 || strings.Join(*targets, ",") != "q,k,v,o" || !*full {
		t.Errorf("lr %v epochs %v targets %v full %v; want 2e-7, 7 (the command line's), q,k,v,o, true", *lr, *epochs, *targets, *full)
	}
}

// TestApplyErrors checks that a bad recipe is an error naming file:line.
func TestApplyErrors(t *testing.T) {
	tests := []struct{ name, text, want string }{
		{"unknown key", "lr: 1\nlearning-rate: 2\n", `:2: unknown key "learning-rate"`},
		{"bad value", "epochs: four\n", ":1: epochs:"},
		{"nested", "lr:\n  peak: 1\n", ":1: \"lr\": want a value or a list"},
		{"set twice", "lr: 1\nlr: 2\n", `:2: "lr" set twice (first on line 1)`},
		{"set twice, spelt as a flag", "lr: 1\n--lr: 2\n", `:2: "lr" set twice (first on line 1)`},
		{"dashes alone", "--: 1\n", ":1: a key must be a flag name"},
		{"no value", "lr:\n", `:1: "lr" has no value`},
		{"a skipped key", "out: elsewhere\n", `:1: "out" cannot be set in a recipe`},
		{"itself", "config: other.yaml\n", `"config" cannot be set`},
		{"not a mapping", "- lr\n", ":1: want a mapping"},
		{"not YAML", "lr: [1\n", "recipe.yaml"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs, _, _, _, _ := flags()
			fs.Parse(nil)
			path := write(t, tc.text)
			err := Apply(fs, path, "out")
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("Apply: %v; want an error naming %s and %q", err, path, tc.want)
			}
		})
	}
	fs, _, _, _, _ := flags()
	if err := Apply(fs, filepath.Join(t.TempDir(), "none.yaml")); err == nil || !strings.Contains(err.Error(), "none.yaml") {
		t.Errorf("a missing recipe: %v", err)
	}
}

// TestCheckRun saves a run's configuration, accepts the same one or one
// that changes only ignored keys, and refuses another unless forced.
func TestCheckRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	fs, _, _, _, _ := flags()
	fs.Parse([]string{"--lr", "3e-4", "--lora-targets", "q,k"})
	first := Values(fs)
	if _, ok := first[FlagName]; ok {
		t.Error("Values includes --config")
	}
	if err := CheckRun(path, first, false); err != nil {
		t.Fatal(err)
	}
	back, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(Diff(first, back)) != 0 || back["lora-targets"] != "q,k" || back["lr"] != "0.0003" {
		t.Errorf("saved and loaded back: %v; want %v", back, first)
	}
	if err := CheckRun(path, first, false); err != nil {
		t.Errorf("the same configuration: %v", err)
	}
	fs2, _, _, _, _ := flags()
	fs2.Parse([]string{"--lr", "1e-3", "--lora-targets", "q,k", "--epochs", "9"})
	second := Values(fs2)
	if err := CheckRun(path, second, false, "epochs"); !errors.Is(err, ErrChanged) ||
		!strings.Contains(err.Error(), `lr: "0.0003" → "0.001"`) || strings.Contains(err.Error(), "epochs") {
		t.Errorf("another lr: %v; want ErrChanged naming lr and not the ignored epochs", err)
	}
	if err := CheckRun(path, second, true); err != nil {
		t.Errorf("forced: %v", err)
	}
	if now, _ := Load(path); now["lr"] != "0.001" {
		t.Errorf("a forced resume did not save its configuration: %v", now)
	}
}

// TestDeprecatedSpelling checks that a recipe may still use a flag's
// deprecated spelling (it sets the flag, with pflag's notice) and that the
// resolved configuration records the value under the new spelling alone.
func TestDeprecatedSpelling(t *testing.T) {
	fs, _, _, _, _ := flags()
	var log strings.Builder
	fs.SetOutput(&log)
	fs.Var(fs.Lookup("out").Value, "run-dir", "output")
	if err := fs.MarkDeprecated("run-dir", "use --out"); err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if err := Apply(fs, write(t, "run-dir: runs/old\n")); err != nil {
		t.Fatal(err)
	}
	vals := Values(fs)
	if _, ok := vals["run-dir"]; ok || vals["out"] != "runs/old" {
		t.Errorf("resolved configuration %v; want out: runs/old and no run-dir", vals)
	}
	if !strings.Contains(log.String(), "use --out") {
		t.Errorf("no notice for the deprecated spelling: %q", log.String())
	}
}

// TestSavedAsRecipe checks that a saved configuration records the binary
// under BuildKey, and that it reads back as a recipe: the build is
// skipped, flags at their own value are left unchanged, the others set.
// A configuration saved before the build was recorded still loads.
func TestSavedAsRecipe(t *testing.T) {
	fs, _, _, _, _ := flags()
	fs.Parse([]string{"--lr", "3e-4", "--out", "runs/a"})
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := Save(path, Values(fs)); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Build buildinfo.Info `yaml:"build"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil || doc.Build != buildinfo.Read() {
		t.Errorf("the saved build %+v, %v; want %+v\n%s", doc.Build, err, buildinfo.Read(), raw)
	}
	back, err := Load(path)
	if err != nil || len(Diff(Values(fs), back)) != 0 {
		t.Errorf("loaded back %v, %v; want %v", back, err, Values(fs))
	}

	again, lr, epochs, targets, _ := flags()
	again.Parse([]string{"--out", "runs/b"})
	if err := Apply(again, path); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		flag    string
		changed bool
	}{
		{"lr", true}, {"out", true}, // set by the recipe, and by the command line
		{"epochs", false}, {"lora-targets", false}, {"full", false}, // at their defaults in both
	} {
		if got := again.Lookup(tc.flag).Changed; got != tc.changed {
			t.Errorf("--%s changed: %v, want %v", tc.flag, got, tc.changed)
		}
	}
	if *lr != 3e-4 || *epochs != 1 || strings.Join(*targets, ",") != "q,v" || again.Lookup("out").Value.String() != "runs/b" {
		t.Errorf("applied: lr %v, epochs %v, targets %v, out %v", *lr, *epochs, *targets, again.Lookup("out").Value)
	}

	old := write(t, "# The resolved configuration of this run\nepochs: \"2\"\nlr: \"0.001\"\n")
	if vals, err := Load(old); err != nil || len(vals) != 2 || vals["lr"] != "0.001" {
		t.Errorf("a configuration without the build: %v, %v", vals, err)
	}
	if err := Apply(fs, write(t, "build: v1\n")); err == nil || !strings.Contains(err.Error(), `unknown key "build"`) {
		t.Errorf("a plain value under build: %v; want the error of a key no flag has", err)
	}
}
