#!/usr/bin/env bash
# Sets up, configures, builds and runs every test. On a machine with no GPU the GPU tests are
# reported as skipped (never as passed); everything else must pass.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"

build=${BUILD_DIR:-build}
generator=()
command -v ninja >/dev/null 2>&1 && [ ! -f "$build/Makefile" ] && generator=(-G Ninja)
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DPython3_EXECUTABLE="$PWD/.venv/bin/python" >/dev/null
cmake --build "$build" --parallel "$(nproc)"

if ! "$build/bin/lstm_gpu_info" >/dev/null 2>&1; then
  echo "test: no usable CUDA GPU here: the GPU tests will be reported as skipped, not passed."
fi
ctest --test-dir "$build" --output-on-failure --parallel "$(nproc)"
