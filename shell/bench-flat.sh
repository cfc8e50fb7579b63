#!/usr/bin/env bash
# Every curve of issue 26 ("flat costs as the home grows") in one run, one table per curve:
#   1. queue submit per job at 1k / 10k / 100k jobs, a one-job submit beside 100k archived
#      jobs, post / dm / inbox beside another agent's 10k items     (shell/bench-scale.sh)
#   2. post / dm / inbox beside 0, 1k, 10k items of another agent   (shell/bench-inbox.sh)
#   3. events --after LAST on a small and a 24 MB segment, and after a 100k-job submit
#                                                                   (shell/bench-journal.sh)
#   4. queue run throughput, bytes written and peak memory at 200 / 1k / 10k jobs
#                                                                   (shell/bench-queue-run.sh)
#   5. claim at 1,000 and 10,000 live claims                        (shell/bench-store.sh)
#   6. start-up: --version against a hello-world binary             (shell/bench-startup.sh)
# Each table gives medians and the ratios measured in the same run (the goals are ratios: the
# machine's load moves absolute figures, not the ratios).
# Usage: [BIN=path] shell/bench-flat.sh [quick|full]   (default quick: fewer rounds, about 10
#   minutes on 2 cores; full: the rounds the figures in docs/internals.md were measured with)
#   BIN: the conductor binary every section measures (default: build the release binary).
# COMPARE=1 adds pueue and task-spooler to the queue run table (both must be on the PATH; see
# shell/bench-queue-run.sh).
set -euo pipefail
BIN=${BIN:+$(realpath "$BIN")}   # before the cd: a relative path is the caller's
cd "$(dirname "$0")/.."
mode=${1:-quick}
case "$mode" in
  quick) scale=1 inbox=9 journal=30 qrounds=1 store=30 startup=100 ;;
  full) scale=3 inbox=21 journal=100 qrounds=3 store=100 startup=200 ;;
  *) echo "usage: shell/bench-flat.sh [quick|full]" >&2; exit 2 ;;
esac
bin=${BIN:-}
if [ -z "$bin" ]; then
  cargo build --release --quiet --locked --bin conductor
  bin="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/release/conductor"
fi
bin=$(realpath "$bin")
echo "binary: $bin ($("$bin" --version)); mode $mode"
echo "load average (1, 5, 15 min) at the start: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
section() { printf '\n## %s\n\n' "$1"; }
section "1. submit per job, submit beside the archive, one agent's inbox beside another's (goal: within 1.5x)"
shell/bench-scale.sh "$scale" "$bin"
section "2. post / dm / inbox beside 0, 1k, 10k items of another agent (goal: within 1.5x)"
shell/bench-inbox.sh "$inbox" "$bin"
section "3. the journal's tail: events --after LAST (goal: in proportion to what is read)"
BIN="$bin" shell/bench-journal.sh "$journal" 100000
section "4. queue run at 200, 1k, 10k jobs (goal: jobs/s within 1.5x, bytes per job constant)"
BIN="$bin" COMPARE="${COMPARE:-0}" shell/bench-queue-run.sh "$qrounds" 200 1000 10000
section "5. claim at 1,000 and 10,000 live claims (goal: no slower)"
BIN="$bin" shell/bench-store.sh "$store"
section "6. start-up (goal: --version within 1.3x of hello-world)"
BIN="$bin" shell/bench-startup.sh "$startup"
echo "load average (1, 5, 15 min) at the end: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
