#!/bin/bash
# Installs the Tailwind CSS CLI that sweetrl/frontend/render runs to compile a
# page's Tailwind classes offline: the exact version pinned by
# sweetrl/frontend/render/tailwind/package-lock.json, into build/node/ (ignored
# by git). Needs npm (scripts/setup.sh installs it, with chromium and the
# fonts). Safe to run again: it does nothing when the pinned CLI is there.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
src="$root/sweetrl/frontend/render/tailwind"
dst="$root/build/node"
cli="$dst/node_modules/.bin/tailwindcss"

if [ -x "$cli" ] && cmp -s "$src/package-lock.json" "$dst/package-lock.json"; then
	echo "setup-render: $("$cli" --help 2>/dev/null | head -2 | tail -1 | tr -d '\n') in build/node"
	exit 0
fi
command -v npm >/dev/null 2>&1 || { echo "setup-render: npm not found; run scripts/setup.sh" >&2; exit 1; }
mkdir -p "$dst"
cp "$src/package.json" "$src/package-lock.json" "$dst/"
(cd "$dst" && npm ci --no-audit --no-fund --loglevel=error)
echo "setup-render: $("$cli" --help 2>/dev/null | head -2 | tail -1 | tr -d '\n') installed in build/node"
