#!/usr/bin/env bash
# Installs everything the build, the tests, the docs and the plots need; safe to run again (it
# installs only what is missing). Debian/Ubuntu packages through apt-get, Python packages into
# .venv from the pinned requirements.txt. The CUDA toolkit (nvcc, cuBLAS) must already be there.
#
# It says what it checks and what it installs, one line each ("setup: ..."); apt-get and pip run
# quietly (their errors still show). Exit codes: 0 everything is there, 1 something is missing
# and could not be installed (the message says what), 2 a usage error.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'setup: %s\n' "$*"; }
if (($#)); then
  case $1 in
    -h | --help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: scripts/setup.sh (no arguments)" >&2; exit 2 ;;
  esac
fi

# ---- CUDA toolkit: not installable from the distribution in a usable version; check for it.
say "checking the CUDA toolkit (nvcc)"
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
cuda_version=$(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
say "CUDA toolkit: nvcc ${cuda_version:-(version unknown)} at $(command -v nvcc)"

# ---- Distribution packages (header-only libraries, test frameworks, docs, Python venv).
packages=(cmake ninja-build g++ make libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev
          nlohmann-json3-dev doxygen git)
# A python3 with a working venv module (the distribution's, pyenv's, conda's) is enough.
python3 -m venv --help >/dev/null 2>&1 || packages+=(python3 python3-venv)
say "checking ${#packages[@]} distribution packages (${packages[*]})"
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
if ((${#missing[@]})); then
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  say "updating the package lists (apt-get update; this takes a minute)"
  "${sudo_cmd[@]}" apt-get update -qq
  say "installing ${missing[*]} with apt-get (this takes a minute or two)"
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
  say "installed ${missing[*]}"
else
  say "distribution packages: all present"
fi

# ---- Python virtual environment from the pinned requirements (re-installed when they change).
if [ ! -x .venv/bin/python ]; then
  say "creating the Python virtual environment .venv"
  python3 -m venv .venv
fi
stamp=.venv/.requirements.sha256
wanted=$(sha256sum requirements.txt | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  names=$(sed -n 's/^\([A-Za-z0-9_.-]*\)==.*/\1/p' requirements.txt | tr '\n' ' ')
  say "installing Python packages into .venv: ${names% } (pinned in requirements.txt; this takes a minute)"
  .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt
  echo "$wanted" >"$stamp"
  say "Python packages: installed"
else
  say "Python packages in .venv: up to date with requirements.txt"
fi

# ---- NCCL, for the multigpu stage's all-reduce: the CUDA toolkit's (or the distribution's) where
# there is one, so nothing is installed and no time lost; else the pinned nvidia-nccl-cu13 wheel
# into .venv, where CMake finds it. Without NCCL only the multigpu stage is left out of the build.
nccl_wheel=nvidia-nccl-cu13==2.30.7
cuda_root=$(dirname "$(dirname "$(command -v nvcc)")")
if compgen -G "$cuda_root/lib*/libnccl.so*" >/dev/null || compgen -G "$cuda_root/targets/*/lib/libnccl.so*" >/dev/null ||
  { [ -e /usr/include/nccl.h ] && compgen -G "/usr/lib/*/libnccl.so*" >/dev/null; }; then
  say "NCCL: present (the CUDA toolkit's or the distribution's)"
elif .venv/bin/python -c "import nvidia.nccl" 2>/dev/null; then
  say "NCCL: the nvidia-nccl-cu13 wheel in .venv"
elif .venv/bin/python -m pip install -q --disable-pip-version-check "$nccl_wheel"; then
  say "NCCL: not in the CUDA toolkit; installed ${nccl_wheel} into .venv (for the multigpu stage)"
else
  say "NCCL: not found and ${nccl_wheel} could not be installed: the multigpu stage will not be built"
fi
say "done"
