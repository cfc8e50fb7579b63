#!/usr/bin/env bash
# Benchmark for issue 26 (not a test): `events --after LAST` on a small and on a 24 MB active
# segment, whole processes, medians of interleaved runs, and their ratio (one run, release).
# A reader seeks by seq, so the ratio stays near 1. Measured (release, 2 busy cores): 2.84 vs
# 3.54 ms, 1.25x (50 runs); the build before the seek: 3.20 vs 92.68 ms, 29x (20 runs), when
# every reader parsed the active segment from its start.
# Then a real submit of JOBS jobs (default 100,000) in one transaction: the biggest journal file
# it leaves (before the split of big transactions: one 24 MB segment; now each file stays under
# events_segment_bytes, 4 MiB), the submit's time, and `events --after LAST` after it.
# Usage: [BIN=path] shell/bench-journal.sh [RUNS] [JOBS]   (default 100, 100000)
#   BIN: the conductor binary (default: build the release binary; honours CARGO_TARGET_DIR).
set -euo pipefail
BIN=${BIN:+$(realpath "$BIN")}   # before the cd: a relative path is the caller's
cd "$(dirname "$0")/.."
bin=${BIN:-}
if [ -z "$bin" ]; then
  cargo build --release --quiet --locked --bin conductor
  bin="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/release/conductor"
fi
bin=$(realpath "$bin")
echo "binary: $bin ($("$bin" --version))"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "load average (1, 5, 15 min) at the start: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
python3 - "$bin" "$tmp" "${1:-100}" "${2:-100000}" <<'PY'
import json, os, secrets, statistics, subprocess, sys, time
bin, tmp, runs, jobs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

def home(name, jobs):
    h = os.path.join(tmp, name)
    m = {"workspace": "w", "jobs": [{"id": f"j{i}", "prompt": "p"} for i in range(jobs)]}
    subprocess.run([bin, "-q", "queue", "submit", "-"], input=json.dumps(m).encode(),
                   env={**os.environ, "CONDUCTOR_HOME": h}, check=True, stdout=subprocess.DEVNULL)
    return h

small = home("small", 10)
big = home("big", 1000)
# Grow the big home's active segment to 24 MB with renumbered copies of its real lines (one
# submit of ~110,000 jobs writes the same, but takes a minute).
path = os.path.join(big, "events.jsonl")
lines = [json.loads(l) for l in open(path)]
seq = lines[-1]["seq"]
with open(path, "a") as f:
    while f.tell() < 24 * 1024 * 1024:
        for e in lines:
            seq += 1
            e = dict(e, seq=seq, event_id=f"evt-{seq}-{secrets.token_hex(6)}")
            f.write(json.dumps(e, separators=(",", ":")) + "\n")

def last_seq(h):
    with open(os.path.join(h, "events.jsonl"), "rb") as f:
        return json.loads(f.read().splitlines()[-1])["seq"]

times = {"small": [], "big": []}
for _ in range(runs):
    for name, h in (("small", small), ("big", big)):
        env = {**os.environ, "CONDUCTOR_HOME": h}
        after = str(last_seq(h))
        t = time.perf_counter()
        r = subprocess.run([bin, "events", "--after", after], env=env, capture_output=True)
        times[name].append(time.perf_counter() - t)
        assert r.returncode == 0 and json.loads(r.stdout)["items"] == [], r
sizes = {n: os.path.getsize(os.path.join(h, "events.jsonl")) for n, h in (("small", small), ("big", big))}
print(f"{'active segment':>16} {'bytes':>10} {'median ms':>10}")
for n in ("small", "big"):
    print(f"{n:>16} {sizes[n]:>10} {statistics.median(times[n]) * 1000:>10.2f}")
print(f"ratio big/small: {statistics.median(times['big']) / statistics.median(times['small']):.2f}x ({runs} runs each, interleaved)")

# A real big transaction.
h = os.path.join(tmp, "real")
t = time.perf_counter()
home("real", jobs)
submit = time.perf_counter() - t
files = sorted((os.path.getsize(os.path.join(h, f)), f) for f in os.listdir(h)
               if f.startswith("events.") and f.endswith(".jsonl"))
env = {**os.environ, "CONDUCTOR_HOME": h}
ts = []
for _ in range(min(runs, 30)):
    with open(os.path.join(h, "events.jsonl"), "rb") as f:
        seq = json.loads(f.read().splitlines()[-1])["seq"]
    t = time.perf_counter()
    subprocess.run([bin, "events", "--after", str(seq)], env=env, capture_output=True, check=True)
    ts.append(time.perf_counter() - t)
print(f"one submit of {jobs} jobs: {submit:.2f} s; {len(files)} journal files, biggest "
      f"{files[-1][0] / 1e6:.1f} MB ({files[-1][1]}), total {sum(s for s, _ in files) / 1e6:.1f} MB; "
      f"events --after LAST: {statistics.median(ts) * 1000:.2f} ms (median of {len(ts)})")
PY
echo "load average (1, 5, 15 min) at the end: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
