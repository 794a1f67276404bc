// Package pyeval scores final answers to ColBench backend programming tasks
// the way the SWEET-RL reference does, running each answer in a sandboxed
// Python process. An *Evaluator is a sweetrl.Scorer.
//
// # Scoring
//
// An answer scores 0 without being run when it contains one of the strings
// the reference forbids (see Forbidden). Otherwise markdown fences are
// stripped (see StripFences) and, for each of the task's tests in order,
// the ground truth and then the answer are executed and the test's call
// expression evaluated; the answer's part runs under a one-shot alarm of
// Options.TestTimeout (1 s, the reference's), the ground truth's under none
// (but within the wall-clock limit). The test passes when the ground
// truth's value is not None and equals the answer's; an exception on either
// side, or a time-out, fails it. The reward is the fraction of tests
// passed. The ground truth is neither checked nor stripped.
//
// # Comparing
//
// Options.Compare says where the outputs meet. CompareIsolated (the
// default) runs the ground truth in one process and then the answer in
// another, under different user ids; neither sees the other's source.
// Each sends its output for every test out as data: tagged JSON for None,
// bool, int, float (NaN and infinities included), complex, str, bytes,
// list, tuple, set, frozenset, dict, type objects and the datetime types
// (see encode in harness.py; a subclass of these goes as its base type's
// value). The evaluator compares the two with Python's == on those types
// (see pyEqual) without running any of the answer's code, so an answer
// whose objects equal anything, that writes result lines of its own, that
// patches builtins or that walks the stack to the harness gets no pass it
// did not compute. An output of any other type cannot cross: a test whose
// ground truth returns one fails ("cannot be compared as data"), as does
// an answer that returns one. On the 1000 public backend tasks no ground
// truth does (their outputs are ints, strs, dicts, floats, lists, bools,
// tuples, sets, Nones, type objects in one task and datetimes in another),
// so the 994 of 1000 hold. Where the two modes can differ: a NaN equals
// nothing here, while in one process a container holding the very same
// NaN object equals itself; module state such as random's is not shared
// between ground truth and answer; an OrderedDict compares as a plain
// dict. CompareInProcess keeps the reference's behaviour exactly — both
// programs in one process, compared with == there — for reproducing its
// numbers; it is as forgeable as the reference.
//
// By default the programs run as the reference runs them: exec and eval
// inside a function, with that function's locals dictionary as the
// program's top-level namespace (the semantics of Python 3.10 and 3.11,
// reproduced explicitly, so that any Python 3 gives the same result). A
// function of the program therefore cannot see the program's other
// top-level names: an answer whose function uses a top-level import, a
// helper function, a module constant or recursion raises NameError and
// fails. Options.ModuleScope runs each program as a module instead, which
// is what such answers mean. In both modes every test starts from a fresh
// namespace (the reference's module globals are not visible), and the
// program's __name__ is not "__main__".
//
// Where the reference itself would crash or hang — an exception raised by
// comparing the outputs, an answer that swallows the alarm and never
// returns — the test fails here; an answer cut off by the wall-clock limit
// keeps the tests it finished.
//
// # Sandbox
//
// Each program runs in its own Python process (all its tests in it),
// started with a harness script embedded in the package. The process gets:
//
//   - when the evaluator runs as root, a user id of its own from a small
//     pool without accounts (Options.FirstUID, 60200 by default, and up):
//     each worker runs its answers under one id and their ground truths
//     under the next, so answers running at once cannot reach each other's
//     files or processes, and a process limit counts each apart;
//   - as root, where the kernel allows, its own mount namespace with a
//     fresh tmpfs of Options.TmpSize bytes (and 4096 files) on each of /tmp,
//     /var/tmp, /dev/shm and /run/lock, gone when the process ends, /tmp
//     being its working directory, HOME and TMPDIR; a fresh /proc showing
//     only its own processes; and the files named in Options.Hide (the
//     tasks and answers files, which hold the ground truths) covered by an
//     empty file. A program therefore never sees the caller's files under
//     those four directories (a checkout under /tmp included), and sees
//     every other file its user id may read unless Options.Hide names it.
//     The harness starts as root to mount these, then drops to
//     its id before it reads anything it is given. Without a mount
//     namespace (not root, or refused) it gets a private directory in the
//     evaluator's temporary directory instead, and what it writes in /tmp
//     or /dev/shm stays;
//   - no_new_privs, so that nothing it executes gains privileges;
//   - the interpreter started with -s -B -P (no user site-packages, no
//     bytecode files, no current directory on the import path; the harness
//     drops the current directory itself under a Python without -P) and,
//     with Options.StdlibOnly, -S. Not -I: it implies -E, which ignores
//     PYTHONHASHSEED, and the hash seed must be fixed for set iteration
//     order (and so scores) to repeat;
//   - resource limits, set by the harness before it reads the program:
//     address space Options.Memory (1 GiB by default: an attempt to
//     allocate more raises MemoryError), CPU time (the wall-clock limit,
//     rounded up), file size Options.FileSize, Options.Processes processes
//     for its user (a fork bomb stalls there), 256 open files and no core
//     dumps;
//   - a wall-clock limit (Options.Timeout) enforced from Go, after which it
//     is killed;
//   - a clean environment;
//   - standard input, output and error on /dev/null while the code runs:
//     the results travel on a descriptor of their own, read in bounded
//     lines, so that output cannot flood them (an answer that writes to
//     that descriptor on purpose loses its remaining tests);
//   - its own process group, killed when the program is done, whatever
//     happened;
//   - new network, PID and IPC namespaces where the kernel allows them (for
//     an evaluator that is not root, inside a new user namespace): no
//     network at all, and every process the program starts dies with it.
//
// Where the kernel refuses a namespace, or the evaluator is not root,
// programs run without what it would give, and Evaluator.Isolation says
// what was obtained. The evaluator's own temporary directory (made only
// without a mount namespace) is locked while it runs; at start-up, New
// removes those of earlier evaluators that were killed (see
// Isolation.StaleRemoved).
//
// What the sandbox does not do: it does not limit total disk use outside
// the tmpfs (only each file's size, and the time to write); without a PID
// namespace, a process a program starts that leaves its process group can
// outlive it.
//
// Scores do not depend on the order or the parallelism of the run, except
// through the time limits on a machine too loaded to meet them; processes
// run with PYTHONHASHSEED=0, so set iteration order is the same from run to
// run.
package pyeval

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/turnwise/turnwise/sweetrl"
)

//go:embed harness.py
var harnessSource string

// Defaults of Options.
const (
	// DefaultPython is the interpreter looked up on PATH when
	// Options.Python is empty.
	DefaultPython = "python3"
	// DefaultTestTimeout is the reference's time limit on the answer's part
	// of one test.
	DefaultTestTimeout = time.Second
	// DefaultMemory is the default address-space limit of an answer's
	// process, in bytes.
	DefaultMemory = 1 << 30
	// DefaultFileSize is the default limit on the size of a file an answer
	// writes, in bytes.
	DefaultFileSize = 16 << 20
	// DefaultProcesses is the default limit on the processes of the user an
	// answer runs as.
	DefaultProcesses = 64
	// DefaultFirstUID is the first of the user ids answers run under when
	// the evaluator runs as root.
	DefaultFirstUID = 60200
	// DefaultTmpSize is the default size of each private tmpfs an answer
	// gets (/tmp, /var/tmp, /dev/shm, /run/lock), in bytes.
	DefaultTmpSize = 32 << 20
	// TimeoutMargin is added to the number of tests times the test timeout
	// to make the default wall-clock limit of an answer: time for the
	// interpreter to start and for the ground truth to run.
	TimeoutMargin = 5 * time.Second
)

// openFiles is the limit on an answer's open file descriptors.
const openFiles = 256

// tmpInodes is the limit on the files in each private tmpfs.
const tmpInodes = 4096

// Compare says where an answer's outputs are compared with the ground
// truth's.
type Compare int

const (
	// CompareIsolated runs the ground truth and the answer in two separate
	// processes, under different user ids, each sending its outputs as
	// data; the evaluator compares them. Nothing the answer does can make
	// a test pass except returning the right values.
	CompareIsolated Compare = iota
	// CompareInProcess runs both in one process and compares with == there,
	// exactly as the reference does (and as forgeably: an answer can return
	// an object equal to anything, or reach the harness).
	CompareInProcess
)

// String names the mode as the --compare flag spells it.
func (c Compare) String() string {
	if c == CompareInProcess {
		return "in-process"
	}
	return "isolated"
}

// ParseCompare parses "isolated" or "in-process".
func ParseCompare(s string) (Compare, error) {
	switch s {
	case "isolated":
		return CompareIsolated, nil
	case "in-process":
		return CompareInProcess, nil
	}
	return 0, fmt.Errorf("compare mode %q: want isolated or in-process", s)
}

// Options configure an Evaluator. The zero value scores as the reference
// does, with the defaults above.
type Options struct {
	// Python is the interpreter: a path, or a name looked up on PATH
	// (DefaultPython when empty). For a name, the first match on PATH that
	// the sandbox user can run is taken; answers run under the executable
	// it reports as sys.executable.
	Python string
	// StdlibOnly runs the interpreter with -S, so that answers can import
	// only the standard library and not what is installed in
	// site-packages: scores then do not depend on whether, say, numpy is
	// installed.
	StdlibOnly bool
	// ModuleScope runs each program in a module namespace instead of the
	// reference's function frame (see the package documentation).
	ModuleScope bool
	// Workers is the number of answers scored at once (runtime.NumCPU()
	// when 0 or less).
	Workers int
	// TestTimeout is the limit on the answer's part of one test
	// (DefaultTestTimeout when 0 or less).
	TestTimeout time.Duration
	// Timeout is the wall-clock limit on one answer's process, all its tests
	// included (when 0 or less: the number of tests times TestTimeout, plus
	// TimeoutMargin).
	Timeout time.Duration
	// Memory is the address-space limit of an answer's process in bytes
	// (DefaultMemory when 0 or less).
	Memory int64
	// FileSize is the largest file an answer may write, in bytes
	// (DefaultFileSize when 0 or less).
	FileSize int64
	// Processes is the limit on the number of processes of the user an
	// answer runs as (DefaultProcesses when 0 or less).
	Processes int
	// Compare is where outputs are compared (CompareIsolated, the zero
	// value, by default).
	Compare Compare
	// FirstUID is the first of the user ids programs run under when the
	// evaluator runs as root (DefaultFirstUID when 0 or less): worker w
	// runs answers as FirstUID+2w and ground truths as FirstUID+2w+1. No
	// account may own an id of the pool.
	FirstUID int
	// TmpSize is the size in bytes of each private tmpfs a program gets
	// (DefaultTmpSize when 0 or less).
	TmpSize int64
	// Hide lists files and directories that programs must not read (the
	// tasks and answers files, which hold the ground truths): in a
	// program's mount namespace each is covered by an empty file or an
	// empty read-only directory. Without a mount namespace they stay
	// visible, and Isolation says so.
	Hide []string
}

// withDefaults fills in the zero fields.
func (o Options) withDefaults() Options {
	if o.Python == "" {
		o.Python = DefaultPython
	}
	if o.Workers <= 0 {
		o.Workers = runtime.NumCPU()
	}
	if o.TestTimeout <= 0 {
		o.TestTimeout = DefaultTestTimeout
	}
	if o.Timeout < 0 {
		o.Timeout = 0
	}
	if o.Memory <= 0 {
		o.Memory = DefaultMemory
	}
	if o.FileSize <= 0 {
		o.FileSize = DefaultFileSize
	}
	if o.Processes <= 0 {
		o.Processes = DefaultProcesses
	}
	if o.FirstUID <= 0 {
		o.FirstUID = DefaultFirstUID
	}
	if o.TmpSize <= 0 {
		o.TmpSize = DefaultTmpSize
	}
	return o
}

// Isolation describes how far answers are kept from the machine.
type Isolation struct {
	// User names the account answers run as, e.g. "nobody (uid 65534)".
	User string
	// Dropped reports whether that account is another, unprivileged one
	// (the evaluator runs as root); when false, answers run as the
	// evaluator's own account and can write wherever it can.
	Dropped bool
	// Network, PID and IPC report whether answers run in their own network
	// namespace (no network), PID namespace (all processes they start die
	// with them) and IPC namespace.
	Network, PID, IPC bool
	// UserNamespace reports whether the namespaces hang off a new user
	// namespace (an evaluator that is not root).
	UserNamespace bool
	// Refused, when namespaces are missing, is why: the kernel's answer to
	// the request for them.
	Refused string
	// TmpDirs are the directories on which each program gets a fresh,
	// private tmpfs of TmpSize bytes in its own mount namespace; empty when
	// it has none (then it gets a private directory of the evaluator's, and
	// what it writes elsewhere, e.g. in /tmp or /dev/shm, stays).
	TmpDirs []string
	// TmpSize is the size of each of those tmpfs.
	TmpSize int64
	// MountRefused, when there is no mount namespace as root, is why.
	MountRefused string
	// Proc reports a fresh /proc showing only the program's own processes.
	Proc bool
	// NoNewPrivs reports that programs run with no_new_privs set.
	NoNewPrivs bool
	// Hidden is the number of files (Options.Hide) covered in programs'
	// mount namespaces.
	Hidden int
	// StaleRemoved lists the temporary directories of earlier, killed
	// evaluators removed at start-up.
	StaleRemoved []string
}

// Lines describes the isolation in a few lines of text, e.g.
// "network: isolated (own network namespace)" or "network: NOT isolated
// (the kernel refused a new network namespace: operation not permitted)".
func (iso Isolation) Lines() []string {
	user := "user: " + iso.User
	if !iso.Dropped {
		user += " (the evaluator's own account: answers can write wherever it can)"
	}
	ns := func(what, name, yes string, ok bool) string {
		if ok {
			return what + ": isolated (" + yes + ")"
		}
		why := "not requested"
		if iso.Refused != "" {
			why = "the kernel refused a new " + name + " namespace: " + iso.Refused
		}
		return what + ": NOT isolated (" + why + ")"
	}
	files := "temporary files: NOT private (not root: a private directory each, but /tmp and /dev/shm are shared and what is written there stays)"
	switch {
	case len(iso.TmpDirs) > 0:
		files = fmt.Sprintf("temporary files: private (own mount namespace, a fresh tmpfs of %d MiB on each of %s, gone with the program)",
			iso.TmpSize>>20, strings.Join(iso.TmpDirs, ", "))
	case iso.MountRefused != "":
		files = "temporary files: NOT private (" + iso.MountRefused + "): a private directory each, but /tmp and /dev/shm are shared and what is written there stays"
	}
	proc := "/proc: the machine's (no PID namespace of its own)"
	switch {
	case iso.Proc:
		proc = "/proc: fresh, showing only the program's own processes"
	case iso.PID:
		proc = "/proc: the machine's, but other processes cannot be signalled (own PID namespace)"
	}
	hidden := "input files: readable by answers where their permissions allow (no mount namespace to hide them in)"
	if len(iso.TmpDirs) > 0 {
		hidden = fmt.Sprintf("input files: %d hidden from programs (tasks and answers files covered in their mount namespace)", iso.Hidden)
	}
	priv := "privileges: no_new_privs NOT set; current directory not on the import path"
	if iso.NoNewPrivs {
		priv = "privileges: no_new_privs set; current directory not on the import path"
	}
	lines := []string{
		user,
		ns("network", "network", "own network namespace, no interfaces", iso.Network),
		ns("processes", "PID", "own PID namespace: every process an answer starts dies with it", iso.PID),
		ns("IPC", "IPC", "own IPC namespace", iso.IPC),
		files, proc, hidden, priv,
	}
	if n := len(iso.StaleRemoved); n > 0 {
		lines = append(lines, fmt.Sprintf("removed at start-up: %d temporary directories of an earlier evaluator that was killed", n))
	}
	return lines
}

// String joins Lines with "; ".
func (iso Isolation) String() string { return strings.Join(iso.Lines(), "; ") }

// TestResult is the outcome of one test of one answer.
type TestResult struct {
	// Name is the test's key in the task, e.g. "test3".
	Name string
	// Passed reports whether the answer's output equalled the ground
	// truth's (not None).
	Passed bool
	// Error says why the test failed ("answer raised NameError: …",
	// "answer timed out (limit 1s)", "outputs differ", "ground truth
	// returned None", "not run: …"); empty when it passed.
	Error string
}

// Result is the score of one answer with the outcome of each test.
type Result struct {
	sweetrl.Score
	// Tests are the task's tests in order.
	Tests []TestResult
}

// Evaluator scores answers to ColBench backend tasks in sandboxed Python
// processes. Make one with New; its methods may be called concurrently.
type Evaluator struct {
	// Python is the interpreter answers run under (its sys.executable).
	Python string
	// Version is its sys.version.
	Version string
	// Isolation is what the sandbox achieved on this machine.
	Isolation Isolation

	opts Options
	sb   *sandbox
	// slots hands each running answer a worker number, which fixes its
	// user ids; it holds Options.Workers numbers.
	slots chan int
}

// New finds the interpreter, checks that it runs in the sandbox and which
// isolation the kernel allows, and returns an Evaluator. It fails when no
// interpreter can be run.
func New(ctx context.Context, opts Options) (*Evaluator, error) {
	opts = opts.withDefaults()
	sb, info, err := newSandbox(ctx, opts)
	if err != nil {
		return nil, err
	}
	e := &Evaluator{
		Python:    info.executable,
		Version:   info.version,
		Isolation: sb.isolation,
		opts:      opts,
		sb:        sb,
		slots:     make(chan int, opts.Workers),
	}
	for w := range opts.Workers {
		e.slots <- w
	}
	return e, nil
}

// Close removes the evaluator's temporary directory. An evaluator killed
// before it closes leaves the directory to the next one's start-up, which
// removes it.
func (e *Evaluator) Close() error { return e.sb.close() }

// Options returns the options the evaluator runs with, defaults filled in.
func (e *Evaluator) Options() Options { return e.opts }

// CompareMode describes where outputs are compared.
func (e *Evaluator) CompareMode() string {
	if e.opts.Compare == CompareInProcess {
		return "in-process (as the reference: the answer's objects are compared with ==, which an answer can forge)"
	}
	return "isolated (ground truth and answer in separate processes under different ids; outputs compared as data by the evaluator)"
}

// Scope names how programs run: "function (as the reference)" or "module".
func (e *Evaluator) Scope() string {
	if e.opts.ModuleScope {
		return "module"
	}
	return "function (as the reference)"
}

// Score scores answers[i] against tasks[i] (see Evaluate); it implements
// sweetrl.Scorer.
func (e *Evaluator) Score(ctx context.Context, tasks []sweetrl.Task, answers []string) ([]sweetrl.Score, error) {
	res, err := e.Evaluate(ctx, tasks, answers)
	if err != nil {
		return nil, err
	}
	scores := make([]sweetrl.Score, len(res))
	for i, r := range res {
		scores[i] = r.Score
	}
	return scores, nil
}

// Evaluate scores answers[i] against tasks[i], Options.Workers answers at a
// time, and returns the results in input order. A bad answer is a result
// with a low reward (and a Note for one that scored 0); an error is returned
// only when the evaluator itself fails (an interpreter that no longer
// starts, a temporary directory that cannot be made) or ctx is done.
func (e *Evaluator) Evaluate(ctx context.Context, tasks []sweetrl.Task, answers []string) ([]Result, error) {
	if len(tasks) != len(answers) {
		return nil, fmt.Errorf("scoring answers: %d tasks but %d answers", len(tasks), len(answers))
	}
	results := make([]Result, len(tasks))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	jobs := make(chan int)
	for range min(e.opts.Workers, len(tasks)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				r, err := e.evaluateOne(ctx, tasks[i], answers[i])
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("scoring answer %d: %w", i, err)
					}
					mu.Unlock()
					cancel()
					continue
				}
				results[i] = r
			}
		}()
	}
feed:
	for i := range tasks {
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("scoring answers: %w", err)
	}
	return results, nil
}

// harnessInput is what the harness reads on its standard input.
type harnessInput struct {
	Answer      string      `json:"answer"`
	GroundTruth string      `json:"ground_truth"`
	Tests       [][2]string `json:"tests"`
	ModuleScope bool        `json:"module_scope"`
	TestTimeout float64     `json:"test_timeout"`
}

// harnessLine is one line the harness writes on its result channel.
type harnessLine struct {
	Ready  *bool   `json:"ready"`
	Done   *bool   `json:"done"`
	Test   *int    `json:"test"`
	Passed *bool   `json:"passed"`
	Error  *string `json:"error"`
	Fatal  *string `json:"fatal"`
}

// wallLimit is the wall-clock limit for an answer to a task of n tests.
func (e *Evaluator) wallLimit(n int) time.Duration {
	if e.opts.Timeout > 0 {
		return e.opts.Timeout
	}
	return time.Duration(n)*e.opts.TestTimeout + TimeoutMargin
}

// evaluateOne scores one answer.
func (e *Evaluator) evaluateOne(ctx context.Context, task sweetrl.Task, answer string) (Result, error) {
	n := len(task.TestCases)
	res := Result{Score: sweetrl.Score{Total: n}, Tests: make([]TestResult, n)}
	for i, tc := range task.TestCases {
		res.Tests[i].Name = tc.Name
	}
	if n == 0 {
		res.Note = "the task has no tests"
		return res, nil
	}
	if s, bad := Forbidden(answer); bad {
		res.Note = fmt.Sprintf("contains the forbidden string %q", s)
		for i := range res.Tests {
			res.Tests[i].Error = "not run: the answer " + res.Note
		}
		return res, nil
	}
	var w int
	select {
	case w = <-e.slots:
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	defer func() { e.slots <- w }()
	answerUID, truthUID := e.opts.FirstUID+2*w, e.opts.FirstUID+2*w+1
	if e.opts.Compare == CompareIsolated {
		return e.evaluateIsolated(ctx, task, StripFences(answer), res, answerUID, truthUID)
	}
	in := harnessInput{
		Answer:      StripFences(answer),
		GroundTruth: task.GroundTruth,
		Tests:       make([][2]string, n),
		ModuleScope: e.opts.ModuleScope,
		TestTimeout: e.opts.TestTimeout.Seconds(),
	}
	for i, tc := range task.TestCases {
		in.Tests[i] = [2]string{tc.Name, tc.Call}
	}
	data, err := json.Marshal(in)
	if err != nil {
		return Result{}, fmt.Errorf("encoding the harness input: %w", err)
	}
	wall := e.wallLimit(n)
	out, err := e.sb.run(ctx, "run", data, wall, answerUID)
	if err != nil {
		return Result{}, err
	}
	return interpret(out, res, wall)
}

// outputsInput is what the harness reads in "outputs" mode.
type outputsInput struct {
	Program     string      `json:"program"`
	Role        string      `json:"role"`
	Tests       [][2]string `json:"tests"`
	Skip        []int       `json:"skip"`
	ModuleScope bool        `json:"module_scope"`
	TestTimeout float64     `json:"test_timeout"`
}

// outputLine is one test's line in "outputs" mode.
type outputLine struct {
	Test  *int            `json:"test"`
	Value json.RawMessage `json:"value"`
	Error *string         `json:"error"`
}

// evaluateIsolated scores an answer (fences stripped) by running the ground
// truth under truthUID and then the answer under answerUID, each alone in
// its own process, and comparing the outputs they send as data. The answer
// does not run the tests on which the ground truth failed, as in the
// reference.
func (e *Evaluator) evaluateIsolated(ctx context.Context, task sweetrl.Task, answer string, res Result, answerUID, truthUID int) (Result, error) {
	n := len(task.TestCases)
	wall := e.wallLimit(n)
	in := outputsInput{Program: task.GroundTruth, Role: "ground truth", Tests: make([][2]string, n), ModuleScope: e.opts.ModuleScope}
	for i, tc := range task.TestCases {
		in.Tests[i] = [2]string{tc.Name, tc.Call}
	}
	run := func(in outputsInput, uid int) (outcome, error) {
		data, err := json.Marshal(in)
		if err != nil {
			return outcome{}, fmt.Errorf("encoding the harness input: %w", err)
		}
		return e.sb.run(ctx, "outputs", data, wall, uid)
	}
	truthOut, err := run(in, truthUID)
	if err != nil {
		return Result{}, err
	}
	truth, truthStop, err := readOutputs(truthOut, n, wall, "ground truth")
	if err != nil {
		return Result{}, err
	}
	want := make([]value, n)
	for i, t := range truth {
		switch {
		case t.err != "":
			continue
		case t.missing:
			truth[i].err = "not run: " + truthStop
			continue
		}
		v, err := decodeValue(t.value)
		switch {
		case err != nil:
			truth[i].err = "ground truth's output is not data: " + err.Error()
		case v.kind == kindNone:
			truth[i].err = "ground truth returned None"
		case firstOther(&v) != "":
			truth[i].err = fmt.Sprintf("ground truth's output holds a %s, which cannot be compared as data", firstOther(&v))
		}
		want[i] = v
	}
	in.Program, in.Role, in.TestTimeout = answer, "answer", e.opts.TestTimeout.Seconds()
	for i, t := range truth {
		if t.err != "" {
			in.Skip = append(in.Skip, i)
		}
	}
	var got []programOutput
	answerStop := ""
	if len(in.Skip) < n {
		answerOut, err := run(in, answerUID)
		if err != nil {
			return Result{}, err
		}
		got, answerStop, err = readOutputs(answerOut, n, wall, "answer")
		if err != nil {
			return Result{}, err
		}
	}
	next := n // the first test the answer did not report
	for i := range res.Tests {
		t := &res.Tests[i]
		if truth[i].err != "" {
			t.Error = truth[i].err
			continue
		}
		a := got[i]
		switch {
		case a.missing:
			t.Error = "not run: " + answerStop
			next = min(next, i)
		case a.err != "":
			t.Error = a.err
		default:
			v, err := decodeValue(a.value)
			switch {
			case err != nil:
				t.Error = "answer's output is not data: " + clip(err.Error())
			case firstOther(&v) != "":
				t.Error = fmt.Sprintf("answer's output holds a %s, which cannot be compared as data", clip(firstOther(&v)))
			case pyEqual(&want[i], &v):
				t.Passed = true
				res.Passed++
			default:
				t.Error = "outputs differ"
			}
		}
	}
	res.Reward = float64(res.Passed) / float64(n)
	switch {
	case next < n:
		res.Note = fmt.Sprintf("%s after %d of %d tests", answerStop, next, n)
	case res.Passed == 0:
		res.Note = commonError(res.Tests)
	}
	return res, nil
}

// programOutput is what one program reported for one test.
type programOutput struct {
	value   json.RawMessage
	err     string
	missing bool // no report: the process stopped before
}

// readOutputs reads an "outputs" process's lines: one output or error per
// test. Tests it did not report are marked missing, and stop says why it
// stopped. The error is for a process that stopped before taking its
// program, which is the evaluator's fault.
func readOutputs(out outcome, n int, wall time.Duration, role string) ([]programOutput, string, error) {
	res := make([]programOutput, n)
	for i := range res {
		res[i].missing = true
	}
	ready, done, next := false, false, 0
	var stop string
lines:
	for _, line := range out.lines {
		var m harnessLine
		var o outputLine
		if json.Unmarshal(line, &m) != nil || json.Unmarshal(line, &o) != nil {
			stop = fmt.Sprintf("the result channel carried %q (not a result)", clip(string(line)))
			break
		}
		switch {
		case m.Fatal != nil:
			stop = "the harness failed: " + *m.Fatal
			if !ready {
				stop = "the harness could not take the " + role + ": " + *m.Fatal
			}
			break lines
		case m.Ready != nil && !ready:
			ready = true
		case o.Test != nil && ready && *o.Test == next && next < n && (o.Error != nil) != (o.Value != nil):
			if o.Error != nil {
				res[next].err = *o.Error
				if res[next].err == "" {
					res[next].err = role + " failed"
				}
			} else {
				res[next].value = o.Value
			}
			res[next].missing = false
			next++
		case m.Done != nil && ready && next == n:
			done = true
			break lines
		default:
			stop = fmt.Sprintf("the result channel carried %q out of turn", clip(string(line)))
			break lines
		}
	}
	if !ready && stop == "" {
		msg := "the Python process stopped before taking the " + role + ": " + out.describeEnd(wall)
		if s := strings.TrimSpace(out.stderr); s != "" {
			msg += ": " + clip(s)
		}
		return nil, "", errors.New(msg)
	}
	if !done && stop == "" {
		stop = out.describeEnd(wall)
	}
	if role != "answer" && stop != "" {
		stop = role + ": " + stop
	}
	return res, stop, nil
}

// outcome is what one harness process left behind.
type outcome struct {
	// lines are the result lines read, without their newlines.
	lines [][]byte
	// readErr is a failure reading the result channel (a line too long, too
	// many lines), nil at a clean end of file.
	readErr error
	// deadline reports that the wall-clock limit cut the process off.
	deadline bool
	// signal names the signal that ended the process before its results
	// were complete, "" when it exited; exitCode is its status then.
	signal   string
	exitCode int
	// cpuLimit reports that the process was killed at its CPU-time limit.
	cpuLimit bool
	// closedEarly reports that the result channel closed while the process
	// went on running (until it was killed).
	closedEarly bool
	// stderr is the start of what the process wrote on its standard error
	// before the harness closed it.
	stderr string
}

// describeEnd says why a harness process stopped reporting.
func (o outcome) describeEnd(wall time.Duration) string {
	switch {
	case o.deadline:
		return fmt.Sprintf("wall-clock limit of %v reached", wall)
	case o.readErr != nil:
		return "the result channel broke: " + o.readErr.Error()
	case o.closedEarly:
		return "the result channel closed while the process still ran"
	case o.cpuLimit:
		return "CPU-time limit reached"
	case o.signal != "":
		return "the process was killed by " + o.signal
	default:
		return fmt.Sprintf("the process exited with status %d", o.exitCode)
	}
}

// interpret turns a harness process's result lines into the answer's
// result; res comes with its test names filled in.
func interpret(out outcome, res Result, wall time.Duration) (Result, error) {
	n := len(res.Tests)
	ready, done := false, false
	next := 0
	var stop string
lines:
	for _, line := range out.lines {
		var m harnessLine
		if err := json.Unmarshal(line, &m); err != nil {
			stop = fmt.Sprintf("the result channel carried %q (not a result)", clip(string(line)))
			break
		}
		switch {
		case m.Fatal != nil:
			if ready {
				stop = "the harness failed: " + *m.Fatal
			} else {
				stop = "the harness could not take the answer: " + *m.Fatal
			}
			break lines
		case m.Ready != nil && !ready:
			ready = true
		case m.Test != nil && ready && *m.Test == next && next < n && m.Passed != nil:
			res.Tests[next].Passed = *m.Passed
			if m.Error != nil && !*m.Passed {
				res.Tests[next].Error = *m.Error
			}
			next++
		case m.Done != nil && ready && next == n:
			done = true
			break lines
		default:
			stop = fmt.Sprintf("the result channel carried %q out of turn", clip(string(line)))
			break lines
		}
	}
	if !ready && stop == "" {
		// Nothing of the answer has run yet: the evaluator is at fault.
		msg := "the Python process stopped before taking the answer: " + out.describeEnd(wall)
		if s := strings.TrimSpace(out.stderr); s != "" {
			msg += ": " + clip(s)
		}
		return Result{}, errors.New(msg)
	}
	for _, t := range res.Tests {
		if t.Passed {
			res.Passed++
		}
	}
	res.Reward = float64(res.Passed) / float64(n)
	if !done {
		if stop == "" {
			stop = out.describeEnd(wall)
		}
		for i := next; i < n; i++ {
			res.Tests[i].Error = "not run: " + stop
		}
		res.Note = fmt.Sprintf("%s after %d of %d tests", stop, next, n)
		return res, nil
	}
	if res.Passed == 0 {
		res.Note = commonError(res.Tests)
	}
	return res, nil
}

// commonError summarises why the tests failed: the most frequent error, and
// in how many tests.
func commonError(tests []TestResult) string {
	count := map[string]int{}
	for _, t := range tests {
		if !t.Passed {
			count[t.Error]++
		}
	}
	if len(count) == 0 {
		return ""
	}
	errs := make([]string, 0, len(count))
	for e := range count {
		errs = append(errs, e)
	}
	sort.Slice(errs, func(i, j int) bool {
		if count[errs[i]] != count[errs[j]] {
			return count[errs[i]] > count[errs[j]]
		}
		return errs[i] < errs[j]
	})
	top := errs[0]
	if count[top] == len(tests) {
		return fmt.Sprintf("%s (every test)", top)
	}
	return fmt.Sprintf("%s (%d of %d tests)", top, count[top], len(tests))
}

// clip shortens text for a message.
func clip(s string) string {
	const limit = 300
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > limit {
		r := []rune(s[:limit])
		s = string(r[:len(r)-1]) + "…"
	}
	return s
}

// cpuSeconds is the CPU-time limit, in whole seconds, that goes with a
// wall-clock limit.
func cpuSeconds(wall time.Duration) int {
	return int(math.Ceil(wall.Seconds())) + 1
}
