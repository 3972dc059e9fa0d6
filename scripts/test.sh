#!/usr/bin/env bash
# test.sh - builds with warnings as errors and runs every test (GPU tests
# report a skip without a GPU), the packaging tests (label wheel), then the
# CPU tests again under AddressSanitizer
# and UndefinedBehaviorSanitizer, then under ThreadSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
jobs="$(nproc)"
# NVRTC 12 from deps.sh: tests/packaging/nvrtc.sh cu12 compiles with it.
export DCPTOPK_TEST_NVRTC12="${DCPTOPK_TEST_NVRTC12_ROOT:-/opt/dcptopk-ci/nvrtc-cu12}/nvidia/cuda_nvrtc/lib"

cmake -S . -B build-test -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDCPTOPK_WERROR=ON >/dev/null
cmake --build build-test -j"$jobs"
(cd build-test && ctest --output-on-failure -j"$jobs" -LE '^wheel$')
# The packages (wheel twice, sdist, each installed in a fresh venv): their
# own stage, so that its time shows.
start=$(date +%s)
# Their tools, SQLite's source and the NVRTC wheels, from PyPI once
# (scripts/wheel_tools.sh); without PyPI the tests skip and say so.
scripts/wheel_tools.sh >/dev/null ||
    echo "test.sh: warning: wheel tools not installed: the packaging tests will skip" >&2
(cd build-test && ctest --output-on-failure -j"$jobs" -L '^wheel$')
echo "test.sh: packaging stage took $(($(date +%s) - start)) s"

cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DDCPTOPK_WERROR=ON \
      -DDCPTOPK_SANITIZE=ON -DDCPTOPK_BUILD_BENCH=OFF >/dev/null
cmake --build build-asan -j"$jobs"
# NVRTC keeps process-lifetime allocations that LeakSanitizer would report.
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# NVRTC is not instrumented: its compile of every config runs once, above.
# The emulator's other schedules (tests/emu, .low/.high) check barriers,
# not memory: the normal build runs them.
(cd build-asan && ctest --output-on-failure -j"$jobs" -L cpu \
    -E '^packaging\.nvrtc_cu12$|\.(low|high)$')

cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DDCPTOPK_WERROR=ON \
      -DDCPTOPK_TSAN=ON -DDCPTOPK_BUILD_BENCH=OFF >/dev/null
cmake --build build-tsan -j"$jobs"
# NVRTC is not instrumented (scripts/tsan.supp); the Python binding's test
# would load the instrumented library into an uninstrumented interpreter.
# The one-answer search is single-threaded reference code (minutes a case
# under TSan): the two runs above cover it, as the normal build covers the
# emulator's other schedules.
export TSAN_OPTIONS="suppressions=$PWD/scripts/tsan.supp:halt_on_error=1"
(cd build-tsan && ctest --output-on-failure -j"$jobs" -L cpu \
    -E '^python\.|^packaging\.nvrtc_cu12$|^test_one_answer\.|\.(low|high)$')
echo "test.sh: all tests passed (normal build, then CPU tests under ASan+UBSan, then TSan)"
