package pipeline

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"
)

// TestTargets checks that Config.Targets (train demo --lora-targets)
// chooses the projections of every adapter the demo trains and saves.
func TestTargets(t *testing.T) {
	c := tiny(t, "keys", t.TempDir())
	c.From, c.K, c.Targets = t.TempDir(), 4, []string{"q", "v"}
	fixture(t, c) // scripted rollouts, which have pairs for every method
	if _, err := Run(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	paths, err := filepath.Glob(filepath.Join(c.OutDir, "*", "adapter_config.json"))
	if err != nil || len(paths) < 3 {
		t.Fatalf("%d adapters saved (%v), want the critic's and the policies'", len(paths), err)
	}
	for _, p := range paths {
		var pc struct {
			TargetModules []string `json:"target_modules"`
		}
		if err := json.Unmarshal(readFile(t, p), &pc); err != nil || !slices.Equal(pc.TargetModules, []string{"q_proj", "v_proj"}) {
			t.Errorf("%s: target_modules %v (%v), want [q_proj v_proj]", p, pc.TargetModules, err)
		}
	}
}
