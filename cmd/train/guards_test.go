package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/turnwise/turnwise/checkpoint"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/internal/recipe"
	"github.com/turnwise/turnwise/trainer"
)

// TestThreadsClamp checks that --threads above the machine's CPU count is
// lowered to it with a notice, and that a count within it is kept quietly.
func TestThreadsClamp(t *testing.T) {
	n := runtime.NumCPU()
	for _, tc := range []struct {
		threads, want int
		notice        string
	}{
		{n + 3, n, fmt.Sprintf("--threads %d: this machine has %d CPUs; using %d threads", n+3, n, n)},
		{n, n, ""},
		{1, 1, ""},
	} {
		var notices bytes.Buffer
		fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
		fs.SetOutput(&notices)
		var bf backendFlags
		bf.register(fs)
		if err := fs.Parse([]string{"--threads", fmt.Sprint(tc.threads)}); err != nil {
			t.Fatal(err)
		}
		b, err := bf.open()
		if err != nil {
			t.Fatal(err)
		}
		if got := b.(*cpu.Backend).Threads(); got != tc.want || !strings.Contains(notices.String(), tc.notice) || (tc.notice == "") != (notices.Len() == 0) {
			t.Errorf("--threads %d: %d threads, notice %q; want %d threads and notice %q", tc.threads, got, notices.String(), tc.want, tc.notice)
		}
	}
}

// TestSFTGuards checks the flags train sft refuses before it reads any
// data: a LoRA rank above the adapted projections' dimensions, and
// contradictory lengths of the run.
func TestSFTGuards(t *testing.T) {
	model := byteModel(t) // k and v are [16, 32]
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"rank above the built-in model's dimensions", []string{"--lora-rank", "100000"},
			"--lora-rank 100000: LoRA rank 100000 exceeds projection q's smaller dimension (128×128): an update B·A has rank at most 128, want a rank of 1 to 64"},
		{"rank above a loaded model's dimensions", []string{"--hf", model, "--lora-rank", "17"}, "want a rank of 1 to 16"},
		{"rank above the targets' dimensions", []string{"--hf", model, "--lora-rank", "33", "--lora-targets", "q,o"}, "want a rank of 1 to 32"},
		{"epochs and steps", []string{"--epochs", "2", "--steps", "5"}, "--epochs 2 and --steps 5 both say how long the run is"},
		{"no length", []string{"--steps", "0"}, "--steps 0: give a number of steps, or --epochs N"},
		{"zero epochs", []string{"--epochs", "0"}, "--epochs"},
		{"dropout of 1", []string{"--lora-rank", "4", "--lora-dropout", "1"}, "--lora-dropout 1: want a value in [0, 1)"},
		{"negative alpha", []string{"--lora-rank", "4", "--lora-alpha", "-1"}, "--lora-alpha -1: want a value ≥ 0"},
		{"alpha without an adapter", []string{"--lora-alpha", "16"}, "--lora-alpha and --lora-dropout shape a fresh adapter"},
		{"dropout of a loaded adapter", []string{"--adapter", "x", "--lora-dropout", "0.1"}, "--lora-alpha and --lora-dropout shape a fresh adapter"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runCmd(t, runSFT, "", append([]string{"--out", t.TempDir(), "--prompt="}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
			if strings.Contains(out, "training examples") {
				t.Errorf("the run read its data before refusing:\n%s", out)
			}
		})
	}
	if _, err := runCmd(t, runSFT, "", "--out", t.TempDir(), "--hf", model, "--lora-rank", "16", "--steps", "1", "--prompt=", "--threads", "1"); err != nil {
		t.Errorf("rank 16 on a model whose smallest adapted dimension is 16: %v", err)
	}
}

// chatFile writes n short chat rows to a JSONL file and returns its path.
func chatFile(t *testing.T, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"messages": [{"role": "user", "content": "Hi %d"}, {"role": "assistant", "content": "Hello %d!"}]}`+"\n", i, i+1)
	}
	path := filepath.Join(t.TempDir(), "chats.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSFTEpochsAndDefaultLR checks that --epochs N runs exactly N passes
// over the training examples (the last checkpoint's data position is the
// start of pass N), recording steps 0 and the epochs in config.yaml, and
// that without --lr a pretrained model is fine-tuned at the fine-tuning
// rates (every weight, or a LoRA adapter) and a model from scratch at the
// from-scratch one, each recorded as used.
func TestSFTEpochsAndDefaultLR(t *testing.T) {
	model, data := byteModel(t), chatFile(t, 7)
	tests := []struct {
		name   string
		args   []string
		lr     string
		epochs int
	}{
		{"full fine-tuning", []string{"--hf", model, "--epochs", "2"}, "2e-05", 2},
		{"LoRA", []string{"--hf", model, "--lora-rank", "4", "--epochs", "3"}, "0.0002", 3},
		{"from scratch", []string{"--preset", "tiny", "--epochs", "1"}, "0.003", 1},
		{"given", []string{"--hf", model, "--epochs", "1", "--lr", "1e-3"}, "0.001", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := append([]string{"--out", dir, "--data", data, "--batch-tokens", "64", "--eval-fraction", "0", "--prompt=", "--threads", "1"}, tc.args...)
			out, err := runCmd(t, runSFT, "", args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			cfg, err := recipe.Load(filepath.Join(dir, trainer.ConfigName))
			if err != nil {
				t.Fatal(err)
			}
			if cfg["lr"] != tc.lr || cfg["steps"] != "0" || cfg["epochs"] != fmt.Sprint(tc.epochs) {
				t.Errorf("config.yaml: lr %q, steps %q, epochs %q; want %s, 0, %d", cfg["lr"], cfg["steps"], cfg["epochs"], tc.lr, tc.epochs)
			}
			last, _, err := checkpoint.Latest(dir)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(filepath.Join(last, "trainer.json"))
			if err != nil {
				t.Fatal(err)
			}
			var st struct {
				Position struct{ Epoch, Index int } `json:"data_position"`
			}
			if err := json.Unmarshal(raw, &st); err != nil {
				t.Fatal(err)
			}
			if st.Position.Epoch != tc.epochs || st.Position.Index != 0 {
				t.Errorf("%s: the run ended at data position %+v, want the start of epoch %d\n%s", filepath.Base(last), st.Position, tc.epochs, out)
			}
		})
	}
}

// TestSFTDiverges checks that a run whose loss goes non-finite exits with
// an error naming the step and writes no final model.
func TestSFTDiverges(t *testing.T) {
	dir := t.TempDir()
	_, err := runCmd(t, runSFT, "", "--out", dir, "--lr", "1e9", "--steps", "20", "--checkpoint-every", "2", "--batch-tokens", "256",
		"--eval-every", "0", "--prompt=", "--threads", "1")
	if !errors.Is(err, trainer.ErrDiverged) || !strings.Contains(err.Error(), "training diverged at step") {
		t.Fatalf("--lr 1e9: %v; want an error saying at which step training diverged", err)
	}
	if _, err := os.Stat(filepath.Join(dir, trainer.FinalDir)); err == nil {
		t.Error("a diverged run wrote a final model")
	}
}

// syncBuffer is a bytes.Buffer that a child process writes while a test
// reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *syncBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}

// startTrain runs train with args (a subcommand and its flags) in a
// child process (see TestMain), its output into out.
func startTrain(t *testing.T, out *syncBuffer, args []string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TW_TRAIN_MAIN="+strings.Join(args, " "))
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// waitFor waits until path exists.
func waitFor(t *testing.T, path string) {
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", path)
		}
	}
}

// TestSignalAndResume sends SIGINT, then SIGTERM, to train sft in a child
// process: each run finishes its step, writes a checkpoint, says where it
// is and exits with status 1; the run resumed from it ends with the weights
// of an uninterrupted run. Two signals at once stop a run at once.
func TestSignalAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	whole := t.TempDir()
	var out syncBuffer
	if err := startTrain(t, &out, sftArgs(whole)).Wait(); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	dir := t.TempDir()
	for i, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		out.Reset()
		cmd := startTrain(t, &out, sftArgs(dir))
		waitFor(t, checkpoint.Dir(dir, 4*(i+1)))
		cmd.Process.Signal(sig)
		err := cmd.Wait()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !regexp.MustCompile(`interrupted after step \d+: checkpoint \S+step-0000\d\d holds it`).MatchString(out.String()) {
			t.Fatalf("%v: exit %v; want status 1 and a message naming the checkpoint\n%s", sig, err, out.String())
		}
		if _, err := os.Stat(filepath.Join(dir, trainer.FinalDir)); err == nil {
			t.Fatalf("an interrupted run wrote its final model")
		}
	}
	out.Reset()
	if err := startTrain(t, &out, sftArgs(dir)).Wait(); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	final := func(dir string) []byte { return mustRead(t, filepath.Join(dir, trainer.FinalDir, "model.safetensors")) }
	if !bytes.Equal(final(whole), final(dir)) {
		t.Error("interrupted twice and resumed: the final weights differ from an uninterrupted run's")
	}

	out.Reset()
	// Slow steps (many micro-batches), so that the second signal comes
	// while the first one's step is still under way.
	third := t.TempDir()
	cmd := startTrain(t, &out, append(sftArgs(third), "--micro-batches", "16"))
	waitFor(t, checkpoint.Dir(third, 2))
	cmd.Process.Signal(syscall.SIGINT)
	for deadline := time.Now().Add(time.Minute); !strings.Contains(out.String(), "again to stop at once"); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no notice of the first signal:\n%s", out.String())
		}
	}
	cmd.Process.Signal(syscall.SIGINT)
	var exit *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exit) || exit.ExitCode() != exitSecondSignal || !strings.Contains(out.String(), "stopping now") {
		t.Errorf("two signals: exit %v; want status %d at once\n%s", err, exitSecondSignal, out.String())
	}
}

// TestSFTLoRAConfig checks that the adapter train sft saves records the
// lora_alpha and lora_dropout it trained with: PEFT's defaults (8, 0)
// unless --lora-alpha and --lora-dropout say otherwise.
func TestSFTLoRAConfig(t *testing.T) {
	model := byteModel(t)
	for _, tc := range []struct {
		args           []string
		alpha, dropout float64
	}{
		{nil, 8, 0},
		{[]string{"--lora-alpha", "16", "--lora-dropout", "0.1"}, 16, 0.1},
		{[]string{"--lora-alpha", "0", "--lora-rank", "6"}, 12, 0}, // 2·rank
	} {
		dir := t.TempDir()
		args := append([]string{"--out", dir, "--hf", model, "--lora-rank", "4", "--steps", "2", "--batch-tokens", "64", "--prompt=", "--threads", "1"}, tc.args...)
		if out, err := runCmd(t, runSFT, "", args...); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		var cfg struct {
			Alpha   float64 `json:"lora_alpha"`
			Dropout float64 `json:"lora_dropout"`
		}
		if err := json.Unmarshal(mustRead(t, filepath.Join(dir, trainer.FinalDir, "adapter_config.json")), &cfg); err != nil {
			t.Fatal(err)
		}
		if float32(cfg.Alpha) != float32(tc.alpha) || float32(cfg.Dropout) != float32(tc.dropout) {
			t.Errorf("%q: adapter_config.json has lora_alpha %v, lora_dropout %v; want %v, %v", tc.args, cfg.Alpha, cfg.Dropout, tc.alpha, tc.dropout)
		}
	}
}

// TestRLLoRAFlags checks that the RL trainers take --lora-alpha (0: 2·rank,
// their scale before the flag) and rft --lora-dropout, written to the
// adapter_config.json they save, and that the preference trainers, which
// train without dropout, have no --lora-dropout.
func TestRLLoRAFlags(t *testing.T) {
	model, dir := byteModel(t), t.TempDir()
	scripted := scriptedTrajectories(t, dir)
	common := []string{"--hf", model, "--threads", "1", "--trajectories", scripted, "--env", "demo", "--lora-rank", "2", "--batch-tokens", "2048", "--epochs", "1"}
	for _, tc := range []struct {
		name           string
		run            runFunc
		args           []string
		alpha, dropout float64
	}{
		{"rft", runRFT, []string{"--lora-alpha", "3", "--lora-dropout", "0.2"}, 3, 0.2},
		{"rft", runRFT, nil, 4, 0},
		{"critic", runCritic, []string{"--lora-alpha", "5"}, 5, 0},
	} {
		out := filepath.Join(t.TempDir(), tc.name)
		if log, err := runCmd(t, tc.run, "", append(append(common, "--out", out), tc.args...)...); err != nil {
			t.Fatalf("%s %q: %v\n%s", tc.name, tc.args, err, log)
		}
		var cfg struct {
			Alpha   float64 `json:"lora_alpha"`
			Dropout float64 `json:"lora_dropout"`
		}
		if err := json.Unmarshal(mustRead(t, filepath.Join(out, "adapter_config.json")), &cfg); err != nil {
			t.Fatal(err)
		}
		if float32(cfg.Alpha) != float32(tc.alpha) || float32(cfg.Dropout) != float32(tc.dropout) {
			t.Errorf("%s %q: lora_alpha %v, lora_dropout %v; want %v, %v", tc.name, tc.args, cfg.Alpha, cfg.Dropout, tc.alpha, tc.dropout)
		}
	}
	for name, run := range map[string]runFunc{"critic": runCritic, "actor": runActor, "mtdpo": runMTDPO} {
		if _, err := runCmd(t, run, "", "--lora-dropout", "0.1"); err == nil || !strings.Contains(err.Error(), "unknown flag: --lora-dropout") {
			t.Errorf("%s --lora-dropout: %v; want an unknown flag", name, err)
		}
	}
	if _, err := runCmd(t, runRFT, "", append(append(common, "--out", t.TempDir()), "--full", "--lora-alpha", "3")...); err == nil || !strings.Contains(err.Error(), "--lora-alpha and --lora-dropout shape a fresh adapter") {
		t.Errorf("rft --full --lora-alpha 3: %v; want a refusal", err)
	}
}
