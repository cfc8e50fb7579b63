#!/usr/bin/env bash
# Benchmark (not a test): the CPU the home's edit watcher (`conductor watch-edits`, started by a
# session's `start`) spends while another session claims and releases one file N times at 10,000
# live claims: every commit replaces status.json, which the watcher follows. Reads the watcher's
# utime + stime from /proc before and after.
# Usage: [BIN=path] shell/bench-watch-edits.sh [N]   (default 100 claims and 100 releases)
set -euo pipefail
BIN=${BIN:+$(realpath "$BIN")}   # before the cd: a relative path is the caller's
cd "$(dirname "$0")/.."
n=${1:-100}
. shell/bench-bin.sh   # $bin: BIN, else the release build
tmp=$(mktemp -d)
mkdir -p "$tmp/proj/src"
cd "$tmp/proj"
export CONDUCTOR_HOME=$tmp/home NO_COLOR=1
json_id() { python3 -c 'import json,sys; print(json.load(sys.stdin)["instance_id"])'; }
claimant=""
for i in $(seq 1 10); do
  id=$(CONDUCTOR_WATCH_EDITS=0 "$bin" --json start "task $i" --project bench --priority P1 | json_id)
  [ -n "$claimant" ] || claimant=$id
  files=(); for f in $(seq 1 1000); do files+=("src/i$i-f$f.rs"); done
  "$bin" claim --instance "$id" "${files[@]}" >/dev/null
done
# This start launches the watcher (none runs yet: the others had it turned off).
"$bin" --json start "watched session" --project bench --priority P1 >/dev/null
pid=""
for _ in $(seq 1 50); do
  pid=$(awk '/^pid /{print $2; exit}' "$CONDUCTOR_HOME/edit-watch.lock" 2>/dev/null || true)
  [ -n "$pid" ] && break
  sleep 0.1
done
[ -n "$pid" ] || { echo "no edit watcher started"; exit 1; }
trap 'kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
sleep 1
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
c0=$(ticks); t0=$(date +%s.%N)
for _ in $(seq 1 "$n"); do
  "$bin" --json claim --instance "$claimant" src/bench.rs >/dev/null
  "$bin" --json release --instance "$claimant" src/bench.rs >/dev/null
done
sleep 1   # its last look
c1=$(ticks); t1=$(date +%s.%N)
hz=$(getconf CLK_TCK)
python3 -c "
c = ($c1 - $c0) / $hz; n = 2 * $n
print(f'edit watcher CPU during {n} commits at 10,000 claims: {c:.2f} s, {c / n * 1000:.2f} ms per commit '
      f'(the commits took {$t1 - $t0:.1f} s); binary: $bin')"
