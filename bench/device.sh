#!/usr/bin/env bash
# bench/device.sh - the batch run on the GPU machine, in one command: checks
# the carried build, runs the GPU tests, compute-sanitizer (memcheck, racecheck,
# synccheck) on small shapes, the benchmarks and the torch.topk baselines, and
# prints a short table last. Logs and JSON go to $OUT.
#
#   bench/device.sh [BUILD_DIR (default build-release)] [STAGES (default "tests selftest sanitize bench torch")]
#
# Stages: tests (GPU tests), selftest (`dcptopk selftest` and the default
# config's warmup: the quick start's GPU path), sanitize (compute-sanitizer),
# bench, torch (the torch.topk baselines and the Python binding's host
# overhead, bench/torch_host.py), shapes (the two shapes of a pair row of
# 16384 against each other on this GPU, bench/bin_ab.sh: whether
# DC_PAIR_TWO_CTAS_PAY's choice holds here), profile (bench/profile.sh: Nsight
# Compute, archived as prof.tgz), keepcache (the kernel cache the run filled,
# archived as cache.tgz: unpack it here into an ignored folder, carry that
# folder and point DCPTOPK_CACHE_DIR at it, and the next run's tests compile
# only what changed).
#
# Environment: TESTS_RE (a ctest -R filter of the C GPU tests), PY_RE (the
# Python GPU tests', default all), JOBS (parallel
# GPU tests, default 8: their NVRTC compiles run side by side), PROFILE_WHICH
# (the kernels bench/profile.sh profiles, default "pair topn select"), BENCHES (the
# bench programs to run, default all), TORCHES (the torch stage's scripts,
# default all four: a kernel's own benchmark and its torch.topk baseline
# can run alone, e.g. BENCHES=bench_pair TORCHES=torch_pair), SAN_TESTS (the sanitizer's tests,
# "binary case;binary case"), DCPTOPK_CACHE_DIR (a kernel cache
# to start from, e.g. a carried copy of an earlier run's). Only 8 files come
# back from the machine: every log goes into $OUT/logs.tgz, and summary.txt
# and bench.jsonl stay beside it. bench.jsonl is one device run's record:
# bench/tables.py turns it into docs/BENCHMARKS.md's tables.
#
# The build is made on the build machine (the GPU machine has no SQLite or
# xxHash headers) and carried; its CTest files hold the build machine's absolute
# paths, so /work/main is linked to this checkout when it does not exist.
set -uo pipefail
build="${1:-build-release}"
stages="${2:-tests selftest sanitize bench torch}"
OUT="${OUT:-/tmp/dcptopk-device}"
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export DCPTOPK_CACHE_DIR="${DCPTOPK_CACHE_DIR:-$OUT/cache-dir}"
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
summary="$OUT/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader \
    | tee "$OUT/gpu.txt"
# The commit comes from $build/COMMIT, which the lead writes when building
# (`git rev-parse --short HEAD >build-release/COMMIT`): the device copy of the
# tree may have no .git. DCPTOPK_COMMIT overrides it.
commit="${DCPTOPK_COMMIT:-$(head -c 64 "$build/COMMIT" 2>/dev/null | tr -cd '0-9a-zA-Z._+-')}"
commit="${commit:-unknown}"
run_date=$(date -u +%FT%TZ)
gpu_name=$(head -1 "$OUT/gpu.txt" | cut -d, -f1 | sed 's/ *$//')
gpu_driver=$(head -1 "$OUT/gpu.txt" | cut -d, -f2 | tr -d ' ')
note "commit $commit, $run_date, $(head -1 "$OUT/gpu.txt")"

stage_tests() {
    (cd "$build" && timeout "${TESTS_TIMEOUT:-400}" ctest -L gpu --output-on-failure -j"${JOBS:-8}" \
        -E '^python\.' ${TESTS_RE:+-R "$TESTS_RE"}) >"$OUT/gpu-tests.log" 2>&1
    note "gpu tests: rc=$? $(grep -E 'tests passed|tests failed' "$OUT/gpu-tests.log" | tail -1)"
    grep -E "Failed|\*\*\*" "$OUT/gpu-tests.log" | head -20
    # A skip prints its reason only in verbose output: keep the reasons.
    (cd "$build" && timeout 400 ctest -L gpu -R "${PY_RE:-^python\.}" -V -j4) \
        >"$OUT/gpu-python.log" 2>&1
    note "python gpu tests: $(grep -E 'tests passed|tests failed' "$OUT/gpu-python.log" | tail -1)"
    grep -hoE "SKIPPED: .*|SKIP [a-z_]+: .*" "$OUT/gpu-python.log" | sort | uniq -c | head -5 |
        tee -a "$summary"
}

stage_selftest() {
    local cli="$build/dcptopk" cache="$OUT/selftest-cache.sqlite"
    timeout 120 "$cli" warmup --cache "$cache" >"$OUT/selftest.log" 2>&1
    note "warmup (default config, device 0): rc=$?"
    timeout 120 "$cli" selftest >>"$OUT/selftest.log" 2>&1
    note "dcptopk selftest: rc=$? $(grep -E 'selftest (passed|FAILED)' "$OUT/selftest.log" | tail -1)"
    rm -f "$cache" "$cache"-*
}

stage_profile() {
    OUT="$OUT" timeout 400 bench/profile.sh "$build" "${PROFILE_WHICH:-pair topn select}" >"$OUT/profile.log" 2>&1
    note "profile: rc=$? ($(grep -c 'rc=0' "$OUT/profile.log") kernels profiled)"
    (cd "$OUT" && tar czf prof.tgz prof && rm -rf prof)
}

stage_keepcache() {
    (cd "$(dirname "$DCPTOPK_CACHE_DIR")" &&
        tar czf "$OUT/cache.tgz" "$(basename "$DCPTOPK_CACHE_DIR")")
    note "kernel cache archived: $(du -h "$OUT/cache.tgz" | cut -f1)"
}

stage_sanitize() {
    cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    small=(
        "test_topn pack_small"
        "test_topn push_small"
        "test_topn pack_wide_span"
        "test_topn pack_masked_tail"
        "test_pair select_small_topk"
        "test_packed select_duplicates_and_junk"
        "test_loopback merge_small"
        "test_loopback one_answer_small"
        "test_hier simulated_nodes_small"
    )
    # SAN_TESTS: "binary case;binary case;..." instead of the list above.
    if [ -n "${SAN_TESTS:-}" ]; then
        IFS=';' read -r -a small <<<"$SAN_TESTS"
    fi
    for tool in memcheck racecheck synccheck; do
        fails=0
        for t in "${small[@]}"; do
            set -- $t
            log="$OUT/san-$tool.log"
            echo "== $tool $1 $2" >>"$log"
            timeout 100 "$cs" --tool "$tool" --error-exitcode 99 \
                "$build/tests/$1" "$2" >>"$log" 2>&1
            rc=$?
            [ $rc -eq 0 ] || { fails=$((fails + 1)); echo "   rc=$rc" >>"$log"; }
        done
        # memcheck and synccheck end with "ERROR SUMMARY: 0 errors", racecheck
        # with "RACECHECK SUMMARY: 0 hazards displayed".
        note "compute-sanitizer $tool: ${#small[@]} tests, $fails failing ($(grep -cE 'ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards' "$OUT/san-$tool.log") clean summaries)"
    done
}

stage_bench() {
    for b in ${BENCHES:-bench_warmup bench_pair bench_topn bench_packed bench_dist}; do
        [ -x "$build/bench/$b" ] || { note "$b: not built"; continue; }
        timeout 150 "$build/bench/$b" >"$OUT/$b.log" 2>&1
        note "$b: rc=$?"
        grep '^JSON ' "$OUT/$b.log" | sed 's/^JSON //' >>"$OUT/bench.jsonl"
    done
}

stage_shapes() {
    # DCPTOPK_PAIR_TWO_CTAS forces each shape; bin_ab.sh picks the bench by
    # the wrapper's name. The context's own choice is in the GPU tests' log
    # (test_pair.select_rows_of_16384_both_shapes).
    local d
    d=$(mktemp -d)
    for s in one:0 two:1; do
        printf '#!/bin/sh\nDCPTOPK_PAIR_TWO_CTAS=%s exec %s "$@"\n' "${s#*:}" \
            "$PWD/$build/bench/bench_pair" >"$d/${s%%:*}_pair"
        chmod +x "$d/${s%%:*}_pair"
    done
    timeout 300 bench/bin_ab.sh 2 "8,2048,6710 8,2048,64 16,1024,6710 4,4096,6710" \
        one="$d/one_pair" two="$d/two_pair" >"$OUT/shapes.log" 2>&1
    note "pair row shapes (bench/bin_ab.sh, one CTA against two): rc=$?"
    grep '^AB pair_select |' "$OUT/shapes.log" | tee -a "$summary"
    rm -rf "$d"
}

stage_torch() {
    # torch_host times the Python binding's drop-in merge: it needs the
    # package and the carried library.
    for p in ${TORCHES:-torch_pair torch_topn torch_packed torch_host}; do
        DCPTOPK_LIBRARY="$PWD/$build/libdcptopk.so" PYTHONPATH="$PWD/bindings/python" \
            timeout 120 python3 "bench/$p.py" >"$OUT/$p.log" 2>&1
        note "$p: rc=$?"
        grep '^JSON ' "$OUT/$p.log" | sed 's/^JSON //' >>"$OUT/bench.jsonl"
    done
}

# Stages run in the order given; the log archive is rewritten after each, so
# a run cut short by its time limit still brings back what it did.
# bench.jsonl opens with the run's header record: bench/tables.py names every
# figure's run by it (date, GPU, commit).
printf '{"bench": "run", "date": "%s", "gpu": "%s", "driver": "%s", "commit": "%s", "stages": "%s"}\n' \
    "$run_date" "$gpu_name" "$gpu_driver" "$commit" "$stages" >"$OUT/bench.jsonl"
for st in $stages; do
    "stage_$st"
    (cd "$OUT" && tar czf logs.tgz.tmp --exclude='logs.tgz*' --exclude=cache-dir \
        $(ls *.log *.txt 2>/dev/null) && mv logs.tgz.tmp logs.tgz)
done
(cd "$OUT" && find . -maxdepth 1 -name '*.log' -delete)
echo "================ summary"
cat "$summary"
[ -s "$OUT/bench.jsonl" ] && python3 bench/summarize.py "$OUT/bench.jsonl"
[ -s "$OUT/bench.jsonl" ] && python3 bench/tables.py "$OUT/bench.jsonl" >"$OUT/tables.md" 2>&1
exit 0
