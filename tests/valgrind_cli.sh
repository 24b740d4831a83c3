#!/bin/bash
# tests/valgrind_cli.sh "VALGRIND COMMAND" CLI - every CLI command on the fixture
# dumps (tests/cli/fixtures) under valgrind memcheck (make valgrind).
#
# Each run must exit as it does without valgrind (0, or 1 for the expected
# error cases) and valgrind must report nothing: its --error-exitcode (99)
# marks memory errors and definite/indirect leaks.  Graph commands run with
# --script-only (gnuplot is not ours to check) and write into a temporary
# directory.  Prints one line per run and a summary; exits 1 if any run failed.
set -uo pipefail

vg=$1
cli=$2
root=$(cd "$(dirname "$0")/.." && pwd)
fx=$root/tests/cli/fixtures
tut=$fx/tutorial
nt=$fx/notime
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '1394031412.5#a.py:3:f\x1b[2J=>409600\n05#b.py:1:g=>-409600\ngarbage\n' > "$tmp/hostile.mem"
printf '1394031412.0#c.py:1:h\n' > "$tmp/hostile.stack"
gzip -c "$tut/Thread-7.mem" > "$tmp/Thread-7.mem.gz"
acc2=$fx/accounting2
printf '# threadgraph snapshot 2\n# thread: 0 t\n1 - 0 1 1 1 1 a\n2 9 0 1 1 1 1 orphan\n3 1 0 1 1 1 1 b\x1b[2J\n' \
    > "$tmp/snapshot-1-hostile"

# a binary capture of the tutorial's Thread-7 (tests/cli/capture_encode.py), and a
# copy cut short inside its records
mkdir -p "$tmp/run" "$tmp/cut"
python3 - "$tut" "$tmp" "$root/tests/cli" <<'PYEOF'
import os, sys
tut, tmp, cli = sys.argv[1:]
sys.path.insert(0, cli)
import capture_encode as ce
names = ["Thread-7.mem", "Thread-7.stack", "process.mem"]
os.makedirs(os.path.join(tmp, "canon"), exist_ok=True)
for n in names:
    out = []
    for ln in open(os.path.join(tut, n), "rb").read().split(b"\n")[:-1]:
        s = ln.lstrip(b" ")
        t, _, rest = s.partition(b"#")
        sec, _, fr = t.partition(b".")
        out.append(ln[:len(ln) - len(s)] + sec + b"." + (fr + b"000000")[:6] + b"#" + rest)
    open(os.path.join(tmp, "canon", n), "wb").write(b"".join(x + b"\n" for x in out))
data = ce.encode([os.path.join(tmp, "canon", n) for n in names], chunk=64)
open(os.path.join(tmp, "run", "capture.tg"), "wb").write(data)
open(os.path.join(tmp, "cut", "capture.tg"), "wb").write(data[:len(data) * 2 // 3])
PYEOF

runs=0
failed=0
# check EXPECTED_EXIT ARGS...
check() {
    local want=$1 rc
    shift
    runs=$((runs + 1))
    $vg "$cli" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ $rc -ne "$want" ]; then
        failed=$((failed + 1))
        echo "FAIL (exit $rc, expected $want): threadgraph $*"
        tail -n 30 "$tmp/err"
    else
        echo "ok   threadgraph $*"
    fi
}

o="-o $tmp"
check 0 peaks --peak=20 --peak_delta_time=0 --peak_delta_value=50 "$tut"/*.mem
check 0 peaks --json --top=3 --sort=size "$tut"/*.mem "$tmp/Thread-7.mem.gz"
check 0 --no_time peaks --peak=1 "$nt"/Worker.mem
check 0 memg --script-only $o --process_rebase=5500 --peak=20 --peak_delta_time=0 \
    --peak_delta_value=50 --time_from "05/03/2014 14:00" --time_to "05/03/2030" "$tut"/*.mem
check 0 memg --script-only $o --no_time --cap 100 "$nt"/Worker.mem "$nt"/process.mem
check 0 memh --script-only $o "$tut"/*.mem "$tut"/*.stack
check 0 nesting --script-only $o "$tut"/Thread-7.stack
check 0 --no_time nesting --script-only $o "$nt"/Worker.stack
check 0 interleave --script-only $o "$tut"/*.mem
# the temporary plot folder (made, filled, removed) and --keep's, past a gnuplot
# that draws nothing; the elapsed and clock axes; many threads grouped in grey
GNUPLOT=/bin/true check 1 memg $o --top-threads 2 "$tut"/*.mem
GNUPLOT=/bin/true check 1 nesting --keep --time-axis=clock $o "$tut"/Thread-7.stack
check 0 memg --script-only $o --time-axis=clock --top-threads 1 "$tut"/*.mem
check 0 decorate-stack --prefix=/data/code/thread_graph/examples/ \
    "$tut"/Thread-7.mem "$tut"/Thread-7.stack 30
check 0 decorate-stack "$tut"/Thread-7.mem "$tut"/Thread-7.stack \
    "19: Thread-7>/data/code/thread_graph/examples/main.py:39:doStuff=>167936"
check 0 peaks --json --peak=1 "$tmp/hostile.mem"
check 1 decorate-stack "$tmp/hostile.mem" "$tmp/hostile.stack" 1
check 1 peaks --strict "$tmp/hostile.mem"
check 1 peaks "$tmp/missing.mem"
check 1 memg --script-only $o "$tut"/Thread-7.stack
check 2 peaks --peak=abc "$tut"/Thread-7.mem
check 0 top "$acc2/run-a"
check 0 top --depth 1 --merge-threads --sort total "$acc2/run-a/snapshot-2-final"
check 0 diff --base "$acc2/run-a" "$acc2/run-b"
check 0 diff --per-thread --depth 0 --base "$fx/accounting/snapshot-1-before" "$acc2/run-a"
check 0 top "$tmp/snapshot-1-hostile"
check 1 top --strict "$tmp/snapshot-1-hostile"
fr=$fx/flamerun
check 0 folded "$fr"
check 0 folded --metric delta --thread "worker 1" "$fr"
check 0 folded --metric time --merge-threads "$fr"
check 0 folded --metric peak "$fr"
check 1 folded --metric peak "$acc2/run-a"
check 0 flamegraph --metric live -o "$tmp/flame.svg" "$fr"
check 0 flamegraph --min-width 5 -o "$tmp/flame.svg" "$tmp/snapshot-1-hostile"
check 0 report --peak 1 -o "$tmp/report.html" "$fr"
check 0 report --metric delta -o "$tmp/report.html" "$tut"
check 1 report -o "$tmp/report.html" "$tmp/missing"
check 0 peaks --json --peak=20 "$tmp/run"
check 0 memg --script-only $o --peak=20 "$tmp/run/capture.tg"
check 0 nesting --script-only $o "$tmp/run"
check 0 decorate-stack --prefix=/data/code/thread_graph/examples/ "$tmp/run" Thread-7 30
check 0 export -o "$tmp/exported" "$tmp/run"
check 1 export -o "$tmp/exported" "$tmp/run"
check 0 peaks --peak=1 "$tmp/cut"
check 0 export -o "$tmp/exported-cut" "$tmp/cut"
check 1 decorate-stack "$tmp/run" Nobody 1
# folded, flamegraph and report reading the capture natively
check 0 folded --metric delta "$tmp/run"
check 0 folded --metric time --thread Thread-7 "$tmp/run/capture.tg"
check 1 folded --metric delta --thread Nobody "$tmp/run"
check 0 flamegraph --metric delta -o "$tmp/flame.svg" "$tmp/run"
check 0 report --peak 20 --metric delta -o "$tmp/report.html" "$tmp/run"
check 0 report --metric time -o "$tmp/report.html" "$tmp/cut"
# held memory and the threads' figures: from the capture, text dumps with
# their .stack, an accounting summary (fixture without pairs), and none
check 0 memg --held --script-only $o "$tmp/run"
check 0 memg --held --script-only $o "$fr"/*.mem "$fr"/process.mem
check 0 threads "$fr"
check 0 threads --json "$tmp/run"
check 1 threads "$tmp/missing"
check 0 --help
check 0 memg --help

echo "valgrind: $runs runs, $((runs - failed)) clean, $failed failed"
[ $failed -eq 0 ]
