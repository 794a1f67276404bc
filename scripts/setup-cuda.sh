#!/bin/bash
# Installs Debian's CUDA toolkit (nvcc 11.8, cuBLAS, cuBLASLt) so that CI can
# compile the real kernel library for sm_80 and sm_90. The toolkit lives in
# Debian's non-free component: this adds "contrib non-free" for bookworm from
# the same mirror the machine's main sources use, then installs it. Safe to run
# again. Needs root (or sudo). Exits 0 without installing when apt has no
# candidate, so that the rest of the build still runs and says what it skipped.
set -euo pipefail

if command -v nvcc >/dev/null 2>&1; then
	echo "setup-cuda: $(nvcc --version | tail -1)"
	exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

list=/etc/apt/sources.list.d/turnwise-nonfree.sources
if [ ! -e "$list" ]; then
	uri="" key=""
	if [ -r /etc/apt/sources.list.d/debian.sources ]; then
		uri=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
		key=$(awk '/^Signed-By:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
	fi
	if [ -z "$uri" ] && [ -r /etc/apt/sources.list ]; then
		uri=$(awk '$1 == "deb" && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list)
	fi
	if [ -z "$uri" ]; then
		echo "setup-cuda: found no Debian mirror in the apt sources; not installing the CUDA toolkit" >&2
		exit 0
	fi
	# The same mirror and suite must carry the same Signed-By as the main
	# entry, or apt refuses both.
	{
		echo "Types: deb"
		echo "URIs: $uri"
		echo "Suites: bookworm"
		echo "Components: contrib non-free"
		[ -z "$key" ] || echo "Signed-By: $key"
	} | $sudo tee "$list" >/dev/null
fi
apt="$sudo apt-get -o DPkg::Lock::Timeout=600"
$apt update -qq
policy=$(apt-cache policy nvidia-cuda-toolkit)
if ! grep -q 'Candidate: [0-9]' <<<"$policy"; then
	echo "setup-cuda: apt has no nvidia-cuda-toolkit candidate; not installing it" >&2
	exit 0
fi
echo "setup-cuda: installing nvidia-cuda-toolkit (a few minutes)"
DEBIAN_FRONTEND=noninteractive $apt install -y -qq --no-install-recommends nvidia-cuda-toolkit >/dev/null
echo "setup-cuda: $(nvcc --version | tail -1)"
