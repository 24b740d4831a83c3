#!/bin/bash
# tests/asan_python.sh [PYTEST ARGS...] - the recorder's Python tests against an
# AddressSanitizer + UndefinedBehaviorSanitizer build of threadgraph._recorder.
#
# Builds the extension (src/recorder/*.c) and the CLI with
# -fsanitize=address,undefined into a private copy of the package under
# build/asan-python/ (the working tree's own .so is never touched), then runs
# pytest on tests/python/test_recorder.py, test_reliability.py, test_backends.py
# and test_native.py (or on the given arguments) with that copy first on PYTHONPATH and the gcc
# sanitizer runtimes preloaded into every Python process, scenarios included.
# Any sanitizer report aborts the process that made it, so the test fails.
# Leak detection is off: CPython keeps memory until exit by design.
# native=True coexists with ASan: ASan's runtime defines malloc and mmap, so the
# patcher calls ASan's functions and leaves its runtime (and libc) unpatched.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}
cc=${CC_ASAN:-gcc}
out=$root/build/asan-python
pkg=$out/threadgraph
san="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"

rm -rf "$out"
mkdir -p "$pkg/_bin"
cp "$root"/threadgraph/*.py "$pkg"/
cp -r "$root"/threadgraph/_hook "$pkg"/   # the --follow-exec start-up hook
# the original tutorial's import (from thread_graph.Profiler import ProcessProfile)
mkdir -p "$out/thread_graph" && cp "$root"/thread_graph/*.py "$out/thread_graph"/
inc=$($py -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
suffix=$($py -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
# The version's one definition (as setup.py and the Makefile read it).
version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$root/threadgraph/_version.py")
echo "== building the extension with ASan/UBSan for $($py -V 2>&1)"
$cc -std=gnu11 -O1 -g -fPIC -shared $san -Wall -Wextra -Wno-missing-field-initializers \
    -I"$inc" -I"$root/src/common" -I"$root/src/recorder" -DTG_VERSION="\"$version\"" \
    -o "$pkg/_recorder$suffix" "$root"/src/recorder/*.c -lpthread -lz -ldl -lm
# ASAN_CLI: the Makefile's ASan/UBSan CLI (make check-asan-python passes it),
# copied instead of compiling the same sources again.
if [ -n "${ASAN_CLI:-}" ]; then
    echo "== the CLI with ASan/UBSan: $ASAN_CLI"
    cp "$ASAN_CLI" "$pkg/_bin/threadgraph"
else
    echo "== building the CLI with ASan/UBSan"
    $cc -std=gnu11 -O1 -g $san -Wno-missing-field-initializers \
        -I"$root/src/common" -I"$root/src/lib" -I"$root/src/cli" -DTG_VERSION="\"$version\"" \
        -o "$pkg/_bin/threadgraph" "$root"/src/lib/*.c "$root"/src/cli/*.c -lm -lz
fi

asan_rt=$($cc -print-file-name=libasan.so)
ubsan_rt=$($cc -print-file-name=libubsan.so)
export LD_PRELOAD="$asan_rt:$ubsan_rt"
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:halt_on_error=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export PYTHONPATH="$out${PYTHONPATH:+:$PYTHONPATH}"
export TG_CLI="$pkg/_bin/threadgraph"
export PYTHONDONTWRITEBYTECODE=1

# Run from the private copy, so that the working tree's package is not on sys.path.
cd "$out"
got=$($py -c 'import threadgraph._recorder as r; print(r.__file__)')
if [ "$got" != "$pkg/_recorder$suffix" ]; then
    echo "error: imported $got instead of the sanitizer build" >&2
    exit 1
fi
$py -c 'import threadgraph._recorder
maps = open("/proc/self/maps").read()
assert "libasan" in maps and "libubsan" in maps, "sanitizer runtimes not loaded"'
echo "== pytest with $got"
if [ $# -eq 0 ]; then
    for t in test_recorder.py test_reliability.py test_backends.py test_native.py \
             test_accounting_peak.py; do
        [ -f "$root/tests/python/$t" ] && set -- "$@" "$root/tests/python/$t"
    done
fi
# TG_TEST_JOBS > 1 (make check-asan-python passes one per core): that many
# pytest-xdist workers, where the venv has pytest-xdist.
jobs=()
if [ "${TG_TEST_JOBS:-1}" -gt 1 ] && $py -c 'import xdist' 2>/dev/null; then
    jobs=(-n "$TG_TEST_JOBS")
fi
exec $py -m pytest -q -p no:cacheprovider ${jobs[@]+"${jobs[@]}"} "$@"
