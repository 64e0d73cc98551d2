#!/usr/bin/env bash
# The main job. Sets up (scripts/setup.sh) and builds; then
#   with a GPU:    runs every stage at the canonical config (H=512 B=64 T=100 L=4) with the check
#                  on, appends the results to results/local/<gpu>/canonical.jsonl, runs the
#                  benchmarks (scripts/bench.sh; LSTM_SKIP_BENCH=1 skips them), draws the plots;
#   without a GPU: says so, runs the CPU reference on a small problem, and redraws the plots
#                  from the committed results.
#
# usage: scripts/run.sh [--cuda-arch N]
#   --cuda-arch N   the CUDA architecture to build for (CMAKE_CUDA_ARCHITECTURES): 90 (H100,
#                   the default), 80 (A100), 89 (L4, RTX 40xx), a list "80;90", or native (the
#                   GPU of this machine; needs one). Also read from the environment, CUDA_ARCH=N;
#                   the option wins. Without either, the build folder keeps the architecture it
#                   was configured with (90 for a new one); another one reconfigures and rebuilds.
#   environment: BUILD_DIR (default build), CUDA_ARCH, LSTM_SKIP_BENCH
# Exit codes: 0 success, 1 a failed or refused run (or build), 2 a usage error.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '9,15p' "$0" | sed 's/^# \{0,1\}//'; }
usage_error() { echo "run: $*" >&2; usage >&2; exit 2; }
# shellcheck source=lib/build.sh
source scripts/lib/build.sh
parse_cuda_arch run "$@"

./scripts/setup.sh
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"

build=${BUILD_DIR:-build}
if ! configure_and_build run "$build"; then
  echo "run: nothing was run"
  exit 1
fi
python=.venv/bin/python

if gpu=$("$build/bin/lstm_gpu_info" 2>&1); then
  folder=results/local/$("$build/bin/lstm_gpu_info" --folder)
  mkdir -p "$folder"
  echo "run: $gpu" | head -n 1
  echo "run: every stage at the canonical config, checked against the CPU reference"
  for exe in "$build"/bin/lstm_*_[0-9][0-9]_*; do  # every stage of every series
    case $(basename "$exe") in lstm_selftest_*) continue ;; esac  # test-only stages
    echo
    "$exe" --json "$folder/canonical.jsonl"
  done
  echo
  if [ "${LSTM_SKIP_BENCH:-0}" != 1 ]; then
    echo "run: the benchmarks (scripts/bench.sh: over ten minutes on an H100; LSTM_SKIP_BENCH=1 skips them)"
    BUILD_DIR="$build" ./scripts/bench.sh "$folder"
  fi
  echo "run: drawing the plots (plots/make_plots.py)"
  "$python" plots/make_plots.py --no-readmes --results results/local
  echo "run: results appended to $folder/canonical.jsonl; plots in $folder/plots/"
else
  echo "run: NO GPU: $gpu"
  echo "run: the stages need an NVIDIA GPU, so none was run. What runs here instead:"
  echo
  "$build/bin/lstm_reference" --hidden 64 --input-size 32 --batch 8 --seq 20 --layers 2
  echo
  echo "run: redrawing the plots from the committed results (plots/make_plots.py)"
  "$python" plots/make_plots.py --no-readmes
  echo "run: plots redrawn from the committed results (results/<gpu>/plots/)."
fi
