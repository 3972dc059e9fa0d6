#!/usr/bin/env bash
# wheel.sh [OUT_DIR] - builds the manylinux_2_28 wheel of this tree into
# OUT_DIR (default build/wheelhouse) and prints its path.
#   - C compiler: zig cc targeting glibc 2.28 (no container needed);
#   - SQLite 3.50.4 compiled into libdcptopk with its symbols hidden;
#   - reproducible: SOURCE_DATE_EPOCH is the commit's time, the build folder
#     is a fresh temporary one and never written into the binaries;
#   - auditwheel repair retags it manylinux_2_28 (it grafts nothing: the
#     library needs only glibc; CUDA and NVRTC are loaded at run time).
# The tools come from scripts/wheel_tools.sh (PyPI, once). docs/PACKAGING.md.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$src/build/wheelhouse}
tools=$("$src/scripts/wheel_tools.sh")
py="$tools/venv/bin/python"

if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
    SOURCE_DATE_EPOCH=$(git -C "$src" log -1 --format=%ct 2>/dev/null || echo 315532800)
fi
export SOURCE_DATE_EPOCH
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
out=$(cd "$out" && pwd)

# A copy of the tree as git holds it (tracked and unignored files): no stray
# build output or __pycache__ of the work tree reaches the wheel.
mkdir "$work/src"
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
    (cd "$src" && git ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do
            [ ! -e "$f" ] || cp -P --parents "$f" "$work/src/"
        done)
else
    cp -a "$src/." "$work/src"
fi

export CC="$tools/zigcc"
export ZIG_GLOBAL_CACHE_DIR="$tools/zig-cache"
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2}
unset CFLAGS LDFLAGS CPPFLAGS
"$py" -m build --wheel --no-isolation --outdir "$work/raw" "$work/src" \
    -C build-dir="$work/build" \
    -C cmake.define.DCPTOPK_WHEEL=ON \
    -C cmake.define.DCPTOPK_BUNDLED_SQLITE="$tools/sqlite-3.50.4" \
    -C cmake.define.CMAKE_C_COMPILER_LAUNCHER= >"$work/build.log" 2>&1 ||
    { tail -40 "$work/build.log" >&2; echo "wheel.sh: build failed" >&2; exit 1; }
raw=$(ls "$work"/raw/dcptopk-*.whl)
PATH="$tools/venv/bin:$PATH" "$tools/venv/bin/auditwheel" repair --plat manylinux_2_28_x86_64 -w "$work/fixed" "$raw" \
    >"$work/repair.log" 2>&1 ||
    { cat "$work/repair.log" >&2; echo "wheel.sh: auditwheel repair failed" >&2; exit 1; }
fixed=$(ls "$work"/fixed/dcptopk-*.whl)
rm -f "$out/$(basename "$fixed")"
cp "$fixed" "$out/"
echo "$out/$(basename "$fixed")"
