#!/bin/bash
# build.sh KIND OUTDIR — assembles the GPU bundle: a folder that validates
# and benchmarks turnwise's GPU path on a machine with no Go, no network and
# no package manager (run.sh beside this file says what it runs). The
# Makefile's gpu-bundle and gpu-bundle-emu targets call it.
#
#   KIND    cuda     the real GPU build (needs build/cuda/libtwkernels_cuda.a,
#                    from make kernels-cuda, and nvcc's stub libcuda to link)
#           cudaemu  the same bundle over the kernel emulator (build/emu), so
#                    that run.sh can be run on any machine
#   OUTDIR  replaced by:
#             run.sh           the entry point: run.sh RESULTS_DIR
#             payload.tar.gz   bin/train, bin/engine-cuda.test (the op
#                              conformance suite), bin/llama.test (the model's
#                              GPU tests), bin/selftest (the kernel emulator's
#                              self-tests, built for the bundle's kind), lib/ (shared libraries a bare
#                              machine lacks), data/ (stories260K.gguf),
#                              peers/ (the PyTorch peers), baselines/ (the
#                              kernel results of earlier GPU runs, for the
#                              regression gate: RUN/bench-kernels.json),
#                              BUNDLE.env
#             BUNDLE.env       what was built, from which commit, with what
#
# Environment: GO (default go), CUDA_STUBS (directory of the stub libcuda.so,
# for KIND cuda), TURNWISE_TESTDATA (the shared test data; default
# ../shared/testdata beside the repository, as internal/testdata finds it),
# TW_GPU_RUNS (the earlier GPU runs, one folder each; default
# ../shared/gpu-runs beside the repository), TW_BUNDLE_MAX_MIB (size limit
# of OUTDIR, default 56: a GPU machine is sent the bundle with the working
# tree, about 5 MiB, and takes 64 MiB at most; three binaries carry the
# kernels' sm_80 and sm_90 code each, which is most of it).
set -euo pipefail

if [ $# -ne 2 ] || { [ "$1" != cuda ] && [ "$1" != cudaemu ]; }; then
	echo "usage: $0 cuda|cudaemu OUTDIR" >&2
	exit 2
fi
kind=$1 out=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
GO=${GO:-go}
max_mib=${TW_BUNDLE_MAX_MIB:-56}
cd "$root"

stage=$(mktemp -d "${TMPDIR:-/tmp}/gpu-bundle.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/data" "$stage/peers" "$stage/baselines"

if [ "$kind" = cuda ]; then
	lib=build/cuda/libtwkernels_cuda.a
	stubs=${CUDA_STUBS:-/usr/lib/x86_64-linux-gnu/stubs}
	[ -e "$stubs/libcuda.so" ] || { echo "build.sh: no stub libcuda.so in $stubs (set CUDA_STUBS)" >&2; exit 1; }
	export CGO_LDFLAGS="-L$stubs ${CGO_LDFLAGS:-}"
else
	lib=build/emu/libtwkernels_emu.a
fi
[ -e "$lib" ] || { echo "build.sh: $lib is missing: run make kernels-${kind#cuda}" >&2; exit 1; }

# Binaries, stripped (-s -w) to keep the bundle small, with the commit set
# for train version, run directories and train bench's results (the build's
# own stamp may be off: -buildvcs).
rev=$(git rev-parse HEAD 2>/dev/null || true)
flags=(-tags "$kind" -trimpath -ldflags "-s -w${rev:+ -X github.com/turnwise/turnwise/internal/buildinfo.commit=$rev}")
echo "build.sh: building the -tags $kind binaries"
"$GO" build "${flags[@]}" -o "$stage/bin/train" ./cmd/train
"$GO" test -c "${flags[@]}" -o "$stage/bin/engine-cuda.test" ./engine/cuda/
"$GO" test -c "${flags[@]}" -o "$stage/bin/llama.test" ./model/llama/
# The emulator's self-tests: on a GPU compiled by nvcc (the hardware must
# agree with what the emulator models: warp collectives, cp.async, wmma,
# mma.sync and ldmatrix fragment layouts, rounding), on the emulator bundle
# the emulator's own build.
if [ "$kind" = cuda ]; then
	cmake --build build/cuda --target selftest_cuda >/dev/null
	cp build/cuda/selftest_cuda "$stage/bin/selftest"
else
	cmake --build build/emu --target emu_selftest >/dev/null
	cp build/emu/emu_selftest "$stage/bin/selftest"
fi

# Shared libraries: everything the binaries load except the C and C++
# runtimes every Linux machine has and the driver's libcuda.so.1. The CUDA
# runtime and cuBLAS must not be among them: the binaries carry the runtime
# and open cuBLAS at run time.
echo "build.sh: collecting shared libraries"
ldd "$stage"/bin/* >"$stage/ldd.txt"
if grep -v 'libcuda\.so' "$stage/ldd.txt" | grep -q 'not found'; then
	grep 'not found' "$stage/ldd.txt" >&2
	echo "build.sh: a shared library the binaries need is not installed here" >&2
	exit 1
fi
awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' "$stage/ldd.txt" | sort -u >"$stage/libs.txt"
while read -r name path; do
	case $name in
	ld-linux* | libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | libresolv.so.* | \
		libstdc++.so.* | libgcc_s.so.* | libcuda.so.*)
		;;
	libcudart* | libcublas* | libnccl*)
		echo "build.sh: the binaries link $name ($path); the bundle carries no CUDA library but needs a build that links the CUDA runtime statically and opens cuBLAS at run time" >&2
		exit 1
		;;
	*)
		cp -L "$path" "$stage/lib/$name"
		;;
	esac
done <"$stage/libs.txt"
rm "$stage/ldd.txt" "$stage/libs.txt"

# Data: the real tiny checkpoint the greedy-text check decodes. It is shared
# test data: it goes into the build output only, never into the repository.
data=${TURNWISE_TESTDATA:-$(dirname "$root")/shared/testdata}
if [ -e "$data/stories260K/stories260K.gguf" ]; then
	mkdir -p "$stage/data/stories260K"
	cp "$data/stories260K/stories260K.gguf" "$stage/data/stories260K/"
else
	echo "build.sh: warning: $data/stories260K/stories260K.gguf not found; run.sh will report the stories260K checks as not run" >&2
fi

cp bench/peers/*.py "$stage/peers/" 2>/dev/null || echo "build.sh: warning: no bench/peers/*.py; run.sh will report the peers as missing" >&2

# Baselines: the per-kernel results of earlier GPU runs, which run.sh's gate
# step re-measures on a device of the same kind: the runs recorded in the
# repository (bench/runs) and those of the shared GPU-runs folder.
runs=${TW_GPU_RUNS:-$(dirname "$root")/shared/gpu-runs}
n=0
for f in "$root"/bench/runs/*/bench-kernels.json "$runs"/*/bench-kernels.json; do
	[ -s "$f" ] || continue
	run=$(basename "$(dirname "$f")")
	mkdir -p "$stage/baselines/$run"
	cp "$f" "$stage/baselines/$run/bench-kernels.json"
	n=$((n + 1))
done
if [ "$n" -eq 0 ]; then
	echo "build.sh: warning: no bench/runs/*/bench-kernels.json nor $runs/*/bench-kernels.json; run.sh's gate step will have no baseline (TW_BUNDLE_BASELINE names one)" >&2
else
	echo "build.sh: $n baseline(s) from bench/runs and $runs"
fi

{
	echo "TW_BUNDLE_KIND=$kind"
	echo "TW_BUNDLE_COMMIT=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo -modified)"
	echo "TW_BUNDLE_BUILT=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "TW_BUNDLE_GO=\"$("$GO" env GOVERSION)\""
	if [ "$kind" = cuda ]; then
		echo "TW_BUNDLE_TOOLKIT=\"$(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/nvcc \1/p')\""
	else
		echo "TW_BUNDLE_TOOLKIT=\"kernel emulator (g++ $(g++ -dumpversion))\""
	fi
} >"$stage/BUNDLE.env"

echo "build.sh: packing"
rm -rf "$out"
mkdir -p "$out"
# gzip: every machine unpacks it, and it packs 100 MiB in seconds where xz
# takes minutes on two cores (for about half the size; both fit the limit).
tar -C "$stage" -czf "$out/payload.tar.gz" .
cp scripts/gpubundle/run.sh "$out/run.sh"
chmod +x "$out/run.sh"
cp "$stage/BUNDLE.env" "$out/BUNDLE.env"

size=$(du -sb "$out" | cut -f1)
unpacked=$(du -sb "$stage" | cut -f1)
awk -v o="$out" -v s="$size" -v u="$unpacked" 'BEGIN { printf "build.sh: %s: %.1f MiB (%.1f MiB unpacked)\n", o, s / 1048576, u / 1048576 }'
(cd "$stage" && find . -type f -printf '  %-48P %10s\n' | sort)
if [ "$size" -gt $((max_mib * 1048576)) ]; then
	echo "build.sh: the bundle is larger than $max_mib MiB" >&2
	exit 1
fi
