package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// exitSecondSignal is the exit status of a run stopped at once by a second
// SIGINT or SIGTERM: 128 + SIGINT's number, as a shell reports a process
// an interrupt killed.
const exitSecondSignal = 130

// interruptible returns a context that SIGINT or SIGTERM cancels, for a
// trainer to finish its step, write a checkpoint and stop
// (trainer.RunContext); a second signal exits the process at once with
// exitSecondSignal. Each is announced on stderr. Call stop when training
// is over: the signals then have their usual effect again.
func interruptible(stderr io.Writer) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sig:
			fmt.Fprintf(stderr, "%v: finishing the current step and writing a checkpoint (again to stop at once)\n", s)
			cancel()
		case <-done:
			return
		}
		select {
		case s := <-sig:
			fmt.Fprintf(stderr, "%v again: stopping now, without a checkpoint of this step\n", s)
			os.Exit(exitSecondSignal)
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sig)
		close(done)
		cancel()
	}
}
