#!/usr/bin/env bash
# device_wheel.sh WHEEL - on the GPU machine (python3 with torch's CUDA
# wheels, no network, no build tools): installs WHEEL (scripts/wheel.sh
# makes it: build/wheelhouse/dcptopk-*-manylinux_2_28_x86_64.whl) into a
# clean --target folder, with no build folder on any path, then runs from
# the installed package:
#   python -m dcptopk env, dcptopk selftest, dcptopk selftest --ranks 4,
#   and the Python tests (binding, torch GPU, one-GPU and multi-GPU groups).
# NVRTC is torch's (its nvidia-cuda-nvrtc wheel), found on sys.path.
# Prints one line per step and `N passed, N failed` at the end; exits 1 on
# any failure.
set -uo pipefail
whl=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
[ -f "$whl" ] || { echo "device_wheel: no wheel file $1" >&2; exit 2; }
src=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
target="$work/site"
unset DCPTOPK_LIBRARY DCPTOPK_CLI PYTHONPATH
"$py" -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-deps --no-index --target "$target" "$whl" ||
    { echo "device_wheel: pip install --target failed" >&2; exit 1; }
export PYTHONPATH="$target" DCPTOPK_TEST_INSTALLED=1
export DCPTOPK_CACHE_DIR="$work/cache"
mkdir -m 700 "$DCPTOPK_CACHE_DIR"
cd "$work"  # nothing of the source tree on sys.path but the tests' folder

passed=0 failed=0
step() {  # NAME CMD...
    local name=$1 rc=0
    shift
    "$@" >"$work/step.log" 2>&1 || rc=$?
    if [ "$rc" -eq 0 ]; then
        passed=$((passed + 1)); echo "ok   $name: $(tail -1 "$work/step.log")"
    elif [ "$rc" -eq 77 ]; then
        echo "skip $name: $(grep -m1 SKIPPED "$work/step.log")"
    else
        failed=$((failed + 1)); echo "FAIL $name (exit $rc):"; tail -40 "$work/step.log"
    fi
}

lib=$("$py" -c "import dcptopk; print(dcptopk.library()._name)")
case $lib in
"$target"/*) echo "library: $lib" ;;
*) echo "FAIL: dcptopk loaded $lib, not the installed $target" >&2; exit 1 ;;
esac
# torch's NVRTC: the CLI finds it through sys.path (python -m dcptopk); the
# library in the tests' processes is told where it is.
nv=$("$py" -c "from dcptopk._lib import nvrtc_candidates as c; l = c('libnvrtc.so.13') or c('libnvrtc.so.12'); print(l[0] if l else '')")
echo "nvrtc: ${nv:-none on sys.path, left to the library search}"
[ -z "$nv" ] || export DCPTOPK_NVRTC_PATH="$nv"
cli=("$py" -m dcptopk)
step "env" "${cli[@]}" env
"${cli[@]}" env | sed -n '1,3p'
step "console script" "$target/bin/dcptopk" --version
step "selftest" "${cli[@]}" selftest
step "selftest --ranks 4" "${cli[@]}" selftest --ranks 4
for t in test_binding test_torch_cpu test_torch_gpu test_dist_one_gpu test_dist_gpu; do
    step "$t.py" "$py" "$src/tests/python/$t.py"
done
echo "device_wheel: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
