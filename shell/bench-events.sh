#!/usr/bin/env bash
# Benchmark for issue 4 (not a test): claim -> watch latency, the same with a 1 s polling
# consumer, release -> claim --wait latency, and a quiet watcher's CPU.
# Usage: shell/bench-events.sh [N_EVENTS]   (default 200)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet --bin conductor --example bench_events
exec target/release/examples/bench_events target/release/conductor "${1:-200}"
