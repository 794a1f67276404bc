#!/bin/bash
# Installs what building and testing turnwise needs on a fresh Debian
# machine: a C compiler for cgo and OpenBLAS. Safe to run again: it installs
# only what is missing. Needs root (or sudo) when something is missing.
set -euo pipefail

need=()
command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
[ -e /usr/include/x86_64-linux-gnu/cblas.h ] || [ -e /usr/include/cblas.h ] || need+=(libopenblas-dev)
command -v make >/dev/null 2>&1 || need+=(make)

if [ ${#need[@]} -gt 0 ]; then
	echo "setup: installing ${need[*]}"
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if ! command -v go >/dev/null 2>&1; then
	echo "setup: no Go toolchain on PATH; install Go 1.26 or newer" >&2
	exit 1
fi
echo "setup: $(go version), gcc $(gcc -dumpversion), OpenBLAS present"
