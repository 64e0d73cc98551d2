#!/usr/bin/env bash
# Sets up (scripts/setup.sh), configures, builds and runs every test with CTest. On a machine with
# no GPU the GPU tests are reported as skipped (never as passed); everything else must pass.
#
# usage: scripts/test.sh [--cuda-arch N]
#   --cuda-arch N   the CUDA architecture to build for (CMAKE_CUDA_ARCHITECTURES): 90 (H100,
#                   the default), 80 (A100), 89 (L4, RTX 40xx), a list "80;90", or native (the
#                   GPU of this machine; needs one). Also read from the environment, CUDA_ARCH=N;
#                   the option wins. Without either, the build folder keeps the architecture it
#                   was configured with (90 for a new one); another one reconfigures and rebuilds.
#   environment: BUILD_DIR (default build), CUDA_ARCH
#
# The last line is the summary, also written to BUILD_DIR/test_summary.txt:
#   tests: N passed, M failed, K skipped
# Exit codes: 0 every test passed or skipped, 1 a test failed (or the build did), 2 a usage error.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '5,11p' "$0" | sed 's/^# \{0,1\}//'; }
usage_error() { echo "test: $*" >&2; usage >&2; exit 2; }
# shellcheck source=lib/build.sh
source scripts/lib/build.sh
parse_cuda_arch test "$@"

./scripts/setup.sh
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"

build=${BUILD_DIR:-build}
if ! configure_and_build test "$build"; then
  echo "test: no test was run"
  echo "tests: not run (the build failed)" | tee "$build/test_summary.txt"
  exit 1
fi

# ---- test
if ! "$build/bin/lstm_gpu_info" >/dev/null 2>&1; then
  echo "test: no usable CUDA GPU here: the GPU tests will be reported as skipped, not passed."
fi
echo "test: running the tests with CTest (a few minutes; one line per test)"
log="$build/ctest.log"
ctest_status=0
ctest --test-dir "$build" --output-on-failure --parallel "$(nproc)" 2>&1 | tee "$log" || ctest_status=$?

# CTest lists failed tests (each on a tab-indented line) under "The following tests FAILED:" and
# skipped ones, marked "(Skipped)", under "The following tests did not run:"; its total counts
# the skipped ones as passed, the line below does not.
failed=$(awk '/^The following tests FAILED:/ {in_list = 1; next}
              in_list && /^\t/ {count++; next}
              {in_list = 0}
              END {print count + 0}' "$log")
skipped=$(grep -c "(Skipped)" "$log" || true)
total=$(sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p' "$log" | tail -n 1)
total=${total:-0}
passed=$((total - failed - skipped))
if [ "$skipped" -gt 0 ]; then
  echo "test: $skipped test(s) were SKIPPED, not passed (listed above under 'did not run');"
  echo "test: the GPU tests run only where a CUDA GPU is present (scripts/gpu_check.sh)."
  # A skipped script test says why in its output, which CTest keeps in LastTest.log.
  grep -ho "pytorch_script: SKIPPED (.*" "$build"/Testing/Temporary/LastTest*.log 2>/dev/null |
    tail -n 1 | sed 's/^/test: /' || true
fi
if [ "$failed" -gt 0 ]; then
  echo "test: $failed test(s) FAILED (listed above under 'The following tests FAILED'; output in $log)"
elif [ "$ctest_status" -ne 0 ] || [ "$total" -eq 0 ]; then
  # No test listed as failed, yet CTest failed (or found no test): a failure all the same.
  echo "test: CTest exited with status $ctest_status having run $total test(s) (output in $log)"
  ctest_status=1
fi
echo "tests: $passed passed, $failed failed, $skipped skipped" | tee "$build/test_summary.txt"
if [ "$failed" -gt 0 ] || [ "$ctest_status" -ne 0 ]; then
  exit 1
fi
