package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
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
// greedy continuation from every one of them.
func TestExportLoadsBack(t *testing.T) {
	full := t.TempDir()
	if out, err := runCmd(t, runSFT, "", "--run-dir", full, "--steps", "2", "--batch-tokens", "256", "--prompt", "", "--threads", "1"); err != nil {
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
	if out, err := runCmd(t, runSFT, "", "--run-dir", lora, "--hf", base, "--lora-rank", "2", "--lr", "0.05", "--steps", "2", "--batch-tokens", "256", "--prompt", "", "--threads", "1"); err != nil {
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
	} {
		if msg, err := runCmd(t, runExport, "", tc.args...); err != nil {
			t.Fatalf("%s: export: %v\n%s", tc.name, err, msg)
		}
		if got := greedyIDs(t, tc.load...); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: generate from the export gives %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, bad := range [][]string{
		{"--out", filepath.Join(out, "x")},
		{"--from", base, "--out", filepath.Join(out, "x"), "--dtype", "i32"},
		{"--from", base, "--out", filepath.Join(out, "x"), "stray"},
	} {
		if _, err := runCmd(t, runExport, "", bad...); err == nil {
			t.Errorf("export %q succeeded", bad)
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
