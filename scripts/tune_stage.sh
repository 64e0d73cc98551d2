#!/usr/bin/env bash
# Times a persistent stage with a planner (default: forward stage 12, the last one) with the
# planner's choice and with pinned plans (its flags: --plan tile,threads,groups and, where the
# stage has them, --weights and --input) over the shapes its targets name, so that the planner's
# cost model can be checked against the GPU. Unchecked runs (the checks are gpu_check.sh's job);
# one line per (shape, plan). Where block 0 spends a step (--trace) is printed only by a build
# configured with -DLSTM_PERSISTENT_TRACE=ON (tracing is compiled in only on request); the
# timings are of the same kernels either way.
#
# usage: scripts/tune_stage.sh [--stage NAME] [DIR]   (environment: BUILD_DIR, default build-gpu)
#   --stage NAME  the stage executable, lstm_NAME: forward_12_small_batch_registers (the
#                 default), forward_11_batch_groups, ...; or a forward stage's number, e.g. 11
#   DIR           where tune.txt, tune.log and tune.jsonl go (default results/local/tune)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
usage() { sed -n "10,13p" "$0" | sed 's/^# \{0,1\}//'; }
build=${BUILD_DIR:-build-gpu}
name=forward_12_small_batch_registers
out=
while (($#)); do
  case $1 in
    --stage) (($# >= 2)) || { echo "tune_stage: --stage needs a value" >&2; exit 2; }; name=$2; shift 2 ;;
    --stage=*) name=${1#*=}; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "tune_stage: unknown option: $1" >&2; usage >&2; exit 2 ;;
    *) [ -z "$out" ] || { echo "tune_stage: one DIR only (got $out and $1)" >&2; exit 2; }; out=$1; shift ;;
  esac
done
out=${out:-results/local/tune}
if [[ $name =~ ^[0-9]+$ ]]; then  # a forward stage's number
  matches=("$build"/bin/lstm_forward_"$(printf '%02d' "$((10#$name))")"_*)
  [ -x "${matches[0]}" ] || { echo "tune_stage: no forward stage $name in $build/bin" >&2; exit 2; }
  name=${matches[0]##*/lstm_}
fi
stage="$build/bin/lstm_$name"
[ -x "$stage" ] || { echo "tune_stage: no stage executable $stage (build it first)" >&2; exit 2; }
help=$("$stage" --help)
grep -q -- --plan <<<"$help" || { echo "tune_stage: $name has no planner (no --plan flag)" >&2; exit 2; }
"$build/bin/lstm_gpu_info" >/dev/null 2>&1 || { echo "tune_stage: no usable CUDA GPU here; nothing to tune." >&2; exit 1; }
mkdir -p "$out"
trace=()
grep -q -- --trace <<<"$help" && trace=(--trace)
shapes=("512 1 1" "512 4 1" "512 8 1" "512 16 1" "512 64 1" "512 128 1" "512 256 1" "1024 1 1" "1024 4 1" "1024 8 1" "1024 16 1"
        "1024 64 1" "1024 128 1" "1024 256 1" "512 64 4")
# auto = the planner's choice; reg+gemm = the register kernel with cuBLAS input parts;
# shared = the shared-memory kernel (planner's tile); tile,threads,groups = pinned shared plans.
plans=(auto)
grep -q -- --weights <<<"$help" && plans+=(reg+gemm shared)
# shellcheck disable=SC2054  # the commas are in the values (tile,threads,groups)
plans+=(4,256,1 4,512,1 8,256,1 16,256,1 4,256,2 4,256,4)
"$build/bin/lstm_gpu_info" | head -n 1 | tee "$out/tune.txt"
echo "$name at commit $(cat .git_commit 2>/dev/null || git describe --always --dirty --abbrev=12), $(date -u +%Y-%m-%dT%H:%M:%SZ)" | tee -a "$out/tune.txt"
printf '%-16s' "H B L \\ plan" | tee -a "$out/tune.txt"
printf '%10s' "${plans[@]}" | tee -a "$out/tune.txt"
echo | tee -a "$out/tune.txt"
for shape in "${shapes[@]}"; do
  read -r hidden batch layers <<<"$shape"
  printf '%-16s' "$hidden $batch $layers" | tee -a "$out/tune.txt"
  for plan in "${plans[@]}"; do
    pins=()
    case $plan in
      auto) pins=("${trace[@]}") ;;
      reg+gemm) pins=(--weights registers --input gemm) ;;
      shared) pins=(--weights shared) ;;
      *) pins=(--plan "$plan") ;;
    esac
    line=$(timeout 60 "$stage" --verbose "${pins[@]}" \
      --hidden "$hidden" --batch "$batch" --seq 100 --layers "$layers" --no-check \
      --json "$out/tune.jsonl" 2>&1)
    echo "== $shape plan=$plan" >>"$out/tune.log"
    echo "$line" >>"$out/tune.log"
    us=$(echo "$line" | sed -n 's/.* \([0-9.]*\) us\/step-layer.*/\1/p' | head -n 1)
    printf '%10s' "${us:-fail}" | tee -a "$out/tune.txt"
  done
  echo | tee -a "$out/tune.txt"
done
echo "(us per step and layer, median of 20; fail = the plan does not fit this shape; tile,threads,groups = a pinned shared-memory plan)" | tee -a "$out/tune.txt"
echo "The planner's choice (auto) and where block 0 spends a step:" | tee -a "$out/tune.txt"
grep -E "^== .*plan=auto|plan:|trace" "$out/tune.log" | sed "s|^${name/_//} ||" | tee -a "$out/tune.txt"
