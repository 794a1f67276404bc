package main

import (
	"fmt"
	"io"

	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/sweetrl/demotask"
	"github.com/turnwise/turnwise/sweetrl/pipeline"
)

// runFamilyStats implements "train family-stats".
func runFamilyStats(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("family-stats", stderr)
	family := fs.String("family", "tally", "task family (tally)")
	n := fs.Int("dialogues", 100000, "scripted dialogues measured (and episodes of the imitating policy)")
	seed := fs.Uint64("seed", 1, "seed of the tasks and the scripted dialogues")
	sftTasks := fs.Int("sft-tasks", pipeline.DefaultSFTTasks, "train demo's --sft-tasks: the supervised start's dialogues")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *family != "tally" {
		return fmt.Errorf("--family %q: family statistics exist for the tally family only", *family)
	}
	if *n <= 0 || 2**n > demotask.TallyNumTasks {
		return fmt.Errorf("--dialogues %d: want 1 to %d", *n, demotask.TallyNumTasks/2)
	}
	if *sftTasks <= 0 || *sftTasks+pipeline.DefaultRLTasks > demotask.TallyNumTasks {
		return fmt.Errorf("--sft-tasks %d: want 1 to %d", *sftTasks, demotask.TallyNumTasks-pipeline.DefaultRLTasks)
	}
	st := demotask.TallyStatistics(*n, *seed)
	pct := func(v float64) string { return fmt.Sprintf("%5.1f%%", 100*v) }
	fmt.Fprintf(stdout, "%s family, %d scripted dialogues (seed %d), no model:\n", *family, st.Dialogues, *seed)
	fmt.Fprintf(stdout, "  scripted success                      %s (mean reward %.3f)\n", pct(st.Scripted), st.MeanReward)
	fmt.Fprintf(stdout, "  imitating the successes exactly       %s (%d episodes on fresh tasks; %.2f%% of their turns after a dialogue no success passed through, played as scripted)\n",
		pct(st.Imitation), st.ImitationEpisodes, 100*st.Unseen)
	fmt.Fprintf(stdout, "  optimum                               %s\n", pct(st.Optimum))
	fmt.Fprintf(stdout, "  successes holding a harmful turn      %s (failures: %s; the imitating policy's episodes: %s)\n",
		pct(st.HarmfulInSuccesses), pct(st.HarmfulInFailures), pct(st.ImitationHarmful))
	fmt.Fprintf(stdout, "  tasks whose last key is the 5th letter %s (where any harmful turn fails)\n", pct(st.LastKeyFifth))

	f, err := pipeline.LookupFamily(*family)
	if err != nil {
		return err
	}
	train, _ := f.Split(*seed, *sftTasks+pipeline.DefaultRLTasks, 0)
	sft := f.Scripted(train[:*sftTasks], 1, *seed)
	s := sweetrl.SuccessRate(sft)
	fmt.Fprintf(stdout, "train demo's supervised data (%d dialogues, seed %d): success %s, mean reward %.3f; the SFT start is kept if it reaches 0.8 × that = %s\n",
		len(sft), *seed, pct(s), sweetrl.MeanReward(sft), pct(0.8*s))
	return nil
}
