#!/usr/bin/env bash
# quickstart.sh - the main job: install what is missing, build, warm up the
# default config (DeepSeek-V3.2 on DCP8) into the default cache, and verify a
# merge: on the GPU when there is one, else the CPU reference alone (it says so).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >build-configure.log 2>&1 ||
    { cat build-configure.log; exit 1; }
cmake --build build -j"$(nproc)" >build-make.log 2>&1 || { tail -50 build-make.log; exit 1; }
cli=build/dcptopk
echo "== built $($cli --version)"

gpus=$($cli devices --json | sed -n 's/.*"count":\([0-9]*\).*/\1/p')
if [ "${gpus:-0}" -gt 0 ]; then
    echo "== warmup of the default config on this GPU"
    $cli warmup
    echo "== a verified merge on the GPU (loopback world, bit-exact against the CPU reference)"
    $cli selftest
else
    echo "== no GPU here: compiling the default config for the H200 (sm_90a) into the cache"
    $cli warmup --arch sm_90a
    echo "== no GPU here: the merge runs on the CPU reference only"
    $cli selftest
fi
echo "== the cache"
$cli cache stats
