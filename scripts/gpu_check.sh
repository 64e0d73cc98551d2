#!/usr/bin/env bash
# Everything a GPU machine should verify, in one go:
#   0. that there is a GPU: `nvidia-smi -L` must list one, else it says so and stops (exit 1)
#      before building anything
#   1. configure and build (Release, for the CUDA architecture below; where --steps names only
#      stages and sanitizers, just lstm_gpu_info and the stages they run)
#   2. every test, CPU and GPU; a GPU test that skips here counts as a failure, but for one that
#      needs more GPUs than the machine has
#   3. every stage on the canonical config and three odd configs, checks on, results as JSON; a
#      16-bit stage in each of its precisions (its BF16 variant through --precision bf16); the
#      stages are the build's registry (BUILD_DIR/stages.txt), and one not built is a failure
#   4. the cuDNN baseline (every algorithm, forward and training) and PyTorch (forward and
#      training) on the same configs and on the committed fixtures, checks on (a training pass's
#      gradients where the training reference fits the CPU reference's budget)
#   5. compute-sanitizer memcheck, racecheck and synccheck on every stage at a small config (and
#      the stages with other paths at their own: the backward over several clusters), in its
#      default precision (a BF16 variant is the same kernels' other instance)
#   6. the benchmarks (scripts/bench.sh): DIR/bench.json, bench_reduced.json, bench_training.json,
#      bench_training_reduced.json and pytorch.jsonl (more than 10 minutes on an H100: --bench-only
#      runs one of bench.sh's parts, and LSTM_BENCH_FLAGS goes to lstm_bench)
# Steps 2-5 have a time limit (LSTM_STEP_TIMEOUT seconds a program, default 1200; a CTest test
# 1500 s): a hang is reported as a failure, not waited for.
# Logs and results go into DIR. Exit status: 0 everything passed, 1 anything failed (the summary
# says what) or no GPU, 2 a usage error.
#
# usage: scripts/gpu_check.sh [--cuda-arch N] [--steps LIST] [--stages REGEX] [--test-share K/N]
#                             [--bench-only PART] DIR
#   --cuda-arch N   the CUDA architecture to build for (CMAKE_CUDA_ARCHITECTURES): 90 (H100,
#                   the default), 80 (A100), 89 (L4, RTX 40xx), a list "80;90", or native (this
#                   machine's GPU). Also read from the environment, CUDA_ARCH=N; the option wins.
#                   Without either, the build folder keeps the architecture it was configured
#                   with (90 for a new one); another one reconfigures and rebuilds.
#   --steps LIST    only these of steps 2-6, comma-separated: tests, stages, baselines,
#                   sanitizers, bench (default: all of them; the build always runs). For a check
#                   split over several time-limited calls; a partial check says so in its summary.
#   --stages REGEX  steps 3 and 5 only for the stage executables whose name matches this
#                   extended regular expression (e.g. 'forward_(07|08)'); default: every stage
#   --test-share K/N  step 2 only for every N-th test from the K-th (ctest -I K,,N); shares 1/N
#                   to N/N cover every test, e.g. over time-limited calls (the GPU tests took
#                   over 10 minutes on an H200); default: every test
#   --bench-only PART  step 6 only for this part of scripts/bench.sh (its --only: forward-fp32,
#                   forward-reduced, training-fp32, training-reduced, pytorch, ...)
#   environment: BUILD_DIR (default build-gpu), CUDA_ARCH, PYTORCH_PYTHON, LSTM_SKIP_BENCH,
#                LSTM_BENCH_FLAGS (e.g. --benchmark_repetitions=3), LSTM_STEP_TIMEOUT
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

usage() { sed -n '/^# usage:/,/^#   environment:/p' "$0" | sed 's/^# \{0,1\}//'; }
usage_error() { echo "gpu_check: $*" >&2; usage >&2; exit 2; }
cuda_arch=${CUDA_ARCH:-}
out=
all_steps="tests stages baselines sanitizers bench"
steps=$all_steps
stage_regex=
share=
bench_part=
while (($#)); do
  case $1 in
    --cuda-arch) (($# >= 2)) || usage_error "--cuda-arch needs a value"; cuda_arch=$2; shift 2 ;;
    --cuda-arch=*) cuda_arch=${1#*=}; shift ;;
    --steps) (($# >= 2)) || usage_error "--steps needs a value"; steps=${2//,/ }; shift 2 ;;
    --steps=*) steps=${1#*=}; steps=${steps//,/ }; shift ;;
    --stages) (($# >= 2)) || usage_error "--stages needs a value"; stage_regex=$2; shift 2 ;;
    --stages=*) stage_regex=${1#*=}; shift ;;
    --test-share) (($# >= 2)) || usage_error "--test-share needs a value"; share=$2; shift 2 ;;
    --test-share=*) share=${1#*=}; shift ;;
    --bench-only) (($# >= 2)) || usage_error "--bench-only needs a value"; bench_part=$2; shift 2 ;;
    --bench-only=*) bench_part=${1#*=}; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) usage_error "unknown option: $1" ;;
    *) [ -z "$out" ] || usage_error "one DIR only (got $out and $1)"; out=$1; shift ;;
  esac
done
[ -n "$out" ] || usage_error "DIR is missing"
for step in $steps; do
  [[ " $all_steps " == *" $step "* ]] || usage_error "unknown step '$step' (steps: ${all_steps// /, })"
done
[ -n "${steps// /}" ] || usage_error "--steps names no step (steps: ${all_steps// /, })"
# selected EXE: the stage executable EXE is one --stages asks for (every stage without it)
selected() { [ -z "$stage_regex" ] || grep -Eq -- "$stage_regex" <<<"$1"; }
if [ -n "$stage_regex" ]; then
  # grep exits 2 on a malformed expression (1 only means no match)
  echo | grep -Eq -- "$stage_regex" 2>/dev/null
  (($? != 2)) || usage_error "--stages: not a valid extended regular expression: $stage_regex"
fi
share_flags=()
if [ -n "$share" ]; then
  if ! [[ $share =~ ^([1-9][0-9]*)/([1-9][0-9]*)$ ]] || ((BASH_REMATCH[1] > BASH_REMATCH[2])); then
    usage_error "--test-share takes K/N with 1 <= K <= N (got '$share')"
  fi
  share_flags=(-I "${BASH_REMATCH[1]},,${BASH_REMATCH[2]}")
fi
step_timeout=${LSTM_STEP_TIMEOUT:-1200}
[[ $step_timeout =~ ^[1-9][0-9]*$ ]] ||
  usage_error "LSTM_STEP_TIMEOUT takes a whole number of seconds, 1 or more (got '$step_timeout')"
wants() { [[ " $steps " == *" $1 "* ]]; }
[ "${LSTM_SKIP_BENCH:-0}" != 1 ] || steps=${steps/bench/}
read -ra step_list <<<"$steps"
steps="${step_list[*]}"
((${#step_list[@]})) || usage_error "LSTM_SKIP_BENCH=1 takes bench out of --steps, which leaves no step to run"
# shellcheck source=lib/build.sh
source scripts/lib/build.sh
check_cuda_arch

# ---- 0. a GPU, before spending minutes on the build
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "gpu_check: no NVIDIA GPU/driver here (nvidia-smi not found); nothing was built or run"
  exit 1
fi
if ! gpus=$(nvidia-smi -L 2>&1); then
  echo "gpu_check: no NVIDIA GPU/driver here (nvidia-smi -L failed: $(echo "$gpus" | head -n 1)); nothing was built or run"
  exit 1
fi
if ! grep -q "^GPU [0-9]" <<<"$gpus"; then
  echo "gpu_check: no NVIDIA GPU/driver here (nvidia-smi -L lists no GPU); nothing was built or run"
  exit 1
fi
echo "gpu_check: $(grep "^GPU [0-9]" <<<"$gpus" | head -n 1)"

if ! mkdir -p "$out" || ! out=$(cd "$out" && pwd); then
  echo "gpu_check: cannot create the folder $out for the logs; nothing was built or run"
  exit 1
fi
build=${BUILD_DIR:-build-gpu}
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
configured=$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
if [ -z "$cuda_arch" ]; then
  cuda_arch=${configured:-90}
elif [ -n "$configured" ] && [ "$configured" != "$cuda_arch" ]; then
  echo "gpu_check: $build was configured for CUDA architecture $configured; reconfiguring for $cuda_arch"
fi

failures=()
summary=()
# run_step NAME COMMAND...: runs COMMAND with its output in DIR/NAME.log; records the outcome.
# A program (not a shell function, whose commands limit themselves) gets step_timeout seconds,
# once the build is done (limit=1 below).
limit=0
run_step() {
  local name=$1 status
  shift
  local start=$SECONDS
  local timeout=()
  ((limit)) && [ "$(type -t "$1")" = file ] && timeout=(timeout "$step_timeout")
  "${timeout[@]}" "$@" >"$out/$name.log" 2>&1
  status=$?
  if ((status == 0)); then
    summary+=("ok      $name ($((SECONDS - start)) s)")
  elif ((${#timeout[@]} && status == 124)); then
    summary+=("FAILED  $name: stopped after $step_timeout s (a hang?): see $name.log")
    failures+=("$name")
  else
    summary+=("FAILED  $name ($((SECONDS - start)) s): see $name.log")
    failures+=("$name")
  fi
  echo "${summary[-1]}"
}

# Header-only packages carried in .deps (scripts/pack_deps.sh) where the machine lacks them.
prefix=()
[ -d .deps/root/usr ] && prefix=(-DCMAKE_PREFIX_PATH="$PWD/.deps/root/usr")

# ---- 1. build
echo "gpu_check: configuring and building $build for CUDA architecture $cuda_arch (a few minutes; logs in $out)"
run_step configure cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES="$cuda_arch" "${prefix[@]}"
# Steps 3 and 5 alone need only the stages they run: a check of one changed stage then builds
# that stage (and lstm_gpu_info), not the whole project (about 3 minutes on an H100's host).
targets=()
if ! wants tests && ! wants baselines && ! wants bench && [ -f "$build/stages.txt" ]; then
  targets=(lstm_gpu_info)
  while read -r exe _; do
    [ -n "$exe" ] && selected "$exe" && targets+=("$exe")
  done <"$build/stages.txt"
  echo "gpu_check: building only lstm_gpu_info and the $((${#targets[@]} - 1)) stage(s) the steps run"
fi
run_step build cmake --build "$build" --parallel "$(nproc)" ${targets[@]+--target "${targets[@]}"}
if [[ " ${failures[*]} " == *" build "* || " ${failures[*]} " == *" configure "* ]]; then
  tail -n 40 "$out"/configure.log "$out"/build.log
  echo "gpu_check: the build failed; nothing else was run"
  exit 1
fi
"$build/bin/lstm_gpu_info" >"$out/environment.txt" 2>&1 || {
  cat "$out/environment.txt"
  echo "gpu_check: no usable GPU here; nothing else was run"
  exit 1
}
nvidia-smi >>"$out/environment.txt" 2>&1 || true
cat "$out/environment.txt" | head -n 2
limit=1  # from here on every program run by run_step has step_timeout seconds

# ---- 2. tests: all of them; on a GPU machine a GPU test may skip only where it needs more GPUs
# than this machine has (its output says "visible here: not run")
skipped_for_gpus() {  # skipped_for_gpus NAME: NAME's output in ctest's log says why it skipped
  awk -v start="\"$1\" start time:" 'index($0, start) == 1 { inside = 1 }
    inside && /visible here: not run/ { found = 1 } /^<end of output>/ { inside = 0 }
    END { exit !found }' "$build/Testing/Temporary/LastTest.log"
}
gpu_tests_ran() {
  # GPU tests first. Then the rest, whatever the GPU tests gave (a Python test whose packages
  # this machine lacks may report skipped, with its reason).
  local listing="$out/tests_gpu.txt" name bad=0
  ctest --test-dir "$build" -L gpu --output-on-failure --parallel 4 --timeout 1500 \
    "${share_flags[@]}" | tee "$listing"
  ((PIPESTATUS[0] == 0)) || { echo "GPU tests FAILED (listed above)"; bad=1; }
  while read -r name; do  # ctest's closing list: "  N - NAME (Skipped)"
    skipped_for_gpus "$name" && continue
    echo "GPU test skipped on a GPU machine: $name"
    bad=1
  done < <(sed -nE 's/^[[:space:]]*[0-9]+ - ([^ ]+) \(Skipped\)$/\1/p' "$listing")
  if ctest --test-dir "$build" -N -L gpu "${share_flags[@]}" | grep -q "Total Tests: 0"; then
    echo "no GPU test to run on a GPU machine"
    bad=1
  fi
  ctest --test-dir "$build" -LE gpu --output-on-failure --parallel 4 --timeout 1500 \
    "${share_flags[@]}" || bad=1
  return $bad
}
wants tests && run_step tests gpu_tests_ran

# ---- 3. every stage: canonical config and three odd configs, checks on
stages=()
declare -A variants=()  # a stage's precisions beyond its default (bf16), from the registry
# Every stage of the registry (BUILD_DIR/stages.txt, written by CMake: not whatever build/bin
# holds from earlier builds); the test-only selftest stages run in the GPU tests instead.
if wants stages || wants sanitizers; then
  while read -r exe more; do
    [ -n "$exe" ] || continue
    selected "$exe" || continue
    if [ ! -x "$build/bin/$exe" ]; then
      summary+=("FAILED  $exe: registered but not built")
      failures+=("$exe")
      echo "${summary[-1]}"
      continue
    fi
    stages+=("$exe")
    variants[$exe]=$more
  done <"$build/stages.txt"
  if ((${#stages[@]} == 0)); then
    summary+=("FAILED  stages: no stage of $build/stages.txt matches --stages '$stage_regex'")
    failures+=(stages)
    echo "${summary[-1]}"
  fi
fi
odd_configs=(
  "--hidden 200 --input-size 77 --batch 3 --seq 17 --layers 3"
  "--hidden 1000 --batch 1 --seq 30 --layers 2"
  "--hidden 33 --input-size 300 --batch 130 --seq 1 --layers 1"
)
if wants stages; then
  for stage in "${stages[@]}"; do
    for precision in default ${variants[$stage]}; do
      name=$stage precision_flags=()
      [ "$precision" = default ] || { name=$stage.$precision; precision_flags=(--precision "$precision"); }
      run_step "$name.canonical" "$build/bin/$stage" "${precision_flags[@]}" \
        --json "$out/canonical.jsonl"
      for i in "${!odd_configs[@]}"; do
        # shellcheck disable=SC2086  # the config is a list of flags
        run_step "$name.odd$i" "$build/bin/$stage" "${precision_flags[@]}" ${odd_configs[$i]} \
          --json "$out/odd.jsonl"
      done
    done
  done
  # Checked runs that the reference did not cover whole (over the CPU reference's budget).
  partly=$(grep -l "NOT checked" "$out"/*.canonical.log "$out"/*.odd[0-9].log 2>/dev/null |
    xargs -r -n1 basename | sed 's/\.log$//' | tr '\n' ' ')
  [ -z "$partly" ] || summary+=("note    runs whose check did not cover everything (their logs say what): $partly")
fi

# ---- 4. the baselines on the same configs: cuDNN (every algorithm it accepts) and PyTorch
python=${PYTORCH_PYTHON:-python3}
if wants baselines; then
  if [ -x "$build/bin/lstm_cudnn" ]; then
    run_step cudnn.canonical "$build/bin/lstm_cudnn" --algo all --json "$out/canonical.jsonl"
    for i in "${!odd_configs[@]}"; do
      # shellcheck disable=SC2086
      run_step "cudnn.odd$i" "$build/bin/lstm_cudnn" --algo all ${odd_configs[$i]} --json "$out/odd.jsonl"
    done
    # cuDNN's training pass, every algorithm, every gradient checked
    run_step cudnn_training.canonical "$build/bin/lstm_cudnn" --training --algo all --json "$out/canonical.jsonl"
    for i in "${!odd_configs[@]}"; do
      # shellcheck disable=SC2086
      run_step "cudnn_training.odd$i" "$build/bin/lstm_cudnn" --training --algo all ${odd_configs[$i]} --json "$out/odd.jsonl"
    done
  else
    summary+=("FAILED  cudnn: the cuDNN baseline was not built (cuDNN not found)")
    failures+=(cudnn)
  fi
  run_step pytorch.fixture "$python" baselines/pytorch/lstm_pytorch.py --load tests/data/pytorch_fixture
  pytorch_checked() {  # PyTorch at one config, checked against the reference's --dump
    local data
    data=$(mktemp -d)
    "$build/bin/lstm_reference" "$@" --save-inputs "$data" --dump "$data" &&
      "$python" baselines/pytorch/lstm_pytorch.py --load "$data" --check-dir "$data" \
        --json "$out/$json_file"
    local status=$?
    rm -rf "$data"
    return $status
  }
  json_file=canonical.jsonl run_step pytorch.canonical pytorch_checked
  for i in "${!odd_configs[@]}"; do
    # shellcheck disable=SC2086
    json_file=odd.jsonl run_step "pytorch.odd$i" pytorch_checked ${odd_configs[$i]}
  done
  # PyTorch's training pass (torch.autograd.grad): the training fixture (inputs, dy, dhy, dcy, and
  # y, hy, cy and every gradient from nn.LSTM in float64), then the same configs, each checked on
  # every gradient where the training reference fits the CPU reference's budget (lstm_reference
  # --fits-budget says), else run unchecked, as the stages' own checks do.
  run_step pytorch_training.fixture "$python" baselines/pytorch/lstm_pytorch.py --training \
    --load tests/data/pytorch_training_fixture
  pytorch_training_checked() {
    local data fits status
    fits=$("$build/bin/lstm_reference" "$@" --training --fits-budget) || return 1
    echo "$fits"
    data=$(mktemp -d)
    if [[ $fits == yes:* ]]; then
      "$build/bin/lstm_reference" "$@" --training --save-inputs "$data/problem" --dump "$data/reference" &&
        "$python" baselines/pytorch/lstm_pytorch.py --training --load "$data/problem" \
          --check-dir "$data/reference" --json "$out/$json_file"
    else
      "$build/bin/lstm_reference" "$@" --training --save-inputs "$data/problem" --no-reference &&
        "$python" baselines/pytorch/lstm_pytorch.py --training --load "$data/problem" --no-check \
          --json "$out/$json_file"
    fi
    status=$?
    rm -rf "$data"
    return $status
  }
  json_file=canonical.jsonl run_step pytorch_training.canonical pytorch_training_checked
  for i in "${!odd_configs[@]}"; do
    # shellcheck disable=SC2086
    json_file=odd.jsonl run_step "pytorch_training.odd$i" pytorch_training_checked ${odd_configs[$i]}
  done
fi

# ---- 5. compute-sanitizer on a small config (memory errors, shared-memory races, barriers)
if wants sanitizers; then
  small="--hidden 40 --input-size 24 --batch 3 --seq 4 --layers 2 --iters 1 --warmup 0"
  # Paths the small config does not take, by stage name: the backward over two and four
  # clusters of 16 (training 33 on), with 3 and 7 rows (a short last quad from training 34);
  # two mma column tiles a cluster, 13 rows in one cluster and 11 over four (training 35 on).
  spans=("--hidden 100 --input-size 30 --batch 3 --seq 4 --layers 1 --plan 0,0,0,0,0,0,0,16,2"
         "--hidden 200 --input-size 40 --batch 7 --seq 3 --layers 1 --plan 0,0,0,0,0,0,0,16,4")
  rows16=("--hidden 64 --input-size 40 --batch 13 --seq 3 --layers 2 --plan 0,0,0,0,1,13,0,16"
          "--hidden 200 --input-size 40 --batch 11 --seq 3 --layers 1 --plan 0,0,0,0,1,11,0,16,4")
  for stage in "${stages[@]}"; do
    # NCCL's ncclCommInitAll asks for attributes of kernels it has no image of here: an API error
    # inside NCCL that memcheck would report as the multigpu stage's.
    api=()
    [[ $stage == *multigpu* ]] && api=(--report-api-errors no)
    configs=("$small")
    # The kernels a stage has, from its plan.h (as tests/CMakeLists.txt finds them): a batch
    # group's backward over several clusters (stage 33 on), up to 16 rows a cluster (35 on).
    folder=${stage#lstm_}
    plan_h=stages/${folder%%_*}/${folder#*_}/plan.h
    grep -qs kMaxSpannedClusters "$plan_h" &&
      configs+=("${spans[0]} --iters 1 --warmup 0" "${spans[1]} --iters 1 --warmup 0")
    grep -qs kMaxClusterRows "$plan_h" &&
      configs+=("${rows16[0]} --iters 1 --warmup 0" "${rows16[1]} --iters 1 --warmup 0")
    for i in "${!configs[@]}"; do
      suffix=${i/#0/}  # the small config's steps keep their names; the others .1, .2
      for tool in memcheck racecheck synccheck; do
        # shellcheck disable=SC2086
        run_step "$stage.$tool${suffix:+.$suffix}" compute-sanitizer --tool "$tool" "${api[@]}" \
          --error-exitcode 99 "$build/bin/$stage" ${configs[$i]}
      done
    done
  done
fi

# ---- 6. the benchmarks (skip with LSTM_SKIP_BENCH=1)
if wants bench; then
  limit=0  # the whole bench takes longer than a step's limit; its parts end by themselves
  # shellcheck disable=SC2086  # LSTM_BENCH_FLAGS is a list of flags
  run_step "bench${bench_part:+.$bench_part}" env BUILD_DIR="$build" PYTORCH_PYTHON="$python" \
    scripts/bench.sh ${bench_part:+--only "$bench_part"} "$out" -- ${LSTM_BENCH_FLAGS:-}
fi

# ---- summary: one line per step, then the timings of the canonical runs
{
  echo
  echo "gpu_check summary ($(date -u +%Y-%m-%dT%H:%M:%SZ), $(head -n 1 "$out/environment.txt"))"
  [ "$steps" == "$all_steps" ] && [ -z "$stage_regex$share" ] ||
    echo "  a partial check: steps '$steps'${stage_regex:+, stages matching '$stage_regex'}${share:+, test share $share}"
  printf '  %s\n' "${summary[@]}"
  echo "canonical config (H=512 B=64 T=100 L=4):"
  grep -h "^time " "$out"/*.canonical.log 2>/dev/null | sed 's/^/  /'
} | tee "$out/summary.txt"
if ((${#failures[@]})); then
  echo "gpu_check: ${#failures[@]} step(s) FAILED: ${failures[*]}"
  exit 1
fi
echo "gpu_check: everything passed"
