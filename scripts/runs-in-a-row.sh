#!/bin/sh
# The suite N times in a row (docs/TESTING.md, "Runs in a row"):
#   scripts/runs-in-a-row.sh N            make test, N times
#   scripts/runs-in-a-row.sh N -j2        prove -j2 -r t/ (after one make)
#   RUNS_HOGS=2 scripts/runs-in-a-row.sh N -j2
#                                         ... with two busy loops beside
# Logs in build/runs/run-K.log, a line per run in build/runs/summary.
set -u
cd "$(dirname "$0")/.."

n=${1:?how many runs}
shift
dir=build/runs
mkdir -p "$dir"
: > "$dir/summary"

if [ $# -gt 0 ]; then
    make all test-deps web xterm >/dev/null || exit 1
fi

hogs=
for _ in $(seq "${RUNS_HOGS:-0}"); do
    sh -c 'while :; do :; done' &
    hogs="$hogs $!"
done
if [ -n "$hogs" ]; then
    trap 'kill $hogs 2>/dev/null' EXIT
    trap 'exit 1' INT TERM
fi

passed=0
k=1
while [ "$k" -le "$n" ]; do
    start=$(date +%s)

    if [ $# -gt 0 ]; then
        prove "$@" -r t/ > "$dir/run-$k.log" 2>&1
    else
        make test > "$dir/run-$k.log" 2>&1
    fi
    rc=$?

    took=$(( $(date +%s) - start ))

    if [ "$rc" -eq 0 ]; then
        passed=$((passed + 1))
        echo "run $k: passed in ${took} s" | tee -a "$dir/summary"
    else
        failed=$(sed -n 's/^\(t\/[^ ]*\.t\) *(Wstat.*/\1/p' "$dir/run-$k.log" \
                 | tr '\n' ' ')
        echo "run $k: FAILED in ${took} s: ${failed:-see run-$k.log}" \
            | tee -a "$dir/summary"
    fi

    k=$((k + 1))
done

echo "$passed of $n passed" | tee -a "$dir/summary"
[ "$passed" -eq "$n" ]
