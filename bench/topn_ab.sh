#!/usr/bin/env bash
# topn_ab.sh - builds a top-N + pack cubin (N = 384) from a copy of
# kernels/ for bench/topn_ab (A/B runs of kernel versions on the GPU
# machine).
#
#   bench/topn_ab.sh BUILD_DIR OUT.cubin TEMPLATES_DIR VARIANT [--trace] [-DNAME=VALUE...]
#
# The library renders the kernel from TEMPLATES_DIR (DCPTOPK_TEMPLATE_DIR) and
# compiles it with its own NVRTC options (BUILD_DIR/bench/topn_cubin), so an
# edited copy or an older commit's templates (git archive) can be built;
# --trace first stamps a copy of them (bench/topn_trace.py). Then, on the GPU
# machine, with BUILD_DIR and the cubins carried, for example:
#
#   BUILD_DIR/bench/topn_ab old:2:old.cubin new:2:new.cubin
#   BUILD_DIR/bench/topn_ab --rows 6710 --cols 16384 --copies 1 old:1:old0.cubin new:1:new0.cubin
set -euo pipefail
[ $# -ge 4 ] || { sed -n '2,17p' "$0"; exit 2; }
build=$1 out=$2 tpl=$3 variant=$4
shift 4
if [ "${1:-}" = --trace ]; then
    shift
    traced=$(mktemp -d)
    trap 'rm -rf "$traced"' EXIT
    python3 "$(dirname "$0")/topn_trace.py" "$tpl" "$traced/t"
    tpl=$traced/t
fi
DCPTOPK_TEMPLATE_DIR="$tpl" "$build/bench/topn_cubin" "$out" "$variant" 384 "$@"
echo "$out: variant $variant from $tpl${*:+ ($*)}"
