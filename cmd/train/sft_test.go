package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turnwise/turnwise/checkpoint"
	"github.com/turnwise/turnwise/internal/recipe"
	"github.com/turnwise/turnwise/metrics"
	"github.com/turnwise/turnwise/trainer"
)

// TestMain lets a test run the train binary's main in a child process: the
// kill test below starts this test binary with TW_TRAIN_MAIN set (the
// arguments), train launch's tests with TW_TRAIN_ARGV=1 (the arguments are
// the command line's, as the launcher passes them to its ranks). A rank
// whose RANK is TW_TEST_KILL_RANK kills itself with SIGKILL once the path
// TW_TEST_KILL_AT exists (TestLaunchKillRankAndResume).
func TestMain(m *testing.M) {
	if args := os.Getenv("TW_TRAIN_MAIN"); args != "" {
		os.Exit(run(strings.Fields(args), os.Stdin, os.Stdout, os.Stderr))
	}
	if os.Getenv("TW_TRAIN_ARGV") == "1" {
		if at := os.Getenv("TW_TEST_KILL_AT"); at != "" && os.Getenv("RANK") == os.Getenv("TW_TEST_KILL_RANK") {
			go func() {
				for {
					if _, err := os.Stat(at); err == nil {
						syscall.Kill(os.Getpid(), syscall.SIGKILL)
					}
					time.Sleep(2 * time.Millisecond)
				}
			}()
		}
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func sftArgs(dir string) []string {
	return []string{"sft", "--out", dir, "--steps", "30", "--checkpoint-every", "2", "--keep", "20",
		"--batch-tokens", "256", "--eval-every", "0", "--prompt=", "--threads", "1"}
}

func TestSFTBuiltin(t *testing.T) {
	dir := t.TempDir()
	out, err := runCmd(t, runSFT, "", "--out", dir, "--steps", "6", "--batch-tokens", "256", "--checkpoint-every", "3", "--max-new", "20")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"training examples", "step 6/6", "greedy continuation"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if d, _, err := checkpoint.Latest(dir); err != nil || filepath.Base(d) != "step-000006" {
		t.Errorf("latest checkpoint %q, %v", d, err)
	}
	out, err = runCmd(t, runSFT, "", "--out", dir, "--steps", "8", "--batch-tokens", "256", "--prompt", "")
	if err != nil || !strings.Contains(out, "resuming from step 6") {
		t.Errorf("second run: %v\n%s", err, out)
	}
	if _, err := runCmd(t, runSFT, "", "--out", dir, "--steps", "9", "--batch-tokens", "256", "--prompt", "", "--resume=false"); err == nil || !strings.Contains(err.Error(), "choose another --out") {
		t.Errorf("--resume=false on a run directory with checkpoints: %v; want a refusal naming --out", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	os.WriteFile(bad, []byte("{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\"}]}\n{oops\n"), 0o644)
	if _, err := runCmd(t, runSFT, "", "--out", t.TempDir(), "--data", bad, "--steps", "1", "--preset", "tiny"); err == nil || !strings.Contains(err.Error(), "bad.jsonl:2") {
		t.Errorf("a malformed line gave %v, want an error naming bad.jsonl:2", err)
	}
}

// startSFT runs "train sft" in a child process.
func startSFT(t *testing.T, dir string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TW_TRAIN_MAIN="+strings.Join(sftArgs(dir), " "))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// lossByStep returns each step's last logged loss (a resumed run logs the
// steps after its checkpoint again).
func lossByStep(t *testing.T, dir string) map[int64]float64 {
	recs, err := metrics.Read(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]float64{}
	for _, r := range recs {
		out[r.Step], _ = r.Get(metrics.Loss)
	}
	return out
}

// TestKillAndResume starts training, SIGKILLs it at a random checkpoint,
// resumes, and compares the final weights and the loss log with an
// uninterrupted run: they must be identical.
func TestKillAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	whole := t.TempDir()
	if err := startSFT(t, whole).Wait(); err != nil {
		t.Fatal(err)
	}
	killed := t.TempDir()
	cmd := startSFT(t, killed)
	at := 2 * (1 + rand.IntN(5)) // a checkpoint step in 2…10
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := os.Stat(checkpoint.Dir(killed, at)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint at step %d", at)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Kill() // SIGKILL: no chance to clean up
	cmd.Wait()
	if _, err := os.Stat(checkpoint.Dir(killed, 30)); err == nil {
		t.Fatal("the run finished before it was killed; the test needs a longer run")
	}
	if err := startSFT(t, killed).Wait(); err != nil {
		t.Fatal(err)
	}
	final := func(dir string) []byte {
		raw, err := os.ReadFile(filepath.Join(checkpoint.Dir(dir, 30), "model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	if !bytes.Equal(final(whole), final(killed)) {
		t.Errorf("killed at step %d and resumed: the final weights differ from an uninterrupted run", at)
	}
	a, b := lossByStep(t, whole), lossByStep(t, killed)
	for step, l := range a {
		if b[step] != l {
			t.Errorf("step %d: loss %v uninterrupted, %v killed at %d and resumed", step, l, b[step], at)
		}
	}
	if len(a) != 30 || len(b) != 30 {
		t.Errorf("loss logs cover %d and %d steps, want 30", len(a), len(b))
	}
}

// TestSFTConfig checks that a run directory records the run's resolved
// flags, that a resume with another learning rate is refused naming it
// unless --force, and that a --config recipe sets flags the command line
// leaves unset.
func TestSFTConfig(t *testing.T) {
	dir := t.TempDir()
	base := []string{"--out", dir, "--batch-tokens", "256", "--prompt", "", "--checkpoint-every", "2"}
	if out, err := runCmd(t, runSFT, "", append(base, "--steps", "2", "--lr", "1e-3")...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	saved, err := os.ReadFile(filepath.Join(dir, "config.yaml"))
	if err != nil || !strings.Contains(string(saved), `lr: "0.001"`) {
		t.Fatalf("config.yaml: %v\n%s", err, saved)
	}
	_, err = runCmd(t, runSFT, "", append(base, "--steps", "3", "--lr", "2e-3")...)
	if err == nil || !strings.Contains(err.Error(), `lr: "0.001" → "0.002"`) || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("a resume with another --lr: %v; want a refusal naming lr and --force", err)
	}
	recipePath := filepath.Join(t.TempDir(), "sft.yaml")
	os.WriteFile(recipePath, []byte("lr: 1e-3\nsteps: 9\n"), 0o644)
	out, err := runCmd(t, runSFT, "", append(base, "--config", recipePath, "--steps", "3")...)
	if err != nil || !strings.Contains(out, "resuming from step 2") || !strings.Contains(out, "step 3/3") {
		t.Fatalf("a resume through the recipe's lr (--steps given on the command line): %v\n%s", err, out)
	}
	if out, err := runCmd(t, runSFT, "", append(base, "--steps", "4", "--lr", "2e-3", "--force")...); err != nil || !strings.Contains(out, "resuming from step 3") {
		t.Fatalf("--force: %v\n%s", err, out)
	}
	if saved, _ := os.ReadFile(filepath.Join(dir, "config.yaml")); !strings.Contains(string(saved), `lr: "0.002"`) {
		t.Errorf("a forced resume did not record its configuration:\n%s", saved)
	}
}

// TestSFTConfigReproduces runs train sft for a few steps on the built-in
// model and corpus, then again with the first run's saved config.yaml as
// --config into another directory: the second run's configuration is the
// first's but for --out, and its losses, gradient norms and final weights
// are the same bit for bit (the CPU backend at one thread is
// deterministic).
func TestSFTConfigReproduces(t *testing.T) {
	first, second := t.TempDir(), t.TempDir()
	if out, err := runCmd(t, runSFT, "", "--out", first, "--steps", "3", "--batch-tokens", "256", "--prompt", "",
		"--threads", "1", "--lr", "2e-3", "--eval-every", "0"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	saved := filepath.Join(first, trainer.ConfigName)
	if out, err := runCmd(t, runSFT, "", "--config", saved, "--out", second); err != nil {
		t.Fatalf("the saved config.yaml given back as --config: %v\n%s", err, out)
	}
	was, err := recipe.Load(saved)
	if err != nil {
		t.Fatal(err)
	}
	now, err := recipe.Load(filepath.Join(second, trainer.ConfigName))
	if err != nil {
		t.Fatal(err)
	}
	if ch := recipe.Diff(was, now, "out"); len(ch) > 0 || was["out"] == now["out"] || now["steps"] != "3" || now["preset"] != "" {
		t.Errorf("the second run's configuration differs from the first's: %v\nfirst %v\nsecond %v", ch, was, now)
	}
	if raw, _ := os.ReadFile(saved); !strings.Contains(string(raw), "\n"+recipe.BuildKey+":\n") {
		t.Errorf("config.yaml does not record the binary:\n%s", raw)
	}
	if a, b := metricsByStep(t, first), metricsByStep(t, second); len(a) != 3 || !reflect.DeepEqual(a, b) {
		t.Errorf("losses and gradient norms by step: first %v, second %v", a, b)
	}
	model := filepath.Join(trainer.FinalDir, "model.safetensors")
	a, errA := os.ReadFile(filepath.Join(first, model))
	b, errB := os.ReadFile(filepath.Join(second, model))
	if errA != nil || errB != nil || !bytes.Equal(a, b) {
		t.Errorf("the final weights differ (%v, %v)", errA, errB)
	}
}

// TestSFTDataFormats runs train sft for a couple of steps on a tiny file of
// each data format, told by its rows and named by --data-format, and checks
// the flag's errors.
func TestSFTDataFormats(t *testing.T) {
	rows := map[string]string{
		"messages":                   `{"messages": [{"role": "user", "content": "Hi %d"}, {"role": "assistant", "content": "Hello %d!"}]}`,
		"text":                       `{"text": "Once upon a time there were %d foxes and %d hens."}`,
		"prompt-completion":          `{"prompt": "%d + 1 =", "completion": " %d"}`,
		"prompt-completion messages": `{"prompt": [{"role": "user", "content": "%d + 1?"}], "completion": [{"role": "assistant", "content": "%d"}]}`,
		"sharegpt":                   `{"conversations": [{"from": "system", "value": "Count."}, {"from": "human", "value": "%d"}, {"from": "gpt", "value": "%d"}]}`,
	}
	dir := t.TempDir()
	write := func(name string, row string) string {
		var b strings.Builder
		for i := range 6 {
			fmt.Fprintf(&b, row+"\n", i, i+1)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tiny := []string{"--preset", "tiny", "--steps", "2", "--batch-tokens", "128", "--eval-every", "0", "--eval-fraction", "0", "--prompt=", "--threads", "1"}
	for name, row := range rows {
		path := write(strings.ReplaceAll(name, " ", "-")+".jsonl", row)
		format, _, _ := strings.Cut(name, " ")
		for _, flag := range []string{"auto", format} {
			t.Run(name+"/"+flag, func(t *testing.T) {
				args := append([]string{"--out", t.TempDir(), "--data", path, "--data-format", flag}, tiny...)
				out, err := runCmd(t, runSFT, "", args...)
				if err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
				for _, want := range []string{"data: 6 training examples", "step 2/2"} {
					if !strings.Contains(out, want) {
						t.Errorf("output lacks %q:\n%s", want, out)
					}
				}
			})
		}
	}
	messages := write("chats.jsonl", rows["messages"])
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"forced format of the wrong shape", []string{"--data", messages, "--data-format", "text"},
			`chats.jsonl:1: text row without "text" (it looks like a messages row; every row of a file must have the same format)`},
		{"unknown format", []string{"--data", messages, "--data-format", "alpaca"}, `unknown data format "alpaca"`},
		{"no --data", []string{"--data-format", "text"}, "--data-format says the format of --data"},
		{"keys of no format", []string{"--data", write("io.jsonl", `{"input": "%d", "output": "%d"}`)},
			`io.jsonl:1: unknown data format: a row with the keys "input", "output"; want "messages", "text", "prompt" and "completion", or "conversations" (or name the format with --data-format)`},
		{"bad row", []string{"--data", write("pc.jsonl", `{"prompt": "%d", "completion": "%d"}`+"\n"+`{"prompt": "x"}`)},
			`pc.jsonl:2: prompt-completion row without "completion"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"--out", t.TempDir()}, tc.args...), tiny...)
			if _, err := runCmd(t, runSFT, "", args...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v; want %q", err, tc.want)
			}
		})
	}
}
