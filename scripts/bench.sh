#!/usr/bin/env bash
# Measures every stage, every cuDNN algorithm and PyTorch's nn.LSTM over the standard
# configurations (common/standard_configs.json, listed by build/bin/lstm_configs) on this
# machine's GPU:
#   DIR/bench.json           Google Benchmark JSON from build/bin/lstm_bench, the FP32 forward
#                            part: every FP32 forward stage, cuDNN's FP32 forward algorithms and
#                            the floors (FMA rate, grid barrier, exchanges), with the environment
#                            and how it measured as context
#   DIR/bench_reduced.json   the same for the FP16 and BF16 forward stages and cuDNN algorithms
#   DIR/bench_training.json  the FP32 training part: every FP32 training stage and cuDNN's FP32
#                            training algorithms
#   DIR/bench_training_reduced.json  the FP16 and BF16 training stages and cuDNN algorithms
#                            (each part one run of lstm_bench: a stage's ratio to cuDNN is taken
#                            within its part, where cuDNN ran in the same precision)
#   DIR/pytorch.jsonl        two records per configuration from baselines/pytorch/lstm_pytorch.py:
#                            the forward pass ("pytorch"), checked against the CPU reference where
#                            the whole sequence fits the reference's budget, and the training pass
#                            ("pytorch_training", --training), every gradient checked where the
#                            training reference (3x the forward's FLOPs) fits it (the same budget
#                            the stages' checks use; lstm_configs says where)
# lstm_bench runs every benchmark 5 times (--benchmark_repetitions) with the repetitions of all
# benchmarks in a random order (--benchmark_enable_random_interleaving); a repetition times 10
# passes after 2 warm-up (a training pass: 3 after 1, of each of the whole pass, its forward and
# its backward). Each repetition is an entry of the JSON; tables take the median of the
# repetitions' medians, plots their spread. (The defaults live in lstm_bench: lstm_bench --help.)
# Each part is one lstm_bench run, so that a part fits one 10-minute GPU session
# (--only PART, several in one call where they fit).
#
# usage: scripts/bench.sh [--only PART] [DIR] [-- LSTM_BENCH_FLAGS...]
#   --only forward           lstm_bench's forward parts alone (DIR/bench.json, bench_reduced.json)
#   --only forward-fp32      DIR/bench.json alone; --only forward-reduced: bench_reduced.json alone
#   --only training          lstm_bench's training parts alone (DIR/bench_training.json,
#                            bench_training_reduced.json)
#   --only training-fp32     DIR/bench_training.json alone; --only training-reduced:
#                            bench_training_reduced.json alone
#   --only cpp               the four parts of lstm_bench, one after the other
#   --only pytorch           the PyTorch part alone, forward and training (appended to
#                            DIR/pytorch.jsonl)
#   --only pytorch-training  PyTorch's training pass alone (appended to DIR/pytorch.jsonl)
#   --only pytorch-forward   PyTorch's forward pass alone (appended to DIR/pytorch.jsonl)
#                            (to split the bench over several runs, e.g. time-limited GPU
#                            sessions; default: everything, lstm_bench's parts first)
#   DIR                      default results/local/<gpu>
#   LSTM_BENCH_FLAGS         passed on to lstm_bench, e.g. --benchmark_repetitions=3
#   environment: BUILD_DIR (default build), PYTORCH_PYTHON (the python that has torch, default
#                python3), PYTORCH_PRECISIONS (the precisions PyTorch runs in, default "fp32";
#                e.g. "fp32 fp16 bf16": each reduced one on the inputs rounded to it, checked
#                against the reference of those values)
# Compare two runs: scripts/compare_runs.py A/bench.json B/bench.json
# Exit status: 0 done, 1 no GPU or a step failed, 2 a usage error.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '/^# usage:/,/^# Exit status/p' "$0" | sed 's/^# \{0,1\}//'; }
usage_error() { echo "bench: $*" >&2; usage >&2; exit 2; }
parts="forward, forward-fp32, forward-reduced, training, training-fp32, training-reduced, cpp, pytorch, pytorch-forward or pytorch-training"
only=
dir=
bench_flags=()
while (($#)); do
  case $1 in
    --only)
      [ -n "${2:-}" ] || usage_error "--only needs a value: $parts"
      only=$2
      shift 2
      ;;
    --only=*) only=${1#*=}; [ -n "$only" ] || usage_error "--only needs a value: $parts"; shift ;;
    -h | --help) usage; exit 0 ;;
    --) shift; bench_flags=("$@"); break ;;
    -*) usage_error "unknown option: $1" ;;
    *) [ -z "$dir" ] || usage_error "one DIR only (got $dir and $1)"; dir=$1; shift ;;
  esac
done
case $only in
  "" | forward | forward-fp32 | forward-reduced | training | training-fp32 | training-reduced | \
    cpp | pytorch | pytorch-forward | pytorch-training) ;;
  *) usage_error "--only takes $parts, got '$only'" ;;
esac

build=${BUILD_DIR:-build}
python=${PYTORCH_PYTHON:-python3}
precisions=${PYTORCH_PRECISIONS:-fp32}
for precision in $precisions; do
  case $precision in fp32 | fp16 | bf16) ;; *) usage_error "PYTORCH_PRECISIONS: $precision is not fp32, fp16 or bf16" ;; esac
done
if [ ! -x "$build/bin/lstm_gpu_info" ]; then
  echo "bench: $build/bin/lstm_gpu_info is not built (build first, or set BUILD_DIR); nothing to measure." >&2
  exit 1
fi
if ! "$build/bin/lstm_gpu_info" >/dev/null 2>&1; then
  echo "bench: no usable CUDA GPU here; nothing to measure."
  exit 1
fi
dir=${dir:-results/local/$("$build/bin/lstm_gpu_info" --folder)}
mkdir -p "$dir"

bench_part() {  # bench_part FILTER PRECISIONS FILE: one part of lstm_bench, one run
  echo "bench: lstm_bench --benchmark_filter=$1 --precisions=$2 -> $3"
  "$build/bin/lstm_bench" --benchmark_filter="$1" --precisions="$2" --benchmark_out="$3" \
    --benchmark_out_format=json ${bench_flags[@]+"${bench_flags[@]}"}
}
case $only in "" | forward | forward-fp32 | cpp) bench_part -training fp32 "$dir/bench.json" ;; esac
case $only in "" | forward | forward-reduced | cpp)
  bench_part -training fp16,bf16 "$dir/bench_reduced.json" ;;
esac
case $only in "" | training | training-fp32 | cpp)
  bench_part training fp32 "$dir/bench_training.json" ;;
esac
case $only in "" | training | training-reduced | cpp)
  bench_part training fp16,bf16 "$dir/bench_training_reduced.json" ;;
esac
case $only in
  forward* | training* | cpp)
    echo "bench: done (lstm_bench, --only $only); results in $dir"
    exit 0
    ;;
esac
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
  for precision in $precisions; do
    # The inputs (rounded to the precision), with the upstream gradients dy, dhy, dcy.
    problem=$data/problem reference=$data/reference
    rm -rf "$problem" "$reference"
    "$build/bin/lstm_reference" "${flags[@]}" --precision "$precision" --training \
      --save-inputs "$problem" --no-reference >/dev/null
    # The reference: the training one where it fits (its y, hy, cy serve the forward check too),
    # else the forward one where the whole sequence fits, else none.
    forward_check=(--no-check) training_check=(--no-check)
    if ((training_checked)) && [ "$only" != pytorch-forward ]; then
      "$build/bin/lstm_reference" --load "$problem" --training --dump "$reference" >/dev/null
      forward_check=(--check-dir "$reference") training_check=(--check-dir "$reference")
    elif ((reference_steps == seq)); then
      if [ "$only" != pytorch-training ]; then
        "$build/bin/lstm_reference" --load "$problem" --dump "$reference" >/dev/null
        forward_check=(--check-dir "$reference")
      fi
      ((training_checked)) ||
        echo "check: training gradients not checked for $what (the training reference is over the CPU reference's budget)"
    else
      echo "check: skipped for $what, forward and training ($flop FLOP: over the CPU reference's budget)"
    fi
    [ "$only" = pytorch-training ] ||
      pytorch --precision "$precision" --load "$problem" "${forward_check[@]}"
    [ "$only" = pytorch-forward ] ||
      pytorch --precision "$precision" --training --load "$problem" "${training_check[@]}"
  done
done <"$data/configs.txt"
echo "bench: done; results in $dir"
