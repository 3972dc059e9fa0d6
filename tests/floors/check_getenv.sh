#!/bin/sh
# check_getenv.sh - within the library only base/settings.c reads the
# environment: every other variable read goes through the settings table, so
# README.md's table (checked by test_settings) is the whole list.
#
#   check_getenv.sh NAME=OBJ[:OBJ...] ...
#
# Prints every other object that references getenv or secure_getenv and
# exits 1 when there is one.
set -eu
bad=0
for arg in "$@"; do
    for o in $(printf '%s' "${arg#*=}" | tr ':' ' '); do
        case $(basename "$o") in settings.c.o) continue ;; esac
        if nm "$o" | grep -Eq '^ +U (secure_)?getenv$'; then
            echo "${arg%%=*}/$(basename "$o") calls getenv: read it through base/settings.h"
            bad=1
        fi
    done
done
[ $bad -eq 0 ] && echo "getenv only in settings.c"
exit $bad
