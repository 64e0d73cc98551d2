#!/usr/bin/env bash
# Measures every stage, every cuDNN algorithm and PyTorch's nn.LSTM over docs/design.md's standard
# configurations (canonical, batch sweep, hidden sweep) on this machine's GPU, in one session:
#   DIR/bench.json      Google Benchmark JSON from build/bin/lstm_bench (with the environment)
#   DIR/pytorch.jsonl   one record per configuration from baselines/pytorch/lstm_pytorch.py,
#                       checked against the CPU reference where that takes at most ~10 s
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
configs=("512 64 100 4")
for hidden in 512 1024; do
  for batch in 1 2 4 8 16 32 64 128 256; do configs+=("$hidden $batch 100 1"); done
done
for hidden in 256 512 1024 2048; do configs+=("$hidden 64 100 4"); done
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
for config in "${configs[@]}"; do
  read -r hidden batch seq layers <<<"$config"
  flags=(--hidden "$hidden" --batch "$batch" --seq "$seq" --layers "$layers")
  flop=$((2 * layers * seq * batch * 8 * hidden * hidden))
  rm -rf "${data:?}"/*
  if ((flop <= 500000000000)); then  # the reference takes ~10 s per 5e11 FLOP on 16 cores
    "$build/bin/lstm_reference" "${flags[@]}" --save-inputs "$data" --dump "$data" >/dev/null
    "$python" baselines/pytorch/lstm_pytorch.py --load "$data" --check-dir "$data" \
      --json "$dir/pytorch.jsonl" | grep -E "^(time|check|Disposition|pytorch)"
  else
    "$build/bin/lstm_reference" "${flags[@]}" --save-inputs "$data" --no-reference >/dev/null
    echo "check: skipped for ${flags[*]} (the CPU reference would take over 10 s)"
    "$python" baselines/pytorch/lstm_pytorch.py --load "$data" --no-check \
      --json "$dir/pytorch.jsonl" | grep -E "^(time|Disposition|pytorch)"
  fi
done
echo "bench: done; results in $dir"
