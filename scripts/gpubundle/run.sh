#!/bin/bash
# run.sh OUTDIR — validates and benchmarks turnwise's GPU path on the machine
# it runs on, from the bundle beside it (make gpu-bundle, or make
# gpu-bundle-emu for the same steps over the kernel emulator). It needs no
# Go, no network and no package manager: bash, coreutils, tar and gzip, the
# NVIDIA driver, and for some steps tools it looks for (compute-sanitizer, a
# python3 that imports torch).
#
# Each step runs under `timeout` with its output streamed into its own log,
# so that one failure does not stop the rest and a step killed at its limit
# leaves what it had printed (the kill is SIGQUIT: a Go program prints its
# goroutines). A step that cannot apply here (no sanitizer, no PyTorch, the
# emulator) is skipped and says why. The test steps run every top-level Go
# test in a process of its own (a panic or a device fault, which poisons the
# process's CUDA context, ends that test alone), with -test.timeout a little
# under what is left of the step's limit, so that Go prints where a hung test
# was; they count the tests passed, failed and skipped and name the failed.
# The steps, in order: first the short checks and the benchmarks (meant to
# take five minutes on an H100 or H200, by the first run's times), then the
# long checks:
#
#   device            nvidia-smi, and the device's properties
#   torch             finds a python3 that imports torch, and its cuBLASLt
#   conformance       the op conformance suite's binary, every test in its own
#                     process, with TW_CUDA_SYNC=1 (an op that faults is
#                     named): f32 and bf16 at its small shapes (against the
#                     float64 reference) and at a miniature model's shapes
#                     (against the CPU backend)
#   model             the model's GPU tests (stories260K decoded on the GPU)
#   stories           `train generate` greedy text of stories260K on the GPU
#                     must be the documented text
#   selftest          the kernel emulator's self-tests built by nvcc (sm_90
#                     code: an H100 or H200): the GPU must compute what the
#                     emulator models (warp collectives, cp.async, mma.sync
#                     and ldmatrix layouts)
#   bench-kernels     the per-kernel table (CUDA events, ceilings measured in
#                     the same run, cuBLASLt beside our GEMM)
#   bench-step        the Llama-3.1-8B LoRA step, prefill and decode with the
#                     backend's default GEMM, cuBLASLt (--gemm cublas)
#   peers             the PyTorch peers (SDPA; Hugging Face Llama + PEFT)
#   bench-report      one table of all of them, with the ratios (written
#                     again at the end, with bench-step-own)
#   bench-step-own    the step suite again with our own GEMM (--gemm own),
#                     the first of the long checks
#   attn-sweep        the attention cases of the kernel suite once per
#                     configuration `train bench --attention-configs` lists
#                     (the forward's and the backward's tile sizes and
#                     pipeline depths, decoding's and the backward's splits,
#                     the backward's dQ by atomics; 3 repetitions each), as far as its time goes: a table
#                     case × configuration in its log, the best
#                     configuration of each case in its note, the results in
#                     attn-sweep.tar.gz (on the emulator bundle, at the small
#                     shapes, where configurations compiled only for head
#                     width 128 are refused: a check of the step itself)
#   gemm-sweep        the decoding GEMM cases of the kernel suite with our
#                     GEMM once per configuration of its few-row kernel
#                     (TW_GEMM_SKINNY: rows per block × loads in flight),
#                     and four projection cases once per block tile of its
#                     tiled kernel (TW_GEMM_TILE=128k64, 256; the default
#                     over both), as far as its time goes: a table in its log, the best
#                     configuration of each case in its note, the results in
#                     gemm-sweep.tar.gz
#   profile           Nsight Compute's counters (ncu, clocks left alone) of
#                     one launch of each case TW_BUNDLE_PROFILE names (our
#                     attention forward, backward and decoding at 2k) and of
#                     SDPA's flash forward and backward at the same shape:
#                     a table (time, SM, memory and tensor-pipe shares of
#                     peak, occupancy, top stall reasons) and, per kernel,
#                     where its warps wait (the warp-state samples by opcode
#                     and the hottest instructions, with their stall
#                     reasons) in its log, one line per kernel in its note,
#                     the reports in logs.tar.gz's bench/profile/
#   bench-step-tuned  the step suite again with the attention configuration
#                     attn-sweep found fastest (its forward's and its
#                     backward's fields, at the most tokens), where that is
#                     not the defaults: what the sweep's winner does to the
#                     whole step (bench-step-tuned.json, not in bench.md)
#   collectives       one GPU rank over NCCL (PyTorch's, found by the torch
#                     step), started by `train launch`: `train collectives`
#                     checks every collective and times the all-reduce (with
#                     one rank nothing crosses a link: the time is NCCL's
#                     per-call cost)
#   collectives-cpu   two CPU ranks over Gloo, started by `train launch`: the
#                     same checks and timings
#   gate              the kernel regression gate: `train bench --baseline`
#                     re-measures the kernels of the newest earlier run on
#                     this kind of device that the bundle carries (baselines/,
#                     from build.sh), or of TW_BUNDLE_BASELINE, and lists
#                     every kernel slower than the noise allows; it fails only
#                     against a baseline of this bundle's own commit (against
#                     another commit the slower kernels are information)
#   conformance-8b    the suite at Llama-3.1-8B's shapes (TestConformanceShapes
#                     with TW_CONFORMANCE_SHAPES=llama8B), one process per op,
#                     with our GEMM and with cuBLASLt, TW_CUDA_SYNC=1
#   memcheck, synccheck, racecheck
#                     compute-sanitizer over the GEMM and attention tests
#
# The default budget does not hold every long check on every machine: the
# steps it leaves out are reported "not run" and named, with the
# TW_BUNDLE_STEPS that runs them in a second call.
#
# OUTDIR receives summary.md and summary.json (the device; every step: pass,
# fail or skip, its time, a note, the test steps' results test by test, and
# for failures an excerpt of its log), bench.md (the benchmarks side by side
# with the peers, and the ratios) with the results it is made of
# (bench-kernels.json, bench-step.json, bench-step-own.json,
# bench-torch.json; gate.json, the gate's measurement), bench-step-tuned.json
# and .md (the step with the sweep's fastest attention), attn-sweep.tar.gz and
# gemm-sweep.tar.gz (the sweeps' results, one per configuration, and their
# tables), and logs.tar.gz (every step's full log, and every test process's
# output). The exit status is 0 when no step failed.
#
# Environment:
#   TW_BUNDLE_BUDGET   seconds for all steps (default 460: with unpacking, the
#                      run ends within 8 minutes); a step gets the smaller of
#                      its own limit and what is left
#   TW_BUNDLE_STEPS    an extended regular expression: run only the steps
#                      whose names match (the others are skipped)
#   TW_BUNDLE_TESTS    an extended regular expression: the conformance and
#                      model steps run only the top-level tests whose names
#                      match
#   TW_BUNDLE_SKIP_TESTS
#                      an extended regular expression: those steps leave out
#                      the top-level tests whose names match (the Makefile's
#                      emulator run leaves out what the emulator suites have
#                      just run)
#   TW_BUNDLE_BASELINE the bench-kernels.json the gate step compares with
#                      (default: the newest of the bundle's on this device)
#   TW_BUNDLE_KEEP     when set, keep the unpacked bundle (its path is
#                      printed) to rerun a test binary by hand
#   TW_BUNDLE_PLANT    panic or hang: the self-check fixture's misbehaviour
#                      (engine/cuda/bundleplant_test.go; used by selftest.sh
#                      beside this file in the repository)
#   TW_BUNDLE_GO_MARGIN
#                      seconds between a test process's -test.timeout and the
#                      end of its step's limit (default 5; below 0, the kill
#                      at the limit comes first, as selftest.sh shows)
#   TW_PYTHON          the python3 to use for the PyTorch steps
#   TW_SANITIZER       the compute-sanitizer to use
#   TW_NCU             the ncu (Nsight Compute) to use
#   TW_BUNDLE_PROFILE  the profile step's cases, LABEL@FILTER@KERNEL each,
#                      or LABEL@FILTER@KERNEL@CONFIG to run the case with
#                      --attention-config CONFIG (e.g. the old schedules:
#                      attn-fwd-ring1@^attention/fwd/bf16/b1xT2048/@attn_fwd_kernel@fwd.k_ring=1),
#                      space-separated (see PROFILE_CASES below)
set -u -o pipefail

if [ $# -ne 1 ] || [ "${1#-}" != "$1" ]; then
	sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$1" || exit 2
OUT=$(cd "$1" && pwd)
BUDGET=${TW_BUNDLE_BUDGET:-460}
ONLY=${TW_BUNDLE_STEPS:-}
STARTED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
T0=$SECONDS
# A step killed at its limit gets SIGQUIT, whose default action writes a
# core file (python's, compute-sanitizer's).
ulimit -c 0

# The documented greedy continuation of BOS by stories260K (the project's
# correctness anchor for a real checkpoint).
STORIES_TEXT="Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. She wanted to play with it, but it was too high."

# A baseline named relative to where run.sh was called from.
BASELINE=${TW_BUNDLE_BASELINE:-}
if [ -n "$BASELINE" ] && [ "${BASELINE#/}" = "$BASELINE" ]; then
	BASELINE=$PWD/$BASELINE
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/turnwise-bundle.XXXXXX") || exit 1
B=$WORK/bundle
LOGS=$WORK/logs
mkdir -p "$B" "$LOGS" "$WORK/bench" "$WORK/tests"
echo "run.sh: unpacking into $WORK"
tar -C "$B" -xzf "$HERE/payload.tar.gz" || { echo "run.sh: cannot unpack $HERE/payload.tar.gz" >&2; exit 1; }
# shellcheck source=/dev/null
. "$B/BUNDLE.env"

# The device, queried here and not by the device step, so that the summary
# names it whichever steps run. DEVICE_NAME is what the gate matches with
# the device of a baseline's results.
if [ "$TW_BUNDLE_KIND" = cuda ]; then
	if ! command -v nvidia-smi >/dev/null; then
		DEVICE="unknown: nvidia-smi not found" DEVICE_NAME=""
	elif DEVICE=$(timeout 30 nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1) &&
		[ -n "$DEVICE" ] && [ "${DEVICE#*failed}" = "$DEVICE" ]; then
		DEVICE_NAME=${DEVICE%%,*}
	else
		DEVICE="unknown: nvidia-smi: ${DEVICE:-no output}" DEVICE_NAME=""
	fi
else
	cpu=$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo 2>/dev/null | head -1)
	DEVICE="cudaemu: the kernel emulator on ${cpu:-$(uname -m)}, $(nproc 2>/dev/null || echo '?') CPUs"
	DEVICE_NAME="CUDA kernel emulator"
fi
echo "run.sh: device: $DEVICE"

export B WORK STORIES_TEXT TW_BUNDLE_KIND TW_BUNDLE_COMMIT DEVICE DEVICE_NAME BASELINE
export TURNWISE_TESTDATA=$B/data
# The bundle's libraries come first for our binaries only: a python3 run
# beside them keeps its own.
export OURS_LD_PATH=$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# A Go test process's -test.timeout is this many seconds under what is left
# of its step's limit: time for Go to print its goroutines and exit.
export GO_MARGIN=${TW_BUNDLE_GO_MARGIN:-5}

# ---- steps (each runs in its own bash under timeout; exit 77 = skipped) ----
#
# A step's stdout and stderr are its log; file descriptor 3 is run.sh's own
# output, for progress lines. Its environment names its files: NOTE_FILE (its
# one-line note), TESTS_FILE (the test steps' results, one line per test:
# status, seconds, name, subtests passed, failed and skipped, detail,
# tab-separated), PLANNED_FILE (the tests it means to run), CURRENT_FILE (the
# test running now); and its time: STEP_LIMIT (seconds) and STEP_END (when
# the limit ends, in seconds since the epoch). At the limit every process of
# the step gets SIGQUIT (bash ignores it: the step goes on to record what
# was killed, and is killed 10 s later if it has not ended).

# ours runs one of the bundle's binaries with the bundle's libraries and,
# when the torch step found one, PyTorch's cuBLASLt on the search paths
# (after the user's own TW_CUBLAS_PATH).
# NCCL, where the torch step found one, is passed the same way.
ours() {
	local nccl=${TW_NCCL_PATH:-}
	[ -z "${NCCL_DIR:-}" ] || nccl=${nccl:+$nccl:}$NCCL_DIR
	if [ -n "${CUBLAS_DIR:-}" ]; then
		LD_LIBRARY_PATH=$OURS_LD_PATH:$CUBLAS_DIR TW_CUBLAS_PATH=${TW_CUBLAS_PATH:+$TW_CUBLAS_PATH:}$CUBLAS_DIR \
			TW_NCCL_PATH=$nccl "$@"
	else
		LD_LIBRARY_PATH=$OURS_LD_PATH TW_NCCL_PATH=$nccl "$@"
	fi
}

# logged FILE, as the last command of a pipeline, copies its input to the
# step's log and to FILE as it comes. It ignores SIGQUIT, so that when the
# step is killed at its limit it still copies the goroutine dump of the Go
# program it reads from; and it is tee itself (a pipeline's command runs in
# a subshell of its own), so that the step waits for it to copy everything.
logged() {
	trap '' QUIT
	exec tee "$1"
}

# note records the one-line note of the running step.
note() { printf '%s\n' "$*" >"$NOTE_FILE"; }

# progress prints a line to run.sh's output and to the step's log.
progress() {
	printf 'run.sh:   %s\n' "$*" 2>/dev/null >&3
	printf 'run.sh: %s\n' "$*"
}

# skip ends the running step as skipped, saying why.
skip() {
	note "$*"
	exit 77
}

gpu_only() { [ "$TW_BUNDLE_KIND" = cuda ] || skip "the emulator bundle $*"; }

# left prints the seconds left of the running step's limit.
left() { echo $((STEP_END - $(date +%s))); }

# max1 N prints N, or 1 when N is less (a -test.timeout of 0 is none).
max1() { echo $(($1 < 1 ? 1 : $1)); }

# load_torch reads what the torch step found.
load_torch() {
	# shellcheck source=/dev/null
	[ ! -e "$WORK/torch.env" ] || . "$WORK/torch.env"
}

step_device() {
	gpu_only "has no GPU ($DEVICE)"
	command -v nvidia-smi >/dev/null || { note "nvidia-smi not found"; exit 1; }
	nvidia-smi || { note "nvidia-smi failed (exit status $?): see the log"; exit 1; }
	line=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)
	[ -n "$line" ] || exit 1
	note "$line"
	# The rest is for the log; a field this driver lacks fails nothing.
	nvidia-smi --query-gpu=compute_cap,clocks.max.sm,clocks.max.memory,power.limit,pci.bus_id --format=csv
	nvidia-smi -q
	true
}

step_torch() {
	gpu_only "runs no PyTorch peer"
	local py=""
	for c in ${TW_PYTHON:-} python3 /opt/torch/.venv/bin/python3 /opt/conda/bin/python3 /usr/local/bin/python3 /usr/bin/python3; do
		command -v "$c" >/dev/null 2>&1 || continue
		if "$c" -c 'import torch' >/dev/null 2>&1; then
			py=$(command -v "$c")
			break
		fi
	done
	[ -n "$py" ] || skip "no python3 here imports torch (set TW_PYTHON)"
	PYTHONUNBUFFERED=1 "$py" - <<'EOF' || exit 1
import glob, os, sys, torch
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)
assert torch.cuda.is_available(), "torch sees no GPU"
p = torch.cuda.get_device_properties(0)
print("device:", p)
print("L2 bytes:", getattr(p, "L2_cache_size", "?"))
site = os.path.dirname(os.path.dirname(torch.__file__))
libs = sorted(glob.glob(os.path.join(site, "nvidia", "**", "libcublasLt.so*"), recursive=True)
        + glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib", "libcublasLt.so*")))
print("cublasLt:", libs)
nccl = sorted(glob.glob(os.path.join(site, "nvidia", "**", "libnccl.so*"), recursive=True)
        + glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib", "libnccl.so*")))
print("nccl:", nccl)
with open(os.path.join(os.environ["WORK"], "torch.env"), "w") as f:
    f.write("TORCH_PY=%s\n" % sys.executable)
    if libs:
        f.write("CUBLAS_DIR=%s\n" % os.path.dirname(libs[0]))
    if nccl:
        f.write("NCCL_DIR=%s\n" % os.path.dirname(nccl[0]))
EOF
	load_torch
	note "$("$TORCH_PY" -c 'import torch; print("torch", torch.__version__)'), cuBLAS in ${CUBLAS_DIR:-(none found)}, NCCL in ${NCCL_DIR:-(none found)}"
}

# run_test NAME REGEX BIN [ARGS…] runs the tests of the test binary BIN that
# REGEX selects (-test.run) in a process of their own, streaming its output
# into the step's log, and records its result in TESTS_FILE under NAME. Its
# -test.timeout is GO_MARGIN seconds under what is left of the step's limit
# (at most TEST_CAP seconds, when set); with too little left it is not run.
# The process passes when its top-level test passed (and, with NEED_SUBTESTS
# set, a subtest whose name that regular expression matches passed: a filter
# that selects nothing checks nothing); a top-level skip is a skip.
run_test() {
	local name=$1 re=$2 bin=$3
	shift 3
	local to=$(($(left) - GO_MARGIN))
	[ -z "${TEST_CAP:-}" ] || [ "$to" -le "$TEST_CAP" ] || to=$TEST_CAP
	[ "$to" -ge 3 ] && [ "$(left)" -ge 3 ] || return 0 # not run: tests_end says so
	local out="$WORK/tests/$STEP/${name//\//_}.out" t=$SECONDS rc status detail
	mkdir -p "$WORK/tests/$STEP"
	printf '%s\t%s\n' "$name" "$(date +%s)" >"$CURRENT_FILE"
	echo "=== run.sh: $name (-test.run '$re', -test.timeout ${to}s${TW_CUDA_SYNC:+, TW_CUDA_SYNC=$TW_CUDA_SYNC})"
	ours "$bin" -test.v -test.run "$re" -test.timeout "${to}s" "$@" 2>&1 | logged "$out"
	rc=${PIPESTATUS[0]}
	local sp sf ss
	sp=$(grep -cE '^[[:space:]]+--- PASS: ' "$out")
	sf=$(grep -cE '^[[:space:]]+--- FAIL: ' "$out")
	ss=$(grep -cE '^[[:space:]]+--- SKIP: ' "$out")
	if grep -q '^panic: test timed out after' "$out"; then
		status=timeout detail="hung: Go's -test.timeout ended it after ${to} s"
	elif [ "$rc" -gt 128 ] && [ "$(left)" -le 1 ]; then
		# The step's limit: timeout sent SIGQUIT (which bash ignores).
		status=killed detail="killed at the step's limit ($STEP_LIMIT s) by signal $((rc - 128))"
		echo "run.sh: killed at the step's limit ($STEP_LIMIT s) while $name ran"
	elif [ "$rc" -ne 0 ]; then
		# What failed: the panic, else the failed subtests, else the test's
		# first message.
		status=fail
		detail=$(grep -m1 '^panic: ' "$out")
		if [ -z "$detail" ] && [ "$sf" -gt 0 ]; then
			detail="failed: $(grep -E '^[[:space:]]+--- FAIL: ' "$out" | sed -E 's/^[[:space:]]*--- FAIL: //; s/ \([0-9.]+s\)$//' |
				head -3 | paste -sd, - | sed 's/,/, /g')"
		fi
		[ -n "$detail" ] || detail=$(test_message "$out")
		[ -n "$detail" ] || detail="exit status $rc"
		[ "$rc" -le 128 ] || detail="killed by signal $((rc - 128)); $detail"
	elif grep -qE '^--- SKIP: ' "$out"; then
		status=skip detail=$(test_message "$out")
	elif ! grep -qE '^--- PASS: ' "$out"; then
		status=fail detail="no test ran: $(grep -m1 -E 'warning|no tests' "$out")"
	elif [ -n "${NEED_SUBTESTS:-}" ] && ! grep -qE "^[[:space:]]+--- PASS: ($NEED_SUBTESTS) " "$out"; then
		if [ "$ss" -gt 0 ]; then
			status=skip detail=$(test_message "$out")
		else
			status=fail detail="no subtest matched -test.run '$re'"
		fi
	else
		status=pass detail=""
	fi
	detail=${detail//$'\t'/ }
	: >"$CURRENT_FILE"
	printf '%s\t%d\t%s\t%d\t%d\t%d\t%s\n' "$status" $((SECONDS - t)) "$name" "$sp" "$sf" "$ss" "${detail:0:300}" >>"$TESTS_FILE"
	progress "$name: $status ($((SECONDS - t)) s)${detail:+ ${detail:0:160}}"
}

# test_message FILE prints the first message a test logged (t.Log, t.Error,
# t.Skip…) in the test output FILE, without its file and line.
test_message() {
	grep -m1 -E '^[[:space:]]+[^[:space:]]+_test\.go:[0-9]+: ' "$1" | sed -E 's/^[[:space:]]*[^[:space:]]+_test\.go:[0-9]+: //'
}

# tests_finish records every planned test that has no result as not run.
tests_finish() {
	local name
	[ -s "$PLANNED_FILE" ] || return 0
	while IFS= read -r name; do
		cut -f3 "$TESTS_FILE" | grep -qxF -- "$name" && continue
		printf 'not-run\t0\t%s\t0\t0\t0\t%s\n' "$name" "not run: the step's time was spent" >>"$TESTS_FILE"
	done <"$PLANNED_FILE"
}

# tests_note prints the one-line account of TESTS_FILE: the tests passed,
# failed (named) and skipped, and their subtests.
tests_note() {
	awk -F'\t' '
		{ n++; sp += $4; sf += $5; ss += $6 }
		$1 == "pass" { p++ }
		$1 == "skip" { s++ }
		$1 == "not-run" { nr++ }
		$1 == "fail" || $1 == "timeout" || $1 == "killed" {
			f++
			why = $1 == "timeout" ? ": timed out" : $1 == "killed" ? ": killed at the step'"'"'s limit" : ""
			if (f <= 5) names = names (f > 1 ? ", " : "") $3 why
			else if (f == 6) names = names ", …"
		}
		END {
			printf "%d test%s: %d passed, %d failed%s, %d skipped", n, n == 1 ? "" : "s", p, f, f ? " (" names ")" : "", s
			if (nr) printf ", %d not run", nr
			if (sp + sf + ss) printf "; subtests: %d passed, %d failed, %d skipped", sp, sf, ss
			printf "\n"
		}' "$TESTS_FILE"
}

# tests_end ends a test step: its note counts the tests, and it fails when a
# test failed or none passed (or, with SKIP_FAILS, one skipped), and ends as
# timed out (124) when the step's time was spent: tests were not run for
# lack of it, or a test hung until it was nearly over.
tests_end() {
	tests_finish
	note "$(tests_note)"
	local statuses
	statuses=$(cut -f1 "$TESTS_FILE" | sort -u | tr '\n' ' ')
	case " $statuses" in
	*" not-run "*) exit 124 ;;
	*" timeout "*) [ "$(left)" -ge $((GO_MARGIN + 3)) ] || exit 124 ;;
	esac
	case " $statuses" in *" fail "* | *" timeout "*) exit 1 ;; esac
	[ -z "${SKIP_FAILS:-}" ] || case " $statuses" in *" skip "*) exit 1 ;; esac
	case " $statuses" in *" pass "*) exit 0 ;; esac
	exit 1
}

# gotests BIN [ARGS…] runs each top-level test of the test binary BIN that
# TESTS_RE (default: all) and TW_BUNDLE_TESTS select, and TW_BUNDLE_SKIP_TESTS
# does not leave out, in a process of its own
# (run_test), and ends the step (tests_end).
gotests() {
	local bin=$1 names name
	shift
	cd "$B" || exit 1
	names=$(ours "$bin" -test.list "${TESTS_RE:-.}" 2>&1) || {
		printf '%s\n' "$names"
		note "$bin -test.list failed: $(tail -1 <<<"$names")"
		exit 1
	}
	names=$(printf '%s\n' "$names" | grep -E '^(Test|Example|Fuzz)')
	[ -n "$names" ] || { note "$bin lists no test"; exit 1; }
	names=$(printf '%s\n' "$names" | grep -E -- "${TW_BUNDLE_TESTS:-.}") || skip "TW_BUNDLE_TESTS=$TW_BUNDLE_TESTS selects none of $bin's tests"
	if [ -n "${TW_BUNDLE_SKIP_TESTS:-}" ]; then
		names=$(printf '%s\n' "$names" | grep -v -E -- "$TW_BUNDLE_SKIP_TESTS") || skip "TW_BUNDLE_SKIP_TESTS=$TW_BUNDLE_SKIP_TESTS leaves out every selected test of $bin"
	fi
	printf '%s\n' "$names" >"$PLANNED_FILE"
	progress "$(wc -l <"$PLANNED_FILE") test(s) of $bin, one process each"
	for name in $names; do
		run_test "$name" "^$name\$" "$bin" "$@"
	done
	tests_end
}

# On a GPU a test gets a minute at most, so that one that hangs leaves the
# others time to run.
step_conformance() {
	load_torch
	export TW_CUDA_SYNC=1
	[ "$TW_BUNDLE_KIND" != cuda ] || export TEST_CAP=60
	gotests bin/engine-cuda.test
}

step_model() {
	[ -e "$TURNWISE_TESTDATA/stories260K/stories260K.gguf" ] || no_data
	load_torch
	TESTS_RE=CUDA SKIP_FAILS=1 gotests bin/llama.test
}

# The ops of the conformance suite, in TestConformanceShapes's subtest names.
CONFORMANCE_OPS="gemm attention rmsnorm rope swiglu layernorm bias gelu logsoftmax embedding adamw_lora"
export CONFORMANCE_OPS

# The kernel cases the profile step gives Nsight Compute, LABEL@FILTER@KERNEL
# each (FILTER: train bench's --filter; KERNEL: a regular expression ncu
# matches with kernel names, the first launch after one being profiled):
# our attention forward and backward at Llama-3.1-8B's heads and 2k tokens,
# and decoding 16 sequences of 2k keys. TW_BUNDLE_PROFILE replaces them.
PROFILE_CASES=${TW_BUNDLE_PROFILE:-attn-fwd@^attention/fwd/bf16/b1xT2048/@attn_fwd_kernel attn-bwd@^attention/bwd/bf16/b1xT2048/@attn_bwd_kernel attn-decode@^attention/decode/bf16/b16xK2048/@attn_fwd_kernel}
export PROFILE_CASES

step_conformance_8b() {
	gpu_only "runs the miniature shapes only (the conformance step)"
	load_torch
	cd "$B" || exit 1
	export TW_CUDA_SYNC=1 TW_CONFORMANCE_SHAPES=llama8B
	local op
	for op in $CONFORMANCE_OPS; do echo "llama8B/$op"; done >"$PLANNED_FILE"
	progress "$(wc -w <<<"$CONFORMANCE_OPS") ops at Llama-3.1-8B's shapes, our GEMM and cuBLASLt, one process each"
	for op in $CONFORMANCE_OPS; do
		TEST_CAP=60 NEED_SUBTESTS="TestConformanceShapes/[^/]+/llama8B/[^/]+/$op" run_test "llama8B/$op" "^TestConformanceShapes\$/^(own|cublas)\$/^llama8B\$/./^$op\$" bin/engine-cuda.test
	done
	tests_end
}

# step_selftest runs the kernel emulator's self-tests: on a GPU, built by
# nvcc, they check that the hardware computes what the emulator models (the
# instructions and fragment layouts the kernels are built on); on the
# emulator bundle they check the emulator.
step_selftest() {
	cd "$B" || exit 1
	ours bin/selftest 2>&1 | logged "$WORK/selftest.out"
	rc=${PIPESTATUS[0]}
	pass=$(grep -c '^ok ' "$WORK/selftest.out")
	failed=$(grep '^FAIL ' "$WORK/selftest.out" | awk '{print $2}' | paste -sd' ' -)
	note "$pass passed${failed:+, failed: $failed}"
	[ "$rc" -eq 0 ] && [ "$pass" -gt 0 ] || exit 1
}

# no_data ends a step that needs stories260K when the bundle has none: a
# failure on a GPU (its check did not run), a skip on the emulator bundle.
no_data() {
	note "the bundle carries no stories260K.gguf (build it where the shared test data is)"
	[ "$TW_BUNDLE_KIND" = cuda ] && exit 1
	exit 77
}

step_stories() {
	gguf=$TURNWISE_TESTDATA/stories260K/stories260K.gguf
	[ -e "$gguf" ] || no_data
	load_torch
	cd "$B" || exit 1
	ours bin/train generate --backend cuda --gguf "$gguf" --bos-only --max-new 80 | logged "$WORK/stories.out"
	[ "${PIPESTATUS[0]}" -eq 0 ] || { note "train generate failed"; exit 1; }
	got=$(cat "$WORK/stories.out")
	echo "want: $STORIES_TEXT…"
	case $got in
	"$STORIES_TEXT"*) note "greedy text is the documented text" ;;
	*)
		note "greedy text differs: ${got:0:120}"
		exit 1
		;;
	esac
}

# collectives NPROC PORT FLAGS… runs `train collectives` under `train launch`
# with NPROC ranks, and notes which library ran it and the all-reduce
# bandwidth at the largest size.
collectives() {
	local nproc=$1 port=$2
	shift 2
	load_torch
	cd "$B" || exit 1
	ours bin/train launch --nproc-per-node "$nproc" --master-port "$port" -- collectives "$@" 2>&1 | logged "$WORK/coll.out"
	rc=${PIPESTATUS[0]}
	lib=$(grep -m1 -o 'through .*' "$WORK/coll.out")
	bw=$(grep 'all-reduce f32' "$WORK/coll.out" | tail -1 | sed 's/^\[rank 0\] //; s/  */ /g')
	if [ "$rc" -ne 0 ]; then
		note "failed: $(grep -m1 -E 'failed|error' "$WORK/coll.out")"
		exit 1
	fi
	note "$nproc rank(s) ${lib:-?}: every collective matches; ${bw:-no bandwidth line}"
}

step_collectives() {
	gpu_only "has no NCCL (the GPU bundle runs this step)"
	collectives 1 29531 --backend cuda --sizes 1,16,64,256
}

step_collectives_cpu() { collectives 2 29532 --backend cpu --threads 1 --sizes 1,16,64; }

# sanitize TOOL runs compute-sanitizer's TOOL over the GEMM and attention
# tests at their small shapes.
# cuda_tool NAME [PATH…] prints where CUDA's tool NAME is: on PATH, else the
# newest of /usr/local/cuda*/bin/NAME and the PATHs given (globs expanded).
cuda_tool() {
	command -v "$1" 2>/dev/null && return
	ls -d /usr/local/cuda*/bin/"$1" "${@:2}" 2>/dev/null | sort -V | tail -1
}

sanitize() {
	gpu_only "runs no sanitizer"
	local cs=${TW_SANITIZER:-$(cuda_tool compute-sanitizer)}
	[ -n "$cs" ] && [ -x "$cs" ] || skip "compute-sanitizer not found (on PATH or under /usr/local/cuda*/bin)"
	load_torch
	cd "$B" || exit 1
	ours "$cs" --tool "$1" --error-exitcode 1 --print-limit 50 \
		bin/engine-cuda.test -test.run '^(TestConformance|TestGemmPaths|TestGemmSkinny)$/^(gemm|attention|f32_to|bf16_to)' \
		-test.timeout "$(max1 $(($(left) - GO_MARGIN)))s" 2>&1 | logged "$WORK/san.out"
	rc=${PIPESTATUS[0]}
	# memcheck and synccheck end with an ERROR SUMMARY, racecheck with a
	# RACECHECK SUMMARY (hazards).
	summary=$(grep -m1 -E '(ERROR|RACECHECK) SUMMARY' "$WORK/san.out")
	note "${summary:-no summary line} ($cs)"
	[ "$rc" -eq 0 ] || exit 1
}

step_memcheck() { sanitize memcheck; }
step_racecheck() { sanitize racecheck; }
step_synccheck() { sanitize synccheck; }

# The benchmarks: train bench picks its shapes by itself (Llama-3.1-8B's and
# the 8B model on a GPU, small shapes and a tiny model on the emulator).
step_bench_kernels() {
	load_torch
	cd "$B" || exit 1
	ours bin/train bench --backend cuda --suite kernels \
		--out "$WORK/bench/bench-kernels.json" --md "$WORK/bench/bench-kernels.md" || exit 1
	cat "$WORK/bench/bench-kernels.md"
	note "$(grep -c '^| ' "$WORK/bench/bench-kernels.md") table lines"
}

# bench_step GEMM NAME measures the LoRA step, prefill and decode with the
# backend's GEMM GEMM (train bench --gemm) into NAME.json and NAME.md; the
# note has the table count and the first profile of a step and of
# decoding (the 2048-token step, decoding one sequence).
bench_step() {
	load_torch
	cd "$B" || exit 1
	ours bin/train bench --backend cuda --suite step --gemm "$1" \
		--out "$WORK/bench/$2.json" --md "$WORK/bench/$2.md" || exit 1
	cat "$WORK/bench/$2.md"
	note "--gemm $1: $(grep -c '^| ' "$WORK/bench/$2.md") table lines; $(grep -m1 '^One more training step' "$WORK/bench/$2.md") $(grep -m1 'more decoding steps' "$WORK/bench/$2.md" | sed 's/.*: the ops take/decoding: the ops take/')"
}

step_bench_step() {
	gpu_only "has no cuBLASLt (bench-step-own measures the step with our GEMM)"
	bench_step cublas bench-step
}

step_bench_step_own() { bench_step own bench-step-own; }

# sweep_report DIR PREFIX IMPL CFGS tabulates a sweep: DIR/CFG.json holds
# train bench's results with configuration CFG (one of CFGS); of them, the
# cases whose names start with PREFIX (and whose impl is IMPL, when IMPL is
# not empty) go into DIR/sweep.tsv (one line per case and configuration:
# name, configuration, median seconds, TFLOP/s, GB/s, bound, error; a case
# the configuration refused has an error and no times), DIR/sweep.sorted
# (measured first, fastest first within a case, then the refusals) and the
# table DIR/sweep.md, which it prints; BEST is set to the fastest
# configuration of each case. It fails when nothing was measured.
sweep_report() {
	local dir=$1 prefix=$2 impl=$3 cfgs=$4 c
	# train bench's JSON has one field per line.
	for c in $cfgs; do
		[ -s "$dir/$c.json" ] || continue
		awk -v cfg="$c" -v prefix="$prefix" -v impl="$impl" '
			function val(s) { sub(/^[^:]*: */, "", s); sub(/,$/, "", s); gsub(/"/, "", s); return s }
			function flush() { if (name != "") print name "\t" cfg "\t" med "\t" tf "\t" gb "\t" bound "\t" err; name = "" }
			/^    [}{]/ { flush() }
			/^      "name": / { v = val($0); if (index(v, prefix) == 1) { name = v; med = tf = gb = bound = err = "" } }
			name != "" && /^      "impl":/ && impl != "" && val($0) != impl { name = "" }
			name != "" && /^      "median_s":/ { med = val($0) }
			name != "" && /^      "tflops":/ { tf = val($0) }
			name != "" && /^      "gbs":/ { gb = val($0) }
			name != "" && /^      "bound":/ { bound = val($0) }
			name != "" && /^      "error":/ { err = val($0) }
			END { flush() }
		' "$dir/$c.json"
	done >"$dir/sweep.tsv"
	awk -F'\t' '$3 != "" { f = 1 } END { exit !f }' "$dir/sweep.tsv" || return 1
	awk -F'\t' '{ print $1 "\t" ($3 == "" ? 1 : 0) "\t" $0 }' "$dir/sweep.tsv" | sort -t$'\t' -k1,1 -k2,2n -k5,5g |
		cut -f3- >"$dir/sweep.sorted"
	awk -F'\t' '
		BEGIN { print "| case | configuration | median ms | TFLOP/s | GB/s |"; print "| --- | --- | ---: | ---: | ---: |" }
		$3 == "" { printf "| %s | %s | %s | | |\n", $1, $2, $7 == "" ? "no result" : $7; next }
		{ printf "| %s | %s%s | %.4g | %.4g | %.4g |\n", $1, $2, $1 != prev ? " (best)" : "", 1000 * $3, $4, $5; prev = $1 }
	' "$dir/sweep.sorted" | tee "$dir/sweep.md"
	BEST=$(awk -F'\t' -v prefix="$prefix" '
		$3 != "" && $1 != prev {
			c = substr($1, length(prefix) + 1); sub(/\/H[0-9]+\/G[0-9]+\/D[0-9]+$/, "", c)
			printf "%s%s: %s (%s)", n++ ? "; " : "", c, $2, $6 == "memory" ? sprintf("%.4g GB/s", $5) : sprintf("%.4g TFLOP/s", $4)
			prev = $1
		}' "$dir/sweep.sorted")
}

# step_attn_sweep measures the kernel suite's attention cases once per
# configuration of the attention kernels that train bench lists (the
# defaults, listed first, over every case; a forward, backward or decoding
# configuration over that direction's cases), into
# bench/attn-sweep/CONFIG.json (a configuration that fails, e.g. one whose
# shared memory this device lacks, is listed as such), then tabulates them.
step_attn_sweep() {
	load_torch
	cd "$B" || exit 1
	local dir=$WORK/bench/attn-sweep cfgs c n=0 failed="" skipped=0 filter
	mkdir -p "$dir"
	cfgs=$(ours bin/train bench --attention-configs 2>&1) || { note "train bench --attention-configs failed: $cfgs"; exit 1; }
	[ -n "$cfgs" ] || { note "train bench --attention-configs lists nothing"; exit 1; }
	printf '%s\n' "$cfgs" >"$dir/configs.txt"
	progress "$(wc -l <<<"$cfgs") attention configurations"
	for c in $cfgs; do
		# The defaults (listed first) over every attention case; any other
		# configuration over the cases its direction runs.
		case $c in
		fwd.*) filter='^attention/fwd' ;;
		bwd.*) filter='^attention/bwd' ;;
		dec.*) filter='^attention/decode' ;;
		*) filter='^attention/' ;;
		esac
		[ "$n" -gt 0 ] || filter='^attention/'
		sweep_measure "$dir" "$c" bin/train bench --backend cuda --suite kernels --filter "$filter" \
			--attention-config "$c" --reps 3 --min-time 5ms --quiet --out "$dir/$c.json"
	done
	sweep_report "$dir" attention/ "" "$cfgs" || { note "nothing measured (${n} configurations tried; failed:${failed:- none})"; exit 1; }
	sweep_note "$cfgs"
}

# step_bench_step_tuned measures the step suite again with the attention
# configuration the attn-sweep step of this call found fastest: the forward
# fields of the best configuration of the causal forward at the most tokens
# with the backward fields of the backward's (a direction's default, which
# the sweep's first run measures, sets no fields), so that the run that
# finds a faster configuration also says what it does to the whole step
# (bench-step-tuned.json and .md, beside bench-step's with the defaults; not
# in bench.md). The GEMM is cuBLASLt on a GPU, ours on the emulator bundle.
step_bench_step_tuned() {
	local sorted=$WORK/bench/attn-sweep/sweep.sorted cfg gemm=cublas
	[ -s "$sorted" ] || skip "the attn-sweep step measured nothing in this call"
	[ "$TW_BUNDLE_KIND" = cuda ] || gemm=own
	# best DIR: the fields of DIR (fwd or bwd) in the fastest configuration
	# of the causal DIR case with the most tokens (sweep.sorted lists each
	# case's measured configurations fastest first).
	best() {
		awk -F'\t' -v d="$1" '
			$3 != "" && index($1, "attention/" d "/") == 1 && match($1, /\/b[0-9]+xT[0-9]+\//) {
				t = substr($1, RSTART, RLENGTH); sub(/.*xT/, "", t); t += 0
				if (!(t in first)) first[t] = $2
				if (t > max) max = t
			}
			END { if (max > 0) print first[max] }' "$sorted" | fields "$1"
	}
	# fields DIR: the DIR fields of the comma-separated configuration on
	# stdin, comma-separated.
	fields() { tr ',' '\n' | grep "^$1\." | paste -sd, -; }
	# The defaults are the sweep's first configuration (the forward's spelled
	# out): a direction whose fastest they are keeps its defaults.
	local def f b
	def=$(head -n 1 "$WORK/bench/attn-sweep/configs.txt")
	f=$(best fwd) b=$(best bwd)
	[ "$f" != "$(fields fwd <<<"$def")" ] || f=""
	[ "$b" != "$(fields bwd <<<"$def")" ] || b=""
	cfg=$f${f:+${b:+,}}$b
	[ -n "$cfg" ] || skip "the sweep's fastest forward and backward are the defaults: bench-step measured them"
	load_torch
	cd "$B" || exit 1
	progress "--attention-config $cfg"
	ours bin/train bench --backend cuda --suite step --gemm "$gemm" --attention-config "$cfg" \
		--out "$WORK/bench/bench-step-tuned.json" --md "$WORK/bench/bench-step-tuned.md" || exit 1
	cat "$WORK/bench/bench-step-tuned.md"
	note "--attention-config $cfg --gemm $gemm: $(grep -m1 '^One more training step' "$WORK/bench/bench-step-tuned.md")"
}

# step_gemm_sweep measures our GEMM's configurations with the kernel suite:
# the decoding GEMM cases (a decoding step's projections at each batch) once
# per configuration of its few-row kernel (TW_GEMM_SKINNY: rows of W per
# block × chunks in flight per thread), and four projection cases of the
# first shape set (q's three GEMMs and gate/up's forward) once per block tile
# of its tiled kernel (TW_GEMM_TILE; 128 is the default's at those shapes);
# the default first, over both. Results go to bench/gemm-sweep/CONFIG.json,
# and a table of ours (cuBLASLt's figures are in every file, unchanged by
# the settings).
step_gemm_sweep() {
	load_torch
	cd "$B" || exit 1
	local dir=$WORK/bench/gemm-sweep cfgs="default 1x4 2x2 2x4 4x2 tile=128k64 tile=256" c n=0 failed="" skipped=0
	local decode='/decode_' tiled='^gemm/(llama8b-2k|small)/(q/(fwd|dx|dW)|gate_up/fwd)/'
	mkdir -p "$dir"
	for c in $cfgs; do
		case $c in
		default) TW_GEMM_SKINNY= TW_GEMM_TILE= sweep_measure "$dir" "$c" bin/train bench --backend cuda --suite kernels \
			--filter "$decode|$tiled" --reps 3 --min-time 5ms --quiet --out "$dir/$c.json" ;;
		tile=*) TW_GEMM_TILE=${c#tile=} sweep_measure "$dir" "$c" bin/train bench --backend cuda --suite kernels \
			--filter "$tiled" --reps 3 --min-time 5ms --quiet --out "$dir/$c.json" ;;
		*) TW_GEMM_SKINNY=$c sweep_measure "$dir" "$c" bin/train bench --backend cuda --suite kernels \
			--filter "$decode" --reps 3 --min-time 5ms --quiet --out "$dir/$c.json" ;;
		esac
	done
	sweep_report "$dir" gemm/ turnwise "$cfgs" || { note "nothing measured (${n} configurations tried; failed:${failed:- none})"; exit 1; }
	sweep_note "$cfgs"
}

# sweep_measure DIR CFG COMMAND… runs COMMAND (a train bench writing
# DIR/CFG.json) for configuration CFG within what is left of the step, its
# output in DIR/CFG.out, and counts it in the caller's n (and in skipped
# when no time is left, in failed when it fails).
sweep_measure() {
	local dir=$1 c=$2 to rc
	shift 2
	to=$(($(left) - 10))
	if [ "$to" -lt 10 ]; then
		skipped=$((skipped + 1))
		return
	fi
	ours timeout -s QUIT -k 5 "$to" "$@" >"$dir/$c.out" 2>&1
	rc=$?
	n=$((n + 1))
	if [ "$rc" -ne 0 ] || [ ! -s "$dir/$c.json" ]; then
		failed="$failed $c"
		progress "$c: failed (exit status $rc): $(grep -m1 -iE 'error|panic|invalid' "$dir/$c.out" | cut -c1-160)"
		rm -f "$dir/$c.json"
	else
		progress "$c: measured"
	fi
}

# sweep_note CFGS notes how much of a sweep of CFGS ran (the caller's n,
# failed, skipped, dir) and its BEST.
sweep_note() {
	local out="" refused
	[ "$skipped" -eq 0 ] || out=", $skipped left out for lack of time"
	refused=$(awk -F'\t' '$3 == ""' "$dir/sweep.tsv" | wc -l)
	[ "$refused" -eq 0 ] || out="$out, $refused (case, configuration) pairs refused"
	note "$n of $(wc -l <<<"$(printf '%s\n' $1)") configurations run${failed:+ (failed:$failed)}$out; best: $BEST"
}

# step_profile runs Nsight Compute over one launch of each kernel case
# PROFILE_CASES names (ours; then SDPA's flash kernels at the same shape,
# where PyTorch was found): the Speed-of-Light, launch, occupancy, warp-state,
# compute and memory sections, with the clocks left alone (METHOD: ncu's
# own clock control changes what is measured). Each case leaves its report
# (CASE.ncu-rep), the report's details page with ncu's own findings
# (CASE.txt), its raw page (CASE.csv) and its source page (CASE.sass.csv:
# the machine code with the warp-state samples at each instruction) in
# logs.tar.gz's bench/profile/, and one table of them all with the samples
# by opcode and the hottest instructions of each (profile.md, train bench
# profile); the note has one line per kernel and one per source page.
step_profile() {
	gpu_only "has no hardware counters"
	local cs=${TW_NCU:-$(cuda_tool ncu /opt/nvidia/nsight-compute/*/ncu)}
	[ -n "$cs" ] && [ -x "$cs" ] || skip "ncu (Nsight Compute) not found (on PATH, under /usr/local/cuda*/bin or /opt/nvidia/nsight-compute; set TW_NCU)"
	load_torch
	cd "$B" || exit 1
	local dir=$WORK/bench/profile spec label filter kern to rc csvs=() sass=() failed="" nosrc=""
	mkdir -p "$dir"
	# The sections, and shared memory's bank conflicts and wavefronts (which
	# no section names as metrics) with the SMs' elapsed cycles they are
	# counted over: wavefronts per SM cycle, against the one a cycle that
	# shared memory serves, say whether ldmatrix and the shared loads bound
	# a kernel. SourceCounters samples the warps' program counters: the
	# source page (machine code, no source lines needed) then says at which
	# instructions the warps wait, and why.
	local sections=(--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats
		--section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section SchedulerStats --section SourceCounters
		--metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,sm__cycles_elapsed.sum)
	# profile LABEL KERNEL-REGEX SKIP RUN COMMAND… profiles the first launch
	# of a kernel whose name matches after SKIP such launches, in COMMAND,
	# run by RUN (ours: with the bundle's libraries first; env: as it is,
	# for a python3 that keeps its own).
	profile() {
		local label=$1 kern=$2 nskip=$3 run=$4
		shift 4
		to=$(($(left) - 15))
		[ "$to" -ge 10 ] || { failed="$failed $label(no time left)"; return; }
		progress "$label: ncu -k regex:$kern"
		"$run" timeout -s QUIT -k 5 "$to" "$cs" --clock-control none --target-processes all -k "regex:$kern" \
			--launch-skip "$nskip" --launch-count 1 "${sections[@]}" -f -o "$dir/$label" "$@" >"$dir/$label.out" 2>&1
		rc=$?
		if [ "$rc" -ne 0 ] || [ ! -s "$dir/$label.ncu-rep" ]; then
			failed="$failed $label"
			progress "$label: failed (exit status $rc): $(grep -m1 -E '==ERROR==|error|panic' "$dir/$label.out" | cut -c1-160)"
			return
		fi
		"$cs" --import "$dir/$label.ncu-rep" --page details >"$dir/$label.txt" 2>&1
		"$cs" --import "$dir/$label.ncu-rep" --page raw --csv --print-units base >"$dir/$label.csv" 2>"$dir/$label.csv.err" &&
			csvs+=("$dir/$label.csv") || failed="$failed $label(import)"
		# The samples per instruction: kept when train bench profile reads
		# them (an ncu whose page it cannot read loses this part alone, and
		# the step does not fail for it).
		if "$cs" --import "$dir/$label.ncu-rep" --page source --csv --print-source sass >"$dir/$label.sass.csv" 2>"$dir/$label.sass.err" &&
			ours "$B/bin/train" bench profile "$dir/$label.sass.csv" >/dev/null 2>>"$dir/$label.sass.err"; then
			sass+=("$dir/$label.sass.csv")
		else
			nosrc="$nosrc $label"
		fi
	}
	local cfg
	for spec in $PROFILE_CASES; do
		IFS='@' read -r label filter kern cfg <<<"$spec"
		profile "$label" "$kern" 1 ours bin/train bench --backend cuda --suite kernels --filter "$filter" \
			${cfg:+--attention-config "$cfg"} --reps 1 --min-time 1ms --quiet
	done
	if [ -n "${TORCH_PY:-}" ] && [ -e "$B/peers/torch_peers.py" ]; then
		local peer=(env PYTHONUNBUFFERED=1 "$TORCH_PY" torch_peers.py --suite attention --attn-seqs 2048
			--reps 1 --min-time 0.001 --copy-mib 64 --gemm-size 1024 --json "$dir/torch.json")
		# The forward is launched once by the probe, then by the timing; the
		# backward's main kernel once per probe and timing too.
		cd "$B/peers" || exit 1
		profile sdpa-fwd 'flash_fwd_kernel' 1 env "${peer[@]}"
		profile sdpa-bwd 'flash_bwd_dq_dk_dv' 1 env "${peer[@]}"
		cd "$B" || exit 1
	fi
	[ "${#csvs[@]}" -gt 0 ] || { note "nothing profiled (failed:${failed:- none}; see the log and bench/profile/)"; exit 1; }
	ours bin/train bench profile --out "$dir/profile.md" "${csvs[@]}" ${sass[@]+"${sass[@]}"} && cat "$dir/profile.md" || exit 1
	note "$(ours bin/train bench profile --brief "${csvs[@]}" ${sass[@]+"${sass[@]}"} | paste -sd';' - | sed 's/;/; /g')${failed:+ (failed:$failed)}${nosrc:+ (no samples per instruction:$nosrc; see CASE.sass.err)}"
	[ -z "$failed" ] || exit 1
}

step_peers() {
	gpu_only "runs no PyTorch peer"
	load_torch
	[ -n "${TORCH_PY:-}" ] || skip "no python3 here imports torch (see the torch step)"
	[ -e "$B/peers/torch_peers.py" ] || { note "the bundle carries no peers/torch_peers.py"; exit 1; }
	cd "$B/peers" || exit 1
	PYTHONUNBUFFERED=1 "$TORCH_PY" torch_peers.py --json "$WORK/bench/bench-torch.json" || exit 1
	note "PyTorch peers measured"
}

# report writes bench.md from every benchmark result there is so far; the
# number of result files is its exit status's complement (0: none).
report() {
	set --
	for f in bench-kernels bench-step bench-step-own bench-torch; do
		[ ! -s "$WORK/bench/$f.json" ] || set -- "$@" "$WORK/bench/$f.json"
	done
	[ $# -gt 0 ] || return 1
	(cd "$B" && ours bin/train bench report --out "$WORK/bench/bench.md" "$@")
}

# step_bench_report writes the report as soon as the first benchmarks are
# done; finish writes it again with every result of the run.
step_bench_report() {
	[ -n "$(ls "$WORK"/bench/*.json 2>/dev/null)" ] || { note "no benchmark results to report"; exit 1; }
	report || exit 1
	cat "$WORK/bench/bench.md"
	note "$(cd "$WORK/bench" && ls ./*.json | xargs -n1 basename | paste -sd' ' -)"
}

# json_meta FILE KEY prints the first string value of KEY in the result file
# FILE: train bench writes meta first.
json_meta() { grep -m1 -o "\"$2\": *\"[^\"]*\"" "$1" | sed 's/^[^:]*: *"//; s/"$//'; }

# same_commit A B: whether the commits A and B are the same, one written as a
# prefix of the other; a tree with changes (a "-modified" suffix) is the same
# as nothing but itself.
same_commit() {
	local a=$1 b=$2
	[ -n "$a" ] && [ -n "$b" ] || return 1
	[ "$a" != "$b" ] || return 0
	case $a$b in *-*) return 1 ;; esac
	[ "${#a}" -ge 7 ] && [ "${#b}" -ge 7 ] || return 1
	[ "${a#"$b"}" != "$a" ] || [ "${b#"$a"}" != "$b" ]
}

step_gate() {
	local base label have="" f dev newest=""
	if [ -n "$BASELINE" ]; then
		base=$BASELINE label=$(basename "$BASELINE")
		[ -s "$base" ] || { note "TW_BUNDLE_BASELINE=$BASELINE: no such file"; exit 1; }
	else
		[ -n "$DEVICE_NAME" ] || skip "the device's name is unknown ($DEVICE): no baseline can be chosen"
		for f in "$B"/baselines/*/bench-kernels.json; do
			[ -s "$f" ] || continue
			dev=$(json_meta "$f" device)
			have="$have, $(basename "$(dirname "$f")") ($dev)"
			[ "$dev" = "$DEVICE_NAME" ] || [ "${dev#"$DEVICE_NAME ("}" != "$dev" ] || continue
			if [ -z "$newest" ] || [[ $(json_meta "$f" date) > $(json_meta "$newest" date) ]]; then
				newest=$f
			fi
		done
		[ -n "$have" ] || skip "the bundle carries no baselines (build.sh copies them from earlier GPU runs' bench-kernels.json)"
		[ -n "$newest" ] || skip "no baseline of this device kind ($DEVICE_NAME) among the bundle's: ${have#, }"
		base=$newest label=$(basename "$(dirname "$newest")")
	fi
	local commit date
	commit=$(json_meta "$base" commit) date=$(json_meta "$base" date)
	echo "run.sh: the gate against $base: $(json_meta "$base" device), commit ${commit:-?}, $date; this bundle: $DEVICE_NAME, commit $TW_BUNDLE_COMMIT"
	load_torch
	cd "$B" || exit 1
	ours bin/train bench --backend cuda --baseline "$base" --out "$WORK/bench/gate.json" 2>&1 | logged "$WORK/gate.out"
	local rc=${PIPESTATUS[0]} verdict n names
	verdict=$(grep -E '^([0-9]+ of [0-9]+ kernels got slower: |all [0-9]+ kernels within the allowed slowdown)' "$WORK/gate.out" | tail -1)
	if [ -z "$verdict" ]; then
		note "train bench --baseline $label gave no verdict (exit status $rc): $(grep -m1 -iE 'error|train bench:' "$WORK/gate.out")"
		exit 1
	fi
	case $verdict in
	all*)
		note "$verdict of $label (commit ${commit:0:12})"
		[ "$rc" -eq 0 ] || exit 1
		return 0
		;;
	esac
	n=${verdict%% *}
	names=$(sed 's/^.*got slower: //' <<<"$verdict" | cut -d, -f1-3)
	[ "$n" -le 3 ] || names="$names, …"
	if same_commit "$commit" "$TW_BUNDLE_COMMIT"; then
		note "$n kernels slower than $label (the same commit, ${commit:0:12}): $names"
		exit 1
	fi
	note "$n kernels slower than $label (another commit: informational; ${commit:0:12}, this bundle's $TW_BUNDLE_COMMIT): $names"
}

export -f ours logged note progress skip gpu_only left max1 load_torch no_data cuda_tool sanitize collectives bench_step report \
	run_test test_message tests_finish tests_note tests_end gotests json_meta same_commit sweep_measure sweep_report sweep_note
export -f step_device step_torch step_conformance step_conformance_8b step_model step_stories \
	step_selftest step_collectives step_collectives_cpu step_memcheck step_racecheck step_synccheck step_bench_kernels \
	step_bench_step step_bench_step_own step_attn_sweep step_bench_step_tuned step_gemm_sweep step_profile step_peers step_bench_report step_gate

# ---- running and recording ----

NAMES=() STATUS=() SECS=() LIMITS=() NOTES=()

# jstr prints s as a JSON string.
jstr() {
	local s=$1
	s=${s//\\/\\\\}
	s=${s//\"/\\\"}
	s=${s//$'\n'/\\n}
	s=${s//$'\t'/\\t}
	s=${s//$'\r'/}
	printf '"%s"' "$s"
}

# jtests FILE prints a test step's results as a JSON array.
jtests() {
	local status secs name sp sf ss detail sep=""
	printf '['
	while IFS=$'\t' read -r status secs name sp sf ss detail; do
		printf '%s\n      {"name": %s, "status": %s, "seconds": %d, "subtests": {"passed": %d, "failed": %d, "skipped": %d}, "detail": %s}' \
			"$sep" "$(jstr "$name")" "$(jstr "$status")" "$secs" "$sp" "$sf" "$ss" "$(jstr "$detail")"
		sep=,
	done <"$1"
	printf '\n    ]'
}

# excerpt prints the lines of a failed step's log that say what failed.
excerpt() {
	local log=$1
	local what='--- FAIL|^panic:|^FAIL|[Ee]rror|ERROR|relative error|timed out|^SIGQUIT|^run\.sh: (killed|.*: (fail|timeout) \()'
	if grep -qE -- "$what" "$log"; then
		grep -E -- "$what" "$log" | head -40
	else
		tail -30 "$log"
	fi
}

# budget_left_out prints the steps the budget left out, as a regular
# expression for TW_BUNDLE_STEPS.
budget_left_out() {
	local i names=""
	for ((i = 0; i < ${#NAMES[@]}; i++)); do
		[ "${NOTES[i]#not run: the time budget}" = "${NOTES[i]}" ] || names="$names|${NAMES[i]}"
	done
	[ -z "$names" ] || echo "^(${names#|})\$"
}

write_summary() {
	local i n=${#NAMES[@]} pass=0 fail=0 skipped=0 t
	for ((i = 0; i < n; i++)); do
		case ${STATUS[i]} in
		pass) pass=$((pass + 1)) ;;
		fail) fail=$((fail + 1)) ;;
		*) skipped=$((skipped + 1)) ;;
		esac
	done
	local rerun
	rerun=$(budget_left_out)
	{
		echo "# turnwise GPU bundle: $STARTED"
		echo
		echo "- bundle: $TW_BUNDLE_KIND, commit $TW_BUNDLE_COMMIT, built $TW_BUNDLE_BUILT with $TW_BUNDLE_GO and $TW_BUNDLE_TOOLKIT"
		echo "- device: $DEVICE"
		echo "- $pass passed, $fail failed, $skipped skipped in $((SECONDS - T0)) s (budget $BUDGET s)"
		[ -z "$rerun" ] || echo "- not run for lack of time; to run them: TW_BUNDLE_STEPS='$rerun' run.sh OUTDIR"
		echo
		echo "| step | result | seconds | limit | note |"
		echo "| --- | --- | ---: | ---: | --- |"
		for ((i = 0; i < n; i++)); do
			echo "| ${NAMES[i]} | ${STATUS[i]} | ${SECS[i]} | ${LIMITS[i]} | ${NOTES[i]//|/\\|} |"
		done
		for ((i = 0; i < n; i++)); do
			[ "${STATUS[i]}" = fail ] && [ -s "$LOGS/${NAMES[i]}.log" ] || continue
			echo
			echo "## ${NAMES[i]} (logs.tar.gz: logs/${NAMES[i]}.log)"
			t=$WORK/tests.${NAMES[i]}
			if [ -s "$t" ] && grep -qvE '^pass'$'\t' "$t"; then
				echo
				awk -F'\t' '$1 != "pass" {
					f = $3
					gsub("/", "_", f)
					printf "- %s: %s (%d s)%s (logs.tar.gz: tests/%s/%s.out)\n", $3, $1, $2, $7 == "" ? "" : ": " $7, step, f
				}' step="${NAMES[i]}" "$t"
			fi
			echo
			echo '```'
			excerpt "$LOGS/${NAMES[i]}.log"
			echo '```'
		done
		if [ -s "$WORK/bench/bench.md" ]; then
			echo
			echo "## Benchmarks"
			echo
			cat "$WORK/bench/bench.md"
		fi
	} >"$OUT/summary.md"
	{
		printf '{\n  "schema": "turnwise-gpu-bundle/1",\n'
		printf '  "bundle": {"kind": %s, "commit": %s, "built": %s, "go": %s, "toolkit": %s},\n' \
			"$(jstr "$TW_BUNDLE_KIND")" "$(jstr "$TW_BUNDLE_COMMIT")" "$(jstr "$TW_BUNDLE_BUILT")" \
			"$(jstr "$TW_BUNDLE_GO")" "$(jstr "$TW_BUNDLE_TOOLKIT")"
		printf '  "device": %s,\n  "started": %s,\n  "seconds": %d,\n  "budget_s": %d,\n' \
			"$(jstr "$DEVICE")" "$(jstr "$STARTED")" $((SECONDS - T0)) "$BUDGET"
		printf '  "rerun_steps": %s,\n' "$(jstr "$rerun")"
		printf '  "passed": %d,\n  "failed": %d,\n  "skipped": %d,\n  "ok": %s,\n  "steps": [' \
			"$pass" "$fail" "$skipped" "$([ "$fail" -eq 0 ] && echo true || echo false)"
		for ((i = 0; i < n; i++)); do
			[ "$i" -eq 0 ] || printf ','
			printf '\n    {"name": %s, "status": %s, "seconds": %d, "limit_s": %d, "timed_out": %s, "note": %s, "log": %s' \
				"$(jstr "${NAMES[i]}")" "$(jstr "${STATUS[i]}")" "${SECS[i]}" "${LIMITS[i]}" \
				"$([ "${NOTES[i]#timed out}" != "${NOTES[i]}" ] && echo true || echo false)" \
				"$(jstr "${NOTES[i]}")" "$(jstr "logs/${NAMES[i]}.log")"
			t=$WORK/tests.${NAMES[i]}
			[ ! -s "$t" ] || printf ', "tests": %s' "$(jtests "$t")"
			printf '}'
		done
		printf '\n  ]\n}\n'
	} >"$OUT/summary.json"
}

# group_procs PGID prints the live processes of the process group PGID, as
# PID(COMMAND).
group_procs() {
	local f stat state pgrp comm
	for f in /proc/[0-9]*/stat; do
		read -r stat 2>/dev/null <"$f" || continue
		read -r state _ pgrp _ <<<"${stat##*) }"
		[ "$pgrp" = "$1" ] && [ "$state" != Z ] || continue
		comm=${stat#*(}
		printf '%s(%s) ' "${stat%% *}" "${comm%)*}"
	done
}

# step NAME LIMIT runs step_NAME (dashes as underscores) for at most LIMIT
# seconds (twice that on the emulator, whose kernels share the CPU with
# whatever else runs there), or what is left of the budget if less, and
# records the result.
step() {
	local name=$1 cap=$2 fn=step_${1//-/_}
	[ "$TW_BUNDLE_KIND" = cuda ] || cap=$((2 * cap))
	local left=$((BUDGET - (SECONDS - T0)))
	local lim=$((cap < left ? cap : left))
	local t=$SECONDS rc status note log=$LOGS/$1.log
	export STEP=$name NOTE_FILE=$WORK/note.$name TESTS_FILE=$WORK/tests.$name \
		PLANNED_FILE=$WORK/planned.$name CURRENT_FILE=$WORK/current.$name
	: >"$NOTE_FILE"
	: >"$TESTS_FILE"
	: >"$PLANNED_FILE"
	: >"$CURRENT_FILE"
	if [ -n "$ONLY" ] && ! [[ $name =~ $ONLY ]]; then
		status=skip note="not selected (TW_BUNDLE_STEPS=$ONLY)" lim=0
	elif [ "$lim" -lt 5 ]; then
		status=fail note="not run: the time budget ($BUDGET s) was spent" lim=0
		printf 'run.sh: [%3d s] %s: %s\n' $((SECONDS - T0)) "$name" "$note"
	else
		printf 'run.sh: [%3d s] %s (limit %d s)\n' $((SECONDS - T0)) "$name" "$lim"
		export STEP_END=$(($(date +%s) + lim)) STEP_LIMIT=$lim
		# SIGQUIT first: a Go program prints its goroutines before it ends.
		# timeout makes the step a process group of its own, whose id the
		# step writes down.
		timeout -s QUIT -k 10 "$lim" bash -c "cut -d' ' -f5 /proc/\$\$/stat >'$WORK/pgid.$name'; $fn" \
			</dev/null 3>&1 >"$log" 2>&1
		rc=$?
		if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
			# timeout waits for the step's bash alone: give what it started
			# a moment to write its last lines, then end what is left (a
			# process stuck in the driver would hold the GPU).
			sleep 1
			local pgid left_running
			pgid=$(cat "$WORK/pgid.$name" 2>/dev/null)
			if [ -n "$pgid" ] && [ "$pgid" != "$(cut -d' ' -f5 /proc/$$/stat)" ]; then
				left_running=$(group_procs "$pgid")
				if [ -n "$left_running" ]; then
					kill -KILL -- "-$pgid" 2>/dev/null
					echo "run.sh: killed what the step left running: $left_running" >>"$log"
				fi
			fi
			local current
			current=$(cut -f1 "$CURRENT_FILE")
			if [ -n "$current" ]; then
				printf 'killed\t%d\t%s\t0\t0\t0\t%s\n' $(($(date +%s) - $(cut -f2 "$CURRENT_FILE"))) "$current" \
					"killed at the step's limit ($lim s)" >>"$TESTS_FILE"
				echo "run.sh: killed at the step's limit ($lim s) while $current ran" >>"$log"
				printf 'run.sh:   %s: killed at the step'"'"'s limit (%d s)\n' "$current" "$lim"
			fi
			if [ -s "$PLANNED_FILE" ]; then
				tests_finish
				note "$(tests_note)"
			fi
		fi
		note=$(head -1 "$NOTE_FILE")
		case $rc in
		0) status=pass ;;
		77) status=skip ;;
		124 | 137) status=fail note="timed out at its limit ($lim s)${note:+; $note}" ;;
		*) status=fail note=${note:-exit status $rc} ;;
		esac
		printf 'run.sh: [%3d s] %s: %s (%d s) %s\n' $((SECONDS - T0)) "$name" "$status" $((SECONDS - t)) "$note"
	fi
	NAMES+=("$name") STATUS+=("$status") SECS+=($((SECONDS - t))) LIMITS+=("$lim") NOTES+=("$note")
	write_summary
}

# finish leaves in OUT the summary, the benchmark report and results, and
# every log (with the benchmarks' own tables and every test process's
# output) in one archive: ten files at most.
finish() {
	write_summary
	# The report again, with what the long steps measured (bench-step-own).
	[ ! -s "$WORK/bench/bench-step-own.json" ] || report >>"$LOGS/bench-report.log" 2>&1 || true
	tar -C "$WORK" -czf "$OUT/logs.tar.gz" logs bench tests
	for f in bench.md bench-kernels.json bench-step.json bench-step-own.json bench-torch.json gate.json bench-step-tuned.json bench-step-tuned.md; do
		[ ! -s "$WORK/bench/$f" ] || cp "$WORK/bench/$f" "$OUT/$f"
	done
	[ ! -d "$WORK/bench/attn-sweep" ] || tar -C "$WORK/bench" -czf "$OUT/attn-sweep.tar.gz" attn-sweep
	[ ! -d "$WORK/bench/gemm-sweep" ] || tar -C "$WORK/bench" -czf "$OUT/gemm-sweep.tar.gz" gemm-sweep
	if [ -n "${TW_BUNDLE_KEEP:-}" ]; then
		echo "run.sh: the unpacked bundle stays in $WORK"
	else
		rm -rf "$WORK"
	fi
}
trap finish EXIT

# The short checks and the benchmarks (on an H200, 2026-11-27: device and
# the small checks a few seconds each, torch 16 s, bench-kernels 40 s,
# bench-step 93 s, peers 66 s) ...
step device 20
step torch 45
step conformance 90
step model 45
step stories 30
step selftest 30
step bench-kernels 75
step bench-step 120
step peers 100
step bench-report 20
# ... then the long checks, as far as the budget goes (the report is written
# again at the end, with bench-step-own).
step bench-step-own 120
step attn-sweep 110
step gemm-sweep 60
step profile 150
step bench-step-tuned 120
step collectives 30
step collectives-cpu 30
step gate 90
step conformance-8b 120
step memcheck 60
step synccheck 60
step racecheck 90

# A failed step's lines again at the end, where a log that keeps only its
# last part (a CI job's) still shows them: its note, the lines of its log
# that name a failure, and the log's last lines.
for i in "${!STATUS[@]}"; do
	if [ "${STATUS[$i]}" = fail ]; then
		echo "run.sh: ${NAMES[$i]} failed: ${NOTES[$i]}"
		f=$LOGS/${NAMES[$i]}.log
		if [ -s "$f" ]; then
			grep -m20 -E -e '--- FAIL|^FAIL|panic:|fatal error|tw-emu:|ERROR' "$f" | sed "s/^/run.sh:   ${NAMES[$i]}: /" | cut -c1-300
			echo "run.sh:   ${NAMES[$i]}: ... its log's last lines:"
			tail -n 15 "$f" | sed "s/^/run.sh:   ${NAMES[$i]}: /" | cut -c1-300
		fi
	fi
done
echo "run.sh: results in $OUT (summary.md, summary.json, bench*, logs.tar.gz)"
rerun=$(budget_left_out)
[ -z "$rerun" ] || echo "run.sh: the budget left steps out; to run them: TW_BUNDLE_STEPS='$rerun' $0 OUTDIR"
for s in "${STATUS[@]}"; do
	[ "$s" != fail ] || exit 1
done
exit 0
