#!/bin/sh
# Encode throughput of turnwise's Llama 3 tokenizer next to OpenAI's tiktoken
# (npm package "tiktoken", cl100k_base) on the same generated text.
#
#   bench/tokenizer/run.sh [MB [ROUNDS [RUNS]]]
#
# Generates MB (default 4) megabytes of mixed text, then ROUNDS times
# (default 3) runs each tokenizer for RUNS timed encodes (default 5) and takes
# the median; prints each round and the medians over rounds. The two
# programs alternate so that both see the same machine load. Set TOKENIZER
# to a tokenizer.json or tokenizer.model to use instead of the shared test
# data's. Needs Go, Node.js and npm (tiktoken is installed with npm ci on
# first use).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mb=${1:-4}
rounds=${2:-3}
runs=${3:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cd "$root"
go build -o "$tmp/tokbench" ./bench/tokenizer
"$tmp/tokbench" gen -o "$tmp/text.txt" -mb "$mb"
if [ ! -d "$here/node_modules/tiktoken" ]; then
	(cd "$here" && npm ci --silent --no-audit --no-fund)
fi

echo "text: $mb MB of generated mixed text (prose, code, numbers, several scripts, emoji, whitespace runs)"
echo "turnwise: Llama 3 tokenizer (128,256 ids), Go, one goroutine"
echo "tiktoken: cl100k_base (100,277 ids), $(node -p 'require("'"$here"'/node_modules/tiktoken/package.json").version') via Node.js $(node --version), encode_ordinary"
ours=""
theirs=""
for r in $(seq "$rounds"); do
	o=$("$tmp/tokbench" run -text "$tmp/text.txt" -runs "$runs" ${TOKENIZER:+-tokenizer "$TOKENIZER"})
	t=$(node "$here/tiktoken.mjs" "$tmp/text.txt" "$runs")
	echo "round $r: turnwise ${o%% *} MB/s (${o##* } tokens), tiktoken ${t%% *} MB/s (${t##* } tokens)"
	ours="$ours ${o%% *}"
	theirs="$theirs ${t%% *}"
done

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# shellcheck disable=SC2086 # word splitting of the lists is intended
mo=$(median $ours)
# shellcheck disable=SC2086
mt=$(median $theirs)
echo "median: turnwise $mo MB/s, tiktoken $mt MB/s, ratio $(awk -v a="$mo" -v b="$mt" 'BEGIN { printf "%.2f", a / b }')x"
echo "note: the vocabularies differ (Llama 3's 128k vs cl100k's 100k) but both are byte-level BPE with"
echo "      near-identical pre-tokenizer patterns, so the work per byte is comparable, not identical."
