#!/usr/bin/env bash
# run.sh BUILD_DIR SOURCE_DIR WORK_DIR - installs the build into WORK_DIR/prefix,
# then builds and runs a consumer through find_package(dcptopk) and through
# pkg-config. Fails on the first step that does not work.
set -euo pipefail
build="$1" src="$2" work="$3"
rm -rf "$work" && mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" >"$work/install.log"
cmake -S "$src/tests/install" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix" >"$work/configure.log"
cmake --build "$work/consumer" >"$work/build.log"
"$work/consumer/consumer"
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
[ -d "$PKG_CONFIG_PATH" ] || export PKG_CONFIG_PATH="$(dirname "$(find "$work/prefix" -name dcptopk.pc | head -1)")"
if command -v pkg-config >/dev/null; then
    cc "$src/tests/install/consumer.c" $(pkg-config --cflags --libs dcptopk) \
       -Wl,-rpath,"$work/prefix/lib" -o "$work/consumer-pc"
    "$work/consumer-pc"
else
    echo "pkg-config not installed: SKIPPED the pkg-config half"
fi
test -x "$work/prefix/bin/dcptopk" && "$work/prefix/bin/dcptopk" --version
echo "1 passed, 0 failed"
