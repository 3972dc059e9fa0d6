#!/usr/bin/env bash
# sass_compare.sh - the SASS comparison routine of a kernel change that must
# not change the machine code (a move, a rename, a split into phases): dumps
# the SASS of every kernel key of every named config, one file a key, and
# compares two such dumps.
#
#   bench/sass_compare.sh dump BUILD_DIR OUT_DIR [ARCH [FILTER]]
#   bench/sass_compare.sh diff BASE_DIR NEW_DIR
#
# dump: BUILD_DIR/bench/sass_dump renders and compiles every key with the
# library's NVRTC options (templates from DCPTOPK_TEMPLATE_DIR when set, else
# the embedded ones), cuobjdump -sass disassembles each cubin, and
# OUT_DIR/<key>.sass keeps the instructions with their encodings (control
# bits included), one line an instruction, without the file header, whose
# lines name the temporary file. cuobjdump comes from $CUOBJDUMP, else PATH,
# else /usr/local/cuda/bin (it needs nvdisasm next to it or on PATH).
#
# diff: for every key of either folder, one of
#   same     the instructions and encodings are identical;
#   params   identical once every constant-bank operand c[0x0][...] and the
#            encodings are masked: only kernel-parameter offsets (or other
#            constant-bank offsets) differ;
#   DIFF     anything else (the first lines of the diff follow);
#   missing  the key is in one folder only.
# Exits 0 when every key is `same` or `params`, 1 otherwise.
set -euo pipefail

usage() { sed -n '2,25p' "$0"; exit 2; }

find_cuobjdump() {
    if [ -n "${CUOBJDUMP:-}" ]; then echo "$CUOBJDUMP"; return; fi
    if command -v cuobjdump >/dev/null; then command -v cuobjdump; return; fi
    if [ -x /usr/local/cuda/bin/cuobjdump ]; then echo /usr/local/cuda/bin/cuobjdump; return; fi
    echo "sass_compare: cuobjdump not found (set CUOBJDUMP)" >&2
    exit 1
}

# The SASS of a cubin on stdout: from the first "Function :" line on, the
# address comment dropped and each instruction's second encoding line joined
# to it.
normalise() {
    "$1" -sass "$2" | awk '
        /Function :/ { on = 1 }
        !on { next }
        {
            sub(/^[ \t]+/, "")
            sub(/^\/\*[0-9a-f]+\*\/[ \t]*/, "")
            gsub(/[ \t]+/, " ")
        }
        /^\/\* 0x[0-9a-f]+ \*\/$/ { if (prev != "") { print prev " " $0; prev = "" } ; next }
        { if (prev != "") print prev; prev = $0 }
        END { if (prev != "") print prev }'
}

# The param view: constant-bank offsets and encodings masked.
masked() {
    sed -E -e 's/c\[0x[0-9a-f]+\]\[[^]]*\]/c[BANK][OFF]/g' -e 's@ */\* 0x[0-9a-f]+ \*/@@g' "$1"
}

cmd_dump() {
    [ $# -ge 2 ] || usage
    local build=$1 out=$2 arch=${3:-sm_90a} filter=${4:-}
    local co
    co=$(find_cuobjdump)
    [ -x "$build/bench/sass_dump" ] || { echo "sass_compare: $build/bench/sass_dump not built" >&2; exit 1; }
    mkdir -p "$out"
    rm -f "$out"/*.sass
    SASS_TMP=$(mktemp -d)
    trap 'rm -rf "$SASS_TMP"' EXIT
    local tmp=$SASS_TMP
    "$build/bench/sass_dump" "$tmp" "$arch" "$filter" >"$tmp/names"
    local n=0
    while read -r name; do
        normalise "$co" "$tmp/$name.cubin" >"$out/$name.sass"
        [ -s "$out/$name.sass" ] || { echo "sass_compare: no SASS for $name" >&2; exit 1; }
        n=$((n + 1))
    done <"$tmp/names"
    echo "sass_compare: $n kernels dumped to $out"
}

cmd_diff() {
    [ $# -eq 2 ] || usage
    local a=$1 b=$2 same=0 params=0 differ=0 missing=0
    local names
    names=$( { (cd "$a" && ls -- *.sass); (cd "$b" && ls -- *.sass); } 2>/dev/null | sort -u)
    for f in $names; do
        if [ ! -f "$a/$f" ] || [ ! -f "$b/$f" ]; then
            echo "missing $f"
            missing=$((missing + 1))
        elif cmp -s "$a/$f" "$b/$f"; then
            same=$((same + 1))
        elif cmp -s <(masked "$a/$f") <(masked "$b/$f"); then
            echo "params  $f"
            params=$((params + 1))
        else
            echo "DIFF    $f"
            diff <(masked "$a/$f") <(masked "$b/$f") | head -20 || true
            differ=$((differ + 1))
        fi
    done
    echo "sass_compare: $((same + params + differ + missing)) kernels: $same identical," \
         "$params differ only in constant-bank (parameter) offsets, $differ differ, $missing missing"
    [ $differ -eq 0 ] && [ $missing -eq 0 ]
}

case "${1:-}" in
dump) shift; cmd_dump "$@" ;;
diff) shift; cmd_diff "$@" ;;
*) usage ;;
esac
