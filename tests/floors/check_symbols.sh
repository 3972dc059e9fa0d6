#!/bin/sh
# check_symbols.sh - no object of a lower floor references a function or
# variable defined on a higher one (the link-time half of the floors rule;
# the include half is the floors.include.* tests).
#
#   check_symbols.sh NAME=OBJ[:OBJ...] ...   (lowest floor first)
#
# Prints every upward reference as "floor/file.o uses symbol (defined on
# floor)" and exits 1 when there is one.
set -eu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
level=0
for arg in "$@"; do
    name=${arg%%=*}
    objs=$(printf '%s' "${arg#*=}" | tr ':' ' ')
    for o in $objs; do
        nm "$o" | awk -v lvl=$level -v fl="$name" -v obj="$(basename "$o")" '
            NF == 3 && $2 ~ /^[TDRB]$/ { print "D", $3, lvl, fl }
            $1 == "U" { print "U", $2, lvl, fl "/" obj }' >>"$tmp/syms"
    done
    level=$((level + 1))
done
awk '
    $1 == "D" { lvl[$2] = $3; floor[$2] = $4 }
    $1 == "U" { use[++n] = $2; ulvl[n] = $3; who[n] = $4 }
    END {
        bad = 0
        for (i = 1; i <= n; i++)
            if ((use[i] in lvl) && lvl[use[i]] > ulvl[i]) {
                printf "%s uses %s (defined on %s)\n", who[i], use[i], floor[use[i]]
                bad = 1
            }
        if (!bad) print "no upward references"
        exit bad
    }' "$tmp/syms"
