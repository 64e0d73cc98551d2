# Sourced by scripts/run.sh and scripts/test.sh (and the CUDA-architecture part by
# scripts/gpu_check.sh): what they share about the command line and the build. Each function
# prints with the caller's tag ("run", "test") first.

# parse_cuda_arch TAG ARGS...: reads --cuda-arch N / --cuda-arch=N / -h / --help from ARGS (and
# CUDA_ARCH from the environment; the option wins) into the global cuda_arch, normalised ("80,90"
# -> "80;90") and checked. Needs the caller's usage and usage_error functions.
parse_cuda_arch() {
  local tag=$1
  shift
  cuda_arch=${CUDA_ARCH:-}
  while (($#)); do
    case $1 in
      --cuda-arch) (($# >= 2)) || usage_error "--cuda-arch needs a value"; cuda_arch=$2; shift 2 ;;
      --cuda-arch=*) cuda_arch=${1#*=}; shift ;;
      -h | --help) usage; exit 0 ;;
      *) usage_error "unknown argument: $1" ;;
    esac
  done
  check_cuda_arch
  : "$tag"
}

# check_cuda_arch: normalises the global cuda_arch ("80,90" -> "80;90") and refuses (usage_error)
# anything that is not an architecture list CMake understands.
check_cuda_arch() {
  cuda_arch=${cuda_arch//,/;}
  local pattern='^(native|all|all-major|[0-9]+(-real|-virtual)?(;[0-9]+(-real|-virtual)?)*)$'
  [[ -z $cuda_arch || $cuda_arch =~ $pattern ]] ||
    usage_error "--cuda-arch (or CUDA_ARCH) \"$cuda_arch\" is not an architecture: give e.g. 80, 89, 90, \"80;90\" or native"
}

# configure_and_build TAG BUILD: configures BUILD (Release; the CUDA architecture cuda_arch, or
# the one BUILD was configured with, or 90) and builds it, showing the build tool's [n/N] lines.
# Returns 1 (having said why) if either step fails.
configure_and_build() {
  local tag=$1 build=$2
  local generator=()
  command -v ninja >/dev/null 2>&1 && [ ! -f "$build/Makefile" ] && generator=(-G Ninja)
  local configured
  configured=$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
  if [ -z "$cuda_arch" ]; then
    cuda_arch=${configured:-90}
  elif [ -n "$configured" ] && [ "$configured" != "$cuda_arch" ]; then
    echo "$tag: $build was configured for CUDA architecture $configured; reconfiguring for $cuda_arch (everything CUDA is rebuilt)"
  fi
  echo "$tag: configuring $build (Release, CUDA architecture $cuda_arch; the first time takes half a minute)"
  mkdir -p "$build"
  if ! cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES="$cuda_arch" >"$build/configure.log" 2>&1; then
    cat "$build/configure.log"
    echo "$tag: configuring failed (above; also in $build/configure.log)"
    return 1
  fi
  if grep -q "CMake Warning\|CMake Deprecation Warning" "$build/configure.log"; then
    cat "$build/configure.log"
  fi
  echo "$tag: building in $build with $(nproc) jobs (a fresh build takes about 10 minutes on 2 cores)"
  if ! cmake --build "$build" --parallel "$(nproc)"; then
    echo "$tag: the build failed (above)"
    return 1
  fi
}
