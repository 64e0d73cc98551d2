#!/usr/bin/env bash
# For a GPU machine that cannot reach a package registry: downloads the header-only packages the
# build needs (CLI11, nlohmann-json) here and unpacks them into .deps/root, which
# scripts/gpu_check.sh adds to CMAKE_PREFIX_PATH. Copy .deps along with the tree.
# The packages are downloaded and unpacked into a temporary folder first: .deps is replaced only
# when all of it succeeded, and left as it was otherwise.
#
# usage: scripts/pack_deps.sh   (no arguments)
# Exit status: 0 done, 1 a download or an unpacking failed (.deps left as it was), 2 a usage error.
set -euo pipefail
cd "$(dirname "$0")/.."
if (($#)); then
  case $1 in
    -h | --help) sed -n '2,/^# Exit status/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "pack_deps: takes no arguments (got $*)" >&2; exit 2 ;;
  esac
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/deps/debs"
(cd "$tmp/deps/debs" && apt-get download libcli11-dev nlohmann-json3-dev) ||
  { echo "pack_deps: apt-get download failed; .deps left as it was" >&2; exit 1; }
for deb in "$tmp"/deps/debs/*.deb; do
  dpkg -x "$deb" "$tmp/deps/root" ||
    { echo "pack_deps: cannot unpack $(basename "$deb"); .deps left as it was" >&2; exit 1; }
done
rm -rf .deps && mv "$tmp/deps" .deps
echo "pack_deps: header-only packages unpacked into .deps/root"
