#!/usr/bin/env bash
# For a GPU machine that cannot reach a package registry: downloads the header-only packages the
# build needs (CLI11, nlohmann-json) here and unpacks them into .deps/root, which
# scripts/gpu_check.sh adds to CMAKE_PREFIX_PATH. Copy .deps along with the tree.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .deps && mkdir -p .deps/debs
(cd .deps/debs && apt-get download libcli11-dev nlohmann-json3-dev)
for deb in .deps/debs/*.deb; do dpkg -x "$deb" .deps/root; done
echo "pack_deps: header-only packages unpacked into .deps/root"
