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
cuda_arch=${CUDA_ARCH:-}
while (($#)); do
  case $1 in
    --cuda-arch) (($# >= 2)) || usage_error "--cuda-arch needs a value"; cuda_arch=$2; shift 2 ;;
    --cuda-arch=*) cuda_arch=${1#*=}; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage_error "unknown argument: $1" ;;
  esac
done
cuda_arch=${cuda_arch//,/;}
arch_pattern='^(native|all|all-major|[0-9]+(-real|-virtual)?(;[0-9]+(-real|-virtual)?)*)$'
[[ -z $cuda_arch || $cuda_arch =~ $arch_pattern ]] ||
  usage_error "--cuda-arch (or CUDA_ARCH) \"$cuda_arch\" is not an architecture: give e.g. 80, 89, 90, \"80;90\" or native"

./scripts/setup.sh
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"

# ---- configure: the build type, the generator, the CUDA architecture
build=${BUILD_DIR:-build}
generator=()
command -v ninja >/dev/null 2>&1 && [ ! -f "$build/Makefile" ] && generator=(-G Ninja)
configured=$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
if [ -z "$cuda_arch" ]; then
  cuda_arch=${configured:-90}
elif [ -n "$configured" ] && [ "$configured" != "$cuda_arch" ]; then
  echo "run: $build was configured for CUDA architecture $configured; reconfiguring for $cuda_arch (everything CUDA is rebuilt)"
fi
echo "run: configuring $build (Release, CUDA architecture $cuda_arch; the first time takes half a minute)"
mkdir -p "$build"
if ! cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES="$cuda_arch" >"$build/configure.log" 2>&1; then
  cat "$build/configure.log"
  echo "run: configuring failed (above; also in $build/configure.log)"
  exit 1
fi
grep -q "CMake Warning\|CMake Deprecation Warning" "$build/configure.log" && cat "$build/configure.log"

# ---- build: the build tool prints one [n/N] line per step
echo "run: building in $build with $(nproc) jobs (a fresh build takes about 10 minutes on 2 cores)"
if ! cmake --build "$build" --parallel "$(nproc)"; then
  echo "run: the build failed (above); nothing was run"
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
    echo "run: the benchmarks (scripts/bench.sh: a few minutes; LSTM_SKIP_BENCH=1 skips them)"
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
