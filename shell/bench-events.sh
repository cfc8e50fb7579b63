#!/usr/bin/env bash
# Benchmark for issue 4 (not a test): claim -> watch latency, the same with a 1 s polling
# consumer, release -> claim --wait latency, and a quiet watcher's CPU.
# Usage: [BIN=path] shell/bench-events.sh [N_EVENTS]   (default 200)
#   BIN: the conductor binary (default: build it and the harness in release; with BIN the harness,
#   which only spawns processes and timestamps their lines, is built in the dev profile).
# The four measurements are of different things (no two cases race for one figure), so they run
# one after another; each prints its sample count.
set -euo pipefail
BIN=${BIN:+$(realpath "$BIN")}   # before the cd: a relative path is the caller's
cd "$(dirname "$0")/.."
target="$(mkdir -p "${CARGO_TARGET_DIR:-target}" && cd "${CARGO_TARGET_DIR:-target}" && pwd)"
bin=${BIN:-}
if [ -z "$bin" ]; then
  cargo build --release --quiet --bin conductor --example bench_events
  bin=$target/release/conductor harness=$target/release/examples/bench_events
else
  cargo build --quiet --example bench_events
  harness=$target/debug/examples/bench_events
fi
bin=$(realpath "$bin")
echo "binary: $bin ($("$bin" --version))"
echo "load average (1, 5, 15 min) at the start: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
"$harness" "$bin" "${1:-200}"
echo "load average (1, 5, 15 min) at the end: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
