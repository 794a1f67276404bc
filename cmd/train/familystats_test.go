package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestFamilyStats runs train family-stats on a small sample: it prints each
// statistic, the optimum at 100%, imitation between the scripted success
// and the optimum, and the bar of the acceptance rule at 0.8 times the
// supervised data's success; other families and bad counts are refused.
func TestFamilyStats(t *testing.T) {
	out, err := runCmd(t, runFamilyStats, "", "--dialogues", "4000", "--sft-tasks", "500")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	pct := func(label string) float64 {
		t.Helper()
		m := regexp.MustCompile(regexp.QuoteMeta(label) + ` +([0-9.]+)%`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no %q in:\n%s", label, out)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	scripted, imitation, optimum := pct("scripted success"), pct("imitating the successes exactly"), pct("optimum")
	if optimum != 100 || !(scripted < imitation && imitation < optimum) {
		t.Errorf("scripted %v, imitation %v, optimum %v:\n%s", scripted, imitation, optimum, out)
	}
	pct("successes holding a harmful turn")
	sft, bar := pct("(500 dialogues, seed 1): success"), pct("0.8 × that =")
	if d := bar - 0.8*sft; d < -0.06 || d > 0.06 { // both printed to 0.1
		t.Errorf("bar %v for a success of %v", bar, sft)
	}
	for _, bad := range [][]string{{"--family", "keys"}, {"--dialogues", "0"}, {"--dialogues", "400000"}, {"--sft-tasks", "0"}} {
		if _, err := runCmd(t, runFamilyStats, "", bad...); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%v: %v, want it refused naming %s", bad, err, bad[0])
		}
	}
	for _, bad := range [][]string{{"--stages", "nope"}, {"--stages", "sft", "--from", "x"}, {"--stages", "prepare", "--from", "x"}} {
		if _, err := runCmd(t, runDemo, "", append([]string{"--out", t.TempDir()}, bad...)...); err == nil || !strings.Contains(err.Error(), "--stages") {
			t.Errorf("train demo %v: %v, want it refused", bad, err)
		}
	}
}
