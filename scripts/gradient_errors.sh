#!/usr/bin/env bash
# The measurements the reduced-precision bounds are to be set from (docs/design.md, "Kinds and
# precisions"): cuDNN's own error against the FP64 CPU reference, per output and gradient, in
# FP16 and BF16, beside the tensor-core training stages 10 and 12 on the same rounded data (one
# seed). One checked training run (--iters 1 --warmup 1 --seed 1) of each cuDNN algorithm
# (standard, persist_static, persist_dynamic) and of each stage, in each precision, at thirteen
# shapes: two odd ones (H=200 I=72 B=3 T=37 L=2; H=96 I=40 B=5 T=50 L=3), the eight shapes of
# the tensor-core training stages' GPU tests (tests/test_training_tensor_cores_gpu.cpp: H=1,
# T=1, B=1, B=130, I > H, ...; the bounds must hold there), H=512 B=1 L=1 and H=1024 B=4 L=1
# (T=100), and the canonical H=512 B=64 L=4 at T=50 instead of 100: at T=100 its training
# reference (3.2e11 FLOP) is over the CPU reference's budget (2.5e11), so no gradient would be
# checked; T=50 is 1.6e11 FLOP, a few seconds of CPU per run. 130 runs in all, two to three
# minutes on an H100 host (each run's CPU reference and start-up are most of it).
# Each run appends one JSON record (its check holds every tensor's relative-norm and max-abs
# error and bound) to FILE; scripts/gradient_errors.py FILE summarises them and proposes bounds.
# A run whose check fails against the current bounds appends no record of its own (the harness
# writes records of passed runs only) and exits 1: this script then writes the record from the
# run's printed check (the same fields; errors to 4 significant digits, "record_from" says so)
# and goes on. An algorithm or stage that refuses a shape is noted on stderr and skipped.
#
# usage: scripts/gradient_errors.sh [FILE]   (default results/local/gradient_errors.jsonl)
#   environment: BUILD_DIR (default build); STAGES (the stage executables to run, space-separated;
#   default the two above); CUDNN=0 (leave cuDNN out: to add a stage to a FILE that holds cuDNN's
#   records of the same shapes and seed, hence of the same rounded data)
# Exit status: 0 done (refusals, failed checks: on stderr), 1 no GPU or a run failed otherwise, 2 usage error.
set -euo pipefail
cd "$(dirname "$0")/.."
case ${1:-} in -h | --help) sed -n '/^# usage:/,/^# Exit status/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; -*) echo "gradient_errors: unknown option $1" >&2; exit 2 ;; esac
(($# <= 1)) || { echo "gradient_errors: one FILE only (got $*)" >&2; exit 2; }
out=${1:-results/local/gradient_errors.jsonl}
bin=${BUILD_DIR:-build}/bin
read -r -a stages <<<"${STAGES:-lstm_training_10_tensor_cores lstm_training_12_tensor_core_backward}"
with_cudnn=${CUDNN:-1}
[[ $with_cudnn == [01] ]] || { echo "gradient_errors: CUDNN must be 0 or 1 (got $with_cudnn)" >&2; exit 2; }
algos=(standard persist_static persist_dynamic)  # cuDNN's, each run beside the stages
((with_cudnn)) || algos=()
for exe in "${stages[@]}" $( ((with_cudnn)) && echo lstm_cudnn) lstm_gpu_info; do
  [ -x "$bin/$exe" ] || { echo "gradient_errors: $bin/$exe is not built" >&2; exit 1; }
done
"$bin/lstm_gpu_info" >/dev/null 2>&1 || { echo "gradient_errors: no usable CUDA GPU here; nothing was run" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
shapes=(
  "--hidden 200 --input-size 72 --batch 3 --seq 37 --layers 2"
  "--hidden 96 --input-size 40 --batch 5 --seq 50 --layers 3"
  "--hidden 64 --input-size 64 --batch 1 --seq 9 --layers 2"
  "--hidden 37 --input-size 19 --batch 3 --seq 7 --layers 3"
  "--hidden 96 --input-size 40 --batch 20 --seq 6 --layers 4"
  "--hidden 1 --input-size 3 --batch 2 --seq 4 --layers 2"
  "--hidden 50 --input-size 30 --batch 5 --seq 1 --layers 1"
  "--hidden 45 --input-size 100 --batch 6 --seq 5 --layers 2"
  "--hidden 520 --input-size 520 --batch 1 --seq 6 --layers 1"
  "--hidden 130 --input-size 50 --batch 130 --seq 4 --layers 2"
  "--hidden 512 --input-size 512 --batch 1 --seq 100 --layers 1"
  "--hidden 1024 --input-size 1024 --batch 4 --seq 100 --layers 1"
  "--hidden 512 --input-size 512 --batch 64 --seq 50 --layers 4"
)
# The record of each implementation in a run's stdout whose check failed and that appended no
# record: from the line describe_run() prints (name, sizes, kind, precision, data) and the
# "check TENSOR: ok|FAIL  rel-norm err X  max-abs err Y  (bound A, B)" lines (core/check.cpp).
failed_records() {
  awk '
    function str(v) { return "\"" v "\"" }
    function kv(key, value) { return str(key) ":" value }
    function num(v) { gsub(/[(),]/, "", v); return v ~ /^-?[0-9.]+(e[-+]?[0-9]+)?$/ ? v : "null" }
    function flush() {
      if (name != "" && !written && failed) {
        printf "{%s,%s,", kv("stage", str(name)), kv("kind", str(kind))
        printf "%s,", kv("precision", str(prec))
        printf "%s,%s,%s,", kv("hidden", s["H"]), kv("input_size", s["I"]), kv("batch", s["B"])
        printf "%s,%s,%s,", kv("seq_len", s["T"]), kv("layers", s["L"]), kv("data", str(data))
        printf "%s,", kv("record_from", str("the printed check of the run " \
          "(scripts/gradient_errors.sh): it failed, so the run appended no record; " \
          "errors to 4 significant digits"))
        printf "%s}\n", kv("check", "{" kv("performed", "true") "," kv("passed", "false") "," \
          kv("tensors", "{" tensors "}") "}")
      }
      name = ""; written = 0; failed = 0; tensors = ""
    }
    /^[^ ]+  H=[0-9]+ I=[0-9]+ B=[0-9]+ T=[0-9]+ L=[0-9]+  (forward|training) (fp32|fp16|bf16)  / {
      flush(); name = $1; kind = $7; prec = $8
      for (i = 2; i <= 6; i++) { split($i, pair, "="); s[pair[1]] = pair[2] }
      data = $0
      sub(/^[^ ]+  [^ ]+ [^ ]+ [^ ]+ [^ ]+ [^ ]+  [^ ]+ [^ ]+  /, "", data)
      sub(/  on .*$/, "", data)
      next
    }
    name != "" && /^check [A-Za-z0-9_]+: (ok|FAIL)/ {
      tensor = $2; sub(/:$/, "", tensor); ok = ($3 == "ok")
      if (!ok) failed = 1
      if ($4 == "not") {  # "not produced by the implementation"
        entry = kv("missing", "true") "," kv("passed", "false")
      } else {
        entry = kv("relative_norm", num($6)) "," kv("max_absolute", num($9)) "," \
          kv("nonfinite", $0 ~ /NaN\/Inf/ ? num($(NF - 1)) : 0) "," kv("missing", "false") "," \
          kv("passed", ok ? "true" : "false") "," \
          kv("bound", "{" kv("relative_norm", num($11)) "," kv("max_absolute", num($12)) "}")
      }
      tensors = tensors (tensors == "" ? "" : ",") kv(tensor, "{" entry "}")
      next
    }
    /^json: record appended/ { written = 1 }
    END { flush() }'
}
runs=0 records=0 from_output=0 refused=0 errors=0
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
# run LABEL COMMAND...: one checked run; its output shown, its outcome counted.
run() {
  local label=$1 status=0 lines before after
  shift
  runs=$((runs + 1))
  before=$( (wc -l <"$out") 2>/dev/null || echo 0)
  "$@" >"$logs/stdout" 2>"$logs/stderr" || status=$?
  cat "$logs/stdout"
  cat "$logs/stderr" >&2
  after=$( (wc -l <"$out") 2>/dev/null || echo 0)
  if grep -qE ': unsupported for |refuses it' "$logs/stdout" "$logs/stderr"; then
    refused=$((refused + 1))
    echo "gradient_errors: $label: refused (the reason is above); no record" >&2
    return 0
  fi
  records=$((records + after - before))
  lines=$(failed_records <"$logs/stdout")
  if [ -n "$lines" ]; then
    printf '%s\n' "$lines" >>"$out"
    from_output=$((from_output + $(printf '%s\n' "$lines" | wc -l)))
    echo "gradient_errors: $label: check FAILED (current bounds); record written from its output" >&2
  elif ((status != 0 || after == before)); then
    errors=$((errors + 1))
    echo "gradient_errors: $label: FAILED (exit status $status, no record; the message is above)" >&2
  fi
}
start=$SECONDS
for shape in "${shapes[@]}"; do
  # shellcheck disable=SC2206  # the shape is a list of flags
  args=($shape --seed 1 --iters 1 --warmup 1 --json "$out")
  for precision in fp16 bf16; do
    for algo in "${algos[@]}"; do
      run "cudnn $algo $precision $shape" \
        "$bin/lstm_cudnn" --training --algo "$algo" --precision "$precision" "${args[@]}"
    done
    for stage in "${stages[@]}"; do
      run "$stage $precision $shape" "$bin/$stage" --precision "$precision" "${args[@]}"
    done
  done
done
echo "gradient_errors: $runs runs in $((SECONDS - start)) s: $((records + from_output)) records" \
  "appended to $out ($from_output of them written from a failed check's output)," \
  "$refused refused, $errors failed otherwise"
echo "gradient_errors: summary and proposed bounds: scripts/gradient_errors.py $out"
((errors == 0)) || exit 1
