#!/usr/bin/env bash
# Compare two conductor binaries on the file home (not a test): process start, `status --json` and
# one claim+release at 1,000 claims, interleaved round-robin so noise hits both alike.
# Usage: shell/bench-compare.sh OLD_BINARY NEW_BINARY [RUNS]   (default 100)
# Build the old one from a worktree, e.g.:
#   git worktree add /tmp/old <commit> && (cd /tmp/old && cargo build --release)
set -euo pipefail
old=$(realpath "$1") new=$(realpath "$2") runs=${3:-100}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/proj/src"
cd "$work/proj"
unset CONDUCTOR_STORE
# The same 1,000-claim home for both (each binary gets its own copy).
CONDUCTOR_HOME=$work/seed "$new" start seed --priority P1 >/dev/null
for i in $(seq 0 9); do
  files=(); for f in $(seq 1 100); do files+=("src/i$i-f$f.rs"); done
  CONDUCTOR_HOME=$work/seed "$new" claim "${files[@]}" >/dev/null
done
cp -a "$work/seed" "$work/old"; cp -a "$work/seed" "$work/new"
echo "load average (1, 5, 15 min) at the start: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
python3 - "$old" "$new" "$work" "$runs" <<'PY'
import os, subprocess, sys, time
old, new, work, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
proj = os.path.join(work, "proj")
bins = {"old": old, "new": new}
env = {k: dict(os.environ, CONDUCTOR_HOME=os.path.join(work, k)) for k in bins}
cases = {
    "process start (--version)": lambda b: [[b, "--version"]],
    "status --json, 1,000 claims": lambda b: [[b, "--json", "status"]],
    "claim, 1,000 claims": lambda b: [[b, "--json", "claim", "src/bench.rs"]],
}
undo = lambda b: [b, "--json", "release", "src/bench.rs"]
t = {(c, k): [] for c in cases for k in bins}
for _ in range(runs):
    for c, mk in cases.items():
        for k, b in bins.items():
            for cmd in mk(b):
                s = time.perf_counter()
                p = subprocess.run(cmd, cwd=proj, env=env[k], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                t[(c, k)].append((time.perf_counter() - s) * 1000)
                if p.returncode != 0:
                    sys.exit(f"{k}: {cmd} failed: {p.stderr.decode()}")
            if c.startswith("claim"):
                subprocess.run(undo(b), cwd=proj, env=env[k], stdout=subprocess.DEVNULL, check=True)
def q(v, p):
    v = sorted(v); return v[min(len(v) - 1, int(p * len(v)))]
print(f"{runs} interleaved runs, ms per call")
print(f"{'case':<30}{'old p50':>9}{'new p50':>9}{'old p95':>9}{'new p95':>9}{'new/old p50':>13}")
for c in cases:
    o, n = t[(c, "old")], t[(c, "new")]
    print(f"{c:<30}{q(o,.5):9.2f}{q(n,.5):9.2f}{q(o,.95):9.2f}{q(n,.95):9.2f}{q(n,.5)/q(o,.5):12.2f}x")
print(f"load average (1, 5, 15 min) at the end: {' '.join(open('/proc/loadavg').read().split()[:3])} on {os.cpu_count()} CPUs")
print(f"binary size: old {os.path.getsize(old)/1e6:.1f} MB, new {os.path.getsize(new)/1e6:.1f} MB")
PY
