#!/usr/bin/env bash
# Installs everything the build, the tests, the docs and the plots need; safe to run again (it
# installs only what is missing). Debian/Ubuntu packages through apt-get, Python packages into
# .venv from the pinned requirements.txt. The CUDA toolkit (nvcc, cuBLAS) must already be there.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'setup: %s\n' "$*"; }

# ---- CUDA toolkit: not installable from the distribution in a usable version; check for it.
if ! command -v nvcc >/dev/null 2>&1; then
  for dir in /usr/local/cuda/bin /usr/local/cuda-*/bin; do
    if [ -x "$dir/nvcc" ]; then export PATH="$dir:$PATH"; break; fi
  done
fi
if ! command -v nvcc >/dev/null 2>&1; then
  say "nvcc not found: install the CUDA Toolkit 12 or newer (https://developer.nvidia.com/cuda-downloads)"
  say "and put its bin/ folder on PATH. The build needs nvcc and cuBLAS even where no GPU is present."
  exit 1
fi

# ---- Distribution packages (header-only libraries, test frameworks, docs, Python venv).
packages=(cmake ninja-build g++ make libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev
          nlohmann-json3-dev doxygen git)
# A python3 with a working venv module (the distribution's, pyenv's, conda's) is enough.
python3 -m venv --help >/dev/null 2>&1 || packages+=(python3 python3-venv)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
if ((${#missing[@]})); then
  say "installing: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
else
  say "distribution packages: all present"
fi

# ---- Python virtual environment from the pinned requirements (re-installed when they change).
if [ ! -x .venv/bin/python ]; then
  say "creating .venv"
  python3 -m venv .venv
fi
stamp=.venv/.requirements.sha256
wanted=$(sha256sum requirements.txt | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  say "installing Python packages from requirements.txt"
  .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt
  echo "$wanted" >"$stamp"
else
  say "Python packages: up to date"
fi
say "done"
