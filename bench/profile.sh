#!/usr/bin/env bash
# bench/profile.sh - Nsight Compute profiles of the hot kernels (pair
# select W=8 K=2048 T=6710, fused top-N + pack 6710 x 16384 and, as
# topn_decode, 64 x 131072, each also on the integer family as topn_int and
# topn_decode_int; packed select W=8 K=2048 N=384 T=6710; the exact select's
# push with no saturated row as push; the rescue with 10% and 100% of the
# rows saturated as rescue10 and rescue100; the decode shapes' pair select
# (T=64) as pair64 and top-N at 8 x 131072 as topn_decode8): one launch
# each, full section set with source counters, exported as a details text
# page, every raw metric (CSV: DRAM bytes, L2 hits, stall reasons) and a
# per-SASS-line CSV (stall samples, executed instructions) under $OUT/prof.
# The reports themselves stay behind (PROFILE_KEEP_REPORTS=1 keeps them):
# they are large and the three exports hold what the tuning reads.
#
#   bench/profile.sh [BUILD_DIR (default build-release)] [WHICH (default "pair topn select")]
set -uo pipefail
build="${1:-build-release}"
which="${2:-pair topn select}"
OUT="${OUT:-/tmp/dcptopk-device}"
dir="$OUT/prof"
mkdir -p "$dir"
export NCCL_NVLS_ENABLE=0 DCPTOPK_CACHE_DIR="$OUT/cache-dir"
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || echo ncu)
"$ncu" --version >"$dir/ncu-version.txt" 2>&1

profile() { # name kernel-regex skip command...
    local name=$1 kre=$2 skip=$3
    shift 3
    timeout 240 "$ncu" --set full --import-source yes -k "regex:$kre" --launch-skip "$skip" \
        --launch-count 1 --kill yes -f -o "$dir/$name" "$@" >"$dir/$name.run.log" 2>&1
    echo "profile $name: rc=$?"
    "$ncu" -i "$dir/$name.ncu-rep" --page details >"$dir/$name.details.txt" 2>&1
    "$ncu" -i "$dir/$name.ncu-rep" --page source --csv --print-source sass \
        >"$dir/$name.sass.csv" 2>"$dir/$name.sass.err"
    "$ncu" -i "$dir/$name.ncu-rep" --page raw --csv >"$dir/$name.raw.csv" 2>&1
    [ "${PROFILE_KEEP_REPORTS:-0}" = 1 ] || rm -f "$dir/$name.ncu-rep"
    grep -E "Duration|Registers Per|Achieved Occupancy|Compute \(SM\) Throughput|Memory Throughput|Block Limit|Issue Slots Busy|No Eligible" \
        "$dir/$name.details.txt" | head -14
}

[[ " $which " == *" pair "* ]] && BENCH_PAIR_ONLY=8,2048,6710 \
    profile pair 'pair_select' 3 "$build/bench/bench_pair" 3
[[ " $which " == *" pair64 "* ]] && BENCH_PAIR_ONLY=8,2048,64 \
    profile pair64 'pair_select' 3 "$build/bench/bench_pair" 3
[[ " $which " == *" topn "* ]] && profile topn 'topn' 3 "$build/bench/bench_topn" 20 'T=6710'
[[ " $which " == *" topn_decode "* ]] &&
    profile topn_decode 'topn' 3 "$build/bench/bench_topn" 20 'T=64,'
[[ " $which " == *" topn_decode8 "* ]] &&
    profile topn_decode8 'topn' 3 "$build/bench/bench_topn" 20 'T=8,'
[[ " $which " == *" topn_int "* ]] && BENCH_TOPN_FAMILY=integer0..3 \
    profile topn_int 'topn' 3 "$build/bench/bench_topn" 20 'T=6710'
[[ " $which " == *" topn_decode_int "* ]] && BENCH_TOPN_FAMILY=integer0..3 \
    profile topn_decode_int 'topn' 3 "$build/bench/bench_topn" 20 'T=64,'
[[ " $which " == *" select "* ]] && BENCH_PACKED_ONLY=select \
    profile select 'dcptopk_select' 3 "$build/bench/bench_packed"
[[ " $which " == *" push "* ]] && BENCH_PACKED_ONLY=select \
    profile push 'dcptopk_push' 3 "$build/bench/bench_packed"
[[ " $which " == *" rescue10 "* ]] && BENCH_PACKED_ONLY=rescue BENCH_PACKED_PCT=10 \
    profile rescue10 'dcptopk_rescue' 3 "$build/bench/bench_packed"
[[ " $which " == *" rescue100 "* ]] && BENCH_PACKED_ONLY=rescue BENCH_PACKED_PCT=100 \
    profile rescue100 'dcptopk_rescue' 3 "$build/bench/bench_packed"
exit 0
