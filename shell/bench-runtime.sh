#!/usr/bin/env bash
# Benchmark of the agent runtime's wake path (not a test): from `conductor post` (the moment the
# post command is started) to the addressed agent's claim, recorded by its `agent run` loop.
# Usage: [BIN=path] shell/bench-runtime.sh [POSTS]   (default 100; throwaway home)
#   BIN: the conductor binary (default: build the release binary; honours CARGO_TARGET_DIR).
# Posts go one at a time: each waits until the previous item is completed, so every sample is an
# idle loop woken by the watcher. Prints p50/p95/max in ms, and a 15 s polling agent (CanopyKit's
# default) for comparison: a post lands uniformly within a poll interval, so it waits 7.5 s at the
# median and 14.25 s at p95 before the poller even looks.
set -euo pipefail
BIN=${BIN:+$(realpath "$BIN")}   # before the cd: a relative path is the caller's
cd "$(dirname "$0")/.."
posts=${1:-100}
. shell/bench-bin.sh   # $bin: BIN, else the release build
echo "binary: $bin ($("$bin" --version))"
work=$(mktemp -d)
export CONDUCTOR_HOME=$work/home
loop_pid=
trap '[ -n "$loop_pid" ] && { kill "$loop_pid" 2>/dev/null; wait "$loop_pid" 2>/dev/null; }; rm -rf "$work"' EXIT
"$bin" -q agent register bench --watch ops >/dev/null
"$bin" -q agent run bench --exec 'cat >/dev/null; printf "[result]\nok\n[/result]\n"' 2>/dev/null &
loop_pid=$!
echo "load average (1, 5, 15 min) at the start: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
python3 - "$bin" "$work/home" "$posts" <<'PY'
import json, os, subprocess, sys, time
bin, home, posts = sys.argv[1], sys.argv[2], int(sys.argv[3])
done = os.path.join(home, "runtime-inbox.jsonl")
def finished():
    try:
        with open(done) as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0
deadline = time.time() + 10
while json.loads(subprocess.run([bin, "--json", "agent", "status", "bench"], capture_output=True).stdout)["running"] is not True:
    if time.time() > deadline: sys.exit("the loop did not start")
    time.sleep(0.05)
started = {}
for i in range(posts):
    t = time.time()
    out = subprocess.run([bin, "--json", "post", "ops", f"@bench job {i}", "--as", "ana"], capture_output=True, check=True)
    started[json.loads(out.stdout)["message"]["message_id"]] = t
    deadline = time.time() + 10
    while finished() < i + 1:
        if time.time() > deadline: sys.exit(f"post {i} was not completed within 10 s")
        time.sleep(0.002)
lat = []
with open(done) as f:
    for line in f:
        d = json.loads(line)
        lat.append(d["last_claim"]["claimed_ms"] - started[d["item"]["source_id"]] * 1000)
lat.sort()
q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]
print(f"{len(lat)} posts, one at a time; post started -> claim recorded by the woken loop (ms)")
print(f"p50 {q(0.5):.1f}  p95 {q(0.95):.1f}  max {lat[-1]:.1f}")
print(f"load average (1, 5, 15 min) at the end: {' '.join(open('/proc/loadavg').read().split()[:3])} on {os.cpu_count()} CPUs")
print("15 s polling agent (CanopyKit default), same path plus the wait for its next poll: p50 >= 7500, p95 >= 14250")
PY
