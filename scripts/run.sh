#!/usr/bin/env bash
# The main job. Sets up and builds; then
#   with a GPU:    runs every stage at the canonical config (H=512 B=64 T=100 L=4) with the check
#                  on, appends the results to results/local/<gpu>/canonical.jsonl, draws the plots;
#   without a GPU: says so, runs the CPU reference on a small problem, and redraws the plots
#                  from the committed results.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh >/dev/null
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"

build=${BUILD_DIR:-build}
generator=()
command -v ninja >/dev/null 2>&1 && [ ! -f "$build/Makefile" ] && generator=(-G Ninja)
echo "run: building (Release) in $build ..."
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --parallel "$(nproc)" >/dev/null
python=.venv/bin/python

if gpu=$("$build/bin/lstm_gpu_info" 2>&1); then
  folder=results/local/$("$build/bin/lstm_gpu_info" --folder)
  mkdir -p "$folder"
  echo "run: $gpu" | head -n 1
  for exe in "$build"/bin/lstm_*_[0-9][0-9]_*; do  # every stage of every series
    case $(basename "$exe") in lstm_selftest_*) continue ;; esac  # test-only stages
    echo
    "$exe" --json "$folder/canonical.jsonl"
  done
  echo
  if [ "${LSTM_SKIP_BENCH:-0}" != 1 ]; then
    BUILD_DIR="$build" ./scripts/bench.sh "$folder"
  fi
  "$python" plots/make_plots.py --no-readmes --results results/local
  echo "run: results appended to $folder/canonical.jsonl; plots in $folder/plots/"
else
  echo "run: NO GPU: $gpu"
  echo "run: the stages need an NVIDIA GPU, so none was run. What runs here instead:"
  echo
  "$build/bin/lstm_reference" --hidden 64 --input-size 32 --batch 8 --seq 20 --layers 2
  echo
  "$python" plots/make_plots.py --no-readmes
  echo "run: plots redrawn from the committed results (results/<gpu>/plots/)."
fi
