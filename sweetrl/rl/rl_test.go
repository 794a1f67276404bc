package rl

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/optim"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/tokenizer"
	"github.com/turnwise/turnwise/trainer"
)

// byteConfig is a small model over the byte tokenizer's 258 ids.
var byteConfig = llama.Config{Dim: 32, Layers: 2, Heads: 2, KVHeads: 1, HeadDim: 16, FFN: 64, Vocab: 258,
	NormEps: 1e-5, RopeTheta: 10000, MaxSeqLen: 512, BOS: tokenizer.BytesBOS, EOS: []int32{tokenizer.BytesEOS}}

func newModel(t *testing.T, std float64) *llama.Model {
	t.Helper()
	m, err := llama.NewRandom(cpu.New(cpu.Options{Threads: 2}), byteConfig, engine.F32, std, 5)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// newAdapter returns an adapter whose B factors are random too, so that
// every factor has a gradient.
func newAdapter(t *testing.T, m *llama.Model) *llama.Adapter {
	t.Helper()
	ad, err := m.NewAdapter(llama.LoRAConfig{Rank: 2, Alpha: 4, Targets: []string{"q", "v", "down"}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	ad.Each(func(name string, w *engine.Tensor) {
		if strings.Contains(name, "lora_B") {
			v := make([]float32, w.Numel())
			for i := range v {
				v[i] = float32(r.NormFloat64() * 0.3)
			}
			engine.SetF32(m.Backend(), w, v)
		}
	})
	return ad
}

func randSeq(r *rand.Rand, n int, w func(i int) float32) Seq {
	s := Seq{IDs: make([]int32, n), W: make([]float32, n)}
	for i := range s.IDs {
		s.IDs[i] = int32(r.IntN(256))
		if i > 0 {
			s.W[i] = w(i)
		}
	}
	return s
}

func TestScoresMatchForward(t *testing.T) {
	m := newModel(t, 0.5)
	r := rand.New(rand.NewPCG(7, 7))
	seqs := []Seq{
		randSeq(r, 9, func(int) float32 { return 1 }),
		randSeq(r, 5, func(i int) float32 { return float32(i%2) * 0.5 }),
		randSeq(r, 12, func(i int) float32 { return 1 / 11.0 }),
	}
	// Every batch size, from one sequence per pass to all in one, gives the
	// same scores as one pass per sequence computed by hand.
	for _, tokens := range []int{1, 14, 1000} {
		got, err := Scores(m, nil, seqs, tokens)
		if err != nil {
			t.Fatal(err)
		}
		for k, s := range seqs {
			bt := llama.Batch{IDs: s.IDs, Targets: append(append([]int32(nil), s.IDs[1:]...), -1), Lens: []int{len(s.IDs)}}
			p, err := m.ForwardTrain(bt, nil)
			if err != nil {
				t.Fatal(err)
			}
			lp := engine.ToF32(m.Backend(), p.LogP)
			p.Release()
			var want float64
			for i := 1; i < len(s.IDs); i++ {
				want += float64(s.W[i]) * float64(lp[i-1])
			}
			if math.Abs(got[k]-want) > 1e-4*math.Max(1, math.Abs(want)) {
				t.Errorf("batch %d tokens, sequence %d: score %g, want %g", tokens, k, got[k], want)
			}
		}
	}
}

// TestPreferenceGradient checks the loss and the gradient TrainPreferences
// steps with against the loss it documents and its central differences, NLL
// term included, over the reply's tokens and over the whole chosen sequence
// (whose unweighted tokens then need log-probabilities too).
func TestPreferenceGradient(t *testing.T) {
	for _, whole := range []bool{false, true} {
		t.Run(fmt.Sprintf("NLLSequence=%v", whole), func(t *testing.T) { testPreferenceGradient(t, whole) })
	}
}

func testPreferenceGradient(t *testing.T, whole bool) {
	m := newModel(t, 0.5)
	ad := newAdapter(t, m)
	r := rand.New(rand.NewPCG(3, 4))
	pairs := []PrefPair{
		{Chosen: randSeq(r, 7, func(i int) float32 { return 1 }), Rejected: randSeq(r, 6, func(int) float32 { return 1 })},
		{Chosen: randSeq(r, 5, func(i int) float32 { return 0.25 * float32(i/3) }), Rejected: randSeq(r, 8, func(i int) float32 { return float32(i % 2) })},
	}
	// A reference that differs from the current weights, so that the
	// margins are not zero.
	ref := []float64{-20, -15, -3, -9}
	o := PrefOptions{Beta: 0.7, NLLCoef: 0.5, NLLSequence: whole}
	loss := func() float64 {
		var seqs []Seq
		for _, p := range pairs {
			seqs = append(seqs, p.Chosen, p.Rejected)
		}
		sc, err := Scores(m, ad, seqs, 1000)
		if err != nil {
			t.Fatal(err)
		}
		var l float64
		for k, p := range pairs {
			x, _, _ := sweetrl.PreferenceLoss(sc[2*k], ref[2*k], sc[2*k+1], ref[2*k+1], o.Beta)
			u := unitWeights(p.Chosen)
			if whole {
				u = allWeights(p.Chosen)
			}
			meanC, err := Scores(m, ad, []Seq{u}, 1000)
			if err != nil {
				t.Fatal(err)
			}
			l += (x - o.NLLCoef*meanC[0]/float64(u.Tokens())) / float64(len(pairs))
		}
		return l
	}
	tp, err := trainer.NewParams(m, ad, ReferenceAdamW(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Free()
	tp.Opt.ZeroGrad()
	ga := tp.AdapterGrads
	ms, err := prefMicroBatch(m, ad, tp, pairs, ref, []int{0, 1}, o, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	l0 := ms.loss
	if want := loss(); math.Abs(l0-want) > 1e-4 {
		t.Fatalf("loss %g, want %g", l0, want)
	}
	b := m.Backend()
	grads := map[string]*engine.Tensor{}
	ga.Each(func(n string, g *engine.Tensor) { grads[n] = g })
	checked := 0
	ad.Each(func(name string, w *engine.Tensor) {
		g := engine.ToF32(b, grads[name])
		for _, i := range []int{0, w.Numel() / 2, w.Numel() - 1} {
			v := engine.ToF32(b, w)
			const h = 1e-2
			orig := v[i]
			v[i] = orig + h
			engine.SetF32(b, w, v)
			lp := loss()
			v[i] = orig - h
			engine.SetF32(b, w, v)
			lm := loss()
			v[i] = orig
			engine.SetF32(b, w, v)
			fd := (lp - lm) / (2 * h)
			if math.Abs(fd-float64(g[i])) > 2e-3+2e-2*math.Abs(fd) {
				t.Errorf("%s[%d]: gradient %g, finite difference %g", name, i, g[i], fd)
			}
			checked++
		}
	})
	if checked == 0 {
		t.Fatal("no parameter was checked")
	}
}

// TestTrainPreferencesLearns trains an adapter on one pair until the
// chosen sequence is preferred.
func TestTrainPreferencesLearns(t *testing.T) {
	m := newModel(t, 0.3)
	ad, err := m.NewAdapter(llama.LoRAConfig{Rank: 4, Alpha: 8, Targets: llama.AllProjections}, 9)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	pairs := []PrefPair{
		{Chosen: randSeq(r, 10, func(int) float32 { return 0.1 }), Rejected: randSeq(r, 10, func(int) float32 { return 0.1 })},
		{Chosen: randSeq(r, 8, func(int) float32 { return 1 }), Rejected: randSeq(r, 9, func(int) float32 { return 1 })},
	}
	st, err := TrainPreferences(m, ad, pairs, PrefOptions{Beta: 0.5, Epochs: 30, PairsPerStep: 2, BatchTokens: 20,
		LR: 1e-2, WarmupFrac: 0.03, MinLRRatio: 0.1, AdamW: optim.AdamWConfig{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}})
	if err != nil {
		t.Fatal(err)
	}
	if st.Steps != 30 || st.Pairs != 2 {
		t.Errorf("%d steps over %d pairs, want 30 over 2", st.Steps, st.Pairs)
	}
	if math.Abs(st.FirstLoss-math.Log(2)) > 1e-3 {
		t.Errorf("first loss %g: a fresh adapter equals the reference, so it must start at log 2", st.FirstLoss)
	}
	if !(st.LastLoss < 0.5*st.FirstLoss) || st.LastAcc != 1 {
		t.Errorf("loss %g → %g, accuracy %g: the preference was not learned", st.FirstLoss, st.LastLoss, st.LastAcc)
	}
	if _, err := TrainPreferences(m, ad, nil, PrefOptions{}); err == nil {
		t.Error("no pairs: want an error")
	}
}

func TestSummarize(t *testing.T) {
	// Two tasks, two seeds each: per-task pass 0.75 and 0.25, success 0.5
	// and 0.
	task := []int{7, 7, 3, 3}
	scores := []sweetrl.Score{
		{Passed: 2, Total: 2, Reward: 1}, {Passed: 1, Total: 2, Reward: 0.5},
		{Passed: 0, Total: 2, Reward: 0}, {Passed: 1, Total: 2, Reward: 0.5},
	}
	s := Summarize(task, scores)
	if s.Tasks != 2 || s.Episodes != 4 || s.PassRate != 0.5 || s.Success != 0.25 {
		t.Fatalf("summary %+v", s)
	}
	// sd of {0.75, 0.25} is √0.125; the standard error divides by √2.
	if want := 1.96 * math.Sqrt(0.125) / math.Sqrt(2); math.Abs(s.PassCI-want) > 1e-12 {
		t.Errorf("pass CI %g, want %g", s.PassCI, want)
	}
	if want := 1.96 * math.Sqrt(0.125) / math.Sqrt(2); math.Abs(s.SuccessCI-want) > 1e-12 {
		t.Errorf("success CI %g, want %g", s.SuccessCI, want)
	}
	if one := Summarize([]int{1}, scores[:1]); one.PassCI != 0 || one.PassRate != 1 {
		t.Errorf("one task: %+v", one)
	}
}

// echoAgent asks once, then answers with the human's last line.
type echoAgent struct{ calls int }

func (a *echoAgent) ActBatch(_ context.Context, convs [][]tokenizer.Message) ([]string, []string, error) {
	a.calls++
	in, out := make([]string, len(convs)), make([]string, len(convs))
	for i, c := range convs {
		in[i] = c[len(c)-1].Content
		if c[len(c)-1].Content == "one" || c[len(c)-1].Content == "two" {
			out[i] = "OUTPUT: what exactly?"
		} else {
			out[i] = "I WANT TO ANSWER: " + c[len(c)-1].Content
		}
	}
	return in, out, nil
}

func TestRunEpisodes(t *testing.T) {
	tasks := []sweetrl.Task{
		{ProblemDescription: "one", HiddenInformation: "def f(): return 1"},
		{ProblemDescription: "two", HiddenInformation: "def f(): return 2"},
	}
	a := &echoAgent{}
	trajs, err := RunEpisodes(context.Background(), tasks, a, sweetrl.ScriptedSimulator{}, RolloutOptions{Protocol: sweetrl.ColBenchProtocol(), SimWorkers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if a.calls != 2 {
		t.Errorf("%d agent batches, want 2 (both episodes advance together)", a.calls)
	}
	for i, tr := range trajs {
		want := "Hint: " + tasks[i].HiddenInformation
		if tr.Answer != want || len(tr.DialogueHistory) != 4 || tr.DialogueHistory[1].Content != " what exactly?" {
			t.Errorf("episode %d: answer %q, history %+v", i, tr.Answer, tr.DialogueHistory)
		}
	}
}

func TestCriticAndPolicySeqs(t *testing.T) {
	tok := tokenizer.Bytes{}
	tr := sweetrl.Trajectory{
		Task: sweetrl.Task{ProblemDescription: "p?", GroundTruth: "x=1"},
		DialogueHistory: []sweetrl.Turn{
			{Role: sweetrl.RoleUser, Content: "p?"},
			{Role: sweetrl.RoleAssistant, Content: "x?", Output: "think OUTPUT:x?"},
			{Role: sweetrl.RoleUser, Content: "x=1"},
			{Role: sweetrl.RoleAssistant, Content: "ok", Output: "hm OUTPUT:ok"},
		},
	}
	prefix := "In light that the final answer is: x=1."
	tests := []struct {
		kind CriticScore
		// weights of the two agent turns' tokens ("x?"+EOS, 4 tokens of
		// the raw last turn "hm OUTPUT:ok"... counted below)
		perTurn bool
	}{{ScoreTurn, true}, {ScoreTrajectory, false}}
	for _, tc := range tests {
		cs, err := CriticSeq(tok, "sys", tr, tc.kind)
		if err != nil {
			t.Fatal(err)
		}
		text, err := tok.Decode(cs.IDs)
		if err != nil {
			t.Fatal(err)
		}
		// No BOS before the prefix; the system prompt; earlier agent turns
		// as the human saw them, the last one raw.
		if want := prefix + "s>sysu>p?a>x?u>x=1a>hm OUTPUT:ok"; text != want || cs.IDs[0] == tokenizer.BytesBOS {
			t.Fatalf("%s: critic text %q, want %q", tc.kind, text, want)
		}
		first, last := len("x?")+1, len("hm OUTPUT:ok")+1 // each turn's body and its end token
		var weighted []int32
		for i, w := range cs.W {
			if w == 0 {
				continue
			}
			want := 1 / float64(first+last)
			if tc.perTurn && len(weighted) < first {
				want = 1 / float64(first)
			} else if tc.perTurn {
				want = 1 / float64(last)
			}
			if math.Abs(float64(w)-want) > 1e-7 {
				t.Errorf("%s: weight %g at %d, want %g", tc.kind, w, i, want)
			}
			weighted = append(weighted, cs.IDs[i])
		}
		if got, _ := tok.Decode(weighted); got != "x?"+"hm OUTPUT:ok" || len(weighted) != first+last {
			t.Errorf("%s: weighted tokens %q (%d)", tc.kind, got, len(weighted))
		}
	}
	tr.DialogueHistory[1].Output = ""
	tr.DialogueHistory[3].Output = ""
	ps, err := PolicySeq(tok, "sys", tr)
	if err != nil {
		t.Fatal(err)
	}
	if text, _ := tok.Decode(ps.IDs); text != "s>sysu>p?a>x?u>x=1a>ok" || ps.Tokens() != 6 || ps.W[len(ps.W)-1] != 1 {
		t.Errorf("policy sequence %q with %d weighted tokens", text, ps.Tokens())
	}
	// A turn's sequence weighs that turn alone.
	msgs := withSystem("sys", sweetrl.TurnsToMessages(tr.DialogueHistory))
	ls, err := lastTurnSeq(tok, nil, msgs, sum)
	if err != nil {
		t.Fatal(err)
	}
	if ls.Tokens() != 3 || ls.W[len(ls.W)-3] != 1 || ls.W[len(ls.W)-4] != 0 {
		t.Errorf("last-turn weights %v", ls.W)
	}
}

func fmtIDs(ids []int32) []byte {
	var b []byte
	for _, id := range ids {
		b = append(b, byte(id), byte(id>>8))
	}
	return b
}

func TestActorPairsAndSimulator(t *testing.T) {
	m := newModel(t, 0.5)
	tok := tokenizer.Bytes{}
	pol := &Sampler{Model: m, Tok: tok, Sample: engine.SampleParams{Temperature: 1, TopP: 1}, MaxNew: 6, Seed: 1}
	tasks := []sweetrl.Task{{ProblemDescription: "p?", HiddenInformation: "x", GroundTruth: "x=1"}, {ProblemDescription: "q?", HiddenInformation: "y", GroundTruth: "y=2"}}
	sim := &ModelSimulator{Model: m, Tok: tok, MaxNew: 5}
	proto := sweetrl.Protocol{MaxTurns: 3, ReplyLimit: 4}
	trajs, err := RunEpisodes(context.Background(), tasks, pol, sim, RolloutOptions{Protocol: proto})
	if err != nil {
		t.Fatal(err)
	}
	for i, tr := range trajs {
		n := 0
		for _, h := range tr.DialogueHistory {
			if h.Role == sweetrl.RoleAssistant {
				n++
				if !strings.HasPrefix(h.Input, "<bos>u>") || !strings.HasSuffix(h.Input, "a>") {
					t.Errorf("episode %d: input %q is not the rendered prompt", i, h.Input)
				}
			} else if len([]rune(h.Content)) > 4 && h.Content != tasks[i].ProblemDescription {
				t.Errorf("episode %d: simulator reply %q longer than the limit", i, h.Content)
			}
		}
		if n == 0 || n > 3 {
			t.Errorf("episode %d: %d agent turns", i, n)
		}
	}
	pairs, st, err := ActorPairs(trajs, pol, Critic{Model: m, Baseline: BaselinePolicy}, ActorOptions{Protocol: proto, Candidates: 4, PairsPerTurn: 2, DataFraction: 1, BatchTokens: 256, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if st.Candidates != 4*st.Turns || st.Pairs+st.TiedPairs != 2*st.Turns || len(pairs) != st.Pairs {
		t.Errorf("stats %+v with %d pairs", st, len(pairs))
	}
	for _, p := range pairs {
		if p.Chosen.Tokens() == 0 || p.Rejected.Tokens() == 0 {
			t.Errorf("a pair side weighs no token")
		}
	}
}
