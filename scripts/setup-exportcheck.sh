#!/bin/bash
# Installs Hugging Face's JavaScript GGUF reader and tokenizers, in the
# exact versions scripts/exportcheck/package-lock.json pins, into
# build/exportcheck/ (ignored by git; about 7 MB), where the export tests
# (TestExportLoadsInHFJS) load turnwise's GGUF and tokenizer exports in
# them. Needs npm (scripts/setup.sh installs it). Safe to run again: it does
# nothing when the pinned packages are there.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
src="$root/scripts/exportcheck"
dst="$root/build/exportcheck"

if [ -d "$dst/node_modules/@huggingface/tokenizers" ] && cmp -s "$src/package-lock.json" "$dst/package-lock.json"; then
	echo "setup-exportcheck: @huggingface/gguf and @huggingface/tokenizers in build/exportcheck"
	exit 0
fi
command -v npm >/dev/null 2>&1 || { echo "setup-exportcheck: npm not found; run scripts/setup.sh" >&2; exit 1; }
mkdir -p "$dst"
cp "$src/package.json" "$src/package-lock.json" "$dst/"
(cd "$dst" && npm ci --no-audit --no-fund --loglevel=error)
echo "setup-exportcheck: @huggingface/gguf and @huggingface/tokenizers installed in build/exportcheck"
