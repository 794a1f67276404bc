#!/bin/bash
# Side-by-side CPU comparison of one Llama training step (forward + backward
# + AdamW), prefill, and decode after a 32- and a 1024-token prompt:
# turnwise's CPU backend (bench/llamastep) against PyTorch
# (bench/llama_step.py, Debian's python3-torch), on the
# 24.4M-parameter reference configuration (dim 288, 6 layers, 6 heads,
# FFN 768, vocab 32000, 4 × 256 tokens), f32, 2 threads. The two alternate
# ROUNDS times so that machine noise hits both; medians are printed.
#
#   bench/llama_cpu.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
py=/usr/bin/python3
if ! $py -c 'import torch' 2>/dev/null; then
	echo "PyTorch not found: apt-get install python3-torch" >&2
	exit 1
fi
go build -o bin/llamastep ./bench/llamastep
out=$(mktemp -d)
for r in $(seq "$rounds"); do
	./bin/llamastep --steps 5 --threads 2 >>"$out/ours.jsonl"
	OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=2 $py bench/llama_step.py --steps 5 --threads 2 >>"$out/torch.jsonl"
done
$py - "$out/ours.jsonl" "$out/torch.jsonl" <<'PY'
import json, statistics, sys
ours = [json.loads(l) for l in open(sys.argv[1])]
peer = [json.loads(l) for l in open(sys.argv[2])]
med = lambda rows, k: statistics.median(r[k] for r in rows)
print(f"{'':26}{'turnwise':>12}{'pytorch':>12}{'ratio':>9}")
for k, unit, lower in [("fwd_bwd_s", "s", True), ("adamw_s", "s", True), ("step_s", "s", True),
                       ("prefill_tok_s", "tok/s", False), ("decode_tok_s", "tok/s", False),
                       ("decode_long_tok_s", "tok/s", False), ("peak_rss_mb", "MB", True)]:
    a, b = med(ours, k), med(peer, k)
    print(f"{k + ' (' + unit + ')':26}{a:12.3f}{b:12.3f}{a / b:9.2f}")
print(f"rounds: {len(ours)}; ratio = turnwise / pytorch (for times and memory, lower is better)")
PY
