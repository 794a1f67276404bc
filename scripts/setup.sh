#!/bin/bash
# Installs what building and testing turnwise needs on a fresh Debian
# machine: C and C++ compilers for cgo and the kernel emulator, CMake and
# ccache, OpenBLAS, Gloo (the collectives of CPU ranks), Python 3 (the ColBench
# answer evaluator runs answers under it) with Debian's PyTorch
# (scripts/sweetrl_check.py checks the SWEET-RL arithmetic with it), Debian's chromium, the DejaVu
# fonts and npm (sweetrl/frontend/render renders pages in chromium, with
# Tailwind compiled by the npm tailwindcss CLI that scripts/setup-render.sh
# installs in build/node/), Hugging Face's JavaScript GGUF reader and
# tokenizers that the export tests load exports in (about 7 MB, by
# scripts/setup-exportcheck.sh into build/exportcheck/), and zsh and fish
# (train completion's scripts are tested in them). Safe to run again: it installs only what is
# missing. Needs root (or sudo) when something is missing. The CUDA toolkit,
# for the real kernel build, is scripts/setup-cuda.sh.
set -euo pipefail

need=()
command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
command -v g++ >/dev/null 2>&1 || need+=(g++)
command -v cmake >/dev/null 2>&1 || need+=(cmake)
# ccache: the kernels' g++ and nvcc compiles, cached across clones (CMakeLists.txt).
command -v ccache >/dev/null 2>&1 || need+=(ccache)
[ -e /usr/include/x86_64-linux-gnu/cblas.h ] || [ -e /usr/include/cblas.h ] || need+=(libopenblas-dev)
[ -e /usr/include/gloo/allreduce.h ] || need+=(libgloo-dev)
command -v make >/dev/null 2>&1 || need+=(make)
command -v python3 >/dev/null 2>&1 || need+=(python3)
# A Python that imports torch: the one on PATH, or Debian's, where
# python3-torch installs it.
have_torch() {
	local py
	for py in python3 /usr/bin/python3; do
		command -v "$py" >/dev/null 2>&1 && "$py" -c 'import torch' >/dev/null 2>&1 && return 0
	done
	return 1
}
have_torch || need+=(python3-torch)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need+=(fonts-dejavu-core)
command -v npm >/dev/null 2>&1 || need+=(npm)
# zsh and fish: the tests load train completion's scripts in them.
command -v zsh >/dev/null 2>&1 || need+=(zsh)
command -v fish >/dev/null 2>&1 || need+=(fish)

if [ ${#need[@]} -gt 0 ]; then
	echo "setup: installing ${need[*]}"
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	$sudo apt-get -o DPkg::Lock::Timeout=600 update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if ! command -v go >/dev/null 2>&1; then
	echo "setup: no Go toolchain on PATH; install Go 1.26 or newer" >&2
	exit 1
fi
"$(dirname "$0")/setup-render.sh"
"$(dirname "$0")/setup-exportcheck.sh"
echo "setup: $(go version), gcc $(gcc -dumpversion), $(cmake --version | head -1), $(python3 --version), PyTorch, OpenBLAS and Gloo present"
