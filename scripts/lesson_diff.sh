#!/usr/bin/env bash
# The lesson of a stage: the diff of its code against the stage it was copied from (its parent,
# named in the stage's file `parent`), and the size of that diff. READMEs and `parent` are left out.
#
# usage: scripts/lesson_diff.sh STAGE [--stat]   STAGE against its parent: the lesson
#        scripts/lesson_diff.sh A B [--stat]     any two stages, B against A, file by file
#        scripts/lesson_diff.sh --table [--write | --check]
#        scripts/lesson_diff.sh --folder STAGE   print the stage's folder (for other scripts)
#   STAGE, A, B  a stage, as a folder (stages/forward/06_cuda_graph), a name
#                (forward/06_cuda_graph), a series and a number (forward/06, training/06), a
#                number in the forward series (06, or f06) or t and a number in the training
#                series (t06);
#                e.g. scripts/lesson_diff.sh 06, scripts/lesson_diff.sh t06 --stat
#   --stat       print only the size: lines removed and added, per file and in all
#   --table      every stage of every series as a markdown table: its parent (and the files it
#                takes from other stages), lines removed, added, and changed (the two together)
#   --write      with --table: write the table into docs/design.md, between its markers
#   --check      with --table: exit 1 if docs/design.md's table is not the one --table prints
# With one stage, a file named in `parent` as taken from another stage is diffed against the file
# it came from there, every other file against the same name in the parent; a file the parent
# lacks is shown as added, a file of the parent the stage lacks as removed.
# Exit codes: 0 (whether or not the stages differ), 1 --check found the table stale, 2 a usage
# error (or an unknown stage, or a malformed parent file).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { awk 'NR >= 5 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; }
usage_error() {
  echo "lesson_diff: $*" >&2
  usage >&2
  exit 2
}
fail() {
  echo "lesson_diff: $*" >&2
  exit 2
}
stat_only=0 table=0 write=0 check=0 folder=0
names=()
for arg in "$@"; do
  case $arg in
    --stat) stat_only=1 ;;
    --table) table=1 ;;
    --write) write=1 ;;
    --check) check=1 ;;
    --folder) folder=1 ;;
    -h | --help) usage; exit 0 ;;
    -*) usage_error "unknown option $arg" ;;
    *) names+=("$arg") ;;
  esac
done
if ((folder)); then
  ((${#names[@]} == 1 && !stat_only && !table && !write && !check)) ||
    usage_error "--folder takes one stage and no other option"
elif ((table)); then
  ((${#names[@]} == 0 && !stat_only && !(write && check))) ||
    usage_error "--table takes no stage and no --stat, and at most one of --write, --check"
elif ((write || check)); then
  usage_error "--write and --check go with --table"
elif ((${#names[@]} != 1 && ${#names[@]} != 2)); then
  usage_error "give one stage (against its parent) or two"
fi

# resolve NAME: the folder under stages/ holding the stage
resolve() {
  local name=${1%/} series number
  name=${name#stages/}
  case $name in
    [0-9][0-9] | f[0-9][0-9]) series=forward number=${name: -2} ;;
    t[0-9][0-9]) series=training number=${name: -2} ;;
    *)
      if [[ $name =~ ^([a-z][a-z0-9]*)/([0-9][0-9])$ ]]; then
        series=${BASH_REMATCH[1]} number=${BASH_REMATCH[2]}
      elif [[ $name =~ ^[a-z][a-z0-9]*/[0-9][0-9]_[a-z0-9_]+$ && -d stages/$name ]]; then
        echo "stages/$name"
        return
      fi
      ;;
  esac
  if [ -n "${number:-}" ]; then
    local matches=(stages/"$series"/"$number"_*)
    if [ -d "${matches[0]}" ]; then
      echo "${matches[0]}"
      return
    fi
  fi
  fail "no stage \"$1\" (try e.g. 06, t06, forward/06_cuda_graph, training/06)"
}

# read_parent DIR: the stage's parent file, into parent (a stage folder, or "none") and from
# (file of the stage -> the file it was taken from, for the files of the per-file lines).
declare -A from
read_parent() {
  local dir=$1 file=$1/parent line n=0 words count=0 source
  parent="" from=()
  [ -f "$file" ] || fail "$dir has no file 'parent' (the stage it was copied from, or none)"
  while IFS= read -r line || [ -n "$line" ]; do
    n=$((n + 1))
    [[ $line =~ ^[[:space:]]*(#|$) ]] && continue
    read -ra words <<<"$line"
    count=$((count + 1))
    if ((count == 1)); then
      ((${#words[@]} == 1)) || fail "$file:$n: expected the parent stage (series/NN_slug) or none"
      if [ "${words[0]}" = none ]; then
        parent=none
      else
        [[ ${words[0]} =~ ^[a-z][a-z0-9]*/[0-9][0-9]_[a-z0-9_]+$ && -d stages/${words[0]} ]] ||
          fail "$file:$n: no stage folder stages/${words[0]}"
        [ "stages/${words[0]}" != "$dir" ] || fail "$file:$n: a stage is not its own parent"
        parent=stages/${words[0]}
      fi
      continue
    fi
    ((${#words[@]} == 2)) || fail "$file:$n: expected <file> <series>/<NN_slug>[/<file there>]"
    [[ ${words[0]} != */* && -f $dir/${words[0]} ]] || fail "$file:$n: no file ${words[0]} in $dir"
    [ -z "${from[${words[0]}]:-}" ] || fail "$file:$n: ${words[0]} is named twice"
    [[ ${words[1]} =~ ^([a-z][a-z0-9]*/[0-9][0-9]_[a-z0-9_]+)(/(.+))?$ ]] ||
      fail "$file:$n: expected <file> <series>/<NN_slug>[/<file there>]"
    source=stages/${BASH_REMATCH[1]}/${BASH_REMATCH[3]:-${words[0]}}
    [ -f "$source" ] || fail "$file:$n: no file $source"
    from[${words[0]}]=$source
  done <"$file"
  [ -n "$parent" ] || fail "$file names no parent (write none for the first stage of a series)"
}

# code_files DIR: the stage's files, relative to DIR, sorted (README.md and parent left out)
code_files() {
  (cd "$1" && find . -type f ! -name README.md ! -name parent | sed 's|^\./||' | LC_ALL=C sort)
}

# The pairs to diff, "old new" per line (/dev/null where a side has no file), into pairs.
pairs=()
pairs_of_two() {  # A B: file by file, by name
  local a=$1 b=$2 f old new
  while IFS= read -r f; do
    old=/dev/null new=/dev/null
    [ -f "$a/$f" ] && old=$a/$f
    [ -f "$b/$f" ] && new=$b/$f
    pairs+=("$old $new")
  done < <({ code_files "$a"; code_files "$b"; } | LC_ALL=C sort -u)
}
pairs_of_lesson() {  # STAGE (after read_parent): each file against where it came from
  local stage=$1 f
  while IFS= read -r f; do
    if [ -n "${from[$f]:-}" ]; then
      pairs+=("${from[$f]} $stage/$f")
    elif [ "$parent" != none ] && [ -f "$parent/$f" ]; then
      pairs+=("$parent/$f $stage/$f")
    else
      pairs+=("/dev/null $stage/$f")
    fi
  done < <(code_files "$stage")
  [ "$parent" = none ] && return
  while IFS= read -r f; do  # the parent's files that the stage neither has nor took elsewhere
    [ -f "$stage/$f" ] && continue
    local taken=0 source
    for source in "${from[@]}"; do [ "$source" = "$parent/$f" ] && taken=1; done
    ((taken)) || pairs+=("$parent/$f /dev/null")
  done < <(code_files "$parent")
}

# count OLD NEW: "removed added" (a normal diff's "<" and ">" lines are exactly the lines)
count() {
  { diff "$1" "$2" || true; } | awk '/^</ { r++ } /^>/ { a++ } END { print r + 0, a + 0 }'
}

# stat FROM_LABEL TO_LABEL: per file and in all, from pairs
stat() {
  local pair old new removed added all_removed=0 all_added=0 note
  for pair in "${pairs[@]}"; do
    read -r old new <<<"$pair"
    read -r removed added < <(count "$old" "$new")
    all_removed=$((all_removed + removed)) all_added=$((all_added + added))
    if [ "$new" = /dev/null ]; then
      note="$old (removed)"
    elif [ "$old" = /dev/null ]; then
      note="$new (new)"
    elif [ "${old##*/}" = "${new##*/}" ] && [ "${old%/*}" = "$1" ]; then
      note=$new
    else
      note="$new (from $old)"
    fi
    printf '%6d -%6d +  %s\n' "$removed" "$added" "$note"
  done
  printf '%6d -%6d +  %s -> %s (code only, READMEs left out)\n' \
    "$all_removed" "$all_added" "$1" "$2"
}

show() {
  local pair old new
  for pair in "${pairs[@]}"; do
    read -r old new <<<"$pair"
    cmp -s "$old" "$new" && continue
    echo "diff -u $old $new"
    diff -u --label "$old" --label "$new" "$old" "$new" || true
  done
}

# table: every stage's lesson, a markdown table
table() {
  local stage name removed added r a pair old new cell source
  echo -n "| stage | parent (and files taken from other stages) "
  echo "| lines removed | lines added | changed |"
  echo "|---|---|--:|--:|--:|"
  for stage in stages/*/[0-9][0-9]_*/; do
    stage=${stage%/}
    name=${stage#stages/}
    read_parent "$stage"
    pairs=()
    pairs_of_lesson "$stage"
    removed=0 added=0
    for pair in "${pairs[@]}"; do
      read -r old new <<<"$pair"
      read -r r a < <(count "$old" "$new")
      removed=$((removed + r)) added=$((added + a))
    done
    cell=${parent#stages/}
    # the per-file parents, grouped by the stage they come from: "file (its name there)"
    for source in $(for f in "${!from[@]}"; do echo "${from[$f]%/*}"; done | LC_ALL=C sort -u); do
      local files=()
      for f in $(printf '%s\n' "${!from[@]}" | LC_ALL=C sort); do
        [ "${from[$f]%/*}" = "$source" ] || continue
        if [ "${from[$f]##*/}" = "$f" ]; then
          files+=("\`$f\`")
        else
          files+=("\`$f\` (\`${from[$f]##*/}\`)")
        fi
      done
      cell+="; from ${source#stages/}: $(printf '%s, ' "${files[@]}" | sed 's/, $//')"
    done
    echo "| $name | $cell | $removed | $added | $((removed + added)) |"
  done
}

if ((table)); then
  doc=docs/design.md begin='<!-- lesson-sizes:begin -->' end='<!-- lesson-sizes:end -->'
  text=$(table)
  if ((write || check)); then
    { grep -qxF "$begin" "$doc" && grep -qxF "$end" "$doc"; } ||
      fail "$doc lacks the lines $begin and $end"
    current=$(awk -v b="$begin" -v e="$end" \
      '$0 == e { inside = 0 } inside { print } $0 == b { inside = 1 }' "$doc")
    if ((check)); then
      if [ "$current" = "$text" ]; then
        echo "lesson_diff: $doc's lesson-size table is current"
        exit 0
      fi
      echo "lesson_diff: $doc's lesson-size table is not what the stages give; regenerate it:" \
        "scripts/lesson_diff.sh --table --write" >&2
      diff <(echo "$current") <(echo "$text") >&2 || true
      exit 1
    fi
    TABLE=$text awk -v b="$begin" -v e="$end" '
      $0 == e { inside = 0 }
      !inside { print }
      $0 == b { inside = 1; print ENVIRON["TABLE"] }' "$doc" >"$doc.tmp"
    mv "$doc.tmp" "$doc"
    echo "lesson_diff: wrote the lesson-size table into $doc"
  else
    echo "$text"
  fi
  exit 0
fi

if ((folder)); then
  resolve "${names[0]}"
  exit 0
fi
if ((${#names[@]} == 2)); then
  a=$(resolve "${names[0]}")
  b=$(resolve "${names[1]}")
  pairs_of_two "$a" "$b"
else
  b=$(resolve "${names[0]}")
  read_parent "$b"
  a=$parent
  pairs_of_lesson "$b"
fi
if ((stat_only)); then stat "$a" "$b"; else show; fi
