#!/usr/bin/env bash
# Benchmark for issue 26 (not a test): start-up of `conductor --version` against a hello-world
# Rust binary built the same way (release, this workspace's [profile.release], same toolchain),
# whole processes, medians of 200 interleaved runs each, and their ratio (goal: within 1.3x).
# Measured (2 cores, another build running): hello-world 0.847 ms, `--version` 1.249 ms, 1.47x;
# before the --version fast path (main's release build, same loop): 1.231 vs 2.772 ms, 2.25x.
# Usage: shell/bench-startup.sh [RUNS]   (default 200)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet --locked --bin conductor
bin="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/release/conductor"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/hello/src"
{
  printf '[package]\nname = "hello"\nversion = "0.1.0"\nedition = "2024"\n\n'
  sed -n '/^\[profile.release\]/,/^$/p' Cargo.toml
} > "$tmp/hello/Cargo.toml"
echo 'fn main() { println!("hello 0.1.0"); }' > "$tmp/hello/src/main.rs"
CARGO_TARGET_DIR="$tmp/hello/target" cargo build --release --quiet --manifest-path "$tmp/hello/Cargo.toml"
hello="$tmp/hello/target/release/hello"
exec python3 - "$bin" "$hello" "${1:-200}" <<'PY'
import statistics, subprocess, sys, time
conductor, hello, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
cmds = {"hello-world": [hello], "conductor --version": [conductor, "--version"]}
times = {k: [] for k in cmds}
for _ in range(runs):
    for k, c in cmds.items():
        t = time.perf_counter()
        subprocess.run(c, stdout=subprocess.DEVNULL, check=True)
        times[k].append(time.perf_counter() - t)
for k in cmds:
    print(f"{k:>22} {statistics.median(times[k]) * 1000:8.3f} ms median")
r = statistics.median(times["conductor --version"]) / statistics.median(times["hello-world"])
print(f"ratio: {r:.2f}x ({runs} interleaved runs each)")
PY
