#!/bin/sh
# tests/fuzz/run.sh TARGET SECONDS|RUNS - runs one libFuzzer target, bounded.
#
#   tests/fuzz/run.sh fuzz_memrec 20          run for 20 seconds
#   tests/fuzz/run.sh fuzz_memrec 5000000x    run 5,000,000 inputs
#
# Builds the target with `make build/fuzz/TARGET` if needed.  The working corpus
# is build/fuzz/corpus/TARGET (started from tests/fuzz/seeds/TARGET, grown by the
# run; the seeds in git are never written).  One process (no -jobs), at nice 10,
# so it shares the machine.  Each input is limited to 10 s, 1 GiB of RSS and
# 256 MiB in one allocation (-timeout, -rss_limit_mb, -malloc_limit_mb).  Crash inputs land in build/fuzz/artifacts/.  The
# run's figures are appended to build/fuzz/stats.log as
#   DATE TARGET executions=N seconds=S exit=E
# Exit status: libFuzzer's (0 = no crash, no sanitizer report, no property
# violated).  FUZZ_ARGS adds libFuzzer options.
set -eu

if [ $# -ne 2 ]; then
    echo "usage: $0 TARGET SECONDS|RUNSx" >&2
    exit 2
fi
target=$1
amount=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$root/build/fuzz/$target
seeds=$root/tests/fuzz/seeds/$target
corpus=$root/build/fuzz/corpus/$target
art=$root/build/fuzz/artifacts/$target
log=$root/build/fuzz/logs/$target.log

make -s -C "$root" "build/fuzz/$target"
mkdir -p "$corpus" "$art" "$(dirname "$log")"
[ -d "$seeds" ] && cp -n "$seeds"/* "$corpus"/ 2>/dev/null || true

case $amount in
    *x) limit="-runs=${amount%x}" ;;
    *)  limit="-max_total_time=$amount" ;;
esac
# The line reader needs inputs past its 64 KiB line limit; the rest are lines.
case $target in
    fuzz_linereader) maxlen=140000 ;;
    fuzz_decorate|fuzz_peaks) maxlen=16384 ;;
    *) maxlen=4096 ;;
esac

start=$(date +%s)
set +e
# shellcheck disable=SC2086
# Bounded in memory and time per input: a small input that makes a parser
# allocate hundreds of MiB (a zstd bomb, a deep chain) or run for seconds
# (a quadratic loop) is a finding, as a crash is (docs/security.md).
nice -n 10 "$bin" $limit -max_len=$maxlen -timeout=10 -rss_limit_mb=1024 \
    -malloc_limit_mb=256 \
    -print_final_stats=1 -artifact_prefix="$art/" ${FUZZ_ARGS:-} "$corpus" >"$log" 2>&1
rc=$?
set -e
secs=$(( $(date +%s) - start ))
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) $target executions=${execs:-?} seconds=$secs exit=$rc" |
    tee -a "$root/build/fuzz/stats.log"
if [ $rc -ne 0 ]; then
    grep -E 'ERROR|runtime error|property violated|Test unit written' "$log" | head -n 20 >&2
    echo "$target: failed, see $log" >&2
fi
exit $rc
