package gloo

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/turnwise/turnwise/dist"
	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/commtest"
	"github.com/turnwise/turnwise/engine/cpu"
)

// The tests start their ranks as separate processes: this test binary run
// again with TW_GLOO_TEST_ROLE set and torchrun's environment.
func TestMain(m *testing.M) {
	if role := os.Getenv("TW_GLOO_TEST_ROLE"); role != "" {
		if err := worker(role); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// worker is one rank: it joins, connects and runs its role.
func worker(role string) error {
	r, err := dist.FromEnv(os.Getenv)
	if err != nil {
		return err
	}
	g, err := dist.Rendezvous(r, 30*time.Second)
	if err != nil {
		return err
	}
	defer g.Close()
	c, err := New(g.Store, r.Rank, r.WorldSize, Options{MasterAddr: r.MasterAddr, Timeout: 60 * time.Second})
	if err != nil {
		return err
	}
	defer c.Close()
	b := cpu.New(cpu.Options{Threads: 1})
	switch role {
	case "check":
		n, _ := strconv.Atoi(os.Getenv("TW_GLOO_TEST_N"))
		if err := commtest.Check(b, c, n); err != nil {
			return fmt.Errorf("rank %d: %w", r.Rank, err)
		}
		return c.Barrier() // rank 0 serves the store: nobody leaves early
	case "bench":
		return benchPeer(b, c)
	case "die":
		if err := c.Barrier(); err != nil { // every pair is connected
			return err
		}
		if r.Rank == 1 {
			os.Exit(3)
		}
		x := engine.MustAlloc(b, engine.F32, 1000)
		err := c.AllReduce(x)
		if err == nil {
			return fmt.Errorf("rank %d: AllReduce with a dead rank succeeded", r.Rank)
		}
		fmt.Fprintf(os.Stderr, "AllReduce failed as it should: %v\n", err)
		os.Exit(4)
	}
	return fmt.Errorf("unknown role %q", role)
}

// freePort returns a TCP port nothing listens on now.
func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// start starts ranks 1 … world−1 of role as processes (rank 0 too when
// self is false), with extra environment.
func start(t testing.TB, role string, world, port int, self bool, extra ...string) []*exec.Cmd {
	var cmds []*exec.Cmd
	for r := range world {
		if r == 0 && self {
			continue
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		rk := dist.Rank{Rank: r, LocalRank: r, WorldSize: world, LocalWorldSize: world, MasterAddr: "127.0.0.1", MasterPort: port}
		cmd.Env = append(append(append(os.Environ(), rk.Env()...), "TW_GLOO_TEST_ROLE="+role), extra...)
		cmd.Stdout, cmd.Stderr = new(bytes.Buffer), new(bytes.Buffer)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	return cmds
}

// TestCollectives checks every collective, f32 and bf16, against plain sums
// with 2 and 3 ranks, at an element count that is not a multiple of the
// world size and one that spans several of Gloo's 1 MiB segments.
func TestCollectives(t *testing.T) {
	for _, world := range []int{2, 3} {
		for _, n := range []int{1, 1001, 300007} {
			t.Run(fmt.Sprintf("ranks=%d/n=%d", world, n), func(t *testing.T) {
				cmds := start(t, "check", world, freePort(t), false, "TW_GLOO_TEST_N="+strconv.Itoa(n))
				for r, cmd := range cmds {
					if err := cmd.Wait(); err != nil {
						t.Errorf("rank %d: %v\n%s", r, err, cmd.Stderr)
					}
				}
			})
		}
	}
}

// TestDeadRank: when a rank dies, the others' collective fails with an
// error instead of waiting for it.
func TestDeadRank(t *testing.T) {
	cmds := start(t, "die", 3, freePort(t), false)
	for r, cmd := range cmds {
		err := cmd.Wait()
		code := cmd.ProcessState.ExitCode()
		switch {
		case r == 1 && code != 3:
			t.Errorf("rank 1 (the one that dies): %v\n%s", err, cmd.Stderr)
		case r != 1 && code != 4:
			t.Errorf("rank %d: exit %d (%v), want 4 (its AllReduce failed)\n%s", r, code, err, cmd.Stderr)
		case r != 1 && !strings.Contains(fmt.Sprint(cmd.Stderr), "gloo: AllReduce on rank"):
			t.Errorf("rank %d: the error does not name the collective:\n%s", r, cmd.Stderr)
		}
	}
}

func TestBadRank(t *testing.T) {
	if _, err := New(dist.NewMemStore(), 2, 2, Options{}); err == nil {
		t.Fatal("New accepted rank 2 of 2")
	}
}
