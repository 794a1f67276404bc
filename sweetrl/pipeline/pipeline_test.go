package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/sweetrl/rl"
	"github.com/turnwise/turnwise/tokenizer"
)

var tinyConfig = llama.Config{Dim: 32, Layers: 2, Heads: 2, KVHeads: 1, HeadDim: 16, FFN: 64, Vocab: 258,
	NormEps: 1e-5, RopeTheta: 10000, MaxSeqLen: 256, BOS: tokenizer.BytesBOS, EOS: []int32{tokenizer.BytesEOS}}

// tiny is a miniature demo configuration.
func tiny(t *testing.T, family, out string) Config {
	t.Helper()
	return Config{Family: family, Model: tinyConfig, Backend: cpu.New(cpu.Options{Threads: 2}), OutDir: out, Seed: 3,
		SFTTasks: 30, SFTSteps: 3, RLTasks: 6, ValTasks: 2, K: 2, TestTasks: 3, EvalSeeds: 1, ValSeeds: 1, CheckTasks: 2, Rank: 2,
		Candidates: 2, DataFraction: 0.5, CriticEpochs: 2, LR: DefaultLRs, NLLSequence: true}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFirstStagesBitIdentical runs the first stages twice: the supervised
// model and the rollouts are the same bytes, and so is the table.
func TestFirstStagesBitIdentical(t *testing.T) {
	var res [2]*Result
	dirs := [2]string{t.TempDir(), t.TempDir()}
	for i, d := range dirs {
		var err error
		if res[i], err = Run(context.Background(), tiny(t, "keys", d)); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"sft/model.safetensors", "rollouts.jsonl.zst", "stages.json", "results.json"} {
		if !bytes.Equal(readFile(t, filepath.Join(dirs[0], f)), readFile(t, filepath.Join(dirs[1], f))) {
			t.Errorf("%s differs between two runs of the same seed", f)
		}
	}
}

// TestFromReuse reuses a run's supervised model and rollouts: nothing is
// retrained, the new directory gets the same stages and the same results,
// and a run that asks for other stages is refused.
func TestFromReuse(t *testing.T) {
	first := t.TempDir()
	if _, err := Run(context.Background(), tiny(t, "keys", first)); err != nil {
		t.Fatal(err)
	}
	second := t.TempDir()
	c := tiny(t, "keys", second)
	c.From = first
	var log strings.Builder
	c.Log = &log
	if _, err := Run(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "reusing "+first) || strings.Contains(log.String(), "supervised start") || strings.Contains(log.String(), "rollouts: 12 episodes (") {
		t.Errorf("the run did not reuse the stages:\n%s", log.String())
	}
	for _, f := range []string{"sft/model.safetensors", "rollouts.jsonl.zst", "stages.json"} {
		if !bytes.Equal(readFile(t, filepath.Join(first, f)), readFile(t, filepath.Join(second, f))) {
			t.Errorf("%s is not the reused one", f)
		}
	}
	if a, b := readFile(t, filepath.Join(first, "results.json")), readFile(t, filepath.Join(second, "results.json")); !bytes.Equal(a, b) {
		t.Errorf("a run reusing the stages printed another table:\n%s\nagainst\n%s", b, a)
	}
	c.Seed++
	if _, err := Run(context.Background(), c); err == nil || !strings.Contains(err.Error(), "made with") {
		t.Errorf("reusing stages of another seed: %v", err)
	}
	c.From = t.TempDir()
	if _, err := Run(context.Background(), c); err == nil || !strings.Contains(err.Error(), "stages.json") {
		t.Errorf("reusing a directory with no stages: %v", err)
	}
}

// TestStagesLeaveAFreshSampler checks that what follows the first stages
// does not depend on whether they were made or reused: the policy's sampler
// after them draws the same candidates either way (the rollouts' draws must
// not advance it).
func TestStagesLeaveAFreshSampler(t *testing.T) {
	ctx := context.Background()
	first := t.TempDir()
	var pols [2]*rl.Sampler
	for k, from := range []string{"", first} {
		c := tiny(t, "keys", first)
		if from != "" {
			c.OutDir, c.From = t.TempDir(), from
		}
		r, _ := prepared(t, ctx, c)
		pols[k] = r.pol
	}
	msgs := []tokenizer.Message{{Role: sweetrl.RoleUser, Content: "Need digits for b d g."}}
	var cands [2][]string
	for k, p := range pols {
		var err error
		if cands[k], err = p.Candidates(msgs, 8); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(cands[0], cands[1]) {
		t.Errorf("after made stages the sampler drew %q first, after reused ones %q", cands[0][0], cands[1][0])
	}
}

// prepared runs the first stages of c (made, or reused with c.From) and
// returns the runner after them and the rollouts they gave.
func prepared(t *testing.T, ctx context.Context, c Config) (*runner, []sweetrl.Trajectory) {
	t.Helper()
	f, err := LookupFamily(c.Family)
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{c: c, f: f, ctx: ctx, tok: tokenizer.Bytes{}, start: time.Now()}
	r.c.Log = io.Discard
	train, _ := f.Split(c.Seed, c.SFTTasks+c.RLTasks, c.TestTasks)
	trajs, err := r.prepare(train)
	if err != nil {
		t.Fatal(err)
	}
	return r, trajs
}

// TestStagesGiveTheSameRollouts checks that the later stages get the same
// rollouts whether the first stages were made or reused: the made ones are
// those of the file, whose replies hold U+FFFD for each byte that the
// sampled reply had and that is not UTF-8 (the barely trained model of the
// tiny configuration samples such bytes).
func TestStagesGiveTheSameRollouts(t *testing.T) {
	ctx := context.Background()
	first := t.TempDir()
	_, made := prepared(t, ctx, tiny(t, "keys", first))
	c := tiny(t, "keys", t.TempDir())
	c.From = first
	_, reused := prepared(t, ctx, c)
	replaced := 0
	for _, tr := range reused {
		for _, tu := range tr.DialogueHistory {
			replaced += strings.Count(tu.Output, "\uFFFD")
		}
	}
	if replaced == 0 {
		t.Fatal("no reply of the rollouts held a byte that is not UTF-8: the test checks nothing")
	}
	if len(made) != len(reused) {
		t.Fatalf("made %d rollouts, reused %d", len(made), len(reused))
	}
	for i := range made {
		if reflect.DeepEqual(made[i], reused[i]) {
			continue
		}
		a, b := made[i].DialogueHistory, reused[i].DialogueHistory
		for j := range min(len(a), len(b)) {
			if !reflect.DeepEqual(a[j], b[j]) {
				t.Fatalf("rollout %d, turn %d: the made stages gave output %q, the reused ones %q", i, j, a[j].Output, b[j].Output)
			}
		}
		t.Fatalf("rollout %d differs between made and reused stages:\n%+v\nagainst\n%+v", i, made[i], reused[i])
	}
}

// fixture writes a run directory whose "rollouts" are the family's
// scripted dialogues (which hold successes, so every method has data) and
// whose supervised model is a random one.
func fixture(t *testing.T, c Config) {
	t.Helper()
	fixtureWith(t, c, 0.02)
}

// fixtureWith is fixture with a random model whose weights have standard
// deviation std.
func fixtureWith(t *testing.T, c Config, std float64) {
	t.Helper()
	f, err := LookupFamily(c.Family)
	if err != nil {
		t.Fatal(err)
	}
	m, err := llama.NewRandom(c.Backend, c.Model, engine.F32, std, c.Seed)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SaveHF(filepath.Join(c.From, "sft")); err != nil {
		t.Fatal(err)
	}
	train, _ := f.Split(c.Seed, c.SFTTasks+c.RLTasks, c.TestTasks)
	trajs := f.Scripted(train[c.SFTTasks:], c.K, c.Seed)
	if err := sweetrl.SaveTrajectories(filepath.Join(c.From, "rollouts.jsonl.zst"), trajs); err != nil {
		t.Fatal(err)
	}
	r := &runner{c: c, f: f}
	r.c.OutDir = c.From
	if err := r.writeManifest(r.manifest()); err != nil {
		t.Fatal(err)
	}
}

// TestEveryMethod runs every method and ablation, with learning-rate
// selection, on both families: each row has a result, each critic a
// validation report and a check, and each choice is printed.
func TestEveryMethod(t *testing.T) {
	for _, family := range Families {
		t.Run(family, func(t *testing.T) {
			c := tiny(t, family, t.TempDir())
			// 6 episodes per task: the validation split of every family holds a pair.
			c.From, c.K, c.RLTasks, c.ValTasks, c.Ablations, c.Select = t.TempDir(), 6, 8, 3, true, true
			fixture(t, c)
			var log strings.Builder
			c.Log = &log
			res, err := Run(context.Background(), c)
			if err != nil {
				t.Fatalf("%v\n%s", err, log.String())
			}
			want := []string{"SFT start", "rejection fine-tuning", "multi-turn DPO", "SWEET-RL (paper's score)",
				"SWEET-RL (paper's score, policy baseline)", "SWEET-RL (released code's score, policy baseline)", "SWEET-RL (value-head critic)"}
			if len(res.Rows) != len(want) {
				t.Fatalf("%d rows, want %d:\n%s", len(res.Rows), len(want), log.String())
			}
			for i, rw := range res.Rows {
				if rw.Method != want[i] || rw.Summary == nil || rw.Health == nil || rw.Summary.Episodes != c.TestTasks {
					t.Errorf("row %d: %+v, want %q evaluated on %d episodes", i, rw, want[i], c.TestTasks)
				}
				if i > 0 && rw.LR == 0 {
					t.Errorf("%s: no learning rate recorded", rw.Method)
				}
			}
			if len(res.Critics) != 3 {
				t.Errorf("%d critic reports, want 3", len(res.Critics))
			}
			nChecks := map[string]int{"keys": 3, "budget": 4, "tally": 4}[family]
			wantBaseline := []string{"reference", "policy", ""} // the paper's, the released code's, the value head
			for i, cr := range res.Critics {
				if cr.Val.Pairs == 0 || len(cr.Check) != nChecks || cr.Epoch < 1 || cr.Epoch > c.CriticEpochs || cr.Baseline != wantBaseline[i] {
					t.Errorf("critic %s: %+v, want the check with baseline %q", cr.Name, cr, wantBaseline[i])
				}
			}
			// a choice per method and critic: rft, mtdpo, 3 critics, 4 actors
			if len(res.Choices) != 9 {
				t.Errorf("%d choices printed, want 9: %v", len(res.Choices), res.Choices)
			}
			for _, lr := range Grid()["critic"] {
				if !strings.Contains(log.String(), fmt.Sprintf("critic lr %.0e epoch", lr)) {
					t.Errorf("the grid's critic lr %g was not tried", lr)
				}
			}
			var back Result
			if err := json.Unmarshal(readFile(t, filepath.Join(c.OutDir, "results.json")), &back); err != nil || len(back.Rows) != len(want) {
				t.Errorf("results.json: %v, %d rows", err, len(back.Rows))
			}
		})
	}
}

// TestChecks checks the critic check's decisions on every family: the
// better reply of an answer decision scores 1 with the family's scorer,
// the wrong answer 0, and the state before it holds every key's digit.
func TestChecks(t *testing.T) {
	for _, family := range Families {
		f, _ := LookupFamily(family)
		_, test := f.Split(2, 10, 5)
		for _, task := range test {
			cases, err := f.Checks(context.Background(), task)
			if err != nil {
				t.Fatal(err)
			}
			for _, cc := range cases {
				if cc.Better == cc.Worse || len(cc.Before) == 0 || cc.Before[len(cc.Before)-1].Role != sweetrl.RoleUser {
					t.Errorf("%s: %+v", family, cc)
				}
				if !strings.HasPrefix(cc.Better, sweetrl.AnswerMarker) {
					continue
				}
				// The answers as the episode gives them (a tally answer is
				// the keys the replies revealed).
				answer := func(reply string) string {
					if f.Protocol.Answer != nil {
						return f.Protocol.Answer(append(slices.Clone(cc.Before), sweetrl.Turn{Role: sweetrl.RoleAssistant, Content: reply}))
					}
					a, _ := sweetrl.Answer(reply)
					return a
				}
				sc, err := f.Scorer.Score(context.Background(), []sweetrl.Task{task, task}, []string{answer(cc.Better), answer(cc.Worse)})
				if err != nil {
					t.Fatal(err)
				}
				if sc[0].Reward != 1 || (strings.HasPrefix(cc.Worse, sweetrl.AnswerMarker) && sc[1].Reward != 0) {
					t.Errorf("%s %q: right answer %v, wrong answer %v", family, cc.Name, sc[0].Reward, sc[1].Reward)
				}
				var seen string
				for _, h := range cc.Before {
					seen += h.Content + " "
				}
				for _, pair := range strings.Fields(task.GroundTruth) {
					if !strings.Contains(seen, pair) {
						t.Errorf("%s %q: %s not revealed before answering", family, cc.Name, pair)
					}
				}
			}
		}
	}
	m, err := llama.NewRandom(cpu.New(cpu.Options{Threads: 1}), tinyConfig, engine.F32, 0.02, 1)
	if err != nil {
		t.Fatal(err)
	}
	ad, err := m.NewAdapter(llama.LoRAEvery(2), 1)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := LookupFamily("budget")
	_, test := f.Split(2, 10, 3)
	pol := &rl.Sampler{Model: m, Tok: tokenizer.Bytes{}}
	res, err := CriticCheck(context.Background(), f, rl.Critic{Model: m, Adapter: ad}, pol, test, 1024)
	if err != nil {
		t.Fatal(err)
	}
	// An untrained LoRA critic equals its reference: every advantage is 0
	// and no decision is won.
	for _, r := range res {
		if r.Tasks != 3 || r.Wins != 0 || r.MeanBetter != 0 || r.MeanWorse != 0 {
			t.Errorf("%+v", r)
		}
	}
}

func TestEpisodeHealth(t *testing.T) {
	turn := func(out string) sweetrl.Turn {
		return sweetrl.Turn{Role: sweetrl.RoleAssistant, Content: sweetrl.VisibleReply(out), Output: out}
	}
	user := sweetrl.Turn{Role: sweetrl.RoleUser, Content: "b=4"}
	eps := []sweetrl.Trajectory{
		{DialogueHistory: []sweetrl.Turn{user, turn("b?"), user, turn(sweetrl.AnswerMarker + " b=4")}},
		{DialogueHistory: []sweetrl.Turn{user, turn("\xff\xfe"), user, turn("e8")}},
		{DialogueHistory: []sweetrl.Turn{user, turn("b?\x01")}},
		{DialogueHistory: []sweetrl.Turn{user, turn("line\n\tnext?")}},
	}
	h := EpisodeHealth(eps)
	if h.Degenerate != 0.5 || h.NoAnswer != 0.75 || h.MeanTurns != 1.5 {
		t.Errorf("health %+v, want degenerate 0.5, no answer 0.75, 1.5 turns", h)
	}
}

// TestMachine checks that a run names what its numbers depend on beyond the
// seed: the backend, its threads and OpenBLAS's core.
func TestMachine(t *testing.T) {
	got := Machine(cpu.New(cpu.Options{Threads: 3}))
	core, ok := strings.CutPrefix(got, "cpu, 3 threads, OpenBLAS core ")
	if !ok || core == "" {
		t.Errorf("Machine = %q, want \"cpu, 3 threads, OpenBLAS core NAME\"", got)
	}
}

// TestSelectCritic chooses the critic's learning rate from the grid and
// leaves every policy at its configured one.
func TestSelectCritic(t *testing.T) {
	c := tiny(t, "keys", t.TempDir())
	c.From, c.K, c.RLTasks, c.ValTasks, c.SelectCritic = t.TempDir(), 4, 8, 3, true
	fixture(t, c)
	var log strings.Builder
	c.Log = &log
	res, err := Run(context.Background(), c)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	for _, lr := range Grid()["critic"] {
		if !strings.Contains(log.String(), fmt.Sprintf("critic lr %.0e epoch 1:", lr)) {
			t.Errorf("the grid's critic lr %g was not tried", lr)
		}
	}
	want := map[string]float64{"rejection fine-tuning": c.LR.RFT, "multi-turn DPO": c.LR.DPO, "SWEET-RL (paper's score)": c.LR.Actor}
	for _, rw := range res.Rows[1:] {
		if rw.LR != want[rw.Method] {
			t.Errorf("%s: lr %g, want the configured %g", rw.Method, rw.LR, want[rw.Method])
		}
	}
	if len(res.Choices) != 4 || !strings.Contains(res.Choices[2], "validation pair accuracy") || strings.Contains(res.Choices[2], "configured") {
		t.Errorf("choices %q: want the critic's chosen on validation pair accuracy", res.Choices)
	}
}

// TestCriticSelectBetter orders critics by each criterion.
func TestCriticSelectBetter(t *testing.T) {
	check := func(wins ...float64) []CheckResult {
		var res []CheckResult
		for _, w := range wins {
			res = append(res, CheckResult{Wins: w})
		}
		return res
	}
	pairs := func(acc, loss float64) rl.PairEval { return rl.PairEval{Accuracy: acc, Loss: loss} }
	for _, tc := range []struct {
		name string
		sel  CriticSelect
		a, b CriticEval
		want bool
	}{
		{"accuracy: higher accuracy", SelectAccuracy, CriticEval{Pairs: pairs(0.9, 0.6)}, CriticEval{Pairs: pairs(0.8, 0.1)}, true},
		{"accuracy: lower accuracy", SelectAccuracy, CriticEval{Pairs: pairs(0.8, 0.1)}, CriticEval{Pairs: pairs(0.9, 0.6)}, false},
		{"accuracy: tie, lower loss", SelectAccuracy, CriticEval{Pairs: pairs(0.9, 0.5)}, CriticEval{Pairs: pairs(0.9, 0.6)}, true},
		{"accuracy: equal is not better", SelectAccuracy, CriticEval{Pairs: pairs(0.9, 0.5)}, CriticEval{Pairs: pairs(0.9, 0.5)}, false},
		{"accuracy ignores the check", SelectAccuracy, CriticEval{Pairs: pairs(0.9, 0.6), Check: check(0, 0, 0)}, CriticEval{Pairs: pairs(0.8, 0.6), Check: check(1, 1, 1)}, true},
		{"check: better worst decision", SelectCheck, CriticEval{Pairs: pairs(0.8, 0.6), Check: check(1, 0.5, 0.6)}, CriticEval{Pairs: pairs(0.9, 0.1), Check: check(1, 0.2, 1)}, true},
		{"check: worse worst decision", SelectCheck, CriticEval{Pairs: pairs(0.9, 0.1), Check: check(1, 0.2, 1)}, CriticEval{Pairs: pairs(0.8, 0.6), Check: check(1, 0.5, 0.6)}, false},
		{"check: same worst, higher mean", SelectCheck, CriticEval{Pairs: pairs(0.8, 0.6), Check: check(1, 0.2, 1)}, CriticEval{Pairs: pairs(0.9, 0.1), Check: check(0.9, 0.2, 1)}, true},
		{"check: same check, pair accuracy", SelectCheck, CriticEval{Pairs: pairs(0.9, 0.6), Check: check(1, 0.2, 1)}, CriticEval{Pairs: pairs(0.8, 0.1), Check: check(1, 0.2, 1)}, true},
		{"check: same check and accuracy, loss", SelectCheck, CriticEval{Pairs: pairs(0.9, 0.6), Check: check(1, 0.2, 1)}, CriticEval{Pairs: pairs(0.9, 0.1), Check: check(1, 0.2, 1)}, false},
	} {
		if got := tc.sel.Better(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: Better = %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, v := range []string{"accuracy", "check"} {
		s, err := ParseCriticSelect(v)
		if err != nil || s.String() != v {
			t.Errorf("ParseCriticSelect(%q) = %v, %v", v, s, err)
		}
	}
	if _, err := ParseCriticSelect("checks"); err == nil || !strings.Contains(err.Error(), "checks") {
		t.Errorf("ParseCriticSelect(\"checks\"): %v, want an error naming the value", err)
	}
}

// TestSelectCriticByCheck keeps the critic's epoch by the critic check on
// the validation tasks, measured after every epoch, and says so.
func TestSelectCriticByCheck(t *testing.T) {
	c := tiny(t, "keys", t.TempDir())
	c.From, c.K, c.RLTasks, c.ValTasks, c.CriticSelect = t.TempDir(), 4, 8, 3, SelectCheck
	c.CriticEpochs, c.LR.Critic, c.CheckTasks = 4, 3e-2, 3 // a critic that moves from epoch to epoch
	fixture(t, c)
	var log strings.Builder
	c.Log = &log
	res, err := Run(context.Background(), c)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	// Each epoch's line gives its validation accuracy, loss and check; the
	// kept epoch must be the best of them by the check.
	epochLine := regexp.MustCompile(`critic lr \S+ epoch (\d+): .*validation accuracy ([0-9.]+), loss ([0-9.]+), .*, check (\d+) / (\d+) / (\d+)%`)
	var evals []CriticEval
	for _, m := range epochLine.FindAllStringSubmatch(log.String(), -1) {
		var ev CriticEval
		ev.Pairs.Accuracy, _ = strconv.ParseFloat(m[2], 64)
		ev.Pairs.Loss, _ = strconv.ParseFloat(m[3], 64)
		for _, w := range m[4:] {
			pct, _ := strconv.ParseFloat(w, 64)
			ev.Check = append(ev.Check, CheckResult{Wins: pct / 100})
		}
		evals = append(evals, ev)
	}
	if len(evals) != c.CriticEpochs {
		t.Fatalf("%d epochs with a critic check on validation tasks in the log, want %d:\n%s", len(evals), c.CriticEpochs, log.String())
	}
	// The log rounds, so the kept epoch must be one that no other epoch
	// beats at the log's precision.
	kept := regexp.MustCompile(`kept epoch (\d+);`).FindStringSubmatch(log.String())
	if kept == nil {
		t.Fatalf("no kept epoch in the log:\n%s", log.String())
	}
	k, _ := strconv.Atoi(kept[1])
	for i := range evals {
		if SelectCheck.Better(evals[i], evals[k-1]) {
			t.Errorf("epoch %d kept, but epoch %d has the better check:\n%s", k, i+1, log.String())
		}
	}
	if len(res.Choices) != 4 || !strings.Contains(res.Choices[2], "critic check on validation tasks") || !strings.Contains(res.Choices[2], "(configured)") {
		t.Errorf("choices %q: want the critic's epoch kept by the critic check", res.Choices)
	}
}

// TestSFTOnly runs the supervised start alone: it makes the model a whole
// run makes, evaluates it on the same held-out tasks with the same result
// as the whole run's first row, and plays no rollout.
func TestSFTOnly(t *testing.T) {
	for _, family := range []string{"keys", "tally"} {
		t.Run(family, func(t *testing.T) {
			whole, alone := tiny(t, family, t.TempDir()), tiny(t, family, t.TempDir())
			alone.SFTOnly = true
			full, err := Run(context.Background(), whole)
			if err != nil {
				t.Fatal(err)
			}
			var log strings.Builder
			alone.Log = &log
			res, err := Run(context.Background(), alone)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Rows) != 1 || res.Rows[0].Method != "SFT start" || !reflect.DeepEqual(res.Rows[0], full.Rows[0]) {
				t.Errorf("rows %+v, want the whole run's first row %+v", res.Rows, full.Rows[0])
			}
			if !bytes.Equal(readFile(t, filepath.Join(alone.OutDir, "sft/model.safetensors")), readFile(t, filepath.Join(whole.OutDir, "sft/model.safetensors"))) {
				t.Error("the supervised start alone made another model")
			}
			for _, f := range []string{"rollouts.jsonl.zst", "stages.json"} {
				if _, err := os.Stat(filepath.Join(alone.OutDir, f)); err == nil {
					t.Errorf("the supervised start alone wrote %s", f)
				}
			}
			if !strings.Contains(log.String(), "results on 3 held-out tasks of the "+family+" family") {
				t.Errorf("log:\n%s", log.String())
			}
			alone.From = whole.OutDir
			if _, err := Run(context.Background(), alone); err == nil {
				t.Error("the supervised start alone reused another run's")
			}
		})
	}
}

// TestPrepareOnly makes the first stages alone: the supervised model and
// rollouts a whole run makes, no table; a run reusing them prints the
// whole run's table.
func TestPrepareOnly(t *testing.T) {
	whole, prep := tiny(t, "tally", t.TempDir()), tiny(t, "tally", t.TempDir())
	prep.PrepareOnly = true
	if _, err := Run(context.Background(), whole); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), prep); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"sft/model.safetensors", "rollouts.jsonl.zst"} {
		if !bytes.Equal(readFile(t, filepath.Join(prep.OutDir, f)), readFile(t, filepath.Join(whole.OutDir, f))) {
			t.Errorf("the first stages alone made another %s", f)
		}
	}
	if _, err := os.Stat(filepath.Join(prep.OutDir, "results.json")); err == nil {
		t.Error("the first stages alone wrote results.json")
	}
	reuse := tiny(t, "tally", t.TempDir())
	reuse.From = prep.OutDir
	if _, err := Run(context.Background(), reuse); err != nil {
		t.Fatal(err)
	}
	if a, b := readFile(t, filepath.Join(whole.OutDir, "results.json")), readFile(t, filepath.Join(reuse.OutDir, "results.json")); !bytes.Equal(a, b) {
		t.Errorf("a run reusing the prepared stages printed another table:\n%s\nagainst\n%s", b, a)
	}
}
