package rl

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/optim"
)

func TestValueCritic(t *testing.T) {
	m := newModel(t, 0.3)
	ad, err := m.NewAdapter(llama.LoRAConfig{Rank: 4, Alpha: 8, Targets: llama.AllProjections}, 9)
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewValueHead(m)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(8, 8))
	one := func(int) float32 { return 1 }
	pairs := []PrefPair{
		{Chosen: randSeq(r, 9, one), Rejected: randSeq(r, 7, one)},
		{Chosen: randSeq(r, 6, one), Rejected: randSeq(r, 11, one)},
		{Chosen: randSeq(r, 8, one), Rejected: randSeq(r, 8, one)},
	}
	st, err := TrainValueCritic(m, ad, v, pairs, PrefOptions{Epochs: 40, PairsPerStep: 3, BatchTokens: 30, LR: 1e-2,
		WarmupFrac: 0.03, MinLRRatio: 0.1, AdamW: optim.AdamWConfig{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(st.FirstLoss-math.Log(2)) > 0.05 {
		t.Errorf("first-epoch loss %g: a zero head starts at log 2", st.FirstLoss)
	}
	if st.LastAcc != 1 || st.LastLoss > 0.3 {
		t.Errorf("loss %g → %g, accuracy %g: the preferences were not learned", st.FirstLoss, st.LastLoss, st.LastAcc)
	}
	var seqs []Seq
	for _, p := range pairs {
		seqs = append(seqs, p.Chosen, p.Rejected)
	}
	vals, err := v.Values(m, ad, seqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	for k := range pairs {
		if vals[2*k] <= vals[2*k+1] {
			t.Errorf("pair %d: V(chosen) %g ≤ V(rejected) %g", k, vals[2*k], vals[2*k+1])
		}
	}
	// Save and load give the same values.
	path := filepath.Join(t.TempDir(), ValueHeadFile)
	if err := v.Save(m.Backend(), path); err != nil {
		t.Fatal(err)
	}
	w, err := LoadValueHead(m, path)
	if err != nil {
		t.Fatal(err)
	}
	again, err := w.Values(m, ad, seqs, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for i := range vals {
		if math.Abs(again[i]-vals[i]) > 1e-5 {
			t.Errorf("sequence %d: value %g after loading, %g before", i, again[i], vals[i])
		}
	}
	// A head of another model's width is refused, naming the file.
	other := newModel(t, 0.3)
	other.Config.Dim = 16
	if _, err := LoadValueHead(other, path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("a head of the wrong width gave %v", err)
	}
	os.WriteFile(path, []byte("junk"), 0o644)
	if _, err := LoadValueHead(m, path); err == nil {
		t.Error("a corrupt head file was accepted")
	}
}

// TestCriticLoadHead checks that a critic directory with a value head makes
// the value-head critic, and one without leaves the log-probability critic.
func TestCriticLoadHead(t *testing.T) {
	m := newModel(t, 0.3)
	v, err := NewValueHead(m)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := Critic{Model: m}
	if path, err := c.LoadHead(dir); err != nil || path != "" || c.Head != nil {
		t.Fatalf("a directory without a head: %q, %v, head %v", path, err, c.Head)
	}
	if err := v.Save(m.Backend(), filepath.Join(dir, ValueHeadFile)); err != nil {
		t.Fatal(err)
	}
	if path, err := c.LoadHead(dir); err != nil || path != filepath.Join(dir, ValueHeadFile) || c.Head == nil {
		t.Fatalf("a directory with a head: %q, %v, head %v", path, err, c.Head)
	}
	if err := os.WriteFile(filepath.Join(dir, ValueHeadFile), []byte("not safetensors"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := (&Critic{Model: m}).LoadHead(dir); err == nil || !strings.Contains(err.Error(), ValueHeadFile) {
		t.Errorf("a damaged head gave %v, want an error naming it", err)
	}
}

func TestDropLongAndStats(t *testing.T) {
	seq := func(n int) Seq { return Seq{IDs: make([]int32, n), W: make([]float32, n)} }
	pairs := []PrefPair{{seq(3), seq(4)}, {seq(5), seq(2)}, {seq(2), seq(6)}, {seq(4), seq(4)}}
	kept, dropped := DropLong(pairs, 4)
	if dropped != 2 || len(kept) != 2 || len(kept[0].Rejected.IDs) != 4 || len(kept[1].Chosen.IDs) != 4 {
		t.Errorf("DropLong kept %d (dropped %d)", len(kept), dropped)
	}
	st := PrefStats{Steps: 3, FirstLoss: 0.69, LastLoss: 0.4, FirstAcc: 0.5, LastAcc: 0.75}
	if got, want := st.String(), "loss 0.6900 → 0.4000, pair accuracy 0.500 → 0.750 over 3 steps"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	st.Skipped = 2
	if !strings.Contains(st.String(), "(2 skipped for a non-finite gradient)") {
		t.Errorf("String() = %q does not count the skipped steps", st.String())
	}
}
