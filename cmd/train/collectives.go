package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/turnwise/turnwise/dist"
	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/commtest"
	"github.com/turnwise/turnwise/engine/gloo"
)

// openComm joins the communicator of g's job on b: Gloo for the cpu
// backend, NCCL for cuda. It returns the communicator and a line saying
// which library runs it.
func openComm(b engine.Backend, g *dist.Group) (engine.Communicator, string, error) {
	if b.Name() == "cpu" {
		c, err := gloo.New(g.Store, g.Rank.Rank, g.WorldSize, gloo.Options{MasterAddr: g.MasterAddr})
		if err != nil {
			return nil, "", err
		}
		return c, "Gloo (TCP)", nil
	}
	return openNCCL(b, g.Store, g.Rank.Rank, g.WorldSize, g.Timeout)
}

// joinJob joins the data-parallel job r belongs to (started by train launch,
// torchrun or Slurm) with a communicator on b. A process alone gets a nil
// communicator. leave closes what was opened.
func joinJob(b engine.Backend, r dist.Rank) (c engine.Communicator, leave func(), err error) {
	if r.WorldSize == 1 {
		return nil, func() {}, nil
	}
	g, err := dist.Rendezvous(r, dist.DefaultTimeout)
	if err != nil {
		return nil, nil, err
	}
	c, _, err = openComm(b, g)
	if err != nil {
		g.Close()
		return nil, nil, err
	}
	return c, func() { c.Close(); g.Close() }, nil
}

// member is a process's place in the data-parallel job it is a rank of
// (train launch, torchrun, Slurm; alone, a job of one).
type member struct {
	rank  dist.Rank
	comm  engine.Communicator // joinJob's; nil: alone
	leave func()              // closes what joinJob opened
}

// enter reads the rank from the environment, points bf at the GPU of its
// LOCAL_RANK and silences *stdout on the ranks other than 0: rank 0 reports.
func (p *member) enter(bf *backendFlags, stdout *io.Writer) (err error) {
	if p.rank, err = dist.FromEnv(os.Getenv); p.rank.Rank != 0 {
		*stdout = io.Discard
	}
	bf.device = p.rank.LocalRank
	return err
}

// runCollectives is `train collectives`: every rank (started by train
// launch, torchrun or Slurm, or alone) joins the job, checks each collective
// against plain sums, and rank 0 prints the all-reduce bandwidth.
func runCollectives(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("collectives", stderr)
	var bf backendFlags
	bf.register(fs)
	sizes := fs.String("sizes", "1,16,64", "all-reduce sizes to time, in MiB (comma-separated; empty: none)")
	reps := fs.Int("reps", 5, "timed all-reduces per size (the median is reported)")
	n := fs.Int("n", 100003, "elements per rank in the correctness checks")
	timeout := fs.Duration("timeout", dist.DefaultTimeout, "how long the rendezvous waits for every rank")
	if err := parse(fs, args); err != nil {
		return err
	}
	mibs, err := commtest.ParseSizes(*sizes)
	if err != nil {
		return err
	}
	if *reps < 1 || *n < 1 {
		return errors.New("--reps and --n must be at least 1")
	}

	r, err := dist.FromEnv(os.Getenv)
	if err != nil {
		return err
	}
	bf.device = r.LocalRank
	b, err := bf.open()
	if err != nil {
		return err
	}
	g, err := dist.Rendezvous(r, *timeout)
	if err != nil {
		return err
	}
	defer g.Close()
	c, lib, err := openComm(b, g)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Fprintf(stdout, "collectives: %v on %s through %s\n", r, b.Device(), lib)
	return commtest.Run(b, c, *n, mibs, *reps, r.Rank == 0, stdout)
}
