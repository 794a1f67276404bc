// Package launch starts the ranks of a job on this node, as torchrun does:
// one process per rank with torchrun's environment (RANK, LOCAL_RANK,
// WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), each line of a
// rank's output prefixed with its rank. When a rank fails, the others are
// stopped — SIGTERM, then SIGKILL after a grace period — and Run returns
// that rank's error: nothing is left waiting for a rank that is gone.
package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/turnwise/turnwise/dist"
)

// Config says what to start and where the job meets.
type Config struct {
	NProcPerNode int    // processes (ranks) on this node, ≥ 1
	NNodes       int    // nodes in the job; 0 means 1
	NodeRank     int    // this node's index in [0, NNodes)
	MasterAddr   string // rank 0's host; empty: 127.0.0.1 (one node only)
	MasterPort   int    // rank 0's store port; 0: dist.DefaultMasterPort

	// Command is the program and its arguments, run once per rank.
	Command []string
	// Env is the environment every rank starts with (os.Environ());
	// torchrun's variables are added to it.
	Env []string
	// Stdout and Stderr receive the ranks' output, line by line, each line
	// prefixed "[rank R] ".
	Stdout, Stderr io.Writer
	// Grace is how long the other ranks have to exit after SIGTERM before
	// SIGKILL; 0: 5 s.
	Grace time.Duration
}

// RankError is the failure of one rank: how it ended and the last lines it
// wrote to stderr.
type RankError struct {
	Rank   int
	Status string   // "exit status 3", "signal: killed"
	Tail   []string // its last lines of stderr, oldest first
}

// Error names the rank, how it ended and its last lines of stderr.
func (e *RankError) Error() string {
	msg := fmt.Sprintf("rank %d failed (%s)", e.Rank, e.Status)
	if len(e.Tail) > 0 {
		msg += ": " + e.Tail[len(e.Tail)-1]
	}
	return msg
}

// tailLines is how many lines of a rank's stderr a RankError keeps.
const tailLines = 20

// ranks returns the Rank of each process to start on this node.
func (c Config) ranks() ([]dist.Rank, error) {
	nodes := max(c.NNodes, 1)
	switch {
	case c.NProcPerNode < 1:
		return nil, fmt.Errorf("--nproc-per-node %d: want at least 1", c.NProcPerNode)
	case c.NodeRank < 0 || c.NodeRank >= nodes:
		return nil, fmt.Errorf("--node-rank %d: want one in [0, %d) for --nnodes %d", c.NodeRank, nodes, nodes)
	case nodes > 1 && c.MasterAddr == "":
		return nil, fmt.Errorf("--nnodes %d: --master-addr must name rank 0's node (reachable from every node)", nodes)
	case c.MasterPort < 0 || c.MasterPort > 65535:
		return nil, fmt.Errorf("--master-port %d: want a port in [1, 65535]", c.MasterPort)
	case len(c.Command) == 0:
		return nil, errors.New("no command to launch")
	}
	addr, port := c.MasterAddr, c.MasterPort
	if addr == "" {
		addr = "127.0.0.1"
	}
	if port == 0 {
		port = dist.DefaultMasterPort
	}
	out := make([]dist.Rank, c.NProcPerNode)
	for i := range out {
		out[i] = dist.Rank{Rank: c.NodeRank*c.NProcPerNode + i, LocalRank: i, WorldSize: nodes * c.NProcPerNode,
			LocalWorldSize: c.NProcPerNode, MasterAddr: addr, MasterPort: port}
	}
	return out, nil
}

// exit is how one rank's process ended.
type exit struct {
	local int
	err   error
}

// Run starts every rank of this node and waits for them. It returns nil when
// all exit with status 0; otherwise the *RankError of the first rank that
// failed, after stopping the others. When ctx is cancelled (the launcher was
// interrupted) it stops every rank and returns ctx's error.
func Run(ctx context.Context, cfg Config) error {
	ranks, err := cfg.ranks()
	if err != nil {
		return err
	}
	grace := cfg.Grace
	if grace <= 0 {
		grace = 5 * time.Second
	}
	var outMu, errMu sync.Mutex
	procs := make([]*exec.Cmd, len(ranks))
	exited := make([]atomic.Bool, len(ranks)) // reaped: its pid may be reused
	stderrs := make([]*prefixWriter, len(ranks))
	done := make(chan exit, len(ranks))
	for i, r := range ranks {
		cmd := exec.Command(cfg.Command[0], cfg.Command[1:]...)
		cmd.Env = append(append([]string(nil), cfg.Env...), r.Env()...)
		stdout := &prefixWriter{w: cfg.Stdout, mu: &outMu, prefix: fmt.Sprintf("[rank %d] ", r.Rank)}
		stderrs[i] = &prefixWriter{w: cfg.Stderr, mu: &errMu, prefix: stdout.prefix, keep: tailLines}
		cmd.Stdout, cmd.Stderr = stdout, stderrs[i]
		// Its own process group, so that stopping a rank stops what it
		// started; and killed if the launcher dies.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		// A grandchild holding the output pipes open must not keep Wait.
		cmd.WaitDelay = grace
		if err := cmd.Start(); err != nil {
			stopAll(procs[:i], exited, done, i, grace)
			return fmt.Errorf("starting rank %d (%s): %w", r.Rank, cfg.Command[0], err)
		}
		procs[i] = cmd
		go func() {
			err := cmd.Wait()
			exited[i].Store(true)
			stdout.flush()
			stderrs[i].flush()
			done <- exit{local: i, err: err}
		}()
	}
	for left := len(procs); left > 0; left-- {
		select {
		case e := <-done:
			if e.err == nil {
				continue
			}
			stopAll(procs, exited, done, left-1, grace)
			return &RankError{Rank: ranks[e.local].Rank, Status: status(e.err), Tail: stderrs[e.local].tail()}
		case <-ctx.Done():
			stopAll(procs, exited, done, left, grace)
			return ctx.Err()
		}
	}
	return nil
}

// status says how a process ended.
func status(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ProcessState.String()
	}
	return err.Error()
}

// stopAll sends SIGTERM to every rank's process group, SIGKILL to those
// still running after grace, and waits for the running ones to be reaped
// (their exits arrive on done).
func stopAll(procs []*exec.Cmd, exited []atomic.Bool, done <-chan exit, running int, grace time.Duration) {
	signal := func(sig syscall.Signal) {
		for i, p := range procs {
			if p != nil && !exited[i].Load() {
				syscall.Kill(-p.Process.Pid, sig) // the group; an exited one answers ESRCH
			}
		}
	}
	signal(syscall.SIGTERM)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	for running > 0 {
		select {
		case <-done:
			running--
		case <-timer.C:
			signal(syscall.SIGKILL)
			timer.Reset(time.Hour)
		}
	}
}

// prefixWriter writes whole lines to w, each prefixed, under mu (shared by
// every rank writing to w), and keeps the last keep lines.
type prefixWriter struct {
	w      io.Writer
	mu     *sync.Mutex
	prefix string
	keep   int

	partial []byte
	lines   []string
	own     sync.Mutex
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.own.Lock()
	defer p.own.Unlock()
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			break
		}
		p.emit(string(p.partial[:i]))
		p.partial = p.partial[i+1:]
	}
	return len(b), nil
}

// emit writes one line (without its newline). Called with own held.
func (p *prefixWriter) emit(line string) {
	if p.keep > 0 && strings.TrimSpace(line) != "" {
		p.lines = append(p.lines, line)
		if len(p.lines) > p.keep {
			p.lines = p.lines[len(p.lines)-p.keep:]
		}
	}
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	io.WriteString(p.w, p.prefix+line+"\n")
}

// flush writes a last line that had no newline.
func (p *prefixWriter) flush() {
	p.own.Lock()
	defer p.own.Unlock()
	if len(p.partial) > 0 {
		p.emit(string(p.partial))
		p.partial = nil
	}
}

// tail returns the kept lines.
func (p *prefixWriter) tail() []string {
	p.own.Lock()
	defer p.own.Unlock()
	return append([]string(nil), p.lines...)
}
