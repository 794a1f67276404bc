package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/turnwise/turnwise/internal/jsonerr"
	"github.com/turnwise/turnwise/internal/outfile"
	"github.com/turnwise/turnwise/internal/stats"
	"github.com/turnwise/turnwise/sweetrl"
)

// Outcomes writes each episode's success as '1' (reward 1) or '0'.
func Outcomes(eps []sweetrl.Trajectory) string {
	b := make([]byte, len(eps))
	for i, e := range eps {
		b[i] = '0'
		if e.Reward == 1 {
			b[i] = '1'
		}
	}
	return string(b)
}

// The pre-registered comparisons, A against B: the main ones, then the
// diagnostics'. Each table shows those whose two rows ran.
var comparisons = []struct{ a, b, family string }{
	{"SWEET-RL (paper's score)", "multi-turn DPO", "main"},
	{"SWEET-RL (paper's score)", "rejection fine-tuning", "main"},
	{"SWEET-RL (paper's score)", "SFT start", "main"},
	{"multi-turn DPO", "SFT start", "main"},
	{"rejection fine-tuning", "SFT start", "main"},
	{RowBestOfN, "SFT start", "diagnostic"},
	{RowOracle, "SWEET-RL (paper's score)", "diagnostic"},
	{RowOracle, "SFT start", "diagnostic"},
	{RowNoInfo, "SWEET-RL (paper's score)", "diagnostic"},
	{RowRPO, "SWEET-RL (paper's score)", "diagnostic"},
}

// BootstrapDraws is the paired bootstrap's number of resamples.
const BootstrapDraws = 10000

// Comparison is a paired comparison of two methods' success on the same
// held-out tasks and sampling seeds, over one or more training seeds.
type Comparison struct {
	A      string `json:"a"`
	B      string `json:"b"`
	Family string `json:"family"` // "main" or "diagnostic"
	// PerSeed is A's success minus B's at each training seed.
	PerSeed []float64 `json:"per_seed"`
	// Bootstrap is the paired bootstrap over tasks (each task's success
	// being the mean over its sampling seeds), resampled within each
	// training seed; its Mean is the mean difference over every task.
	Bootstrap stats.Bootstrap `json:"bootstrap"`
	// OnlyA and OnlyB count the episodes (task and sampling seed) that A
	// alone, or B alone, succeeded in; McNemar is the exact test's p-value.
	OnlyA   int     `json:"only_a"`
	OnlyB   int     `json:"only_b"`
	McNemar float64 `json:"mcnemar_p"`
	// Holm is the bootstrap's p-value adjusted by Holm's method over every
	// comparison of the table; Significant is Holm ≤ 0.05.
	Holm        float64 `json:"holm_p"`
	Significant bool    `json:"significant"`
}

// rowByName returns res's row named name that was evaluated, or nil.
func rowByName(res *Result, name string) *Row {
	for i := range res.Rows {
		if rw := &res.Rows[i]; rw.Method == name && rw.Summary != nil && rw.Outcomes != "" {
			return rw
		}
	}
	return nil
}

// Compare makes the pre-registered comparisons whose two rows every
// result (one per training seed) holds, and adjusts their p-values by
// Holm's method together.
func Compare(results []*Result) []Comparison {
	var out []Comparison
	for _, pc := range comparisons {
		cmp := Comparison{A: pc.a, B: pc.b, Family: pc.family}
		var strata [][]float64
		ok := len(results) > 0
		for _, res := range results {
			a, b := rowByName(res, pc.a), rowByName(res, pc.b)
			if a == nil || b == nil || len(a.Outcomes) != len(b.Outcomes) {
				ok = false
				break
			}
			tasks := a.Summary.Tasks
			seeds := len(a.Outcomes) / tasks
			d := make([]float64, tasks)
			for i := range d {
				for s := range seeds {
					k := s*tasks + i
					x, y := a.Outcomes[k] == '1', b.Outcomes[k] == '1'
					switch {
					case x && !y:
						d[i]++
						cmp.OnlyA++
					case y && !x:
						d[i]--
						cmp.OnlyB++
					}
				}
				d[i] /= float64(seeds)
			}
			strata = append(strata, d)
			cmp.PerSeed = append(cmp.PerSeed, a.Summary.Success-b.Summary.Success)
		}
		if !ok {
			continue
		}
		cmp.Bootstrap = stats.PairedBootstrap(strata, BootstrapDraws, 1)
		cmp.McNemar = stats.McNemar(cmp.OnlyA, cmp.OnlyB)
		out = append(out, cmp)
	}
	p := make([]float64, len(out))
	for i, c := range out {
		p[i] = c.Bootstrap.P
	}
	for i, h := range stats.Holm(p) {
		out[i].Holm, out[i].Significant = h, h <= 0.05
	}
	return out
}

// PrintComparisons writes the comparisons' table.
func PrintComparisons(w io.Writer, cmps []Comparison) {
	if len(cmps) == 0 {
		return
	}
	seeds := len(cmps[0].PerSeed)
	fmt.Fprintf(w, "\npaired comparisons of success (A − B, points; the same held-out tasks and sampling seeds; bootstrap over tasks, %d resamples%s):\n",
		BootstrapDraws, map[bool]string{true: ", within each training seed", false: ""}[seeds > 1])
	fmt.Fprintf(w, "%-80s %-20s %7s %-17s %7s %7s %-20s %s\n", "A vs B", "per seed", "mean", "95% CI", "p", "Holm p", "McNemar p (A/B only)", "significant")
	for _, c := range cmps {
		var ps []string
		for _, d := range c.PerSeed {
			ps = append(ps, fmt.Sprintf("%+.1f", 100*d))
		}
		sig := "no"
		if c.Significant {
			sig = "yes"
		}
		fmt.Fprintf(w, "%-80s %-20s %+7.1f [%+6.1f, %+6.1f] %7.4f %7.4f %-20s %s\n", c.A+" vs "+c.B, strings.Join(ps, " "),
			100*c.Bootstrap.Mean, 100*c.Bootstrap.Lo, 100*c.Bootstrap.Hi, c.Bootstrap.P, c.Holm,
			fmt.Sprintf("%.4f (%d/%d)", c.McNemar, c.OnlyA, c.OnlyB), sig)
	}
	fmt.Fprintln(w, "(significant: Holm-adjusted p ≤ 0.05 over every comparison of this table; p is the bootstrap's two-sided p-value, at best 1/(1 + resamples))")
}

// StudyRow is one method's results over the training seeds.
type StudyRow struct {
	Method  string    `json:"method"`
	Success []float64 `json:"success"` // per seed
	Pass    []float64 `json:"pass_rate"`
	// SuccessMean and SuccessSD are the mean and sample standard deviation
	// over the seeds; likewise PassMean and PassSD.
	SuccessMean float64 `json:"success_mean"`
	SuccessSD   float64 `json:"success_sd"`
	PassMean    float64 `json:"pass_mean"`
	PassSD      float64 `json:"pass_sd"`
	Note        string  `json:"note,omitempty"`
}

// Study is a seeds study: every method's results at each training seed,
// and the paired comparisons over them.
type Study struct {
	Family      string       `json:"family"`
	Seeds       []uint64     `json:"seeds"`
	Machine     string       `json:"machine"`
	Rows        []StudyRow   `json:"rows"`
	Comparisons []Comparison `json:"comparisons"`
}

// NewStudy gathers the results of one run per training seed: a row for
// every method evaluated at every seed, and the comparisons.
func NewStudy(results []*Result) Study {
	st := Study{Comparisons: Compare(results)}
	if len(results) == 0 {
		return st
	}
	st.Family, st.Machine = results[0].Family, results[0].Machine
	for _, res := range results {
		st.Seeds = append(st.Seeds, res.Seed)
	}
	for _, rw := range results[0].Rows {
		sr := StudyRow{Method: rw.Method, Note: rw.Note}
		for _, res := range results {
			r := rowByName(res, rw.Method)
			if r == nil {
				sr.Success = nil
				break
			}
			sr.Success = append(sr.Success, r.Summary.Success)
			sr.Pass = append(sr.Pass, r.Summary.PassRate)
		}
		if sr.Success == nil {
			continue
		}
		sr.SuccessMean, sr.SuccessSD = stats.MeanSD(sr.Success)
		sr.PassMean, sr.PassSD = stats.MeanSD(sr.Pass)
		st.Rows = append(st.Rows, sr)
	}
	return st
}

// PrintStudy writes the seeds study's main table (mean ± sd over the
// seeds, and each seed's value) and its comparisons.
func PrintStudy(w io.Writer, st Study) {
	var seeds []string
	for _, s := range st.Seeds {
		seeds = append(seeds, fmt.Sprint(s))
	}
	fmt.Fprintf(w, "\nthe %s family over training seeds %s (%s): success and pass rate, %%, mean ± sd over the seeds\n", st.Family, strings.Join(seeds, ", "), st.Machine)
	fmt.Fprintf(w, "%-52s %-15s %-24s %-15s\n", "method", "success", "per seed", "pass rate")
	for _, r := range st.Rows {
		var per []string
		for _, v := range r.Success {
			per = append(per, fmt.Sprintf("%.1f", 100*v))
		}
		fmt.Fprintf(w, "%-52s %5.1f ± %-7.1f %-24s %5.1f ± %-7.1f\n", r.Method, 100*r.SuccessMean, 100*r.SuccessSD, strings.Join(per, " "), 100*r.PassMean, 100*r.PassSD)
	}
	PrintComparisons(w, st.Comparisons)
}

// StudyFile is the file a seeds study writes in its directory.
const StudyFile = "study.json"

// RunSeeds runs the demo at seeds c.Seed, c.Seed + 1, … (n of them), each
// in OutDir/seed-S (reusing From/seed-S's stages with From), then prints
// the study over them and writes it to OutDir/StudyFile. With n ≤ 1 it is
// RunFamilies.
func RunSeeds(ctx context.Context, c Config, n int) error {
	if n <= 1 {
		return RunFamilies(ctx, c)
	}
	var results []*Result
	for i := range n {
		cs := c
		cs.Seed = c.Seed + uint64(i)
		sub := fmt.Sprintf("seed-%d", cs.Seed)
		cs.OutDir = filepath.Join(c.OutDir, sub)
		if c.From != "" {
			cs.From = filepath.Join(c.From, sub)
		}
		fmt.Fprintf(c.Log, "\n=== training seed %d (%d of %d) ===\n", cs.Seed, i+1, n)
		res, err := Run(ctx, cs)
		if err != nil {
			return fmt.Errorf("seed %d: %w", cs.Seed, err)
		}
		results = append(results, res)
	}
	if c.PrepareOnly {
		return nil
	}
	return writeStudy(c, results)
}

// ReportSeeds prints and writes the study (as RunSeeds does) over the
// results.json files that earlier runs left in OutDir/seed-S for the n
// seeds c.Seed, c.Seed + 1, …, without training anything: the study of
// seeds run separately (one at a time, or on several machines). Seeds of
// another family, or run with and without per-epoch validation
// (Result.EpochSelect), are refused.
func ReportSeeds(c Config, n int) error {
	var results []*Result
	for i := range n {
		seed := c.Seed + uint64(i)
		path := filepath.Join(c.OutDir, fmt.Sprintf("seed-%d", seed), ResultsFile)
		res, err := ReadResult(path)
		if err != nil {
			return err
		}
		if res.Family != c.Family || res.Seed != seed {
			return fmt.Errorf("%s: the %s family at seed %d, want %s at seed %d", path, res.Family, res.Seed, c.Family, seed)
		}
		if len(results) > 0 && res.EpochSelect != results[0].EpochSelect {
			return fmt.Errorf("%s: seed %d ran %s per-epoch validation, seed %d %s: a study combines runs of one design",
				path, seed, withOrWithout(res.EpochSelect), results[0].Seed, withOrWithout(results[0].EpochSelect))
		}
		if len(results) > 0 && res.Machine != results[0].Machine {
			fmt.Fprintf(c.Log, "note: seed %d ran on %q, seed %d on %q\n", seed, res.Machine, results[0].Seed, results[0].Machine)
		}
		results = append(results, res)
	}
	return writeStudy(c, results)
}

// withOrWithout is "with" for true, "without" for false.
func withOrWithout(b bool) string {
	if b {
		return "with"
	}
	return "without"
}

// ReadResult reads a run's results.json.
func ReadResult(path string) (*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var res Result
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("%s: %w", path, jsonerr.Reword(err))
	}
	if len(res.Rows) == 0 {
		return nil, fmt.Errorf("%s: no result rows", path)
	}
	return &res, nil
}

// writeStudy prints the study over results on c.Log and writes it to
// OutDir/StudyFile.
func writeStudy(c Config, results []*Result) error {
	st := NewStudy(results)
	PrintStudy(c.Log, st)
	js, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return outfile.WriteFile(filepath.Join(c.OutDir, StudyFile), append(js, '\n'), 0o644)
}
