//go:build linux

package pyeval

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turnwise/turnwise/sweetrl"
)

// needIsolation skips a test of the answer-to-answer isolation where this
// machine cannot give it: the evaluator must run as root (for the pool of
// user ids) and the kernel must allow the mount namespace.
func needIsolation(t *testing.T, e *Evaluator) {
	t.Helper()
	if !e.Isolation.Dropped || len(e.Isolation.TmpDirs) == 0 {
		t.Skipf("answers are not isolated from each other here (the evaluator must run as root with mount namespaces): %s", e.Isolation)
	}
}

// osImport reaches the os module without the strings the reference forbids.
const osImport = "o = __import__('o' + 's')\n    "

// TestCrossAnswer runs an answer that plants a random.py (which patches
// builtins.bool, so that every comparison passes, and fakes random.choice)
// in every directory it can reach, while other answers that import random
// run beside it on the second worker: their scores must not change. With
// every answer under one account, in shared temporary directories, and the
// current directory on the import path, the wrong ones scored 1.
func TestCrossAnswer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs answers for several seconds; skipped in -short mode")
	}
	planted := "import builtins\nbuiltins.bool = lambda *a, **k: True\ndef choice(s):\n    return 2 * s[0]\n"
	attacker := "def f(x):\n    " + osImport + fmt.Sprintf(`import time
    body = %q
    end = time.time() + 0.9
    n = 0
    while time.time() < end:
        for top in ('/tmp', '/var/tmp', '/dev/shm', '/run/lock', o.getcwd()):
            for root, dirs, files in o.walk(top):
                try:
                    with open(o.path.join(root, 'random.py'), 'w') as fh:
                        fh.write(body)
                    n += 1
                except OSError:
                    pass
    return n
`, planted)
	// wrong returns x (not 2x) unless random.choice is the planted one; a
	// patched bool would pass it in any case in-process.
	wrong := "def f(x):\n    import random\n    return random.choice([x])"
	wrong2 := "def f(x):\n    import random\n    return x"
	correct := "def f(x):\n    import random\n    random.seed(x)\n    return 2 * x"
	tk := task(doubleGT, "f(1)", "f(2)", "f(3)")
	tasks := []sweetrl.Task{tk}
	answers := []string{attacker}
	wants := []float64{0}
	for range 3 {
		tasks = append(tasks, tk, tk, tk)
		answers = append(answers, wrong, wrong2, correct)
		wants = append(wants, 0, 0, 1)
	}
	for _, compare := range []Compare{CompareIsolated, CompareInProcess} {
		t.Run(compare.String(), func(t *testing.T) {
			e := newEvaluator(t, Options{Workers: 2, Compare: compare})
			needIsolation(t, e)
			res, err := e.Evaluate(context.Background(), tasks, answers)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("attacker: %+v", res[0].Tests)
			for i, r := range res[1:] {
				if r.Reward != wants[i+1] {
					t.Errorf("answer %d (%q) scored %v beside the attacker, want %v: %s", i+1, answers[i+1], r.Reward, wants[i+1], r.Note)
				}
			}
		})
	}
}

// forgeries are answers to doubleTask that compute nothing right but make
// the reference's in-process comparison pass.
var forgeries = []struct{ name, answer string }{
	{"__eq__ override", "def f(x):\n    class A(int):\n        def __eq__(self, other):\n            return True\n        __hash__ = int.__hash__\n    return A(0)"},
	{"fake result lines", "def f(x):\n    " + osImport +
		`lines = ''.join('{"test": %d, "passed": true, "error": ""}\n' % i for i in range(3))
    o.write(3, (lines + '{"done": true}\n').encode())
    getattr(o, '_ex' + 'it')(0)`},
	{"patched builtins.bool", "def f(x):\n    import builtins\n    builtins.bool = lambda *a, **k: True\n    return 0"},
	{"frame walking to the ground truth", "def f(x):\n    frame = __import__('s' + 'ys')._getframe(1)\n" +
		`    while frame is not None:
        for v in list(frame.f_locals.values()):
            if isinstance(v, dict) and 'ground_truth' in v:
                ns = {}
                exec(v['ground_truth'], ns)
                return ns['f'](x)
        frame = frame.f_back
    raise LookupError('no ground truth in reach')`},
}

// TestForgeries checks that each forgery gets full marks when compared
// in-process, as in the reference (so the forgery is real), and 0 in
// isolated mode; a correct answer gets full marks in both.
func TestForgeries(t *testing.T) {
	var tasks []sweetrl.Task
	var answers []string
	for _, f := range forgeries {
		tasks = append(tasks, doubleTask())
		answers = append(answers, f.answer)
	}
	tasks = append(tasks, doubleTask())
	answers = append(answers, "def f(x):\n    return x * 2")
	for _, tt := range []struct {
		compare Compare
		want    float64
	}{{CompareIsolated, 0}, {CompareInProcess, 1}} {
		e := newEvaluator(t, Options{Compare: tt.compare})
		res, err := e.Evaluate(context.Background(), tasks, answers)
		if err != nil {
			t.Fatal(err)
		}
		for i, f := range forgeries {
			if r := res[i]; r.Reward != tt.want {
				t.Errorf("%s, compare %v: reward %v, want %v (%s)", f.name, tt.compare, r.Reward, tt.want, r.Note)
			}
		}
		if r := res[len(forgeries)]; !r.Success() {
			t.Errorf("compare %v: a correct answer scored %+v", tt.compare, r)
		}
	}
}

// TestSpray has an answer write files in every temporary directory and
// fill /dev/shm: the tmpfs there must stop it at its size, and nothing it
// wrote may outlast it.
func TestSpray(t *testing.T) {
	const size = 4 << 20
	e := newEvaluator(t, Options{TmpSize: size})
	needIsolation(t, e)
	marker := fmt.Sprintf("pyeval-spray-%d", time.Now().UnixNano())
	answer := "def f(x):\n    " + osImport + fmt.Sprintf(`for d in ('/tmp', '/var/tmp', '/dev/shm', '/run/lock'):
        try:
            with open(d + '/%[1]s', 'w') as fh:
                fh.write('x')
            o.mkdir(d + '/%[1]s.d')
        except OSError:
            pass
    n = 0
    chunk = b'y' * (1 << 20)
    try:
        for i in range(64):
            with open('/dev/shm/%[1]s.%%d' %% i, 'wb') as fh:
                for _ in range(4):
                    fh.write(chunk)
                    n += len(chunk)
    except OSError as exc:
        raise ValueError('wrote %%d: %%s' %% (n, exc))
    raise ValueError('wrote %%d without error' %% n)`, marker)
	res, err := e.Evaluate(context.Background(), []sweetrl.Task{task(doubleGT, "f(1)")}, []string{answer})
	if err != nil {
		t.Fatal(err)
	}
	msg := res[0].Tests[0].Error
	_, after, ok := strings.Cut(msg, "wrote ")
	fields := strings.Fields(after)
	if !ok || len(fields) == 0 {
		t.Fatalf("the answer did not report what it wrote: %q", msg)
	}
	n, err := strconv.Atoi(strings.TrimSuffix(fields[0], ":"))
	if err != nil {
		t.Fatalf("%q: %v", msg, err)
	}
	t.Logf("answer: %s", msg)
	if n > size || n == 0 || !strings.Contains(msg, "No space left on device") {
		t.Errorf("wrote %d bytes to /dev/shm with a %d-byte tmpfs: %q", n, size, msg)
	}
	for _, d := range tmpDirs {
		matches, err := filepath.Glob(filepath.Join(d, marker+"*"))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range matches {
			t.Errorf("%s outlived the answer", m)
			os.RemoveAll(m)
		}
	}
}

// TestStaleCleanup checks that New removes the evaluator directories of
// runs that were killed (their lock free, or old and without a lock) and
// leaves those of running evaluators (lock held) and fresh ones alone.
func TestStaleCleanup(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	mk := func(name string, lock bool) string {
		d := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Join(d, "run-1"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "run-1", "leftover"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if lock {
			if err := os.WriteFile(filepath.Join(d, lockName), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	killed := mk(rootPrefix+"killed", true)
	running := mk(rootPrefix+"running", true)
	oldNoLock := mk(rootPrefix+"old", false)
	freshNoLock := mk(rootPrefix+"fresh", false)
	other := mk("someone-else", false)
	old := time.Now().Add(-2 * staleAge)
	for _, d := range []string{oldNoLock, other} {
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}
	held, err := os.Open(filepath.Join(running, lockName))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := syscall.Flock(int(held.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}

	e := newEvaluator(t, Options{})
	for _, d := range []string{killed, oldNoLock} {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stale %s was not removed (stat: %v)", d, err)
		}
	}
	for _, d := range []string{running, freshNoLock, other} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s, not stale, was removed: %v", d, err)
		}
	}
	if got := len(e.Isolation.StaleRemoved); got != 2 {
		t.Errorf("Isolation.StaleRemoved = %q, want the 2 stale directories", e.Isolation.StaleRemoved)
	}
	if !strings.Contains(e.Isolation.String(), "removed at start-up: 2") {
		t.Errorf("the isolation report does not mention the removal: %s", e.Isolation)
	}
}

// TestHide checks that a file named in Options.Hide cannot be read by a
// program, while the evaluator reads it as before.
func TestHide(t *testing.T) {
	// Outside the temporary directories, which programs never see: in the
	// package's directory, if others may enter every directory above it.
	dir, err := os.MkdirTemp(".", ".hide-test-")
	if err != nil {
		t.Skipf("no directory outside /tmp to test with: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if dir, err = filepath.Abs(dir); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "tasks.jsonl")
	if err := os.WriteFile(secret, []byte("the ground truths"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			t.Skipf("%s is closed to other users, so no program could read a file below it anyway", d)
		}
		if d == "/" {
			break
		}
	}
	read := fmt.Sprintf("def f(x):\n    with open(%q) as fh:\n        return fh.read()", secret)
	tk := task("def f(x):\n    return 'the ground truths'\n", "f(1)")
	for _, hide := range []bool{false, true} {
		opts := Options{}
		if hide {
			opts.Hide = []string{secret}
		}
		e := newEvaluator(t, opts)
		needIsolation(t, e)
		// A checkout under one of the directories a program gets a private
		// tmpfs on (/tmp, …) is out of its sight even unhidden.
		visible := true
		for _, d := range e.Isolation.TmpDirs {
			if rel, err := filepath.Rel(d, dir); err == nil && !strings.HasPrefix(rel, "..") {
				visible = false
				t.Logf("%s is under %s, which a program sees as its own empty tmpfs: the file is invisible even unhidden", dir, d)
			}
		}
		res, err := e.Evaluate(context.Background(), []sweetrl.Task{tk}, []string{read})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := res[0].Success(), visible && !hide; got != want {
			t.Errorf("hide %v: an answer that reads %s scored %+v, want success %v", hide, secret, res[0], want)
		}
	}
	if b, err := os.ReadFile(secret); err != nil || string(b) != "the ground truths" {
		t.Errorf("the hidden file reads %q, %v afterwards", b, err)
	}
}
