package rl

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/commtest"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/tokenizer"
)

// TestActorPairsAcrossRanks: ActorPairs split across 2 and 3 ranks
// (goroutines, each with its own copy of the model, over commtest.Local)
// gives every rank the pairs and statistics one process gives with the same
// seed — the same candidates, advantages and draws — with a number of turns
// the ranks do not divide evenly.
func TestActorPairsAcrossRanks(t *testing.T) {
	tok := tokenizer.Bytes{}
	proto := sweetrl.Protocol{MaxTurns: 3, ReplyLimit: 4}
	var tasks []sweetrl.Task
	for i := range 3 {
		tasks = append(tasks, sweetrl.Task{ProblemDescription: fmt.Sprintf("p%d?", i), HiddenInformation: "x", GroundTruth: fmt.Sprintf("x=%d", i)})
	}
	m := newModel(t, 0.5)
	play := &Sampler{Model: m, Tok: tok, Sample: engine.SampleParams{Temperature: 1, TopP: 1}, MaxNew: 6, Seed: 1}
	trajs, err := RunEpisodes(context.Background(), tasks, play, &ModelSimulator{Model: m, Tok: tok, MaxNew: 5}, RolloutOptions{Protocol: proto})
	if err != nil {
		t.Fatal(err)
	}
	opts := ActorOptions{Protocol: proto, Candidates: 4, PairsPerTurn: 2, DataFraction: 0.8, BatchTokens: 256, Seed: 3}
	sampler := func(m *llama.Model) *Sampler {
		return &Sampler{Model: m, Tok: tok, Sample: engine.SampleParams{Temperature: 1, TopP: 1}, MaxNew: 6, Seed: 9}
	}
	want, wantSt, err := ActorPairs(trajs, sampler(m), Critic{Model: m, Baseline: BaselinePolicy}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if wantSt.Turns < 5 || wantSt.Turns%2 == 0 || wantSt.Turns%3 == 0 || len(want) == 0 {
		t.Fatalf("one process: %+v, %d pairs; the test wants at least 5 turns that neither 2 nor 3 ranks divide, and pairs", wantSt, len(want))
	}
	for _, size := range []int{2, 3} {
		models := make([]*llama.Model, size)
		bs := make([]engine.Backend, size)
		for r := range size {
			models[r] = newModel(t, 0.5)
			bs[r] = models[r].Backend()
		}
		comms := commtest.Local(bs)
		got := make([][]PrefPair, size)
		gotSt := make([]ActorStats, size)
		errs := make([]error, size)
		var wg sync.WaitGroup
		for r := range size {
			wg.Add(1)
			go func() {
				defer wg.Done()
				o := opts
				o.Comm, o.Backend = comms[r], bs[r]
				got[r], gotSt[r], errs[r] = ActorPairs(trajs, sampler(models[r]), Critic{Model: models[r], Baseline: BaselinePolicy}, o)
			}()
		}
		wg.Wait()
		for r := range size {
			if errs[r] != nil {
				t.Fatalf("%d ranks, rank %d: %v", size, r, errs[r])
			}
			if gotSt[r] != wantSt {
				t.Errorf("%d ranks, rank %d: stats %+v, one process %+v", size, r, gotSt[r], wantSt)
			}
			if len(got[r]) != len(want) {
				t.Fatalf("%d ranks, rank %d: %d pairs, one process %d", size, r, len(got[r]), len(want))
			}
			for i, p := range want {
				q := got[r][i]
				if !sameSeq(q.Chosen, p.Chosen) || !sameSeq(q.Rejected, p.Rejected) {
					t.Errorf("%d ranks, rank %d: pair %d differs from one process's", size, r, i)
				}
			}
		}
	}
}

// sameSeq reports whether two sequences hold the same tokens and weights.
func sameSeq(a, b Seq) bool { return slices.Equal(a.IDs, b.IDs) && slices.Equal(a.W, b.W) }
