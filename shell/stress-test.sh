#!/usr/bin/env bash
# Hunt a flaky integration test (not run by CI): run one test of tests/it PARALLEL at a time,
# ROUNDS times, beside BUSY busy loops (a slower, shared machine such as CI's 2 cores), and
# print each failure's assertion. How the concurrent `overlaps` race of stop 46 was found: 2
# failures in 160 runs under load, none in 48 without.
# Usage: shell/stress-test.sh TEST_NAME [PARALLEL=4] [ROUNDS=40] [BUSY=3]
#   e.g. shell/stress-test.sh worktree_overlaps::concurrent_runs_replacing_the_cache_under_each_other_all_answer_right
# Needs `./test` run once (the tools the tests drive); builds the test binary if need be.
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:?usage: shell/stress-test.sh TEST_NAME [PARALLEL] [ROUNDS] [BUSY]}
parallel=${2:-4}
rounds=${3:-40}
busy=${4:-3}
eval "$(./test --env)"
bin=$(cargo test --locked --test it --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "it" and m.get("executable"):
        print(m["executable"])')
[ -x "$bin" ] || { echo "could not build tests/it" >&2; exit 1; }
"$bin" --list --exact "$name" 2>/dev/null | grep -q ": test$" || { echo "no test named $name" >&2; exit 2; }
logs=$(mktemp -d)
pids=()
for _ in $(seq 1 "$busy"); do (while :; do :; done) & pids+=($!); done
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$logs"' EXIT
failed=0
for r in $(seq 1 "$rounds"); do
    for j in $(seq 1 "$parallel"); do
        ("$bin" --exact "$name" -q >"$logs/$r-$j.log" 2>&1 || touch "$logs/$r-$j.failed") &
    done
    wait -n 2>/dev/null || true
    while [ "$(jobs -rp | wc -l)" -gt "$busy" ]; do wait -n 2>/dev/null || true; done
    for f in "$logs"/$r-*.failed; do
        [ -e "$f" ] || continue
        failed=$((failed + 1))
        echo "round $r: FAILED"
        grep -m1 -A3 "panicked" "${f%.failed}.log" | cut -c1-400
    done
done
echo "$name: $failed failed of $((rounds * parallel)) runs ($parallel at a time, $busy busy loops)"
[ "$failed" -eq 0 ]
