#!/usr/bin/env bash
# bench/bin_ab.sh - a same-run comparison of benchmark binaries built from
# different sources: where a change touches the host side too (a launch
# shape in an *_abi.h header), a template folder alone (bench/packed_ab.sh)
# cannot stand for the old version, so each version is its own static
# bench_pair or bench_packed. The binaries run in turn, ROUNDS times, on
# the same GPU and inputs; prints each figure's median a binary and its
# ratio to the first binary's.
#
#   bench/bin_ab.sh ROUNDS "ONLY [ONLY...]" NAME=BINARY [NAME=BINARY...]
#
# ONLY is the bench's filter (BENCH_PAIR_ONLY "W,K,T" for bench_pair,
# BENCH_PACKED_ONLY for bench_packed, chosen by the binary's file name); one
# run a filter. Build a version with e.g.
#   git worktree add /tmp/old OLD && cmake -S /tmp/old -B /tmp/old/b
#   -DCMAKE_BUILD_TYPE=Release && cmake --build /tmp/old/b --target bench_pair
# Correctness is the GPU tests' job; this script only times.
set -uo pipefail
usage() { sed -n '2,17p' "$0"; exit 2; }
[ $# -ge 3 ] || usage
rounds="$1" onlys="$2"
shift 2
names=() bins=()
for nb in "$@"; do
    names+=("${nb%%=*}")
    bins+=("${nb#*=}")
    [ -x "${nb#*=}" ] || { echo "bin_ab: ${nb#*=} is not an executable" >&2; exit 2; }
done
cache=$(mktemp -d)
lines=$(mktemp)
trap 'rm -rf "$cache" "$lines"' EXIT
chmod 700 "$cache"
# AB_CACHE_FROM: a kernel cache file to start from (the binaries' keys
# warmed on the build machine: `dcptopk warmup CONFIG --arch ARCH --cache F`
# with each version's CLI), so that the first round times without compiles.
[ -z "${AB_CACHE_FROM:-}" ] || cp "$AB_CACHE_FROM" "$cache/dcptopk.sqlite"
export DCPTOPK_CACHE_DIR="$cache" NCCL_NVLS_ENABLE=0
unset DCPTOPK_TEMPLATE_DIR
for ((i = 1; i <= rounds; i++)); do
    for only in $onlys; do
        for j in "${!bins[@]}"; do
            var=BENCH_PACKED_ONLY
            case "$(basename "${bins[$j]}")" in *pair*) var=BENCH_PAIR_ONLY ;; esac
            env "$var=$only" "${bins[$j]}" 2>&1 | grep '^JSON ' |
                sed "s/^JSON /${names[$j]} $i /" | tee -a "$lines"
        done
    done
done
python3 - "$lines" "${names[@]}" <<'EOF'
import json, statistics, sys
names = sys.argv[2:]
rows = {}
for line in open(sys.argv[1]):
    name, _, rec = line.split(" ", 2)
    r = json.loads(rec)
    us = r.get("us", r.get("median_us"))
    if us is None:
        continue
    shape = r.get("shape") or "W=%s K=%s T=%s %s" % (
        r.get("W"), r.get("K"), r.get("T"), r.get("layout", ""))
    rows.setdefault((r["bench"], shape), {}).setdefault(name, []).append(us)
for (bench, shape), by in rows.items():
    base = statistics.median(by[names[0]]) if names[0] in by else None
    cells = []
    for n in names:
        if n not in by:
            cells.append(f"{n} -")
            continue
        m = statistics.median(by[n])
        ratio = f" ({m / base:.3f})" if base else ""
        cells.append(f"{n} {m:.2f}{ratio}")
    print(f"AB {bench} | {shape} | " + " | ".join(cells))
EOF
