package pyeval

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/turnwise/turnwise/sweetrl"
)

// leakMarker is an argument no other process has: the fork test's children
// sleep with it, and none may outlive the evaluation.
const leakMarker = "417.25"

// sleepersAlive counts processes running "sleep 417.25".
func sleepersAlive(t *testing.T) int {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err == nil && bytes.Equal(b, []byte("sleep\x00"+leakMarker+"\x00")) {
			n++
		}
	}
	return n
}

// TestHostile runs hostile answers, each followed by a correct one, in one
// batch: each must be contained and score 0, and the correct ones after
// them 1.
func TestHostile(t *testing.T) {
	if testing.Short() {
		t.Skip("hostile answers take several seconds; skipped in -short mode")
	}
	e := newEvaluator(t, Options{Workers: 4})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port

	// A directory of the evaluator's that others may enter but not write
	// to.
	outside, err := os.MkdirTemp("", "pyeval-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	if err := os.Chmod(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	pwned := filepath.Join(outside, "pwned")

	gt := "def f(x):\n    return x + 1\n"
	tk := task(gt, "f(1)", "f(2)")
	correct := "def f(x):\n    return 1 + x"
	const osMod = "o = __import__('o' + 's')\n    "
	cases := []struct {
		name   string
		answer string
		note   string // must appear in the Note
		skip   func() string
	}{
		{name: "infinite loop", answer: "def f(x):\n    while True:\n        pass", note: "timed out"},
		{name: "loop that swallows the alarm",
			answer: "def f(x):\n    while True:\n        try:\n            while True:\n                pass\n        except BaseException:\n            pass",
			note:   "wall-clock limit"},
		{name: "fork bomb", // fork fails with BlockingIOError at the process limit
			answer: "def f(x):\n    " + osMod + "while True:\n        try:\n            o.fork()\n        except BlockingIOError:\n            pass",
			note:   "timed out"},
		{name: "forked sleepers",
			answer: "def f(x):\n    " + osMod + "for _ in range(5):\n        if o.fork() == 0:\n            o.execvp('sleep', ['sleep', '" + leakMarker + "'])\n    return x"},
		{name: "50 GB allocation", answer: "def f(x):\n    b = bytearray(50 * 1024 ** 3)\n    return len(b)", note: "MemoryError"},
		{name: "growing address space", // untouched pages: only the limit stops it
			answer: "def f(x):\n    import mmap\n    keep = []\n    while True:\n        keep.append(mmap.mmap(-1, 256 << 20))", note: "Cannot allocate memory"},
		{name: "network connection",
			answer: fmt.Sprintf("def f(x):\n    import socket\n    s = socket.create_connection(('127.0.0.1', %d), timeout=0.5)\n    s.close()\n    return x + 1", port),
			skip: func() string {
				if !e.Isolation.Network {
					return "answers are not in their own network namespace here: " + e.Isolation.Lines()[1]
				}
				return ""
			}},
		{name: "write outside the temporary directory",
			answer: fmt.Sprintf("def f(x):\n    with open(%q, 'w') as fh:\n        fh.write('x')\n    return x + 1", pwned),
			note:   "PermissionError", // FileNotFoundError with a private /tmp: see below
			skip: func() string {
				if !e.Isolation.Dropped {
					return "answers run as the evaluator's own account here, which may write there"
				}
				return ""
			}},
		{name: "megabytes of output",
			answer: "def f(x):\n    " + osMod + "chunk = 'y' * (1 << 20)\n    for _ in range(8):\n        print(chunk)\n        o.write(1, chunk.encode())\n        o.write(2, chunk.encode())\n    return x",
			note:   "outputs differ"},
		{name: "garbage on the result channel",
			answer: "def f(x):\n    " + osMod + "o.write(3, b'garbage\\n' * 100000)\n    return x + 1",
			note:   "result channel"},
		{name: "crash", answer: "def f(x):\n    import ctypes\n    return ctypes.string_at(0)", note: "killed by"},
		{name: "closes the result channel", answer: "def f(x):\n    " + osMod + "o.close(3)\n    return x + 1", note: "exited with status 1"},
	}
	if len(e.Isolation.TmpDirs) > 0 {
		// The directory is in the evaluator's /tmp, which answers do not
		// see.
		for i := range cases {
			if cases[i].name == "write outside the temporary directory" {
				cases[i].note = "FileNotFoundError"
			}
		}
	}
	var tasks []sweetrl.Task
	var answers []string
	for _, c := range cases {
		tasks = append(tasks, tk, tk)
		answers = append(answers, c.answer, correct)
	}
	// Output that floods but answers right still scores.
	tasks = append(tasks, tk)
	answers = append(answers, "def f(x):\n    print('z' * (8 << 20))\n    return x + 1")

	start := time.Now()
	res, err := e.Evaluate(context.Background(), tasks, answers)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d answers in %v", len(answers), time.Since(start))
	for i, r := range res {
		t.Logf("answer %d: %d/%d %s", i, r.Passed, r.Total, r.Note)
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.skip != nil {
				if why := c.skip(); why != "" {
					t.Skip(why)
				}
			}
			r, next := res[2*i], res[2*i+1]
			if r.Reward != 0 {
				t.Errorf("hostile answer scored %v: %+v", r.Reward, r)
			}
			if !strings.Contains(r.Note, c.note) {
				t.Errorf("note %q does not contain %q", r.Note, c.note)
			}
			if !next.Success() {
				t.Errorf("the correct answer after it scored %+v", next)
			}
		})
	}
	if r := res[len(res)-1]; !r.Success() {
		t.Errorf("a correct answer that prints 8 MB scored %+v", r)
	}
	select {
	case <-accepted:
		if e.Isolation.Network {
			t.Errorf("an answer reached a listener on the host's loopback")
		}
	default:
	}
	if _, err := os.Stat(pwned); !errors.Is(err, os.ErrNotExist) && e.Isolation.Dropped {
		t.Errorf("an answer wrote %s (stat: %v)", pwned, err)
	}
	if n := sleepersAlive(t); n > 0 {
		t.Errorf("%d processes an answer started outlived it", n)
	}
}
