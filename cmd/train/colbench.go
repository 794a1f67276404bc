package main

import (
	"context"
	"fmt"

	"github.com/turnwise/turnwise/sweetrl"
	"github.com/turnwise/turnwise/sweetrl/pyeval"
)

// colbenchScorer returns the sandboxed Python evaluator the flags ask for,
// with the tasks file hidden from answers, and a line saying which Python
// runs answers, in which scope, and how they are isolated.
func colbenchScorer(e *envFlags) (sweetrl.Scorer, string, error) {
	var hide []string
	if e.tasks != "" {
		hide = []string{e.tasks}
	}
	ev, err := pyeval.New(context.Background(), pyeval.Options{Python: e.python, ModuleScope: e.moduleScope, Workers: e.workers, StdlibOnly: e.stdlibOnly, Hide: hide})
	if err != nil {
		return nil, "", err
	}
	return ev, fmt.Sprintf("Python %s (%s), %s; %s", ev.Version, ev.Python, ev.Scope(), ev.Isolation), nil
}
