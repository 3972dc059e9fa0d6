#!/usr/bin/env bash
# bench/packed_ab.sh - a same-run A/B of the kernels' templates:
# bench_packed (or, with AB_BENCH=pair, bench_pair) with the templates of
# OLD_DIR (through DCPTOPK_TEMPLATE_DIR) and with the build's embedded ones,
# alternated ROUNDS times in one device run, so that both sides see the same
# GPU, clocks and inputs. Prints one line a figure and side, then each
# figure's medians over the rounds.
#
#   bench/packed_ab.sh BUILD_DIR OLD_DIR [ONLY (BENCH_PACKED_ONLY, default
#                      select; with AB_BENCH=pair, BENCH_PAIR_ONLY "W,K,T",
#                      default 8,2048,6710)] [ROUNDS (default 3)]
#
# OLD_DIR is a copy of kernels/ (or a flat folder of templates) of the
# version to compare against, e.g. `git show OLD:kernels/packed/select.cu`
# written into it; several, separated by ':', are each compared with the
# build's templates in the same rounds (a side is named by its folder).
# Correctness is the GPU tests' job (bit-exact against the CPU reference on
# both sides); this script only times.
set -uo pipefail
build="${1:?usage: bench/packed_ab.sh BUILD_DIR OLD_DIR [ONLY] [ROUNDS]}"
old="${2:?usage: bench/packed_ab.sh BUILD_DIR OLD_DIR [ONLY] [ROUNDS]}"
bench=packed only_var=BENCH_PACKED_ONLY only_default=select
if [ "${AB_BENCH:-packed}" = pair ]; then
    bench=pair only_var=BENCH_PAIR_ONLY only_default=8,2048,6710
fi
only="${3:-$only_default}"
rounds="${4:-3}"
IFS=: read -r -a olds <<<"$old"
for ((j = 0; j < ${#olds[@]}; j++)); do
    [ -d "${olds[j]}" ] || { echo "packed_ab: ${olds[j]} is not a folder" >&2; exit 2; }
    olds[j]=$(cd "${olds[j]}" && pwd)
done
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
chmod 700 "$cache"
export DCPTOPK_CACHE_DIR="$cache" NCCL_NVLS_ENABLE=0
lines=$(mktemp)
for ((i = 1; i <= rounds; i++)); do
    for dir in "${olds[@]}" new; do
        if [ "$dir" != new ]; then
            side=old
            [ ${#olds[@]} -gt 1 ] && side=$(basename "$dir" | tr -c 'A-Za-z0-9_.\n-' _)
            out=$(env DCPTOPK_TEMPLATE_DIR="$dir" "$only_var=$only" "$build/bench/bench_$bench" 2>&1)
        else
            side=new
            out=$(env -u DCPTOPK_TEMPLATE_DIR "$only_var=$only" "$build/bench/bench_$bench" 2>&1)
        fi
        echo "$out" | grep '^JSON ' | sed "s/^JSON /$side $i /" | tee -a "$lines"
    done
done
# Medians a figure and side.
python3 - "$lines" <<'EOF'
import json, sys, statistics
rows = {}
for line in open(sys.argv[1]):
    side, _, rec = line.split(" ", 2)
    r = json.loads(rec)
    if "median_us" not in r and "us" not in r:
        continue
    # bench_packed: shape, us; bench_pair: W, K, T, layout, median_us.
    shape = r.get("shape") or "W=%s K=%s T=%s %s" % (r.get("W"), r.get("K"), r.get("T"), r.get("layout", ""))
    key = (r["bench"], shape)
    rows.setdefault(key, {}).setdefault(side, []).append(r.get("us", r.get("median_us")))
for (bench, shape), sides in rows.items():
    n = statistics.median(sides.get("new", [float("nan")]))
    for side, v in sides.items():
        if side == "new":
            continue
        o = statistics.median(v)
        print(f"AB {bench} | {shape} | {side} {o:.2f} us | new {n:.2f} us | new/{side} {n / o:.3f}")
EOF
rm -f "$lines"
