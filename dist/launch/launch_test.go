package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turnwise/turnwise/dist"
)

// The ranks the tests launch are this test binary again, with
// TW_LAUNCH_TEST_ROLE saying what to do.
func TestMain(m *testing.M) {
	if role := os.Getenv("TW_LAUNCH_TEST_ROLE"); role != "" {
		os.Exit(rankMain(role))
	}
	os.Exit(m.Run())
}

func rankMain(role string) int {
	r, err := dist.FromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	switch role {
	case "hello":
		fmt.Printf("hello from %d of %d, local %d of %d, store %s\n", r.Rank, r.WorldSize, r.LocalRank, r.LocalWorldSize, r.Addr())
		fmt.Fprintf(os.Stderr, "no newline at the end from %d", r.Rank)
		return 0
	case "fail", "fail-stubborn", "sigkill":
		if r.Rank == 1 && role == "sigkill" {
			time.Sleep(200 * time.Millisecond)
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		if r.Rank == 1 {
			time.Sleep(200 * time.Millisecond)
			fmt.Fprintln(os.Stderr, "an earlier line")
			fmt.Fprintln(os.Stderr, "something broke on purpose")
			return 3
		}
		if role == "fail-stubborn" {
			signal.Ignore(syscall.SIGTERM)
		}
		time.Sleep(2 * time.Minute)
		return 0
	case "rendezvous":
		g, err := dist.Rendezvous(r, 500*time.Millisecond)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		g.Close()
		return 0
	}
	fmt.Fprintf(os.Stderr, "unknown role %q\n", role)
	return 2
}

// freePort returns a TCP port nothing listens on now.
func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func config(t *testing.T, role string, n int) (Config, *bytes.Buffer, *bytes.Buffer) {
	var stdout, stderr bytes.Buffer
	return Config{NProcPerNode: n, MasterPort: freePort(t), Command: []string{os.Args[0], "-test.run=^$"},
		Env: append(os.Environ(), "TW_LAUNCH_TEST_ROLE="+role), Stdout: &stdout, Stderr: &stderr}, &stdout, &stderr
}

// TestEnvironmentAndPrefixes: every rank gets torchrun's environment, and
// each of its lines arrives whole with its rank in front.
func TestEnvironmentAndPrefixes(t *testing.T) {
	cfg, stdout, stderr := config(t, "hello", 3)
	cfg.NNodes, cfg.NodeRank, cfg.MasterAddr = 2, 1, "127.0.0.1"
	if err := Run(context.Background(), cfg); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	slices.Sort(lines)
	var want []string
	for i := range 3 {
		want = append(want, fmt.Sprintf("[rank %d] hello from %d of 6, local %d of 3, store 127.0.0.1:%d", 3+i, 3+i, i, cfg.MasterPort))
	}
	if !slices.Equal(lines, want) {
		t.Errorf("stdout:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	for i := 3; i < 6; i++ {
		if w := fmt.Sprintf("[rank %d] no newline at the end from %d\n", i, i); !strings.Contains(stderr.String(), w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr)
		}
	}
}

// TestOneRankFails: when rank 1 exits with an error, the others (asleep for
// minutes) are stopped, and Run returns rank 1's error with its last line —
// also when they ignore SIGTERM, after the grace period.
func TestOneRankFails(t *testing.T) {
	for _, role := range []string{"fail", "fail-stubborn"} {
		t.Run(role, func(t *testing.T) {
			cfg, _, stderr := config(t, role, 3)
			cfg.Grace = 500 * time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			err := Run(ctx, cfg)
			var re *RankError
			if !errors.As(err, &re) {
				t.Fatalf("Run: %v, want a *RankError (ranks were not stopped?)\n%s", err, stderr)
			}
			if re.Rank != 1 || re.Status != "exit status 3" || !strings.Contains(err.Error(), "something broke on purpose") ||
				len(re.Tail) != 2 {
				t.Errorf("error %q (tail %q), want rank 1's exit status 3 and its last two lines", err, re.Tail)
			}
		})
	}
}

// TestOneRankKilled: a rank killed by SIGKILL is named, with its signal, and
// the others are stopped.
func TestOneRankKilled(t *testing.T) {
	cfg, _, stderr := config(t, "sigkill", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := Run(ctx, cfg)
	var re *RankError
	if !errors.As(err, &re) || re.Rank != 1 || re.Status != "signal: killed" {
		t.Fatalf("Run: %v, want rank 1 killed by a signal\n%s", err, stderr)
	}
}

// TestRendezvousMissingNode: a job of 2 nodes whose second never starts
// fails within the ranks' rendezvous timeout, naming the ranks missing.
func TestRendezvousMissingNode(t *testing.T) {
	cfg, _, stderr := config(t, "rendezvous", 2)
	cfg.NNodes, cfg.MasterAddr = 2, "127.0.0.1"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := Run(ctx, cfg)
	if err == nil || !strings.Contains(err.Error(), "ranks 2, 3 of 4 never arrived within 500ms") {
		t.Fatalf("Run: %v, want an error naming ranks 2 and 3\n%s", err, stderr)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{NProcPerNode: 0, Command: []string{"x"}}, "--nproc-per-node 0"},
		{Config{NProcPerNode: 1, NNodes: 2, NodeRank: 2, MasterAddr: "h", Command: []string{"x"}}, "--node-rank 2"},
		{Config{NProcPerNode: 1, NNodes: 2, Command: []string{"x"}}, "--master-addr"},
		{Config{NProcPerNode: 1}, "no command"},
		{Config{NProcPerNode: 1, Command: []string{"/no/such/program"}}, "starting rank 0"},
	} {
		if err := Run(context.Background(), c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one containing %q", c.cfg, err, c.want)
		}
	}
}
