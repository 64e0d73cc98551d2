#!/usr/bin/env bash
# Data-parallel training's scaling (stages/multigpu/00_data_parallel, its README): the stage at
# G = 1, 2, 4, 8 (those of them this machine has), H = I = 1024, L = 4, T = 100, unchecked (its
# GPU tests check it; the training reference of these sizes is over the CPU budget anyway):
#   strong scaling: global B = 64 and 256;
#   weak scaling:   B per GPU = 4, 16 and 64 (global B = G times that);
# and, as the baselines to beat, training stages 07 (the default inner stage) and 05 (faster from
# some 32 rows up) alone on one GPU at every G = 1 shape.
# Appends to DIR/scaling.jsonl the harness's --json records with "scaling" (strong, weak or
# inner_alone), "gpus" and "inner" added, and to DIR/scaling_parts.jsonl the stage's
# --parts-json records (scatter, per-GPU pass, all-reduce alone, gather). plots/make_plots.py
# draws DIR/plots/scaling.png from them.
# usage: scripts/scaling.sh [--build DIR] [--out DIR]   (defaults: build, results/local/<gpu>)
# Exit codes: 0 done, 1 a run failed or no GPU, 2 a usage error.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build out=""
while (($#)); do
  case $1 in
    --build) [ -n "${2:-}" ] || { echo "scaling: --build needs a folder" >&2; exit 2; }; build=$2; shift 2 ;;
    --out) [ -n "${2:-}" ] || { echo "scaling: --out needs a folder" >&2; exit 2; }; out=$2; shift 2 ;;
    -h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "scaling: unknown option $1" >&2; exit 2 ;;
  esac
done
exe=$build/bin/lstm_multigpu_00_data_parallel
inner=training/07_staged_dz  # the stage's default --inner (recorded with each run)
if [ ! -x "$exe" ]; then
  echo "scaling: no $exe (is NCCL there? configure says 'NCCL: ...')" >&2
  exit 1
fi
# The GPUs the stage can see: CUDA_VISIBLE_DEVICES's list where it is set (nvidia-smi ignores it).
if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
  gpus=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c '[^[:space:]]' || true)
else
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
fi
if ((gpus < 1)); then
  echo "scaling: NO GPU" >&2
  exit 1
fi
out=${out:-results/local/$("$build/bin/lstm_gpu_info" --folder)}
mkdir -p "$out"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
shape=(--hidden 1024 --input-size 1024 --seq 100 --layers 4 --no-check)

# run SCALING G B INNER PROGRAM [FLAGS...]: one run; its record goes to scaling.jsonl with the
# fields added.
run() {
  local scaling=$1 g=$2 batch=$3 inner=$4 program=$5
  shift 5
  echo "scaling: $scaling G=$g B=$batch $(basename "$program") $*"
  : >"$tmp"
  "$program" "${shape[@]}" --batch "$batch" --json "$tmp" "$@"
  python3 - "$tmp" "$out/scaling.jsonl" "$scaling" "$g" "$inner" <<'PY'
import json, sys
source, target, scaling, gpus, inner = sys.argv[1:]
with open(source) as records, open(target, "a") as out:
    for line in records:
        record = json.loads(line)
        record.update(scaling=scaling, gpus=int(gpus), inner=inner)
        out.write(json.dumps(record) + "\n")
PY
}

for g in 1 2 4 8; do
  ((g <= gpus)) || continue
  for batch in 64 256; do
    run strong "$g" "$batch" "$inner" "$exe" --gpus "$g" --parts-json "$out/scaling_parts.jsonl"
  done
  for per_gpu in 4 16 64; do
    run weak "$g" $((per_gpu * g)) "$inner" "$exe" --gpus "$g" --parts-json "$out/scaling_parts.jsonl"
  done
done
for alone in "$inner" training/05_layer_wavefront; do
  for batch in 4 16 64 256; do
    run inner_alone 1 "$batch" "$alone" "$build/bin/lstm_${alone//\//_}"
  done
done
echo "scaling: records appended to $out/scaling.jsonl and $out/scaling_parts.jsonl"
