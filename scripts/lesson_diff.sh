#!/usr/bin/env bash
# The lesson between two stages: the diff of their code (READMEs left out), and its size.
#
# usage: scripts/lesson_diff.sh A B [--stat]
#   A, B     stages, as a folder (stages/forward/06_cuda_graph), a name (forward/06_cuda_graph),
#            or a number within the forward series (06); e.g. scripts/lesson_diff.sh 05 06
#   --stat   print only the size: lines removed and added, per file and in all
# Exit codes: 0 (whether or not the stages differ), 2 a usage error.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '4,9p' "$0" | sed 's/^# \{0,1\}//'; }
stat_only=0
names=()
for arg in "$@"; do
  case $arg in
    --stat) stat_only=1 ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "lesson_diff: unknown option $arg" >&2; usage >&2; exit 2 ;;
    *) names+=("$arg") ;;
  esac
done
if ((${#names[@]} != 2)); then
  echo "lesson_diff: give two stages" >&2
  usage >&2
  exit 2
fi

# resolve NAME: a folder of stages/ holding the stage
resolve() {
  local name=${1%/}
  name=${name#stages/}
  if [[ $name =~ ^[0-9][0-9]$ ]]; then
    local matches=(stages/forward/"$name"_*)
    [ -d "${matches[0]}" ] && { echo "${matches[0]}"; return; }
  elif [ -d "stages/$name" ]; then
    echo "stages/$name"
    return
  fi
  echo "lesson_diff: no stage \"$1\" (try e.g. 06, forward/06_cuda_graph)" >&2
  exit 2
}
a=$(resolve "${names[0]}")
b=$(resolve "${names[1]}")

if ((stat_only)); then
  { diff -ruN -x README.md "$a" "$b" || true; } | awk -v a="$a" -v b="$b" '
    /^\+\+\+ / { file = $2 }
    /^-/ && !/^--- / { removed[file]++; all_removed++ }
    /^\+/ && !/^\+\+\+ / { added[file]++; all_added++ }
    END {
      for (f in added) printf "%6d -%6d +  %s\n", removed[f], added[f], f
      for (f in removed) if (!(f in added)) printf "%6d -%6d +  %s\n", removed[f], 0, f
      printf "%6d -%6d +  %s -> %s (code only, READMEs left out)\n", all_removed, all_added, a, b
    }'
else
  diff -ruN -x README.md "$a" "$b" || true
fi
