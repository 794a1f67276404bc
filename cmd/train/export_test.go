package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/sweetrl/demotask"
)

// greedyIDs runs train generate with args and returns the ids it continues
// the beginning-of-sequence token with.
func greedyIDs(t *testing.T, args ...string) []int32 {
	t.Helper()
	args = append(args, "--bos-only", "--max-new", "12", "--json", "--threads", "1")
	out, err := runCmd(t, runGenerate, "", args...)
	if err != nil {
		t.Fatalf("generate %q: %v\n%s", args, err, out)
	}
	var g struct {
		IDs []int32 `json:"ids"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &g); err != nil || len(g.IDs) == 0 {
		t.Fatalf("generate %q printed %q (%v), want JSON with ids", args, out, err)
	}
	return g.IDs
}

// TestExportLoadsBack trains with sft (full and LoRA), checks that each
// run's final directory is what others load, exports it as a Hugging Face
// directory and a GGUF file, and checks that generate gives the same
// greedy continuation from every one of them and that eval plays them.
func TestExportLoadsBack(t *testing.T) {
	full := t.TempDir()
	if out, err := runCmd(t, runSFT, "", "--out", full, "--steps", "2", "--batch-tokens", "256", "--prompt", "", "--threads", "1"); err != nil {
		t.Fatalf("sft: %v\n%s", err, out)
	}
	base := filepath.Join(full, "final")
	for _, f := range []string{"config.json", "model.safetensors", "generation_config.json"} {
		if _, err := os.Stat(filepath.Join(base, f)); err != nil {
			t.Errorf("full fine-tuning's final directory: %v", err)
		}
	}
	want := greedyIDs(t, "--hf", base)

	lora := t.TempDir()
	if out, err := runCmd(t, runSFT, "", "--out", lora, "--hf", base, "--lora-rank", "2", "--lr", "0.05", "--steps", "2", "--checkpoint-every", "1", "--batch-tokens", "256", "--prompt", "", "--threads", "1"); err != nil {
		t.Fatalf("sft --lora-rank: %v\n%s", err, out)
	}
	adapter := filepath.Join(lora, "final")
	raw, err := os.ReadFile(filepath.Join(adapter, "adapter_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pc struct {
		Base string `json:"base_model_name_or_path"`
	}
	if err := json.Unmarshal(raw, &pc); err != nil || filepath.Clean(pc.Base) != mustAbs(t, base) {
		t.Errorf("adapter_config.json names base %q (%v), want %q", pc.Base, err, mustAbs(t, base))
	}
	withAdapter := greedyIDs(t, "--hf", base, "--adapter", adapter)
	if reflect.DeepEqual(withAdapter, want) {
		t.Fatalf("the trained adapter does not change the greedy continuation %v; the merged exports would test nothing", want)
	}
	// --hf ADAPTER loads the adapter on the base its config names.
	if got := greedyIDs(t, "--hf", adapter); !reflect.DeepEqual(got, withAdapter) {
		t.Errorf("--hf ADAPTER continues with %v, want the adapter on its base's %v", got, withAdapter)
	}
	if _, err := runCmd(t, runGenerate, "", "--hf", adapter, "--adapter", adapter, "--bos-only"); err == nil || !strings.Contains(err.Error(), "names another") {
		t.Errorf("--hf ADAPTER --adapter ADAPTER: %v, want a refusal", err)
	}

	// A full fine-tuning run of the base: its last step checkpoint, on
	// the base it trained, exports as its final directory.
	tuned := t.TempDir()
	if out, err := runCmd(t, runSFT, "", "--out", tuned, "--hf", base, "--lr", "0.05", "--steps", "2", "--checkpoint-every", "1", "--batch-tokens", "256", "--prompt", "", "--threads", "1"); err != nil {
		t.Fatalf("sft --hf: %v\n%s", err, out)
	}
	tunedIDs := greedyIDs(t, "--hf", filepath.Join(tuned, "final"))
	if reflect.DeepEqual(tunedIDs, want) {
		t.Fatalf("fine-tuning does not change the greedy continuation %v; the step export would test nothing", want)
	}

	out := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		load []string
		want []int32
	}{
		{"full-hf", []string{"--from", base, "--out", filepath.Join(out, "full")}, []string{"--hf", filepath.Join(out, "full")}, want},
		{"full-gguf", []string{"--from", base, "--out", filepath.Join(out, "full.gguf"), "--format", "gguf"},
			[]string{"--gguf", filepath.Join(out, "full.gguf"), "--tokenizer", "bytes"}, want},
		{"lora-hf", []string{"--from", adapter, "--out", filepath.Join(out, "merged")}, []string{"--hf", filepath.Join(out, "merged")}, withAdapter},
		{"lora-gguf", []string{"--from", base, "--adapter", adapter, "--out", filepath.Join(out, "merged.gguf"), "--format", "gguf"},
			[]string{"--gguf", filepath.Join(out, "merged.gguf"), "--tokenizer", "bytes"}, withAdapter},
		{"step-hf", []string{"--from", filepath.Join(tuned, "step-000002"), "--base", base, "--out", filepath.Join(out, "step")},
			[]string{"--hf", filepath.Join(out, "step")}, tunedIDs},
	} {
		if msg, err := runCmd(t, runExport, "", tc.args...); err != nil {
			t.Fatalf("%s: export: %v\n%s", tc.name, err, msg)
		}
		if got := greedyIDs(t, tc.load...); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: generate from the export gives %v, want %v", tc.name, got, tc.want)
		}
	}
	// An existing --out: refused without --force; with it, replaced whole
	// (a stale file of an earlier export does not survive).
	names := func(dir string) []string {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var ns []string
		for _, e := range entries {
			ns = append(ns, e.Name())
		}
		return ns
	}
	fullDir, fullGGUF := filepath.Join(out, "full"), filepath.Join(out, "full.gguf")
	before := names(fullDir)
	if _, err := runCmd(t, runExport, "", "--from", adapter, "--out", fullDir); err == nil || !strings.Contains(err.Error(), "not empty") || !strings.Contains(err.Error(), "--force") {
		t.Errorf("export into a non-empty directory: %v, want a refusal naming --force", err)
	}
	if _, err := runCmd(t, runExport, "", "--from", adapter, "--out", fullGGUF, "--format", "gguf"); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Errorf("export over an existing GGUF file: %v, want a refusal naming --force", err)
	}
	if got := greedyIDs(t, "--hf", fullDir); !reflect.DeepEqual(got, want) || !reflect.DeepEqual(names(fullDir), before) {
		t.Errorf("a refused export changed %s: files %v (were %v), generate %v", fullDir, names(fullDir), before, got)
	}
	if err := os.WriteFile(filepath.Join(fullDir, "stale.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--from", adapter, "--out", fullDir, "--force"},
		{"--from", adapter, "--out", fullGGUF, "--format", "gguf", "--force"},
	} {
		if msg, err := runCmd(t, runExport, "", args...); err != nil {
			t.Fatalf("export %q: %v\n%s", args, err, msg)
		}
	}
	if got, wantNames := names(fullDir), names(filepath.Join(out, "merged")); !reflect.DeepEqual(got, wantNames) {
		t.Errorf("after export --force, %s holds %v; want exactly a fresh export's %v", fullDir, got, wantNames)
	}
	for _, load := range [][]string{{"--hf", fullDir}, {"--gguf", fullGGUF, "--tokenizer", "bytes"}} {
		if got := greedyIDs(t, load...); !reflect.DeepEqual(got, withAdapter) {
			t.Errorf("generate %q after export --force: %v, want the merged model's %v", load, got, withAdapter)
		}
	}
	nested := filepath.Join(out, "nested")
	if err := os.MkdirAll(filepath.Join(nested, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--from", base, "--out", nested, "--force"}, "holds a directory"},
		{[]string{"--from", base, "--out", fullGGUF}, "is a file"},
		{[]string{"--from", base, "--out", fullDir, "--format", "gguf", "--force"}, "is a directory"},
	} {
		if _, err := runCmd(t, runExport, "", bad.args...); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("export %q: %v, want an error containing %q", bad.args, err, bad.want)
		}
	}
	if _, err := os.Stat(filepath.Join(nested, "sub")); err != nil {
		t.Errorf("a refused --force removed %s: %v", nested, err)
	}
	for _, n := range names(out) {
		if strings.HasPrefix(n, ".") {
			t.Errorf("the exports left %s in %s", n, out)
		}
	}

	for _, args := range [][]string{
		{"--hf", base},
		{"--hf", base, "--adapter", adapter},
		{"--hf", filepath.Join(out, "merged")},
		{"--gguf", filepath.Join(out, "merged.gguf"), "--tokenizer", "bytes"},
	} {
		args = append(args, "--threads", "1", "--env", "demo", "--demo-tasks", "2", "--max-new", "4")
		if msg, err := runCmd(t, runEval, "", args...); err != nil || !strings.Contains(msg, "(2 tasks, 2 episodes)") {
			t.Errorf("eval %q: %v\n%s", args, err, msg)
		}
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--out", filepath.Join(out, "x")}, "--from"},
		{[]string{"--from", base, "--out", filepath.Join(out, "x"), "--dtype", "i32"}, "--dtype"},
		{[]string{"--from", base, "--out", filepath.Join(out, "x"), "stray"}, "stray"},
		{[]string{"--from", filepath.Join(tuned, "step-000002"), "--out", filepath.Join(out, "x")}, "--base"},
		{[]string{"--from", filepath.Join(lora, "step-000002"), "--base", base, "--out", filepath.Join(out, "x")}, "final adapter directory"},
	} {
		if _, err := runCmd(t, runExport, "", bad.args...); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("export %q: %v, want an error containing %q", bad.args, err, bad.want)
		}
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestRFTFullOutputLoads checks that rft --full leaves a Hugging Face
// directory with its source's tokenizer files and a generation config, and
// that eval and export load it.
func TestRFTFullOutputLoads(t *testing.T) {
	dir := t.TempDir()
	model := byteModel(t)
	tokCfg := `{"model_max_length": 256}`
	if err := os.WriteFile(filepath.Join(model, "tokenizer_config.json"), []byte(tokCfg), 0o644); err != nil {
		t.Fatal(err)
	}
	scripted := filepath.Join(dir, "scripted.jsonl")
	if err := sweetrl.SaveTrajectories(scripted, demotask.ScriptedTrajectories(demotask.Tasks(4, 9), 4, 9)); err != nil {
		t.Fatal(err)
	}
	rft := filepath.Join(dir, "rft")
	if out, err := runCmd(t, runRFT, "", "--hf", model, "--threads", "1", "--trajectories", scripted, "--full", "--batch-tokens", "2048", "--lr", "1e-3", "--env", "demo", "--out", rft); err != nil {
		t.Fatalf("rft --full: %v\n%s", err, out)
	}
	for _, f := range []string{"config.json", "model.safetensors", "generation_config.json"} {
		if _, err := os.Stat(filepath.Join(rft, f)); err != nil {
			t.Errorf("rft --full output: %v", err)
		}
	}
	if got, err := os.ReadFile(filepath.Join(rft, "tokenizer_config.json")); err != nil || string(got) != tokCfg {
		t.Errorf("rft --full output's tokenizer_config.json: %q, %v; want the source's", got, err)
	}
	if out, err := runCmd(t, runEval, "", "--hf", rft, "--threads", "1", "--env", "demo", "--demo-tasks", "2", "--max-new", "4"); err != nil || !strings.Contains(out, "(2 tasks, 2 episodes)") {
		t.Errorf("eval of rft --full's output: %v\n%s", err, out)
	}
	if out, err := runCmd(t, runExport, "", "--from", rft, "--out", filepath.Join(dir, "rft.gguf"), "--format", "gguf", "--dtype", "bf16"); err != nil {
		t.Errorf("export of rft --full's output: %v\n%s", err, out)
	}
}
