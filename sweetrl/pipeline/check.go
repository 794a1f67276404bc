package pipeline

import (
	"context"
	"fmt"
	"io"

	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/sweetrl/rl"
)

// CheckResult is how often a critic ranked one decision of the critic
// check right, over tasks.
type CheckResult struct {
	Name  string  `json:"name"`
	Tasks int     `json:"tasks"`
	Wins  float64 `json:"wins"` // fraction of tasks where Better got the higher advantage
	// MeanBetter and MeanWorse are the mean advantages of the two replies.
	MeanBetter float64 `json:"mean_better"`
	MeanWorse  float64 `json:"mean_worse"`
}

// CriticCheck ranks, on each task, the family's check decisions with the
// critic c (pol is the sampling policy, for the policy baseline).
func CriticCheck(ctx context.Context, f Family, c rl.Critic, pol *rl.Sampler, tasks []sweetrl.Task, batchTokens int) ([]CheckResult, error) {
	var res []CheckResult
	for _, t := range tasks {
		cases, err := f.Checks(ctx, t)
		if err != nil {
			return nil, fmt.Errorf("critic check, task %q: %w", t.ProblemDescription, err)
		}
		if res == nil {
			for _, cc := range cases {
				res = append(res, CheckResult{Name: cc.Name})
			}
		}
		for i, cc := range cases {
			adv, err := c.Advantages(pol, f.Protocol.System, t, cc.Before, []string{cc.Better, cc.Worse}, batchTokens)
			if err != nil {
				return nil, err
			}
			r := &res[i]
			r.Tasks++
			if adv[0] > adv[1] {
				r.Wins++
			}
			r.MeanBetter += adv[0]
			r.MeanWorse += adv[1]
		}
	}
	for i := range res {
		n := float64(res[i].Tasks)
		res[i].Wins /= n
		res[i].MeanBetter /= n
		res[i].MeanWorse /= n
	}
	return res, nil
}

// Describe says in words what a critic's advantage is.
func Describe(c rl.Critic) string {
	critic := "critic's"
	if c.WithoutInfo {
		critic = "the critic's (without the ground truth)"
	}
	switch {
	case c.Head != nil:
		return "the value head's value"
	case c.Baseline == rl.BaselinePolicy:
		return critic + " mean log-prob − policy's"
	}
	return critic + " mean log-prob − its frozen reference's"
}

// PrintCheck writes the critic check's results.
func PrintCheck(w io.Writer, what string, c rl.Critic, res []CheckResult) {
	n := 0
	if len(res) > 0 {
		n = res[0].Tasks
	}
	fmt.Fprintf(w, "critic check on %d %s tasks (advantage = %s):\n", n, what, Describe(c))
	for _, r := range res {
		fmt.Fprintf(w, "  %-56s %5.1f%% of tasks (mean advantages %+.3f vs %+.3f)\n", r.Name, 100*r.Wins, r.MeanBetter, r.MeanWorse)
	}
}

// CheckSummary is the results' win rates as "a / b / c" in percent.
func CheckSummary(res []CheckResult) string {
	s := ""
	for i, r := range res {
		if i > 0 {
			s += " / "
		}
		s += fmt.Sprintf("%.0f", 100*r.Wins)
	}
	return s
}

// CriticSelect is how the demo keeps a critic's epoch (and, with
// Config.SelectCritic, its learning rate) on the validation split.
type CriticSelect int

const (
	// SelectAccuracy keeps the best validation pair accuracy, then the
	// lower validation loss (the default).
	SelectAccuracy CriticSelect = iota
	// SelectCheck keeps the best critic check on the validation tasks: the
	// higher win rate of the worst-ranked decision, then the higher mean
	// win rate, then SelectAccuracy's order. It costs one critic check per
	// epoch.
	SelectCheck
)

// String returns the flag value of s: "accuracy" or "check".
func (s CriticSelect) String() string {
	if s == SelectCheck {
		return "check"
	}
	return "accuracy"
}

// Describe says in words what s keeps.
func (s CriticSelect) Describe() string {
	if s == SelectCheck {
		return "the best critic check on validation tasks (worst decision, then mean, then pair accuracy)"
	}
	return "the best validation pair accuracy (then loss)"
}

// ParseCriticSelect parses "accuracy" or "check".
func ParseCriticSelect(v string) (CriticSelect, error) {
	switch v {
	case "accuracy":
		return SelectAccuracy, nil
	case "check":
		return SelectCheck, nil
	}
	return 0, fmt.Errorf("critic selection %q: want accuracy (validation pair accuracy) or check (the critic check on validation tasks)", v)
}

// CriticEval is what the validation split says of one critic.
type CriticEval struct {
	Pairs rl.PairEval
	Check []CheckResult // on validation tasks; nil unless SelectCheck
}

// Better reports whether a is a better critic than b by s.
func (s CriticSelect) Better(a, b CriticEval) bool {
	if s == SelectCheck {
		aw, am := checkScore(a.Check)
		bw, bm := checkScore(b.Check)
		if aw != bw {
			return aw > bw
		}
		if am != bm {
			return am > bm
		}
	}
	return a.Pairs.Accuracy > b.Pairs.Accuracy || (a.Pairs.Accuracy == b.Pairs.Accuracy && a.Pairs.Loss < b.Pairs.Loss)
}

// checkScore returns the worst and the mean win rate of a critic check
// (0, 0 for none).
func checkScore(res []CheckResult) (worst, mean float64) {
	for i, r := range res {
		if i == 0 || r.Wins < worst {
			worst = r.Wins
		}
		mean += r.Wins
	}
	if len(res) > 0 {
		mean /= float64(len(res))
	}
	return worst, mean
}
