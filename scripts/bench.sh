#!/usr/bin/env bash
# Measures every stage, every cuDNN algorithm and PyTorch's nn.LSTM over the standard
# configurations (common/standard_configs.json, listed by build/bin/lstm_configs) on this
# machine's GPU:
#   DIR/bench.json      Google Benchmark JSON from build/bin/lstm_bench (with the environment)
#   DIR/pytorch.jsonl   two records per configuration from baselines/pytorch/lstm_pytorch.py:
#                       the forward pass ("pytorch"), checked against the CPU reference where the
#                       whole sequence fits the reference's budget, and the training pass
#                       ("pytorch_training", --training), every gradient checked where the
#                       training reference (3x the forward's FLOPs) fits it (the same budget the
#                       stages' checks use; lstm_configs says where)
#
# usage: scripts/bench.sh [--only cpp|pytorch|pytorch-training] [DIR]
#   --only cpp       lstm_bench alone (DIR/bench.json)
#   --only pytorch   the PyTorch part alone (appended to DIR/pytorch.jsonl)
#   --only pytorch-training   PyTorch's training pass alone (appended to DIR/pytorch.jsonl)
#                    (to split the bench over two runs, e.g. two time-limited GPU sessions;
#                    default: both parts, lstm_bench first)
#   DIR              default results/local/<gpu>
#   environment: BUILD_DIR (default build), PYTORCH_PYTHON (the python that has torch, default
#                python3)
# Exit status: 0 done, 1 no GPU or a step failed, 2 a usage error.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '13,22p' "$0" | sed 's/^# \{0,1\}//'; }
usage_error() { echo "bench: $*" >&2; usage >&2; exit 2; }
only=
dir=
while (($#)); do
  case $1 in
    --only)
      (($# >= 2)) || usage_error "--only needs a value: cpp, pytorch or pytorch-training"
      only=$2
      shift 2
      ;;
    --only=*) only=${1#*=}; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) usage_error "unknown option: $1" ;;
    *) [ -z "$dir" ] || usage_error "one DIR only (got $dir and $1)"; dir=$1; shift ;;
  esac
done
case $only in
  "" | cpp | pytorch | pytorch-training) ;;
  *) usage_error "--only takes cpp, pytorch or pytorch-training, got '$only'" ;;
esac

build=${BUILD_DIR:-build}
python=${PYTORCH_PYTHON:-python3}
if ! "$build/bin/lstm_gpu_info" >/dev/null 2>&1; then
  echo "bench: no usable CUDA GPU here; nothing to measure."
  exit 1
fi
dir=${dir:-results/local/$("$build/bin/lstm_gpu_info" --folder)}
mkdir -p "$dir"

if [ "$only" = "" ] || [ "$only" = cpp ]; then
  echo "bench: lstm_bench -> $dir/bench.json"
  "$build/bin/lstm_bench" --benchmark_out="$dir/bench.json" --benchmark_out_format=json
fi
if [ "$only" = cpp ]; then
  echo "bench: done (lstm_bench only); results in $dir"
  exit 0
fi

echo "bench: PyTorch nn.LSTM, forward and training -> $dir/pytorch.jsonl"
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
"$build/bin/lstm_configs" >"$data/configs.txt"
pytorch() {  # lstm_pytorch.py ARGS...: the lines that say what was run and checked
  "$python" baselines/pytorch/lstm_pytorch.py "$@" --json "$dir/pytorch.jsonl" |
    grep -E "^(time|check|Disposition|pytorch|  of which)"
}
# Per line: group H I B T L, the forward's FLOPs, the steps a forward check covers, and whether a
# training check covers the gradients (1) or not (0).
while read -r group hidden input_size batch seq layers flop reference_steps training_checked; do
  flags=(--hidden "$hidden" --input-size "$input_size" --batch "$batch" --seq "$seq" --layers "$layers")
  what="$group ${flags[*]}"
  problem=$data/problem reference=$data/reference
  rm -rf "$problem" "$reference"
  # The inputs, with the upstream gradients dy, dhy, dcy of the training pass.
  "$build/bin/lstm_reference" "${flags[@]}" --training --save-inputs "$problem" --no-reference >/dev/null
  # The reference: the training one where it fits (its y, hy, cy serve the forward check too),
  # else the forward one where the whole sequence fits, else none.
  forward_check=(--no-check) training_check=(--no-check)
  if ((training_checked)); then
    "$build/bin/lstm_reference" --load "$problem" --training --dump "$reference" >/dev/null
    forward_check=(--check-dir "$reference") training_check=(--check-dir "$reference")
  elif ((reference_steps == seq)); then
    if [ "$only" != pytorch-training ]; then
      "$build/bin/lstm_reference" --load "$problem" --dump "$reference" >/dev/null
      forward_check=(--check-dir "$reference")
    fi
    echo "check: training gradients not checked for $what (the training reference is over the CPU reference's budget)"
  else
    echo "check: skipped for $what, forward and training ($flop FLOP: over the CPU reference's budget)"
  fi
  [ "$only" = pytorch-training ] || pytorch --load "$problem" "${forward_check[@]}"
  pytorch --training --load "$problem" "${training_check[@]}"
done <"$data/configs.txt"
echo "bench: done; results in $dir"
