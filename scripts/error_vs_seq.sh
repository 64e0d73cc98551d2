#!/usr/bin/env bash
# The accuracy figure of the tensor-core stages: error against the FP64 CPU reference versus the
# sequence length T, for FP32, FP16 and BF16, the best stage of each precision beside cuDNN's
# PERSIST_STATIC in the same precision, on the same data (one seed; the harness rounds the inputs
# to the precision once and the reference reads those values). One checked run each at
# H = I = 512, B = 8, L = 1 and T = 10, 30, 100, 300, 1000; each appends one JSON record (its
# check holds every tensor's relative-norm and max-abs error) to FILE. plots/make_plots.py draws
# the figure from it.
#
# usage: scripts/error_vs_seq.sh [FILE]   (default results/local/error_vs_seq.jsonl)
#   environment: BUILD_DIR (default build)
# Exit status: 0 done, 1 no GPU or a run failed (its message says why), 2 a usage error.
set -euo pipefail
cd "$(dirname "$0")/.."
case ${1:-} in -h | --help) sed -n '/^# usage:/,/^# Exit status/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; -*) echo "error_vs_seq: unknown option $1" >&2; exit 2 ;; esac
(($# <= 1)) || { echo "error_vs_seq: one FILE only (got $*)" >&2; exit 2; }
out=${1:-results/local/error_vs_seq.jsonl}
bin=${BUILD_DIR:-build}/bin
fp32_stage=lstm_forward_12_small_batch_registers
reduced_stage=lstm_forward_16_graph_of_a_pass
for exe in $fp32_stage $reduced_stage lstm_cudnn lstm_gpu_info; do
  [ -x "$bin/$exe" ] || { echo "error_vs_seq: $bin/$exe is not built" >&2; exit 1; }
done
"$bin/lstm_gpu_info" >/dev/null 2>&1 || { echo "error_vs_seq: no usable CUDA GPU here; nothing was run" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
for seq in 10 30 100 300 1000; do
  shape=(--hidden 512 --input-size 512 --batch 8 --layers 1 --seq "$seq" --seed 1 --iters 1
         --warmup 1 --json "$out")
  "$bin/$fp32_stage" "${shape[@]}"
  "$bin/lstm_cudnn" --algo persist_static --precision fp32 "${shape[@]}"
  for precision in fp16 bf16; do
    "$bin/$reduced_stage" --precision "$precision" "${shape[@]}"
    "$bin/lstm_cudnn" --algo persist_static --precision "$precision" "${shape[@]}"
  done
done
echo "error_vs_seq: records appended to $out"
