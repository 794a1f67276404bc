package pipeline

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/sweetrl/rl"
)

// torchPython returns a Python 3 that imports PyTorch, or skips the test.
func torchPython(t *testing.T) string {
	t.Helper()
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		path, err := exec.LookPath(py)
		if err == nil && exec.Command(path, "-c", "import torch").Run() == nil {
			return path
		}
	}
	t.Skip("no python3 that imports torch: the independent check of the arithmetic (scripts/sweetrl_check.py) did not run; scripts/setup.sh installs Debian's python3-torch")
	return ""
}

// TestArithCrossCheck makes a miniature demo run (and checks the values it
// writes, with or without Python), with adapters trained at
// a learning rate high enough that their log-ratios are far from zero, and
// has scripts/sweetrl_check.py recompute in PyTorch, independently, the
// critic's scores, per-turn log-ratios, losses and gradient, its
// advantages, and the actor's losses and gradient, from the run's files.
// The script must agree to 1e-5, and must refuse the run once one of the
// values it checks is moved by 1e-4 of itself.
func TestArithCrossCheck(t *testing.T) {
	script, err := filepath.Abs("../../scripts/sweetrl_check.py")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		family   string
		score    rl.CriticScore
		baseline rl.AdvantageBaseline
		nllSeq   bool
	}{
		{"paper's score", "tally", rl.ScoreTurn, rl.BaselineReference, true},
		{"released code's score", "keys", rl.ScoreTrajectory, rl.BaselinePolicy, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tiny(t, tc.family, t.TempDir())
			c.From, c.K, c.RLTasks, c.ValTasks, c.CriticEpochs = t.TempDir(), 4, 8, 3, 2
			c.Score, c.Baseline, c.NLLSequence, c.CheckValues = tc.score, tc.baseline, tc.nllSeq, 3
			c.LR = LRs{Critic: 3e-2, Actor: 1e-2, DPO: 1e-4, RFT: 5e-4}
			fixtureWith(t, c, 0.3)
			var log strings.Builder
			c.Log = &log
			if _, err := Run(context.Background(), c); err != nil {
				t.Fatalf("%v\n%s", err, log.String())
			}
			path := filepath.Join(c.OutDir, ArithFile)
			var v ArithValues
			if err := json.Unmarshal(readFile(t, path), &v); err != nil {
				t.Fatal(err)
			}
			if v.Critic == nil || v.Actor == nil || len(v.Advantages) == 0 || len(v.Critic.Pairs) != 3 || len(v.Actor.Pairs) != 3 || v.Critic.Score != tc.score.String() {
				t.Fatalf("%s: critic %v, actor %v, %d advantages", path, v.Critic != nil, v.Actor != nil, len(v.Advantages))
			}
			// The adapters moved: a check of log-ratios near 0 would say little.
			var critic, actor float64
			for _, p := range v.Critic.Pairs {
				for _, r := range append(p.Chosen.Turns, p.Rejected.Turns...) {
					critic = math.Max(critic, math.Abs(r))
				}
			}
			for _, p := range v.Actor.Pairs {
				actor = math.Max(actor, math.Abs(p.Chosen.Score-p.Chosen.Ref))
			}
			t.Logf("largest |log-ratio|: critic's per-turn %.3g, actor's chosen %.3g", critic, actor)
			if critic < 1e-2 || actor < 1e-2 {
				t.Errorf("largest |log-ratio|: critic %.2g, actor %.2g; want the adapters to have moved", critic, actor)
			}

			// The training step's loss is the mean of the pairs' losses,
			// computed apart (the NLL term from a forward of its own).
			for _, a := range []*ArithPrefs{v.Critic, v.Actor} {
				var mean float64
				for _, p := range a.Pairs {
					mean += p.Loss / float64(len(a.Pairs))
				}
				if math.Abs(a.StepLoss-mean) > 1e-5*math.Abs(mean) {
					t.Errorf("%s: step loss %.8g, mean of the pairs' losses %.8g", a.Adapter, a.StepLoss, mean)
				}
			}

			py := torchPython(t) // the run and its values are checked above without it
			out, err := exec.Command(py, script, c.OutDir).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "every value agrees to 1e-05") {
				t.Fatalf("sweetrl_check.py: %v\n%s", err, out)
			}
			t.Logf("%s", out)
			for _, kind := range []string{"score", "turn log-ratio", "loss", "step loss", "gradient", "gradient matrix", "advantage"} {
				if !strings.Contains(string(out), "\n  "+kind+" ") {
					t.Errorf("the script checked no %s", kind)
				}
			}

			// A value moved by 1e-4 of itself is refused.
			v.Actor.Pairs[1].Loss *= 1 + 1e-4
			js, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, js, 0o644); err != nil {
				t.Fatal(err)
			}
			out, err = exec.Command(py, script, c.OutDir).CombinedOutput()
			if err == nil || !strings.Contains(string(out), "loss: actor pair 1") {
				t.Errorf("a perturbed actor loss: %v\n%s", err, out)
			}
		})
	}
}
