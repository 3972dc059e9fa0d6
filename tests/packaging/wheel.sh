#!/usr/bin/env bash
# wheel.sh MODE SOURCE_DIR WORK_DIR [STRUCT_SIZES_EXE] - the packages as an
# engine would take them (no GPU needed):
#   build:   scripts/wheel.sh twice into WORK_DIR/{a,b}: byte-identical;
#            `auditwheel show` says manylinux_2_28 (or older); one unversioned
#            libdcptopk.so, no static library, headers or CMake files, only
#            relative rpaths, no SQLite symbol exported, no libsqlite3 needed,
#            no build folder written into the binaries. Leaves the wheel in
#            WORK_DIR/a for `install`.
#   install: the wheel of `build` (WORK_DIR/a) with its cu13 extra in a fresh
#            venv, NVRTC only from pip: the checks below, then
#            tests/python/test_binding.py against the installed package.
#   sdist:   `python -m build --sdist`, then pip installs it (an isolated
#            build, build requirements from the local wheelhouse) with the
#            cu12 extra in a fresh venv: the checks below.
# Checks in a venv (no CUDA toolkit on the library path): import dcptopk,
# `dcptopk warmup --arch sm_90a` into a temporary cache, `dcptopk selftest`,
# `python -m dcptopk env` naming the venv's NVRTC.
# Needs PyPI once (scripts/wheel_tools.sh caches everything); skips (77)
# when it cannot be reached.
set -euo pipefail
mode=$1
src=$(cd "$2" && pwd)
work=$3
sizes=${4:-}
fail() { echo "FAIL: $*" >&2; exit 1; }

rc=0
tools=$("$src/scripts/wheel_tools.sh") || rc=$?
if [ "$rc" -eq 3 ]; then
    echo "skip: the wheel tools could not be fetched from PyPI (offline?): see scripts/wheel_tools.sh"
    exit 77
fi
[ "$rc" -eq 0 ] || fail "scripts/wheel_tools.sh exited $rc"
tpy="$tools/venv/bin/python"

# A fresh venv on python3, with nothing of CUDA on the library path.
fresh_venv() {
    rm -rf "$1"
    "${PYTHON:-python3}" -m venv "$1"
}
clean_env() {
    env -u LD_LIBRARY_PATH -u DCPTOPK_LIBRARY -u DCPTOPK_CLI -u DCPTOPK_NVRTC_PATH \
        -u PYTHONPATH -u CUDA_HOME -u CUDA_PATH "$@"
}
pip_local() {  # pip install from the local wheelhouse only
    clean_env "$1/bin/python" -m pip install -q --disable-pip-version-check --no-index \
        --find-links "$tools/wheelhouse" "${@:2}" >"$1.pip.log" 2>&1 ||
        { cat "$1.pip.log"; fail "pip install ${*:2}"; }
}
check_venv() {  # VENV WANT_NVRTC_MAJOR
    local venv=$1 major=$2 cache
    cache=$(mktemp -d)
    chmod 700 "$cache"
    (cd / && clean_env "$venv/bin/python" -c "import dcptopk; print('import:', dcptopk.__version__)") ||
        fail "import dcptopk in $venv"
    [ -x "$venv/bin/dcptopk" ] || fail "no dcptopk command in $venv/bin"
    clean_env DCPTOPK_CACHE_DIR="$cache" "$venv/bin/dcptopk" warmup --arch sm_90a --quiet ||
        fail "dcptopk warmup --arch sm_90a"
    n=$(clean_env DCPTOPK_CACHE_DIR="$cache" "$venv/bin/dcptopk" cache ls --json |
        "$venv/bin/python" -c "import json,sys; r=json.load(sys.stdin); print(len(r.get('entries', r) if isinstance(r, dict) else r))")
    [ "$n" -gt 0 ] || fail "warmup left no cache entry"
    clean_env DCPTOPK_CACHE_DIR="$cache" "$venv/bin/dcptopk" selftest >"$cache/selftest.log" 2>&1 ||
        { cat "$cache/selftest.log"; fail "dcptopk selftest"; }
    tail -1 "$cache/selftest.log"
    clean_env DCPTOPK_CACHE_DIR="$cache" "$venv/bin/python" -m dcptopk env >"$cache/env.txt" ||
        fail "python -m dcptopk env"
    clean_env DCPTOPK_CACHE_DIR="$cache" "$venv/bin/python" -m dcptopk env --json >"$cache/env.json"
    "$venv/bin/python" - "$cache/env.json" "$venv" "$major" <<'EOF' || fail "env: $(cat "$cache/env.txt")"
import json, os, sys
e = json.load(open(sys.argv[1]))
venv, major = os.path.realpath(sys.argv[2]), sys.argv[3]
nv = e["nvrtc"]
assert nv["version"] and nv["version"].startswith(major + "."), f"NVRTC {nv}: expected {major}.x"
assert os.path.realpath(nv["path"]).startswith(venv + "/"), f"NVRTC {nv['path']} is not the venv's"
print(f"env: NVRTC {nv['version']} from {nv['path']}; {e['library']['build']}")
EOF
    rm -rf "$cache"
}

case $mode in
build)
    rm -rf "$work"
    mkdir -p "$work"
    start=$(date +%s)
    a=$("$src/scripts/wheel.sh" "$work/a")
    b=$("$src/scripts/wheel.sh" "$work/b")
    ha=$(sha256sum "$a" | cut -d' ' -f1)
    hb=$(sha256sum "$b" | cut -d' ' -f1)
    [ "$ha" = "$hb" ] || fail "two builds differ: $a $ha, $b $hb"
    echo "reproducible: sha256 $ha ($(stat -c %s "$a") bytes, two builds in $(($(date +%s) - start)) s)"
    "$tools/venv/bin/auditwheel" show "$a" >"$work/show.txt" || { cat "$work/show.txt"; fail "auditwheel show"; }
    tr '\n' ' ' <"$work/show.txt" | tr -s ' ' | grep -Eo 'consistent with the following platform tag: "[^"]*"'
    tag=$(tr '\n' ' ' <"$work/show.txt" | tr -s ' ' |
          sed -n 's/.*consistent with the following platform tag: "manylinux_2_\([0-9]*\)_x86_64".*/\1/p')
    [ -n "$tag" ] && [ "$tag" -le 28 ] || fail "not manylinux_2_28 or older: $(cat "$work/show.txt")"
    case $(basename "$a") in *-manylinux_2_28_x86_64.whl) ;; *) fail "wheel name: $a";; esac
    "$tpy" - "$a" "$work" <<'EOF'
import os, subprocess, sys, zipfile
whl, work = sys.argv[1:]
z = zipfile.ZipFile(whl)
names = z.namelist()
libs = [n for n in names if os.path.basename(n).startswith("libdcptopk.so")]
assert libs == ["dcptopk/lib/libdcptopk.so"], f"expected one dcptopk/lib/libdcptopk.so: {libs}"
bad = [n for n in names if n.endswith((".a", ".h", ".cmake", ".pc")) or "/include/" in n]
assert not bad, f"development files in the wheel: {bad}"
assert "dcptopk/bin/dcptopk" in names and "dcptopk/py.typed" in names, names
assert not [n for n in names if "__pycache__" in n], names
ex = os.path.join(work, "x")
z.extractall(ex)
for f in ("dcptopk/lib/libdcptopk.so", "dcptopk/bin/dcptopk"):
    p = os.path.join(ex, f)
    d = subprocess.run(["readelf", "-d", p], capture_output=True, text=True, check=True).stdout
    for line in d.splitlines():
        if "RPATH" in line or "RUNPATH" in line:
            val = line.split("[", 1)[1].rstrip("]")
            assert all(x.startswith("$ORIGIN") for x in val.split(":")), f"{f}: {line.strip()}"
        if "NEEDED" in line:
            assert "sqlite" not in line and "nvrtc" not in line and "cuda" not in line, \
                f"{f} needs {line.strip()}"
    data = open(p, "rb").read()
    for leak in (work.encode(), b"/tmp/tmp.", b"/work/"):
        assert leak not in data, f"{f} holds the path {leak!r}"
syms = subprocess.run(["nm", "-D", "--defined-only", os.path.join(ex, "dcptopk/lib/libdcptopk.so")],
                      capture_output=True, text=True, check=True).stdout.split()
leaked = [s for s in syms if s.startswith("sqlite3")]
assert not leaked, f"SQLite symbols exported: {leaked[:5]}"
print(f"contents: {len(names)} files, one libdcptopk.so, relative rpaths, SQLite built in and hidden")
EOF
    ;;
install)
    whl=$(ls "$work"/a/dcptopk-*-manylinux_*.whl 2>/dev/null | head -1)
    [ -n "$whl" ] || fail "no wheel in $work/a: run mode build first"
    venv="$work/venv-wheel"
    fresh_venv "$venv"
    pip_local "$venv" "$whl[cu13]"
    check_venv "$venv" 13
    # The binding's tests against the installed package.
    [ -z "$sizes" ] || sizes=$(cd "$(dirname "$sizes")" && pwd)/$(basename "$sizes")
    (cd "$work" && clean_env DCPTOPK_TEST_INSTALLED=1 "$venv/bin/python" \
        "$src/tests/python/test_binding.py" $sizes) || fail "test_binding.py on the installed wheel"
    echo "wheel: installed with NVRTC from pip and tested in $venv"
    ;;
sdist)
    rm -rf "$work"
    mkdir -p "$work"
    mkdir "$work/src"
    # The tree as git holds it, as a release would be cut.
    (cd "$src" && git ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do
            [ ! -e "$f" ] || cp -P --parents "$f" "$work/src/"
        done)
    SOURCE_DATE_EPOCH=$(git -C "$src" log -1 --format=%ct) \
        "$tpy" -m build --sdist --no-isolation --outdir "$work/sdist" "$work/src" >"$work/sdist.log" 2>&1 ||
        { tail -20 "$work/sdist.log"; fail "python -m build --sdist"; }
    sd=$(ls "$work"/sdist/dcptopk-*.tar.gz)
    "$tpy" - "$sd" <<'EOF'
import sys, tarfile
names = tarfile.open(sys.argv[1]).getnames()
top = names[0].split("/")[0]
rel = [n[len(top) + 1:] for n in names if "/" in n]
for need in ("CMakeLists.txt", "group/group.c", "include/dcptopk.h", "pyproject.toml",
             "bindings/python/dcptopk/py.typed", "kernels/common"):
    assert need in rel or any(r.startswith(need + "/") for r in rel), f"sdist lacks {need}"
bad = [r for r in rel if r.startswith(("build/", "build-")) or "__pycache__" in r]
assert not bad, f"sdist holds build output: {bad[:5]}"
print(f"sdist: {len(rel)} files")
EOF
    venv="$work/venv-sdist"
    fresh_venv "$venv"
    CMAKE_BUILD_PARALLEL_LEVEL=2 pip_local "$venv" "$sd[cu12]"
    [ -f "$venv/bin/dcptopk" ] || fail "pip install $sd left no dcptopk command"
    check_venv "$venv" 12
    echo "sdist: built, installed with NVRTC 12 from pip and checked in $venv"
    ;;
*)
    fail "mode: got '$mode'; expected build, install or sdist"
    ;;
esac
