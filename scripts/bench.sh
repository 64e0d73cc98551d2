#!/usr/bin/env bash
# Measures every stage, every cuDNN algorithm and PyTorch's nn.LSTM over the standard
# configurations (common/standard_configs.json, listed by build/bin/lstm_configs) on this
# machine's GPU, in one session:
#   DIR/bench.json      Google Benchmark JSON from build/bin/lstm_bench (with the environment)
#   DIR/pytorch.jsonl   one record per configuration from baselines/pytorch/lstm_pytorch.py,
#                       checked against the CPU reference where the whole sequence fits the
#                       reference's budget (the same budget the stages' checks use)
#
# usage: scripts/bench.sh [DIR]   (default results/local/<gpu>; environment: BUILD_DIR,
#        PYTORCH_PYTHON = the python that has torch, default python3)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
python=${PYTORCH_PYTHON:-python3}
if ! "$build/bin/lstm_gpu_info" >/dev/null 2>&1; then
  echo "bench: no usable CUDA GPU here; nothing to measure."
  exit 1
fi
dir=${1:-results/local/$("$build/bin/lstm_gpu_info" --folder)}
mkdir -p "$dir"

echo "bench: lstm_bench -> $dir/bench.json"
"$build/bin/lstm_bench" --benchmark_out="$dir/bench.json" --benchmark_out_format=json

echo "bench: PyTorch nn.LSTM -> $dir/pytorch.jsonl"
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
"$build/bin/lstm_configs" >"$data/configs.txt"
while read -r group hidden input_size batch seq layers flop reference_steps; do
  flags=(--hidden "$hidden" --input-size "$input_size" --batch "$batch" --seq "$seq" --layers "$layers")
  rm -rf "${data:?}/problem"
  if ((reference_steps == seq)); then  # the reference covers every step: check PyTorch against it
    "$build/bin/lstm_reference" "${flags[@]}" --save-inputs "$data/problem" --dump "$data/problem" >/dev/null
    "$python" baselines/pytorch/lstm_pytorch.py --load "$data/problem" --check-dir "$data/problem" \
      --json "$dir/pytorch.jsonl" | grep -E "^(time|check|Disposition|pytorch)"
  else
    "$build/bin/lstm_reference" "${flags[@]}" --save-inputs "$data/problem" --no-reference >/dev/null
    echo "check: skipped for $group ${flags[*]} ($flop FLOP: over the CPU reference's budget)"
    "$python" baselines/pytorch/lstm_pytorch.py --load "$data/problem" --no-check \
      --json "$dir/pytorch.jsonl" | grep -E "^(time|Disposition|pytorch)"
  fi
done <"$data/configs.txt"
echo "bench: done; results in $dir"
