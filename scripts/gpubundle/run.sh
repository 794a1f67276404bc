#!/bin/bash
# run.sh OUTDIR — validates and benchmarks turnwise's GPU path on the machine
# it runs on, from the bundle beside it (make gpu-bundle, or make
# gpu-bundle-emu for the same steps over the kernel emulator). It needs no
# Go, no network and no package manager: bash, coreutils, tar and gzip, the
# NVIDIA driver, and for some steps tools it looks for (compute-sanitizer, a
# python3 that imports torch).
#
# Each step runs under `timeout` with its output in its own log, so that one
# failure does not stop the rest; a step that cannot apply here (no
# sanitizer, no PyTorch, the emulator) is skipped and says why. The steps:
#
#   device            nvidia-smi, and the device's properties
#   torch             finds a python3 that imports torch, and its cuBLAS
#   conformance       the op conformance suite on the GPU, f32 and bf16, at its
#                     small shapes (against the float64 reference) and at a
#                     miniature model's shapes (against the CPU backend)
#   conformance-8b    the suite at Llama-3.1-8B's shapes against the CPU
#                     backend; -cublas: its GEMMs through cuBLAS
#   model             the model's GPU tests (stories260K decoded on the GPU)
#   stories           `train generate` greedy text of stories260K on the GPU
#                     must be the documented text
#   collectives       one GPU rank over NCCL (PyTorch's, found by the torch
#                     step), started by `train launch`: `train collectives`
#                     checks every collective and times the all-reduce (with
#                     one rank nothing crosses a link: the time is NCCL's
#                     per-call cost)
#   collectives-cpu   two CPU ranks over Gloo, started by `train launch`: the
#                     same checks and timings
#   memcheck, racecheck, synccheck
#                     compute-sanitizer over the GEMM and attention tests
#   bench-kernels     the per-kernel table (CUDA events, ceilings measured in
#                     the same run, cuBLASLt beside our GEMM)
#   bench-step        the Llama-3.1-8B LoRA step, prefill and decode
#   peers             the PyTorch peers (SDPA; Hugging Face Llama + PEFT)
#   bench-report      one table of all of them, with the ratios
#
# OUTDIR receives summary.md and summary.json (every step: pass, fail or
# skip, its time, a note, and for failures an excerpt of its log), bench.md
# (the benchmarks side by side with the peers, and the ratios) with the
# results it is made of (bench-kernels.json, bench-step.json,
# bench-torch.json), and logs.tar.gz (every step's full log). The exit status
# is 0 when no step failed.
#
# Environment:
#   TW_BUNDLE_BUDGET   seconds for all steps (default 510); a step gets the
#                      smaller of its own limit and what is left
#   TW_BUNDLE_STEPS    an extended regular expression: run only the steps
#                      whose names match (the others are skipped)
#   TW_BUNDLE_KEEP     when set, keep the unpacked bundle (its path is
#                      printed) to rerun a test binary by hand
#   TW_PYTHON          the python3 to use for the PyTorch steps
#   TW_SANITIZER       the compute-sanitizer to use
set -u -o pipefail

if [ $# -ne 1 ] || [ "${1#-}" != "$1" ]; then
	sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$1" || exit 2
OUT=$(cd "$1" && pwd)
BUDGET=${TW_BUNDLE_BUDGET:-510}
ONLY=${TW_BUNDLE_STEPS:-}
STARTED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
T0=$SECONDS

# The documented greedy continuation of BOS by stories260K (the project's
# correctness anchor for a real checkpoint).
STORIES_TEXT="Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. She wanted to play with it, but it was too high."

WORK=$(mktemp -d "${TMPDIR:-/tmp}/turnwise-bundle.XXXXXX") || exit 1
B=$WORK/bundle
LOGS=$WORK/logs
mkdir -p "$B" "$LOGS" "$WORK/bench"
echo "run.sh: unpacking into $WORK"
tar -C "$B" -xzf "$HERE/payload.tar.gz" || { echo "run.sh: cannot unpack $HERE/payload.tar.gz" >&2; exit 1; }
# shellcheck source=/dev/null
. "$B/BUNDLE.env"

export B WORK STORIES_TEXT TW_BUNDLE_KIND
export TURNWISE_TESTDATA=$B/data
# The bundle's libraries come first for our binaries only: a python3 run
# beside them keeps its own.
export OURS_LD_PATH=$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# ---- steps (each runs in its own bash under timeout; exit 77 = skipped) ----

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

# note records the one-line note of the running step.
note() { printf '%s\n' "$*" >"$NOTE_FILE"; }

# skip ends the running step as skipped, saying why.
skip() {
	note "$*"
	exit 77
}

gpu_only() { [ "$TW_BUNDLE_KIND" = cuda ] || skip "the emulator bundle $*"; }

# load_torch reads what the torch step found.
load_torch() {
	# shellcheck source=/dev/null
	[ ! -e "$WORK/torch.env" ] || . "$WORK/torch.env"
}

step_device() {
	gpu_only "has no GPU"
	command -v nvidia-smi >/dev/null || { note "nvidia-smi not found"; exit 1; }
	nvidia-smi || exit 1
	line=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)
	[ -n "$line" ] || exit 1
	echo "$line" >"$WORK/device.txt"
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
	"$py" - <<'EOF' || exit 1
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

# conformance runs the suite's test binary with the given arguments, and
# notes how many tests passed, failed and were skipped.
conformance() {
	load_torch
	cd "$B" || exit 1
	ours bin/engine-cuda.test -test.v "$@" >"$WORK/go-test.out" 2>&1
	rc=$?
	cat "$WORK/go-test.out"
	pass=$(grep -c -- '--- PASS' "$WORK/go-test.out")
	fail=$(grep -c -- '--- FAIL' "$WORK/go-test.out")
	skipped=$(grep -c -- '--- SKIP' "$WORK/go-test.out")
	note "tests and subtests: $pass passed, $fail failed, $skipped skipped"
	[ "$rc" -eq 0 ] && [ "$pass" -gt 0 ] || exit 1
}

step_conformance() { conformance; }

step_conformance_8b() {
	gpu_only "runs the miniature shapes only"
	export TW_CONFORMANCE_SHAPES=llama8B
	conformance -test.run '^TestConformanceShapes$/^default$'
}

step_conformance_8b_cublas() {
	gpu_only "has no cuBLAS"
	export TW_CONFORMANCE_SHAPES=llama8B
	conformance -test.run '^TestConformanceShapes$/^cublas$/^llama8B$/./^gemm$'
}

step_model() {
	[ -e "$TURNWISE_TESTDATA/stories260K/stories260K.gguf" ] || no_data
	load_torch
	cd "$B" || exit 1
	ours bin/llama.test -test.v -test.run 'CUDA' >"$WORK/go-test.out" 2>&1
	rc=$?
	cat "$WORK/go-test.out"
	if grep -q -- '--- SKIP' "$WORK/go-test.out"; then
		note "a test skipped: $(grep -m1 -A1 -- '--- SKIP' "$WORK/go-test.out" | tail -1 | sed 's/^ *//')"
		exit 1
	fi
	note "$(grep -c -- '--- PASS' "$WORK/go-test.out") passed, $(grep -c -- '--- FAIL' "$WORK/go-test.out") failed"
	[ "$rc" -eq 0 ] || exit 1
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
	cd "$B" || exit 1
	got=$(ours bin/train generate --backend cuda --gguf "$gguf" --bos-only --max-new 80) || {
		echo "$got"
		note "train generate failed"
		exit 1
	}
	echo "got:  $got"
	echo "want: $STORIES_TEXT…"
	case $got in
	"$STORIES_TEXT"*) note "greedy text is the documented text" ;;
	*)
		note "greedy text differs: ${got:0:120}"
		exit 1
		;;
	esac
}

# collectives NPROC FLAGS… runs `train collectives` under `train launch`
# with NPROC ranks, and notes which library ran it and the all-reduce
# bandwidth at the largest size.
collectives() {
	local nproc=$1 port=$2
	shift 2
	load_torch
	cd "$B" || exit 1
	ours bin/train launch --nproc-per-node "$nproc" --master-port "$port" -- collectives "$@" >"$WORK/coll.out" 2>&1
	rc=$?
	cat "$WORK/coll.out"
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
sanitize() {
	gpu_only "runs no sanitizer"
	local cs=${TW_SANITIZER:-}
	if [ -z "$cs" ]; then
		cs=$(command -v compute-sanitizer 2>/dev/null || ls -d /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | sort -V | tail -1)
	fi
	[ -n "$cs" ] && [ -x "$cs" ] || skip "compute-sanitizer not found (on PATH or under /usr/local/cuda*/bin)"
	load_torch
	cd "$B" || exit 1
	ours "$cs" --tool "$1" --error-exitcode 1 --print-limit 50 \
		bin/engine-cuda.test -test.run '^(TestConformance|TestGemmPaths)$/^(gemm|attention|f32_to|bf16_to)' >"$WORK/san.out" 2>&1
	rc=$?
	cat "$WORK/san.out"
	summary=$(grep -m1 'ERROR SUMMARY' "$WORK/san.out")
	note "${summary:-no ERROR SUMMARY line} ($cs)"
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
		--json "$WORK/bench/bench-kernels.json" --md "$WORK/bench/bench-kernels.md" || exit 1
	cat "$WORK/bench/bench-kernels.md"
	note "$(grep -c '^| ' "$WORK/bench/bench-kernels.md") table lines"
}

step_bench_step() {
	load_torch
	cd "$B" || exit 1
	ours bin/train bench --backend cuda --suite step \
		--json "$WORK/bench/bench-step.json" --md "$WORK/bench/bench-step.md" || exit 1
	cat "$WORK/bench/bench-step.md"
	note "$(grep -c '^| ' "$WORK/bench/bench-step.md") table lines"
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

step_bench_report() {
	cd "$B" || exit 1
	set --
	for f in bench-kernels bench-step bench-torch; do
		[ ! -s "$WORK/bench/$f.json" ] || set -- "$@" "$WORK/bench/$f.json"
	done
	[ $# -gt 0 ] || { note "no benchmark results to report"; exit 1; }
	ours bin/train bench report --out "$WORK/bench/bench.md" "$@" || exit 1
	cat "$WORK/bench/bench.md"
	note "$# result files: $(cd "$WORK/bench" && ls ./*.json | xargs -n1 basename | tr '\n' ' ')"
}

export -f ours note skip gpu_only load_torch conformance no_data sanitize collectives
export -f step_device step_torch step_conformance step_conformance_8b step_conformance_8b_cublas \
	step_model step_stories step_collectives step_collectives_cpu step_memcheck step_racecheck step_synccheck step_bench_kernels \
	step_bench_step step_peers step_bench_report

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

# excerpt prints the lines of a failed step's log that say what failed.
excerpt() {
	local log=$1
	if grep -qE -- '--- FAIL|panic:|FAIL|[Ee]rror|ERROR' "$log"; then
		grep -E -- '--- FAIL|panic:|^FAIL|[Ee]rror|ERROR|relative error' "$log" | head -40
	else
		tail -30 "$log"
	fi
}

write_summary() {
	local i n=${#NAMES[@]} pass=0 fail=0 skipped=0 device=""
	for ((i = 0; i < n; i++)); do
		case ${STATUS[i]} in
		pass) pass=$((pass + 1)) ;;
		fail) fail=$((fail + 1)) ;;
		*) skipped=$((skipped + 1)) ;;
		esac
	done
	[ ! -e "$WORK/device.txt" ] || device=$(head -1 "$WORK/device.txt")
	{
		echo "# turnwise GPU bundle: $STARTED"
		echo
		echo "- bundle: $TW_BUNDLE_KIND, commit $TW_BUNDLE_COMMIT, built $TW_BUNDLE_BUILT with $TW_BUNDLE_GO and $TW_BUNDLE_TOOLKIT"
		echo "- device: ${device:-none (the emulator)}"
		echo "- $pass passed, $fail failed, $skipped skipped in $((SECONDS - T0)) s (budget $BUDGET s)"
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
			"$(jstr "$device")" "$(jstr "$STARTED")" $((SECONDS - T0)) "$BUDGET"
		printf '  "passed": %d,\n  "failed": %d,\n  "skipped": %d,\n  "ok": %s,\n  "steps": [' \
			"$pass" "$fail" "$skipped" "$([ "$fail" -eq 0 ] && echo true || echo false)"
		for ((i = 0; i < n; i++)); do
			[ "$i" -eq 0 ] || printf ','
			printf '\n    {"name": %s, "status": %s, "seconds": %d, "limit_s": %d, "note": %s, "log": %s}' \
				"$(jstr "${NAMES[i]}")" "$(jstr "${STATUS[i]}")" "${SECS[i]}" "${LIMITS[i]}" \
				"$(jstr "${NOTES[i]}")" "$(jstr "logs/${NAMES[i]}.log")"
		done
		printf '\n  ]\n}\n'
	} >"$OUT/summary.json"
}

# step NAME LIMIT runs step_NAME (dashes as underscores) for at most LIMIT
# seconds, or what is left of the budget if less, and records the result.
step() {
	local name=$1 cap=$2 fn=step_${1//-/_}
	local left=$((BUDGET - (SECONDS - T0)))
	local lim=$((cap < left ? cap : left))
	local t=$SECONDS rc status note
	export NOTE_FILE=$WORK/note.$name
	: >"$NOTE_FILE"
	if [ -n "$ONLY" ] && ! [[ $name =~ $ONLY ]]; then
		status=skip note="not selected (TW_BUNDLE_STEPS=$ONLY)" lim=0
	elif [ "$lim" -lt 5 ]; then
		status=fail note="not run: the time budget ($BUDGET s) was spent" lim=0
	else
		printf 'run.sh: %-22s (limit %3d s) ... ' "$name" "$lim"
		timeout -k 10 "$lim" bash -c "$fn" </dev/null >"$LOGS/$name.log" 2>&1
		rc=$?
		note=$(head -1 "$NOTE_FILE")
		case $rc in
		0) status=pass ;;
		77) status=skip ;;
		124 | 137) status=fail note="timed out after $lim s${note:+; $note}" ;;
		*) status=fail note=${note:-exit status $rc} ;;
		esac
		echo "$status ($((SECONDS - t)) s) ${note}"
	fi
	NAMES+=("$name") STATUS+=("$status") SECS+=($((SECONDS - t))) LIMITS+=("$lim") NOTES+=("$note")
	write_summary
}

# finish leaves in OUT the summary, the benchmark report and results, and
# every log (with the benchmarks' own tables) in one archive: eight files at
# most.
finish() {
	write_summary
	tar -C "$WORK" -czf "$OUT/logs.tar.gz" logs bench
	for f in bench.md bench-kernels.json bench-step.json bench-torch.json; do
		[ ! -s "$WORK/bench/$f" ] || cp "$WORK/bench/$f" "$OUT/$f"
	done
	if [ -n "${TW_BUNDLE_KEEP:-}" ]; then
		echo "run.sh: the unpacked bundle stays in $WORK"
	else
		rm -rf "$WORK"
	fi
}
trap finish EXIT

step device 30
step torch 60
step conformance 150
step model 60
step stories 45
step collectives 60
step collectives-cpu 60
step conformance-8b 150
step conformance-8b-cublas 60
step memcheck 60
step racecheck 90
step synccheck 60
step bench-kernels 120
step bench-step 150
step peers 150
step bench-report 30

echo "run.sh: results in $OUT (summary.md, summary.json, bench*, logs.tar.gz)"
for s in "${STATUS[@]}"; do
	[ "$s" != fail ] || exit 1
done
exit 0
