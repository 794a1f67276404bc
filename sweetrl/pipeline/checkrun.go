package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/internal/jsonerr"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/sweetrl/rl"
	"github.com/turnwise/turnwise/tokenizer"
)

// CheckOptions control CheckRun.
type CheckOptions struct {
	Run       string // a demo run's directory: its supervised model, family and tasks
	Critic    string // the critic's adapter directory ("": the run's critic/)
	Baseline  rl.AdvantageBaseline
	TestTasks int // the run's number of test tasks (the check takes the first Tasks of them)
	Tasks     int
	Backend   engine.Backend
	Log       io.Writer
}

// CheckRun prints the critic check of any critic trained over a demo run's
// supervised model, on the held-out tasks of the run's family.
func CheckRun(ctx context.Context, o CheckOptions) ([]CheckResult, error) {
	raw, err := os.ReadFile(filepath.Join(o.Run, manifestFile))
	if err != nil {
		return nil, fmt.Errorf("%w (a directory written by train demo)", err)
	}
	var mf manifest
	if err := json.Unmarshal(raw, &mf); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(o.Run, manifestFile), jsonerr.Reword(err))
	}
	f, err := LookupFamily(mf.Family)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(o.Run, manifestFile), err)
	}
	m, err := llama.LoadHF(o.Backend, filepath.Join(o.Run, "sft"), engine.F32)
	if err != nil {
		return nil, err
	}
	dir := o.Critic
	if dir == "" {
		dir = filepath.Join(o.Run, "critic")
	}
	ad, err := m.LoadPEFT(dir)
	if err != nil {
		return nil, err
	}
	crit := rl.Critic{Model: m, Adapter: ad, Baseline: o.Baseline}
	if hp := filepath.Join(dir, rl.ValueHeadFile); fileExists(hp) {
		if crit.Head, err = rl.LoadValueHead(m, hp); err != nil {
			return nil, err
		}
	}
	_, test := f.Split(mf.Seed, mf.SFTTasks+mf.RLTasks, o.TestTasks)
	pol := &rl.Sampler{Model: m, Tok: tokenizer.Bytes{}, MaxNew: maxNew, Seed: mf.Seed}
	res, err := CriticCheck(ctx, f, crit, pol, test[:min(len(test), o.Tasks)], batchTokens)
	if err != nil {
		return nil, err
	}
	PrintCheck(o.Log, "held-out "+f.Name, crit, res)
	return res, nil
}

func fileExists(path string) bool { _, err := os.Stat(path); return err == nil }
