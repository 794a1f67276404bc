package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/turnwise/turnwise/dist"
	"github.com/turnwise/turnwise/dist/launch"
)

// runLaunch is `train launch [flags] -- <subcommand> <flags>`: this binary's
// subcommand once per rank, as torchrun starts a script (dist/launch).
func runLaunch(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("launch", stderr)
	var cfg launch.Config
	fs.IntVar(&cfg.NProcPerNode, "nproc-per-node", 1, "processes (ranks) on this node: one per GPU, or CPU ranks")
	fs.IntVar(&cfg.NNodes, "nnodes", 1, "nodes in the job; run train launch on each")
	fs.IntVar(&cfg.NodeRank, "node-rank", 0, "this node's index in [0, nnodes): its ranks are node-rank·nproc-per-node …")
	fs.StringVar(&cfg.MasterAddr, "master-addr", "", "the host of rank 0 (node 0), reachable from every node (default 127.0.0.1 on one node)")
	fs.IntVar(&cfg.MasterPort, "master-port", dist.DefaultMasterPort, "the port of rank 0's store")
	fs.DurationVar(&cfg.Grace, "grace", 5*time.Second, "after one rank fails, how long the others have to exit after SIGTERM before SIGKILL")
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	sub := fs.Args()
	if fs.ArgsLenAtDash() != 0 || len(sub) == 0 {
		fs.Usage()
		return errors.New("the subcommand to launch and its flags go after --, and nothing else")
	}
	if _, ok := commands()[sub[0]]; !ok || sub[0] == "launch" {
		return fmt.Errorf("%q is not a train subcommand to launch", sub[0])
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this program to start its ranks: %w", err)
	}
	cfg.Command = append([]string{self}, sub...)
	cfg.Env = os.Environ()
	cfg.Stdout, cfg.Stderr = stdout, stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return launch.Run(ctx, cfg)
}
