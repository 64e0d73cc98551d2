#!/usr/bin/env bash
# tests/same_outputs.sh on the CPU, with stand-in stages (scripts that dump files): it passes only
# where both dump the same files byte for byte, fails otherwise, and skips where there is no GPU.
set -uo pipefail
script=$(cd "$(dirname "$0")" && pwd)/same_outputs.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

# stand_in NAME EXIT FILE=TEXT...: a stage that writes each FILE (TEXT, then the flags before
# --dump) into the folder after --dump, then exits EXIT
stand_in() {
  local name=$1 code=$2
  shift 2
  {  # single quotes: the stand-in's own code
    echo '#!/usr/bin/env bash'
    echo 'all="$*"; flags=${all%%--dump*}'
    echo 'while (($#)); do [ "$1" = --dump ] && dir=$2; shift; done; mkdir -p "$dir"'
    for spec in "$@"; do echo "echo \"${spec#*=} \$flags\" >\"\$dir/${spec%%=*}\""; done
    echo "exit $code"
  } >"$tmp/$name"
  chmod +x "$tmp/$name"
}
expect() {  # CODE REGEX STAGE_A STAGE_B [GPU_INFO]: same_outputs.sh's exit code and output
  local code=$1 regex=$2 out status
  out=$("$script" "${5:-true}" "$tmp/$3" "$tmp/$4" --hidden 37 2>&1)
  status=$?
  if [ "$status" != "$code" ] || ! grep -Eq "$regex" <<<"$out"; then
    echo "FAILED: $3 against $4: exit $status (expected $code), output:"
    echo "$out"
    failures=$((failures + 1))
  else
    echo "ok: $3 against $4: exit $status, '$regex'"
  fi
}
stand_in one 0 y.npy=1 hy.npy=2 cy.npy=3
stand_in other_y 0 y.npy=9 hy.npy=2 cy.npy=3
stand_in extra 0 y.npy=1 hy.npy=2 cy.npy=3 dx.npy=4
stand_in failing 1 y.npy=1 hy.npy=2 cy.npy=3
stand_in no_y 0 hy.npy=2 cy.npy=3

expect 0 "the same, byte for byte: cy.npy hy.npy y.npy" one one
expect 1 "not bit for bit the same: y.npy" one other_y
expect 1 "dumped different files" one extra
expect 1 "failing exited non-zero" one failing
expect 1 "no y.npy dumped" no_y no_y
expect 77 "SKIPPED" one one false
"$script" true "$tmp/one" >/dev/null 2>&1  # GPU_INFO and one stage: a usage error
status=$?
if [ "$status" = 2 ]; then
  echo "ok: one stage: exit 2"
else
  echo "FAILED: one stage: exit $status (expected 2)"
  failures=$((failures + 1))
fi

echo "same_outputs tests: $failures failed"
((failures == 0))
