#!/bin/bash
# selftest.sh BUNDLE [OUTDIR] — checks that the GPU bundle's run.sh survives
# its own failures, on the emulator bundle BUNDLE (make gpu-bundle-emu):
# run.sh runs, four times at once, with misbehaviour planted in one test
# (TW_BUNDLE_PLANT, engine/cuda/bundleplant_test.go) and a few steps and
# tests selected, and the summaries and logs must show that
#
#   panic  the panicking test is reported failed, by name, and the tests of
#          its step before and after it passed; the gate step, against a
#          baseline of another commit that every kernel is slower than,
#          passes and says how many kernels were slower (informational)
#   hang   the step is reported timed out, the hung test as timed out and
#          the test after it as not run; its log holds the line the test
#          printed before it hung and Go's -test.timeout dump
#   kill   the same hang with -test.timeout beyond the step's limit
#          (TW_BUNDLE_GO_MARGIN below 0, as a process that Go's timeout
#          cannot end): the step is killed at its limit, reported timed out,
#          the hung test named as killed, and its log holds the line the
#          test printed and the goroutine dump of the kill (SIGQUIT)
#   gate   against a baseline of this bundle's own commit that every kernel
#          is slower than, the gate fails
#
# and every summary's device line names the kernel emulator, whether or not
# the device step ran. With OUTDIR, the results of a whole run.sh of the
# same bundle, it also checks those: no step failed, every conformance test
# passed or skipped one by one, the emulator's self-tests passed, the step
# benchmark ran with our GEMM and skipped cuBLASLt's (and the report written
# at the end has it), and the device line. It prints each check and exits
# non-zero naming every check that failed. The Makefile's test-bundles
# target runs it after the emulator bundle's whole run. Needs python3 (to
# check that each summary.json parses).
set -u -o pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ] || [ ! -x "$1/run.sh" ] || [ ! -e "$1/payload.tar.gz" ]; then
	echo "usage: $0 BUNDLE [OUTDIR]   (BUNDLE: a folder made by build.sh cudaemu)" >&2
	exit 2
fi
bundle=$(cd "$1" && pwd)
full=${2:-}
# shellcheck source=/dev/null
. "$bundle/BUNDLE.env"
[ "$TW_BUNDLE_KIND" = cudaemu ] || { echo "selftest.sh: $bundle is a $TW_BUNDLE_KIND bundle; the self-check plants run on the emulator's" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/bundle-selftest.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
T0=$SECONDS
failed=()

# check DESCRIPTION FILE ERE: FILE must have a line matching ERE, printed.
check() {
	local what=$1 file=$2 re=$3 line
	if line=$(grep -m1 -E -- "$re" "$file" 2>/dev/null); then
		printf 'selftest: ok    %s\n                %s\n' "$what" "${line:0:240}"
	else
		printf 'selftest: FAIL  %s: no line of %s matches %s\n' "$what" "${file#"$work"/}" "$re" >&2
		failed+=("$what")
	fi
}

# check_rc NAME WANT: run NAME's run.sh exited with status WANT.
check_rc() {
	local got
	got=$(cat "$work/$1.rc" 2>/dev/null)
	if [ "$got" = "$2" ]; then
		echo "selftest: ok    $1: run.sh exited with status $2"
	else
		echo "selftest: FAIL  $1: run.sh exited with status ${got:-?}, want $2 (its output: ${work#/}/$1.out)" >&2
		tail -20 "$work/$1.out" >&2
		failed+=("$1: exit status")
	fi
}

# check_json DIR: DIR's summary.json parses.
check_json() {
	if python3 -m json.tool "$1/summary.json" >/dev/null; then
		echo "selftest: ok    ${1##*/}: summary.json is JSON"
	else
		echo "selftest: FAIL  ${1##*/}: summary.json does not parse" >&2
		failed+=("${1##*/}: summary.json")
	fi
}

# unpack DIR: DIR's logs.tar.gz into DIR/x.
unpack() { mkdir -p "$1/x" && tar -C "$1/x" -xzf "$1/logs.tar.gz"; }

# The gate's baselines: a few kernels measured now by this bundle's train,
# every median then made a million million times faster, so that each
# kernel is slower now, whatever the noise; one with another commit, one
# with the bundle's own.
echo "selftest: measuring a few kernels for the gate's baselines"
mkdir -p "$work/payload"
tar -C "$work/payload" -xzf "$bundle/payload.tar.gz" || exit 1
LD_LIBRARY_PATH=$work/payload/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$work/payload/bin/train" bench --backend cuda \
	--suite kernels --filter '^(fill|add|rmsnorm)/small/' --quiet --out "$work/measured.json" >/dev/null || {
	echo "selftest: train bench could not measure the baseline's kernels" >&2
	exit 1
}
rm -rf "$work/payload"
sed -E 's/("median_s": )[0-9.eE+-]+/\11e-12/' "$work/measured.json" >"$work/fast.json"
sed -E '0,/"commit": "[^"]*"/s//"commit": "0000000000000000000000000000000000000000"/' "$work/fast.json" >"$work/base-other.json"
sed -E '0,/"commit": "[^"]*"/s//"commit": "'"$TW_BUNDLE_COMMIT"'"/' "$work/fast.json" >"$work/base-same.json"
check "the baseline has the kernels" "$work/fast.json" '"name": "rmsnorm/small/'
check "the baseline is faster than any run" "$work/fast.json" '"median_s": 1e-12'
check "the other commit's baseline" "$work/base-other.json" '"commit": "0{40}"'
check "the same commit's baseline" "$work/base-same.json" "\"commit\": \"$TW_BUNDLE_COMMIT\""

# run NAME VAR=VALUE…: run.sh into $work/NAME, in the background, with the
# environment given (and no other TW_BUNDLE_ setting).
run() {
	local name=$1
	shift
	(
		env -u TW_BUNDLE_PLANT -u TW_BUNDLE_STEPS -u TW_BUNDLE_TESTS -u TW_BUNDLE_SKIP_TESTS -u TW_BUNDLE_BUDGET -u TW_BUNDLE_BASELINE \
			-u TW_BUNDLE_KEEP -u TW_BUNDLE_GO_MARGIN TMPDIR="$work" "$@" "$bundle/run.sh" "$work/$name" >"$work/$name.out" 2>&1
		echo $? >"$work/$name.rc"
	) &
}

# Three tests of the conformance binary, in this order: one before the
# plant, the plant, one after.
tests='^(TestAdamWMultiTableCached|TestBundlePlant|TestTimer)$'
echo "selftest: four runs of $bundle/run.sh with planted failures"
run panic TW_BUNDLE_PLANT=panic TW_BUNDLE_STEPS='^(device|conformance|gate)$' TW_BUNDLE_TESTS="$tests" \
	TW_BUNDLE_BASELINE="$work/base-other.json"
run hang TW_BUNDLE_PLANT=hang TW_BUNDLE_STEPS='^conformance$' TW_BUNDLE_TESTS="$tests" TW_BUNDLE_BUDGET=15
run kill TW_BUNDLE_PLANT=hang TW_BUNDLE_GO_MARGIN=-60 TW_BUNDLE_STEPS='^conformance$' TW_BUNDLE_TESTS="$tests" \
	TW_BUNDLE_BUDGET=12
run gate TW_BUNDLE_STEPS='^gate$' TW_BUNDLE_BASELINE="$work/base-same.json"
wait
echo "selftest: the four runs took $((SECONDS - T0)) s in all"

emu='^- device: cudaemu: the kernel emulator on .+'
for r in panic hang kill gate; do
	check_json "$work/$r"
	check "$r: the device line names the emulator" "$work/$r/summary.md" "$emu"
	check "$r: summary.json names the emulator" "$work/$r/summary.json" '"device": "cudaemu: the kernel emulator on '
	unpack "$work/$r"
done

P=$work/panic
check_rc panic 1
check "panic: the step counts the tests and names the failed one" "$P/summary.md" \
	'^\| conformance \| fail \| [0-9]+ \| [0-9]+ \| 3 tests: 2 passed, 1 failed \(TestBundlePlant\), 0 skipped'
check "panic: the panicking test failed, with its panic" "$P/summary.json" \
	'\{"name": "TestBundlePlant", "status": "fail", .*"detail": "panic: bundleplant: the planted panic'
check "panic: the test before it passed" "$P/summary.json" '\{"name": "TestAdamWMultiTableCached", "status": "pass"'
check "panic: the test after it passed" "$P/summary.json" '\{"name": "TestTimer", "status": "pass"'
check "panic: the summary lists the failed test" "$P/summary.md" '^- TestBundlePlant: fail \([0-9]+ s\): panic: bundleplant'
check "panic: run.sh's last lines name the failed step" "$work/panic.out" '^run\.sh: conformance failed: 3 tests: 2 passed, 1 failed'
check "panic: ... and the failure its log holds" "$work/panic.out" '^run\.sh:   conformance: .*panic: bundleplant: the planted panic'
check "panic: the test processes ran with TW_CUDA_SYNC=1" "$P/x/logs/conformance.log" "^=== run\.sh: TestTimer \(-test\.run '\^TestTimer\\\$', -test\.timeout [0-9]+s, TW_CUDA_SYNC=1\)"
check "panic: the gate against another commit passes, informational" "$P/summary.md" \
	'^\| gate \| pass \| .*\| [0-9]+ kernels slower than base-other\.json \(another commit: informational'
check "panic: the gate's log keeps the whole verdict" "$P/x/logs/gate.log" '^[0-9]+ of [0-9]+ kernels got slower: '
check "panic: the gate's measurement is kept" "$P/x/bench/gate.json" '"name": "rmsnorm/small/'

H=$work/hang
check_rc hang 1
check "hang: the step timed out; the hung test is named, the next not run" "$H/summary.md" \
	'^\| conformance \| fail \| [0-9]+ \| [0-9]+ \| timed out at its limit \([0-9]+ s\); 3 tests: 1 passed, 1 failed \(TestBundlePlant: timed out\), 0 skipped, 1 not run'
check "hang: summary.json says timed out" "$H/summary.json" '"name": "conformance", "status": "fail", .*"timed_out": true'
check "hang: the hung test timed out" "$H/summary.json" '\{"name": "TestBundlePlant", "status": "timeout"'
check "hang: the test after it was not run" "$H/summary.json" '\{"name": "TestTimer", "status": "not-run"'
check "hang: the log holds what the test printed before it hung" "$H/x/logs/conformance.log" '^bundleplant: blocking now \(TW_BUNDLE_PLANT=hang\)'
check "hang: the log holds Go's timeout dump" "$H/x/logs/conformance.log" '^panic: test timed out after'
check "hang: the dump names the hung test" "$H/x/logs/conformance.log" 'TestBundlePlant \([0-9.]+s\)|cuda\.TestBundlePlant\('

K=$work/kill
check_rc kill 1
check "kill: the step was killed at its limit; the test is named, the next not run" "$K/summary.md" \
	"^\| conformance \| fail \| [0-9]+ \| [0-9]+ \| timed out at its limit \([0-9]+ s\); 3 tests: 1 passed, 1 failed \(TestBundlePlant: killed at the step's limit\), 0 skipped, 1 not run"
check "kill: the hung test was killed" "$K/summary.json" '\{"name": "TestBundlePlant", "status": "killed"'
check "kill: the log holds what the test printed before it hung" "$K/x/logs/conformance.log" '^bundleplant: blocking now \(TW_BUNDLE_PLANT=hang\)'
check "kill: the log holds the goroutine dump of the kill" "$K/x/logs/conformance.log" '^SIGQUIT: quit'
check "kill: the dump shows where the test was" "$K/x/logs/conformance.log" 'cuda\.TestBundlePlant\('
check "kill: the log says what was killed" "$K/x/logs/conformance.log" "^run\.sh: killed at the step's limit \([0-9]+ s\) while TestBundlePlant ran"

G=$work/gate
check_rc gate 1
check "gate: against its own commit, slower kernels fail the step" "$G/summary.md" \
	'^\| gate \| fail \| .*\| [0-9]+ kernels slower than base-same\.json \(the same commit'

if [ -n "$full" ]; then
	F=$(cd "$full" && pwd)
	check_json "$F"
	unpack "$F"
	check "whole run: the device line names the emulator" "$F/summary.md" "$emu"
	check "whole run: no step failed" "$F/summary.md" '^- [0-9]+ passed, 0 failed, [0-9]+ skipped in '
	check "whole run: every conformance test passed or skipped, one by one" "$F/summary.md" \
		'^\| conformance \| pass \| .* ([0-9]+) tests: [0-9]+ passed, 0 failed, [0-9]+ skipped'
	check "whole run: TestConformanceShapes passed in a process of its own" "$F/summary.json" '\{"name": "TestConformanceShapes", "status": "pass"'
	check "whole run: the plant skipped without TW_BUNDLE_PLANT" "$F/summary.json" '\{"name": "TestBundlePlant", "status": "skip"'
	check "whole run: the kernel emulator's self-tests passed" "$F/summary.md" '^\| selftest \| pass \| [0-9]+ \| [0-9]+ \| [0-9]+ passed \|'
	# grep -c reads the whole listing: -q would stop tar with SIGPIPE, and pipefail fail the test.
	if tar -tzf "$bundle/payload.tar.gz" | grep -c 'stories260K\.gguf$' >/dev/null; then
		check "whole run: the model's GPU test passed" "$F/summary.json" '\{"name": "TestStories260KGreedyCUDA", "status": "pass"'
	else # built without the shared test data: the step says so and skips
		check "whole run: the model step says the bundle has no stories260K" "$F/summary.md" '^\| model \| skip \| .*no stories260K'
	fi
	check "whole run: cuBLASLt's step benchmark skipped" "$F/summary.md" '^\| bench-step \| skip \| .*no cuBLASLt'
	check "whole run: our GEMM's step benchmark ran" "$F/summary.md" '^\| bench-step-own \| pass \| .*--gemm own'
	check "whole run: its results were kept" "$F/bench-step-own.json" '"name": "lora_step/'
	check "whole run: the report written at the end took them" "$F/bench.md" '^\| lora_step/[^|]* \| turnwise \| own \|'
	check "whole run: the attention sweep ran" "$F/summary.md" '^\| attn-sweep \| pass \| .* configurations run'
	check "whole run: the step ran with the sweep's fastest attention (or the defaults were it)" "$F/summary.md" \
		'^\| bench-step-tuned \| (pass \| [0-9]+ \| [0-9]+ \| --attention-config [^ ]+ --gemm own: One more training step|skip \| .*are the defaults)'
	check "whole run: the few-row GEMM sweep ran every configuration" "$F/summary.md" \
		'^\| gemm-sweep \| pass \| [0-9]+ \| [0-9]+ \| 7 of 7 configurations run; best: [^|]*decode_'
	check "whole run: the gate has no emulator baseline" "$F/summary.md" '^\| gate \| skip \| .*(no baseline of this device kind \(CUDA kernel emulator\)|carries no baselines)'
	check "whole run: the logs hold each test process's output" "$F/x/tests/conformance/TestConformanceShapes.out" '^--- PASS: TestConformanceShapes '
fi

echo "selftest: $((SECONDS - T0)) s"
if [ ${#failed[@]} -gt 0 ]; then
	echo "selftest: ${#failed[@]} check(s) failed:" >&2
	printf '  %s\n' "${failed[@]}" >&2
	exit 1
fi
echo "selftest: every check passed"
