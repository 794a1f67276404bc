//go:build linux

package pyeval

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// Bounds on what is read back from a harness process, and other constants
// of the sandbox.
const (
	maxLineBytes  = 64 << 10 // one result line in "run" and "probe" modes
	maxValueBytes = 8 << 20  // one result line in "outputs" mode: an output as data
	stderrBytes   = 4 << 10  // the start of its standard error
	probeTimeout  = 30 * time.Second
	waitDelay     = 2 * time.Second
	exitGrace     = time.Second // for a process whose result channel closed early
	nsFlags       = syscall.CLONE_NEWNET | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC
	// staleAge is how old a directory of the evaluator's without a lock
	// must be before start-up cleanup removes it.
	staleAge = time.Minute
	// rootPrefix starts the name of the evaluator's temporary directory.
	rootPrefix = "turnwise-pyeval-"
	lockName   = ".lock"
)

// tmpDirs are the directories that get a private tmpfs in an answer's mount
// namespace; the first is its working directory, HOME and TMPDIR.
var tmpDirs = []string{"/tmp", "/var/tmp", "/dev/shm", "/run/lock"}

// sandbox starts harness processes with the interpreter, ids, namespaces
// and limits New settled on.
type sandbox struct {
	python    string   // the interpreter's executable
	flags     []string // interpreter flags before -c
	opts      Options
	root      bool    // the evaluator runs as root: programs run under pool ids
	mount     bool    // programs get their own mount namespace (root only)
	clone     uintptr // namespace flags
	userns    bool    // map our own ids into a new user namespace
	isolation Isolation
	dir       string   // the evaluator's temporary directory
	lock      *os.File // held open and locked while the evaluator lives
	hide      []string // absolute paths covered in a program's mount namespace
}

// setup is the confinement the harness applies to itself (see harness.py).
type setup struct {
	Mount   bool     `json:"mount"`
	Proc    bool     `json:"proc"`
	Tmpfs   string   `json:"tmpfs"`
	TmpDirs []string `json:"tmp_dirs"`
	Hide    []string `json:"hide"`
	UID     int      `json:"uid"`
	GID     int      `json:"gid"`
}

// confined is what the harness reports of its confinement in probe mode.
type confined struct {
	Tmpfs      []string `json:"tmpfs"`
	Proc       bool     `json:"proc"`
	NoNewPrivs bool     `json:"no_new_privs"`
	UID        int      `json:"uid"`
}

// probeInfo is what the harness says about its interpreter.
type probeInfo struct {
	executable string
	version    string
	confined   confined
}

// newSandbox removes the stale temporary directories of earlier runs, makes
// and locks its own, finds an interpreter that runs in the sandbox and
// settles the isolation.
func newSandbox(ctx context.Context, opts Options) (_ *sandbox, _ probeInfo, err error) {
	base := sandbox{opts: opts, flags: []string{"-s", "-B", "-P"}}
	if opts.StdlibOnly {
		base.flags = append(base.flags, "-S")
	}
	for _, h := range opts.Hide {
		abs, err := filepath.Abs(h)
		if err == nil {
			abs, err = filepath.EvalSymlinks(abs)
		}
		if err != nil {
			return nil, probeInfo{}, fmt.Errorf("hiding %s from answers: %w", h, err)
		}
		base.hide = append(base.hide, abs)
	}
	if os.Geteuid() == 0 {
		base.root = true
		last := opts.FirstUID + 2*opts.Workers - 1
		if opts.FirstUID <= 0 || last >= 65534 {
			return nil, probeInfo{}, fmt.Errorf("user ids %d to %d for %d workers: want ids from 1 to 65533", opts.FirstUID, last, opts.Workers)
		}
		for id := opts.FirstUID; id <= last; id++ {
			if u, err := user.LookupId(strconv.Itoa(id)); err == nil {
				return nil, probeInfo{}, fmt.Errorf("user id %d, in the pool from %d for %d workers, belongs to the account %s: choose another first id", id, opts.FirstUID, opts.Workers, u.Username)
			}
		}
		base.isolation.User = fmt.Sprintf("uids %d–%d, no account: one per running answer, another for its ground truth", opts.FirstUID, last)
		base.isolation.Dropped = true
	} else {
		name := strconv.Itoa(os.Geteuid())
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
		base.isolation.User = fmt.Sprintf("%s (uid %d)", name, os.Geteuid())
	}
	base.isolation.StaleRemoved = removeStale(os.TempDir())
	if base.dir, base.lock, err = makeRoot(); err != nil {
		return nil, probeInfo{}, err
	}
	defer func() {
		if err != nil {
			base.close()
		}
	}()

	candidates, err := pythonCandidates(opts.Python)
	if err != nil {
		return nil, probeInfo{}, err
	}
	var failures []string
	for _, cand := range candidates {
		sb, info, err := base.settle(ctx, cand)
		if err == nil {
			if sb.mount {
				// Programs make their files in their own tmpfs: the
				// evaluator needs no directory of its own.
				if err := sb.close(); err != nil {
					return nil, probeInfo{}, fmt.Errorf("removing the evaluator's temporary directory: %w", err)
				}
			}
			return sb, info, nil
		}
		if ctx.Err() != nil {
			return nil, probeInfo{}, fmt.Errorf("starting the Python evaluator: %w", ctx.Err())
		}
		failures = append(failures, err.Error())
	}
	who := ""
	if base.root {
		who = " as uid " + strconv.Itoa(opts.FirstUID)
	}
	return nil, probeInfo{}, fmt.Errorf("no Python interpreter runs%s: %s", who, strings.Join(failures, "; "))
}

// makeRoot makes the evaluator's temporary directory and locks it: the
// lock, held while the evaluator lives, tells start-up cleanup that the
// directory is in use.
func makeRoot() (string, *os.File, error) {
	dir, err := os.MkdirTemp("", rootPrefix)
	if err != nil {
		return "", nil, fmt.Errorf("making the evaluator's temporary directory: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, lockName), os.O_CREATE|os.O_RDWR, 0o600)
	if err == nil {
		if err = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			lock.Close()
		}
	}
	if err == nil {
		if err = os.Chmod(dir, 0o711); err != nil { // programs enter their own directories, list none
			lock.Close()
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("locking the evaluator's temporary directory %s: %w", dir, err)
	}
	return dir, lock, nil
}

// removeStale removes from tmp the directories of evaluators that are no
// longer running (killed before they could clean up) and returns their
// paths. A directory is stale when its lock can be taken or, lacking a
// lock, when it is older than staleAge.
func removeStale(tmp string) []string {
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), rootPrefix) {
			continue
		}
		dir := filepath.Join(tmp, e.Name())
		if stale(dir) && removeAll(dir) == nil {
			removed = append(removed, dir)
		}
	}
	return removed
}

// stale reports whether dir belongs to an evaluator that is gone.
func stale(dir string) bool {
	lock, err := os.Open(filepath.Join(dir, lockName))
	if err != nil {
		fi, err := os.Stat(dir)
		return err == nil && time.Since(fi.ModTime()) > staleAge
	}
	defer lock.Close()
	return syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
}

// close removes the evaluator's temporary directory and releases its lock.
func (sb *sandbox) close() error {
	if sb.lock == nil {
		return nil
	}
	err := removeAll(sb.dir)
	sb.lock.Close()
	sb.lock = nil
	return err
}

// pythonCandidates lists the executables python may mean: itself when it
// names a path, else every match on PATH in order.
func pythonCandidates(python string) ([]string, error) {
	if strings.ContainsRune(python, '/') {
		return []string{python}, nil
	}
	var out []string
	seen := map[string]bool{}
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, python)
		fi, err := os.Stat(p)
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			continue
		}
		if real, err := filepath.EvalSymlinks(p); err == nil {
			if seen[real] {
				continue
			}
			seen[real] = true
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no Python interpreter: %q is not on PATH (install python3 or pass its path)", python)
	}
	return out, nil
}

// settle probes one candidate interpreter: first with namespaces and, as
// root, its own mounts; then without the mounts if they fail, and without
// namespaces if the kernel refuses them; without -P if the interpreter does
// not know it. Then it probes the executable the interpreter reports, which
// is what programs run under.
func (base sandbox) settle(ctx context.Context, cand string) (*sandbox, probeInfo, error) {
	sb := base
	sb.flags = append([]string{}, base.flags...)
	sb.python = cand
	sb.clone = nsFlags
	sb.userns = !sb.root
	sb.mount = sb.root
	info, err := sb.probe(ctx)
	if err != nil && strings.Contains(err.Error(), "Unknown option") {
		// Python before 3.11: the harness drops the current directory from
		// the import path itself.
		sb.flags = slicesDelete(sb.flags, "-P")
		info, err = sb.probe(ctx)
	}
	if err != nil && sb.mount && strings.Contains(err.Error(), "mounting") {
		sb.isolation.MountRefused = err.Error()
		sb.mount = false
		info, err = sb.probe(ctx)
	}
	if err != nil && nsRefused(err) {
		sb.isolation.Refused = err.Error()
		var errno syscall.Errno
		if errors.As(err, &errno) {
			sb.isolation.Refused = errno.Error()
		}
		sb.clone, sb.userns, sb.mount = 0, false, false
		info, err = sb.probe(ctx)
	}
	if err != nil {
		return nil, probeInfo{}, fmt.Errorf("%s: %w", cand, err)
	}
	sb.isolation.Network = sb.clone&syscall.CLONE_NEWNET != 0
	sb.isolation.PID = sb.clone&syscall.CLONE_NEWPID != 0
	sb.isolation.IPC = sb.clone&syscall.CLONE_NEWIPC != 0
	sb.isolation.UserNamespace = sb.userns
	if info.executable != "" && info.executable != cand {
		sb.python = info.executable
		again, err := sb.probe(ctx)
		if err != nil {
			return nil, probeInfo{}, fmt.Errorf("%s (sys.executable of %s): %w", info.executable, cand, err)
		}
		info = again
	}
	if info.executable == "" {
		info.executable = sb.python
	}
	sb.isolation.TmpDirs = info.confined.Tmpfs
	sb.isolation.TmpSize = sb.opts.TmpSize
	sb.isolation.Proc = info.confined.Proc
	sb.isolation.NoNewPrivs = info.confined.NoNewPrivs
	sb.isolation.Hidden = len(sb.hide)
	if !sb.mount {
		sb.isolation.Hidden = 0
	}
	return &sb, info, nil
}

// slicesDelete returns s without the elements equal to v.
func slicesDelete(s []string, v string) []string {
	out := s[:0]
	for _, x := range s {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}

// nsRefused reports whether a start failure is the kernel refusing the
// namespaces.
func nsRefused(err error) bool {
	return errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) ||
		errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EUSERS) ||
		errors.Is(err, syscall.ENOSYS)
}

// probe runs the harness in probe mode, under the first id of the pool.
func (sb *sandbox) probe(ctx context.Context) (probeInfo, error) {
	out, err := sb.run(ctx, "probe", nil, probeTimeout, sb.opts.FirstUID)
	if err != nil {
		return probeInfo{}, err
	}
	if len(out.lines) == 0 {
		msg := "the harness reported nothing: " + out.describeEnd(probeTimeout)
		if s := strings.TrimSpace(out.stderr); s != "" {
			msg += ": " + clip(s)
		}
		return probeInfo{}, errors.New(msg)
	}
	var p struct {
		Executable string   `json:"executable"`
		Version    string   `json:"version"`
		Confined   confined `json:"confined"`
		Fatal      *string  `json:"fatal"`
	}
	if err := json.Unmarshal(out.lines[0], &p); err != nil || p.Fatal != nil || p.Version == "" {
		if p.Fatal != nil {
			return probeInfo{}, fmt.Errorf("the harness failed: %s", *p.Fatal)
		}
		return probeInfo{}, fmt.Errorf("the harness reported %q", clip(string(out.lines[0])))
	}
	return probeInfo{executable: p.Executable, version: strings.Join(strings.Fields(p.Version), " "), confined: p.Confined}, nil
}

// env is the environment of a harness process whose working directory is
// dir. PYTHONHASHSEED is why the interpreter does not run with -I, which
// would ignore it.
func env(dir string) []string {
	return []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + dir,
		"TMPDIR=" + dir,
		"LANG=C.UTF-8",
		"LC_ALL=C.UTF-8",
		"PYTHONHASHSEED=0",
		"PYTHONDONTWRITEBYTECODE=1",
		"PYTHONIOENCODING=utf-8",
		"PYTHONNOUSERSITE=1",
		"PYTHONSAFEPATH=1",
	}
}

// run starts one harness process in mode ("run", "outputs" or "probe")
// under uid (as root; ignored otherwise) with input on its standard input
// and collects its result lines until it reports done, closes the channel,
// or wall passes. The process group (and, with a PID namespace, everything
// the process started) is killed before run returns. The error is for
// failures to start the process or to make its directory, and for ctx being
// done.
func (sb *sandbox) run(ctx context.Context, mode string, input []byte, wall time.Duration, uid int) (out outcome, err error) {
	if err := ctx.Err(); err != nil {
		return outcome{}, err
	}
	conf := setup{Mount: sb.mount, Proc: sb.mount && sb.clone&syscall.CLONE_NEWPID != 0,
		Tmpfs:   fmt.Sprintf("size=%d,nr_inodes=%d", sb.opts.TmpSize, tmpInodes),
		TmpDirs: tmpDirs, Hide: sb.hide, UID: uid, GID: uid}
	dir := tmpDirs[0]
	if !sb.mount {
		// No mount namespace: a private directory in the evaluator's own,
		// owned by the program's id.
		if dir, err = os.MkdirTemp(sb.dir, "run-"); err != nil {
			return outcome{}, fmt.Errorf("making the program's temporary directory: %w", err)
		}
		defer func() {
			if rerr := removeAll(dir); rerr != nil && err == nil {
				err = fmt.Errorf("removing the program's temporary directory: %w", rerr)
			}
		}()
		if sb.root {
			if err := os.Chown(dir, uid, uid); err != nil {
				return outcome{}, fmt.Errorf("handing the temporary directory %s to uid %d: %w", dir, uid, err)
			}
		}
	}
	setupJSON, err := json.Marshal(conf)
	if err != nil {
		return outcome{}, fmt.Errorf("encoding the sandbox setup: %w", err)
	}

	inR, inW, err := os.Pipe()
	if err != nil {
		return outcome{}, fmt.Errorf("making the input pipe: %w", err)
	}
	resR, resW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return outcome{}, fmt.Errorf("making the result pipe: %w", err)
	}
	defer resR.Close()

	m := sb.opts
	args := append(append([]string{}, sb.flags...), "-c", harnessSource, mode,
		strconv.FormatInt(m.Memory, 10),
		strconv.Itoa(cpuSeconds(wall)),
		strconv.FormatInt(m.FileSize, 10),
		strconv.Itoa(m.Processes),
		strconv.Itoa(openFiles),
		string(setupJSON))
	cmd := exec.Command(sb.python, args...)
	cmd.Dir = dir
	if sb.mount {
		cmd.Dir = "/" // the harness moves to its own /tmp once mounted
	}
	cmd.Env = env(dir)
	cmd.Stdin = inR
	stderr := &headWriter{limit: stderrBytes}
	cmd.Stderr = stderr
	cmd.ExtraFiles = []*os.File{resW} // descriptor 3
	cmd.WaitDelay = waitDelay
	attr := &syscall.SysProcAttr{
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
		Cloneflags: sb.clone,
	}
	switch {
	case sb.mount:
		// The harness starts as root in its own mount namespace (made
		// private before it runs), mounts, then changes to uid itself.
		attr.Unshareflags = syscall.CLONE_NEWNS
	case sb.root:
		attr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}
	}
	if sb.userns {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}}
	}
	cmd.SysProcAttr = attr
	start := time.Now()
	err = cmd.Start()
	inR.Close()
	resW.Close()
	if err != nil {
		inW.Close()
		return outcome{}, fmt.Errorf("starting %s: %w", sb.python, err)
	}
	go func() {
		inW.Write(input) // fails only if the process is gone
		inW.Close()
	}()

	kill := func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Process.Kill()
	}
	resR.SetReadDeadline(start.Add(wall))
	stopWatch := context.AfterFunc(ctx, func() { resR.SetReadDeadline(time.Unix(1, 0)) })
	limit := maxLineBytes
	if mode == "outputs" {
		limit = maxValueBytes
	}
	out.lines, out.readErr = readLines(resR, mode, limit)
	stopWatch()
	if errors.Is(out.readErr, os.ErrDeadlineExceeded) {
		out.readErr = nil
		out.deadline = true
	}
	finished := len(out.lines) > 0 && (mode == "probe" || isDone(out.lines[len(out.lines)-1]))
	if !finished && !out.deadline && ctx.Err() == nil {
		// The channel closed early: let the process end by itself, so that
		// its status says why, before it is killed.
		grace := min(exitGrace, time.Until(start.Add(wall)))
		out.closedEarly = !waitExit(cmd.Process.Pid, grace)
	}
	kill()
	werr := cmd.Wait()
	out.stderr = stderr.String()
	if ctx.Err() != nil {
		return outcome{}, ctx.Err()
	}
	if out.closedEarly {
		return out, nil
	}
	if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		if st.Signaled() {
			out.signal = st.Signal().String()
			cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			if st.Signal() == syscall.SIGKILL && cpu >= time.Duration(cpuSeconds(wall))*time.Second-100*time.Millisecond {
				out.cpuLimit = true
			}
		} else {
			out.exitCode = st.ExitStatus()
		}
	} else if werr != nil {
		out.signal = werr.Error()
	}
	return out, nil
}

// waitExit waits up to timeout for the process pid to exit, without
// reaping it (so that its process group stays safe to kill and os/exec can
// still wait for it), and reports whether it did.
func waitExit(pid int, timeout time.Duration) bool {
	if timeout <= 0 {
		return false
	}
	exited := make(chan bool, 1)
	go func() {
		const pPID, wExited, wNoWait = 1, 0x4, 0x01000000
		var info [128]byte // siginfo_t
		for {
			_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
				uintptr(unsafe.Pointer(&info[0])), wExited|wNoWait, 0, 0)
			if errno != syscall.EINTR {
				exited <- errno == 0
				return
			}
		}
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case ok := <-exited:
		return ok
	case <-t.C:
		return false
	}
}

// readLines reads result lines, each at most limit bytes and all together
// at most maxTotal(limit), until the harness says it is done (or, in probe
// mode, after the first line), the channel closes, or its deadline passes.
func readLines(r io.Reader, mode string, limit int) ([][]byte, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var lines [][]byte
	// ready, one line per test and done; tasks have ten tests, but allow
	// for many more.
	const maxLines = 10000
	total := 0
	var pending []byte
	for len(lines) < maxLines {
		chunk, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull || (err == nil && len(pending) > 0) {
			pending = append(pending, chunk...)
			if len(pending) > limit {
				return lines, fmt.Errorf("a result line longer than %d bytes", limit)
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			chunk, pending = pending, nil
		}
		if err != nil {
			if err == io.EOF {
				err = nil // a partial last line is dropped
			}
			return lines, err
		}
		line := bytes.TrimSpace(chunk)
		if len(line) == 0 {
			continue
		}
		if total += len(line); total > maxTotal(limit) {
			return lines, fmt.Errorf("more than %d bytes of results", maxTotal(limit))
		}
		lines = append(lines, bytes.Clone(line))
		if mode == "probe" || isDone(line) {
			return lines, nil
		}
	}
	return lines, fmt.Errorf("more than %d result lines", maxLines)
}

// maxTotal is the most a harness process may report in all, given the limit
// on one line.
func maxTotal(limit int) int { return 8 * limit }

// isDone reports whether a result line is the harness's last.
func isDone(line []byte) bool {
	var m harnessLine
	return json.Unmarshal(line, &m) == nil && (m.Done != nil || m.Fatal != nil)
}

// headWriter keeps the first limit bytes written to it and drops the rest.
type headWriter struct {
	limit int
	buf   bytes.Buffer
}

// Write keeps what fits and reports everything written.
func (w *headWriter) Write(p []byte) (int, error) {
	if room := w.limit - w.buf.Len(); room > 0 {
		w.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// String returns what was kept.
func (w *headWriter) String() string { return w.buf.String() }

// removeAll removes dir and everything in it, first making directories the
// answer locked writable again.
func removeAll(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(path, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}
