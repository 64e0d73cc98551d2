#!/usr/bin/env bash
# A GPU test for the stages whose READMEs say their outputs are another stage's, bit for bit: both
# run on the same generated problem with their checks on and --dump; each must write y.npy,
# hy.npy and cy.npy (and whatever else it dumps), the same files, equal byte for byte.
#
# usage: tests/same_outputs.sh GPU_INFO STAGE_A STAGE_B [FLAG...]
#   GPU_INFO  build/bin/lstm_gpu_info: where it finds no usable GPU the test exits 77 (CTest:
#             skipped, never passed)
#   FLAG      the problem and precision, given to both stages (e.g. --hidden 37 --precision bf16)
#   environment: SAME_OUTPUTS_EXCEPT, an extended regex of dumped names whose bytes may differ
#   (a stage that sums them in another order; both must still dump them, and each stage's own
#   check has compared them with the reference)
# Exit codes: 0 the same outputs, 1 a stage failed or the outputs differ, 2 a usage error, 77 no GPU.
set -uo pipefail
(($# >= 3)) || { sed -n '5,13p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
gpu_info=$1 stages=("$2" "$3")
shift 3
if ! "$gpu_info" >/dev/null 2>&1; then
  echo "same_outputs: SKIPPED (no usable CUDA GPU: $gpu_info failed)"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for side in 0 1; do  # stage 0 dumps into $dir/0, stage 1 into $dir/1
  stage=${stages[side]}
  echo "same_outputs: $stage $* --dump $dir/$side"
  if ! "$stage" "$@" --iters 1 --warmup 0 --dump "$dir/$side"; then
    echo "same_outputs: FAILED: $stage exited non-zero"
    exit 1
  fi
done
files() { (cd "$1" && find . -type f | sed 's|^\./||' | LC_ALL=C sort | tr '\n' ' '); }
dumped=$(files "$dir/0")
if [ "$dumped" != "$(files "$dir/1")" ]; then
  echo "same_outputs: FAILED: the stages dumped different files: $dumped against $(files "$dir/1")"
  exit 1
fi
differ=()
except=${SAME_OUTPUTS_EXCEPT:-}
for name in $dumped; do
  if [ -n "$except" ] && [[ $name =~ $except ]]; then
    cmp -s "$dir/0/$name" "$dir/1/$name" || echo "same_outputs: $name differs (allowed)"
    continue
  fi
  cmp -s "$dir/0/$name" "$dir/1/$name" || differ+=("$name")
done
for name in y.npy hy.npy cy.npy; do
  [ -f "$dir/0/$name" ] || { echo "same_outputs: FAILED: no $name dumped"; exit 1; }
done
if ((${#differ[@]})); then
  echo "same_outputs: FAILED: not bit for bit the same: ${differ[*]}"
  exit 1
fi
echo "same_outputs: the same, byte for byte: $dumped"
