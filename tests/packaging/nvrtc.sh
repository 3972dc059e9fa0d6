#!/bin/sh
# nvrtc.sh MODE CLI - the run-time NVRTC loader, through the CLI.
#   errors: a DCPTOPK_NVRTC_PATH that holds no NVRTC, or a library that is
#           not NVRTC, is refused, and the error names every file tried and
#           why (no silent fallback to another NVRTC).
#   cu12:   every named config compiles with NVRTC 12 (the pip wheel
#           nvidia-cuda-nvrtc-cu12 that scripts/deps.sh installs into
#           $DCPTOPK_TEST_NVRTC12, a folder holding libnvrtc.so.12) into a
#           fresh cache, whose entries then carry NVRTC 12's version. Skips
#           (77) when that folder has no libnvrtc.so.12.
set -eu
mode=$1
cli=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export DCPTOPK_CACHE_DIR="$work/cache"
mkdir -m 700 "$DCPTOPK_CACHE_DIR"

fail() { echo "FAIL: $*" >&2; exit 1; }

case $mode in
errors)
    mkdir "$work/empty"
    out=$(DCPTOPK_NVRTC_PATH="$work/empty" "$cli" env 2>&1) || true
    echo "$out" | grep -q "nvrtc:    none: no usable NVRTC" || fail "empty folder accepted: $out"
    echo "$out" | grep -q "$work/empty/libnvrtc.so.13: cannot open" || fail "no .so.13 attempt: $out"
    echo "$out" | grep -q "$work/empty/libnvrtc.so.12: cannot open" || fail "no .so.12 attempt: $out"
    # A real library that is not NVRTC.
    not=$(ldd "$cli" | awk '/libc\.so/ {print $3}')
    out=$(DCPTOPK_NVRTC_PATH="$not" "$cli" env 2>&1) || true
    echo "$out" | grep -q "$not: lacks nvrtcVersion" || fail "libc accepted: $out"
    # A compile without NVRTC is an error naming the cause, not a crash.
    rc=0
    out=$(DCPTOPK_NVRTC_PATH="$work/empty" "$cli" warmup --arch sm_90a --quiet 2>&1) || rc=$?
    [ "$rc" -ne 0 ] || fail "warmup without NVRTC succeeded"
    echo "$out" | grep -q "no usable NVRTC" || fail "warmup error: $out"
    echo "nvrtc errors: ok"
    ;;
cu12)
    dir=${DCPTOPK_TEST_NVRTC12:-}
    if [ -z "$dir" ] || [ ! -f "$dir/libnvrtc.so.12" ]; then
        echo "skip: no NVRTC 12 in DCPTOPK_TEST_NVRTC12='$dir' (scripts/deps.sh installs nvidia-cuda-nvrtc-cu12 there)"
        exit 77
    fi
    export DCPTOPK_NVRTC_PATH="$dir"
    ver=$("$cli" env --json | python3 -c "import json,sys; print(json.load(sys.stdin)['nvrtc']['version'])")
    case $ver in 12.*) ;; *) fail "loaded NVRTC $ver, not 12";; esac
    n=0
    for cfg in $("$cli" configs | awk 'NR > 1 {print $1}'); do
        "$cli" warmup "$cfg" --arch sm_90a --quiet || fail "warmup $cfg with NVRTC $ver"
        n=$((n + 1))
    done
    [ "$n" -ge 1 ] || fail "no named config listed"
    # Every entry was compiled by (and is keyed with) the loaded NVRTC.
    others=$("$cli" cache ls --json | python3 -c "
import json, sys
rows = json.load(sys.stdin)
rows = rows.get('entries', rows) if isinstance(rows, dict) else rows
print(len(rows), sum(1 for r in rows if r['nvrtc_version'] != '$ver'))")
    set -- $others
    [ "$1" -gt 0 ] || fail "no cache entries after warmup"
    [ "$2" -eq 0 ] || fail "$2 of $1 entries not from NVRTC $ver"
    echo "nvrtc cu12: $n configs compiled with NVRTC $ver ($1 entries)"
    ;;
*)
    fail "mode: got '$mode'; expected errors or cu12"
    ;;
esac
