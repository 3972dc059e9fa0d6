#!/bin/sh
# check.sh - model-checks the push exchange + rescue protocol
# (group/model/exchange.pml) with spin; ctest model.exchange runs "hold",
# model.exchange_broken_fail runs "fail" (docs/PROTOCOL.md, "The model").
#
#   check.sh SOURCE_DIR hold   every variant that must hold: no assertion
#                              violation, no invalid end state (deadlock), no
#                              acceptance cycle; every "exchange_push.cu:L [En]"
#                              the model cites is still line L of the kernel
#   check.sh SOURCE_DIR fail   every broken variant (SINGLE_BUFFER,
#                              NO_EMPTY_ON_FAIL) must produce an error trail,
#                              printed here
#
# Exit 0 when all is as expected, 1 otherwise, 77 (ctest: skipped) when spin
# or a C compiler is missing. Work happens in a temporary folder.
set -u

src=${1:?usage: check.sh SOURCE_DIR hold|fail}
mode=${2:?usage: check.sh SOURCE_DIR hold|fail}
model=$src/group/model/exchange.pml
kernel=$src/kernels/exchange/exchange_push.cu

if ! command -v spin >/dev/null 2>&1; then
    echo "SKIPPED: spin is not installed (scripts/deps.sh installs it: apt-get install spin)"
    exit 77
fi
cc=${CC:-cc}
if ! command -v "$cc" >/dev/null 2>&1; then
    echo "SKIPPED: no C compiler ($cc) to build spin's verifier"
    exit 77
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/dcptopk-model-XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
cp "$model" "$work/exchange.pml" || exit 1
cd "$work" || exit 1

# run NAME SPIN_DEFINES CC_DEFINES PAN_OPTIONS: builds and runs one verifier;
# its log is NAME.log, its trail (if any) exchange.pml.trail.
run() {
    rm -f pan pan.* exchange.pml.trail
    spin -a $2 exchange.pml >"$1.log" 2>&1 || { cat "$1.log"; return 2; }
    "$cc" -O2 $3 -o pan pan.c >>"$1.log" 2>&1 || { cat "$1.log"; return 2; }
    ./pan $4 >>"$1.log" 2>&1
    errors=$(sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' "$1.log" | tail -n 1)
    [ -n "$errors" ] || { tail -n 20 "$1.log"; return 2; }
    echo "$1: $(grep -E 'states, stored' "$1.log" | head -n 1 | sed 's/^ *//'), errors: $errors"
    [ "$errors" -eq 0 ] && return 0
    return 1
}

fail=0
case "$mode" in
hold)
    # Every [En] the model cites must be on the line it names.
    tags=$(grep -o 'exchange_push\.cu:[0-9]* \[E[0-9]*\]' exchange.pml | sort -u)
    [ -n "$tags" ] || { echo "FAIL: the model cites no exchange_push.cu line"; fail=1; }
    for t in $(echo "$tags" | tr ' ' '@'); do
        line=${t#exchange_push.cu:}
        line=${line%%@*}
        tag=${t#*@}
        if ! sed -n "${line}p" "$kernel" | grep -qF "$tag"; then
            echo "FAIL: the model cites exchange_push.cu:$line for $tag, but that line is:"
            sed -n "${line}p" "$kernel"
            fail=1
        fi
    done
    # Faults (timeouts anywhere, a rank that stops), W = 3, 3 calls.
    run faults "" "-DSAFETY -DCOLLAPSE" "-m10000" || fail=1
    # No faults: every rank finishes every call; more calls are cheap.
    run no_faults_4_calls "-DNO_FAULTS -DNCALLS=4" "-DSAFETY" "-m10000" || fail=1
    run no_faults_6_calls "-DNO_FAULTS -DNCALLS=6" "-DSAFETY" "-m20000" || fail=1
    run no_faults_all_masks "-DNO_FAULTS -DALL_MASKS" "-DSAFETY -DCOLLAPSE" "-m20000" || fail=1
    # Liveness: eventually every rank has finished (weak fairness).
    run liveness "-DNO_FAULTS -DLIVENESS -DNCALLS=4" "" "-m20000 -a -f" || fail=1
    if grep -q 'unreached in proctype rank' faults.log; then
        # The protocol check of [E2] is expected to be unreachable (P4).
        sed -n '/unreached in proctype rank/,/unreached in init/p' faults.log
    fi
    ;;
fail)
    # SINGLE_BUFFER: a data race without any fault. NO_EMPTY_ON_FAIL: one
    # exchange timeout is enough; bounded to one, a rank whose peer failed
    # then waits forever, so end states are not checked (-E) there.
    for v in SINGLE_BUFFER NO_EMPTY_ON_FAIL; do
        if [ $v = SINGLE_BUFFER ]; then
            defs="-D$v -DNO_FAULTS"; opts="-m10000"
        else
            defs="-D$v -DNO_DEATH -DMAX_FAULTS=1"; opts="-m10000 -E"
        fi
        run "$v" "$defs" "-DSAFETY" "$opts"
        rc=$?
        if [ $rc -eq 1 ]; then
            echo "$v fails as it must; the end of its trail:"
            spin -t $defs -p exchange.pml 2>&1 |
                grep -E '^ *[0-9]+:[[:space:]]+proc' |
                grep -E 'assert|xstat = |slot\[|recv\[|flag\[|reading' | tail -n 10
            grep -E 'assertion violated' "$v.log" | head -n 1
        else
            echo "FAIL: $v was expected to violate the model's assertions"
            fail=1
        fi
    done
    ;;
*)
    echo "usage: check.sh SOURCE_DIR hold|fail" >&2
    exit 2
    ;;
esac
if [ $fail -eq 0 ]; then
    echo "model.exchange ($mode): as expected"
else
    echo "model.exchange ($mode): FAILED"
fi
exit $fail
