#!/usr/bin/env bash
# deps.sh - installs what the build needs and is missing (Debian/Ubuntu, as
# root or through sudo): a C compiler, CMake >= 3.25, SQLite 3 and xxHash
# headers, and spin (the protocol model's checker). The CUDA toolkit (NVRTC,
# headers) must already be installed: it is not a Debian package of the right
# version.
set -euo pipefail

missing=()
command -v cc >/dev/null || missing+=(gcc)
command -v c++ >/dev/null || missing+=(g++) # the emulated kernel-helper tests (tests/emu)
command -v make >/dev/null || missing+=(make)
command -v cmake >/dev/null || missing+=(cmake)
[ -f /usr/include/sqlite3.h ] || missing+=(libsqlite3-dev)
[ -f /usr/include/xxhash.h ] || missing+=(libxxhash-dev)
command -v sqlite3 >/dev/null || missing+=(sqlite3)
command -v pkg-config >/dev/null || missing+=(pkg-config)
command -v python3 >/dev/null || missing+=(python3)
# venv for the packaging tests (Debian splits ensurepip off).
command -v python3 >/dev/null && ! python3 -c "import ensurepip" 2>/dev/null && missing+=(python3-venv)
command -v spin >/dev/null || missing+=(spin) # the protocol model (model.exchange)

if [ ${#missing[@]} -gt 0 ]; then
    echo "deps: installing ${missing[*]}"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

cuda_root="${CUDA_HOME:-/usr/local/cuda}"
if [ ! -f "$cuda_root/include/nvrtc.h" ]; then
    echo "deps: error: the CUDA toolkit (NVRTC) was not found under $cuda_root;" \
         "install CUDA 12.8+ or set CUDA_HOME" >&2
    exit 1
fi

# NVRTC 12 for tests/packaging/nvrtc.sh cu12 (the library loads either major
# at run time). Optional: without PyPI that test skips and says so.
nv12="${DCPTOPK_TEST_NVRTC12_ROOT:-/opt/dcptopk-ci/nvrtc-cu12}"
if [ ! -f "$nv12/nvidia/cuda_nvrtc/lib/libnvrtc.so.12" ]; then
    echo "deps: installing nvidia-cuda-nvrtc-cu12 into $nv12"
    python3 -m pip install -q --disable-pip-version-check --no-deps \
        --target "$nv12" "nvidia-cuda-nvrtc-cu12>=12.8" 2>&1 | grep -v "as the 'root' user" ||
        true
    [ -f "$nv12/nvidia/cuda_nvrtc/lib/libnvrtc.so.12" ] ||
        echo "deps: warning: nvidia-cuda-nvrtc-cu12 not installed: the NVRTC 12 test will skip" >&2
fi
