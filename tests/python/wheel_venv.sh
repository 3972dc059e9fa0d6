#!/bin/sh
# wheel_venv.sh SOURCE_DIR WORK_DIR [STRUCT_SIZES_EXE]
# Builds the wheel of SOURCE_DIR (pip wheel: CMake through scikit-build-core),
# installs it into a fresh virtual environment under WORK_DIR and runs the
# package's CPU tests there against the installed package (its bundled
# library and CLI; DCPTOPK_LIBRARY unset). The venv sees the system's site
# packages so that the torch tests run where torch is installed (they skip
# otherwise). Without build isolation when scikit-build-core is installed
# (no network needed), with it otherwise.
set -eu
src=$(cd "$1" && pwd)
work=$2
sizes=""
if [ -n "${3:-}" ]; then
    sizes="$(cd "$(dirname "$3")" && pwd)/$(basename "$3")"  # the script changes folder
fi
py=${PYTHON:-python3}
rm -rf "$work"
mkdir -p "$work"
iso=""
if "$py" -c "import scikit_build_core" 2>/dev/null; then
    iso="--no-build-isolation"
fi
"$py" -m pip wheel "$src" -w "$work/dist" --no-deps $iso -q
"$py" -m venv --system-site-packages "$work/venv"
"$work/venv/bin/python" -m pip install -q --no-deps --no-index "$work"/dist/dcptopk-*.whl
cd "$work"
unset DCPTOPK_LIBRARY DCPTOPK_CLI
export DCPTOPK_TEST_INSTALLED=1
"$work/venv/bin/python" -c "import dcptopk, sys; p = dcptopk.library()._name; print(p); sys.exit(0 if p.startswith('$work/venv') else 1)"
"$work/venv/bin/python" -m dcptopk --version
"$work/venv/bin/python" "$src/tests/python/test_binding.py" $sizes
rc=0
"$work/venv/bin/python" "$src/tests/python/test_torch_cpu.py" || rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
    exit "$rc"
fi
echo "wheel: installed and tested in $work/venv"
