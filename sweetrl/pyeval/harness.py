# Runs one program (an answer, or a task's ground truth) of one ColBench
# backend task. Started by the Go package pyeval, one process per program:
#
#   python -c <this file> MODE MEMORY CPU FSIZE NPROC NOFILE SETUP
#
# MODE is "run", "outputs" or "probe". SETUP is a JSON object saying how to
# confine the process before anything it is given runs:
#
#   {"mount": bool, "proc": bool, "tmpfs": "size=…,nr_inodes=…",
#    "tmp_dirs": [path, ...], "hide": [path, ...], "uid": int, "gid": int}
#
# With "mount", the process has been started as root in its own mount
# namespace: it makes every mount private, mounts a fresh size-capped tmpfs
# on each of tmp_dirs (the first, /tmp, becomes its working directory, HOME
# and TMPDIR), a fresh /proc when "proc" (it is then the first process of
# its own PID namespace), covers each path in "hide" (an empty file or an
# empty read-only directory), and changes to uid and gid with no
# supplementary groups. In every case it sets no_new_privs and drops the
# current directory from the import path. The resource limits are set next,
# before the input is read. The input is one JSON object on standard input:
#
#   run:     {"answer": str, "ground_truth": str, "tests": [[name, call], ...],
#             "module_scope": bool, "test_timeout": seconds}
#   outputs: {"program": str, "tests": [[name, call], ...],
#             "module_scope": bool, "test_timeout": seconds (0: none)}
#
# Results go out as JSON lines on file descriptor 3, which nothing else
# writes to: {"ready": true} once the input is read, then one line per test,
# in order, then {"done": true}. In "run" mode a test's line is
# {"test": i, "passed": bool, "error": str}; in "outputs" mode it is
# {"test": i, "value": V} or {"test": i, "error": str}, V being the
# program's output as tagged data (see encode). Standard input, output and
# error are /dev/null while the code under test runs. "probe" writes one
# line describing the interpreter and the confinement obtained, and exits.
#
# "run" scores as the SWEET-RL reference does, in one process: for each
# test, the ground truth and then the answer are executed and the test's call
# expression evaluated; the answer's part runs under a one-shot wall-clock
# alarm (1 s there); the test passes when the ground truth's output is not
# None and equals the answer's. An exception anywhere makes that side's
# output None, so the test fails. "outputs" runs one program alone and
# reports what it returned, for the evaluator to compare.
#
# The reference executes each program with exec() inside a function and then
# evaluates the call with eval() in the same frame. Under Python 3.10 and
# 3.11 both calls then share the frame's locals dictionary, whose keys are
# the function's parameters (function_definition and test_case); names the
# program defines at top level land in that dictionary, not in the globals
# its functions see, so a function that uses a top-level import, helper,
# constant or itself fails with NameError. run_in_function_frame reproduces
# that explicitly, so the result does not depend on the interpreter's
# version (Python 3.13 changed what locals() returns in a function). The
# globals are a fresh dictionary per test rather than the reference module's.
#
# module_scope runs each program as a module instead: one namespace for its
# top-level names and its functions.

import base64
import json
import os
import resource
import signal
import sys

MAIN_PID = os.getpid()
PROTO_FD = 3
MODULE_NAME = "colbench_answer"  # not "__main__": guarded demo code stays off
TEXT_LIMIT = 300
MAX_DEPTH = 100  # nesting of an output sent as data

# Mount flags (linux/mount.h) and the prctl option for no_new_privs.
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
PR_SET_NO_NEW_PRIVS = 38
PR_SET_PDEATHSIG = 1


def libc():
    import ctypes

    lib = ctypes.CDLL(None, use_errno=True)

    def call(name, *args):
        if getattr(lib, name)(*args) != 0:
            err = ctypes.get_errno()
            raise OSError(err, "%s: %s" % (name, os.strerror(err)))

    return ctypes, call


def mount(call, ctypes, source, target, fstype, flags, data):
    enc = lambda v: None if v is None else v.encode()
    try:
        call("mount", enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data))
    except OSError as exc:
        raise OSError(exc.errno, "mounting %s on %s: %s" % (fstype or source, target, os.strerror(exc.errno)))


def confine(setup):
    """Confines this process as SETUP says (see the top of the file) and
    returns what it obtained, for the probe to report."""
    got = {}
    try:
        ctypes, call = libc()
    except ImportError as exc:  # an interpreter built without ctypes
        if setup.get("mount"):
            raise OSError("mounting needs the ctypes module: %s" % exc)
        ctypes = None
    if setup.get("mount"):
        mount(call, ctypes, None, "/", None, MS_REC | MS_PRIVATE, None)
        for path in setup.get("hide") or []:
            if os.path.isdir(path):
                mount(call, ctypes, "tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,nr_inodes=1,mode=0")
            else:
                mount(call, ctypes, "/dev/null", path, None, MS_BIND, None)
        uid, gid = setup["uid"], setup["gid"]
        mounted = []
        for i, path in enumerate(setup["tmp_dirs"]):
            if not os.path.isdir(path):
                continue
            owner = ",uid=%d,gid=%d,mode=0700" % (uid, gid) if i == 0 else ",mode=1777"
            mount(call, ctypes, "tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, setup["tmpfs"] + owner)
            mounted.append(path)
        got["tmpfs"] = mounted
        if setup.get("proc"):
            mount(call, ctypes, "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
            got["proc"] = True
        os.chdir(setup["tmp_dirs"][0])
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
        # Changing ids cleared the signal the evaluator's death sends.
        call("prctl", PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGKILL), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))
    if ctypes is not None:
        call("prctl", PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))
        got["no_new_privs"] = True
    got["uid"] = os.getuid()
    # -P does this where the interpreter knows it (3.11 and later).
    sys.path[:] = [p for p in sys.path if p not in ("", ".") and p != os.getcwd()]
    got["path_safe"] = True
    return got


def set_limits(args):
    memory, cpu, fsize, nproc, nofile = (int(a) for a in args)
    wanted = [
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_AS, memory),
        (resource.RLIMIT_CPU, cpu),
        (resource.RLIMIT_FSIZE, fsize),
        (resource.RLIMIT_NPROC, nproc),
        (resource.RLIMIT_NOFILE, nofile),
    ]
    for which, value in wanted:
        if value < 0:
            continue
        _, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY and hard < value:
            value = hard
        resource.setrlimit(which, (value, value))


def emit(record):
    if os.getpid() != MAIN_PID:
        os._exit(0)
    data = (json.dumps(record) + "\n").encode()
    while data:
        data = data[os.write(PROTO_FD, data):]


def leave_if_forked():
    # A child forked by the code under test that finds its way back here
    # must not report anything.
    if os.getpid() != MAIN_PID:
        os._exit(0)


class TestTimeout(TimeoutError):
    """The per-test time limit ran out (a TimeoutError, as in the reference)."""


armed = [False]


def on_alarm(signum, frame):
    if armed[0]:
        armed[0] = False
        raise TestTimeout("timed out")


def arm(seconds):
    armed[0] = True
    signal.setitimer(signal.ITIMER_REAL, seconds)


def disarm():
    armed[0] = False
    signal.setitimer(signal.ITIMER_REAL, 0)


def clip(text):
    text = " ".join(text.split())
    if len(text) > TEXT_LIMIT:
        text = text[: TEXT_LIMIT - 1] + "…"
    return text


def describe(exc, seconds):
    """Names an exception; its text comes from the code under test, so it is
    built under the time limit."""
    if isinstance(exc, TestTimeout):
        return "timed out (limit %gs)" % seconds
    if isinstance(exc, SyntaxError):
        return clip("SyntaxError: %s (line %s)" % (exc.msg, exc.lineno))
    name = "exception"
    try:
        arm(seconds)
        name = type(exc).__name__
        if not isinstance(name, str):
            name = "exception"
        text = str(exc)
        disarm()
    except BaseException:
        disarm()
        leave_if_forked()
        return clip(name)
    leave_if_forked()
    if not text:
        return clip(name)
    return clip("%s: %s" % (name, text))


def run_in_function_frame(code, source, call, call_source):
    # The frame of the reference's get_function_output(function_definition,
    # test_case): exec and eval both see its locals dictionary, refreshed
    # from the parameters before eval (and its unbound "e" removed).
    frame_locals = {"function_definition": source, "test_case": call_source}
    frame_globals = {"__name__": MODULE_NAME}
    exec(code, frame_globals, frame_locals)
    frame_locals["function_definition"] = source
    frame_locals["test_case"] = call_source
    frame_locals.pop("e", None)
    return eval(call, frame_globals, frame_locals)


def run_in_module(code, source, call, call_source):
    namespace = {"__name__": MODULE_NAME}
    exec(code, namespace)
    return eval(call, namespace)


def compile_program(source):
    try:
        return compile(source, "<string>", "exec", dont_inherit=True), None
    except BaseException as exc:  # SyntaxError, ValueError (NUL bytes), MemoryError…
        return None, exc


def score_test(task, truth, answer, run, name, call_source):
    seconds = task["test_timeout"]
    try:
        call = compile(call_source, "<string>", "eval", dont_inherit=True)
    except BaseException as exc:
        return "the test's call does not compile: " + describe(exc, seconds)

    truth_code, truth_error = truth
    if truth_code is None:
        return "ground truth does not compile: " + describe(truth_error, seconds)
    try:
        want = run(truth_code, task["ground_truth"], call, call_source)
    except BaseException as exc:
        leave_if_forked()
        return "ground truth raised " + describe(exc, seconds)
    leave_if_forked()
    if want is None:
        return "ground truth returned None"

    answer_code, answer_error = answer
    if answer_code is None:
        return "answer does not compile: " + describe(answer_error, seconds)
    try:
        arm(seconds)
        got = run(answer_code, task["answer"], call, call_source)
        disarm()
    except BaseException as exc:
        disarm()
        leave_if_forked()
        if isinstance(exc, TestTimeout):
            return "answer " + describe(exc, seconds)
        return "answer raised " + describe(exc, seconds)
    leave_if_forked()

    # The reference compares with "==" and its truth value; the answer's
    # objects take part, so this too runs under the limit.
    try:
        arm(seconds)
        same = bool(want == got)
        disarm()
    except BaseException as exc:
        disarm()
        leave_if_forked()
        return "comparing the outputs raised " + describe(exc, seconds)
    leave_if_forked()
    if not same:
        return "outputs differ"
    return ""


def qualified_name(cls):
    module = type.__dict__["__module__"].__get__(cls)
    name = type.__dict__["__qualname__"].__get__(cls)
    return "%s.%s" % (module, name)


def b64(data):
    return base64.b64encode(data).decode("ascii")


def encode(x, depth=0):
    """Returns x as tagged JSON data: None, a bool, a str, or a list whose
    first item names the type: ["int", hex], ["float", repr], ["str",
    base64 of UTF-8 with surrogates] (only for a str that is not valid
    UTF-8), ["bytes", base64], ["complex", re, im], ["list", items...],
    ["tuple", ...], ["set", ...], ["frozenset", ...], ["dict", [k, v]...],
    ["type", "module.qualname"], ["datetime", iso, aware], ["date", iso],
    ["time", iso], ["timedelta", days, seconds, microseconds] or ["other",
    "module.qualname"] for anything else. Subclasses of these types are
    sent as their base type's value, read with the base type's own methods
    (so that an overridden method is never called): the evaluator compares
    values, not objects."""
    if depth > MAX_DEPTH:
        raise ValueError("nested more than %d deep" % MAX_DEPTH)
    if x is None:
        return None
    if x is True or x is False:
        return x
    d = depth + 1
    if isinstance(x, int):
        return ["int", int.__format__(x, "x")]
    if isinstance(x, float):
        return ["float", float.__repr__(x)]
    if isinstance(x, str):
        s = str.__str__(x)
        try:
            s.encode("utf-8")
            return s
        except UnicodeEncodeError:
            return ["str", b64(s.encode("utf-8", "surrogatepass"))]
    if isinstance(x, (bytes, bytearray)):
        return ["bytes", b64(bytes(memoryview(x)))]
    if isinstance(x, complex):
        return ["complex", float.__repr__(complex.real.__get__(x)), float.__repr__(complex.imag.__get__(x))]
    if isinstance(x, list):
        return ["list"] + [encode(v, d) for v in list.__iter__(x)]
    if isinstance(x, tuple):
        return ["tuple"] + [encode(v, d) for v in tuple.__iter__(x)]
    if isinstance(x, frozenset):
        return ["frozenset"] + [encode(v, d) for v in frozenset.__iter__(x)]
    if isinstance(x, set):
        return ["set"] + [encode(v, d) for v in set.__iter__(x)]
    if isinstance(x, dict):
        return ["dict"] + [[encode(k, d), encode(v, d)] for k, v in dict.items(x)]
    if isinstance(x, type):
        return ["type", qualified_name(x)]
    dt = sys.modules.get("datetime")
    if dt is not None:
        if isinstance(x, dt.datetime):
            off = dt.datetime.utcoffset(x)
            if off is None:
                return ["datetime", dt.datetime.isoformat(x), False]
            utc = dt.datetime.replace(dt.datetime.__sub__(x, off), tzinfo=None)
            return ["datetime", dt.datetime.isoformat(utc), True]
        if isinstance(x, dt.date):
            return ["date", dt.date.isoformat(x)]
        if isinstance(x, dt.time):
            return ["time", dt.time.isoformat(x)]
        if isinstance(x, dt.timedelta):
            return ["timedelta", x.days, x.seconds, x.microseconds]
    return ["other", qualified_name(type(x))]


def output_of(task, code, source, run, call, call_source, role):
    """Runs one test of one program and returns the line to report: its
    output as data, or why there is none. The time limit, when there is
    one, covers running and encoding."""
    seconds = task["test_timeout"]
    shown = seconds or 1  # the limit on describing an exception
    stage = "raised"
    try:
        if seconds > 0:
            arm(seconds)
        got = run(code, source, call, call_source)
        stage = "encode"
        value = encode(got)
        disarm()
    except BaseException as exc:
        disarm()
        leave_if_forked()
        if isinstance(exc, TestTimeout):
            return {"error": role + " " + describe(exc, shown)}
        if stage == "encode":
            return {"error": role + "'s output cannot be sent as data: " + describe(exc, shown)}
        return {"error": role + " raised " + describe(exc, shown)}
    leave_if_forked()
    return {"value": value}


def outputs(task):
    run = run_in_module if task["module_scope"] else run_in_function_frame
    role = task["role"]
    skip = set(task.get("skip") or [])
    seconds = task["test_timeout"] or 1
    code, error = compile_program(task["program"])
    for i, (name, call_source) in enumerate(task["tests"]):
        if i in skip:
            line = {"error": "not run"}
        else:
            try:
                call = compile(call_source, "<string>", "eval", dont_inherit=True)
            except BaseException as exc:
                call, line = None, {"error": "the test's call does not compile: " + describe(exc, seconds)}
            if call is not None:
                if code is None:
                    line = {"error": role + " does not compile: " + describe(error, seconds)}
                else:
                    line = output_of(task, code, task["program"], run, call, call_source, role)
        line["test"] = i
        emit(line)


def score(task):
    run = run_in_module if task["module_scope"] else run_in_function_frame
    truth = compile_program(task["ground_truth"])
    answer = compile_program(task["answer"])
    for i, (name, call_source) in enumerate(task["tests"]):
        error = score_test(task, truth, answer, run, name, call_source)
        emit({"test": i, "passed": error == "", "error": error})


def check_readable():
    """Fails unless the interpreter's own files can be read by the id the
    programs run under (which starts it as root when it mounts): a
    module imported later would be missing."""
    dirs = [os.path.dirname(os.__file__)] + [p for p in sys.path if p.endswith("lib-dynload")]
    for path in [sys.executable] + dirs:
        if not os.access(path, os.R_OK | os.X_OK):
            raise PermissionError("%s cannot be read by uid %d" % (path, os.getuid()))


def probe(confined):
    check_readable()
    info = {
        "executable": sys.executable,
        "version": sys.version,
        "version_info": list(sys.version_info[:3]),
        "confined": confined,
    }
    emit(info)


def main():
    mode = sys.argv[1]
    confined = confine(json.loads(sys.argv[7]))
    set_limits(sys.argv[2:7])
    os.set_inheritable(PROTO_FD, False)
    signal.signal(signal.SIGALRM, on_alarm)
    data = sys.stdin.buffer.read()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    if mode == "probe":
        probe(confined)
        return
    task = json.loads(data)
    del data
    emit({"ready": True})
    if mode == "outputs":
        outputs(task)
    else:
        score(task)
    emit({"done": True})


if __name__ == "__main__":
    try:
        main()
    except BaseException as exc:
        try:
            emit({"fatal": clip("%s: %s" % (type(exc).__name__, exc))})
        except BaseException:
            pass
        os._exit(1)
    os._exit(0)
