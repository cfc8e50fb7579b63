#!/usr/bin/env bash
# A/B for `conductor overlaps` (docs/internals.md, "Worktree change cache"): the repository of
# shell/bench-overlaps.sh twice (one per build, each with its own home), its loop (an edit hook
# right after another worktree rewrote a file, then `conductor overlaps`), the two builds
# interleaved in every iteration. Prints whether they answered alike (sessions aside), each
# one's first (cold) run and its median after, and their ratio.
# Usage: shell/bench-overlaps-ab.sh BEFORE_BIN AFTER_BIN [RUNS]
set -euo pipefail
old=$1 new=$2 runs=${3:-20}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export NO_COLOR=1 GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@example.com GIT_COMMITTER_NAME=b GIT_COMMITTER_EMAIL=b@example.com
. "$(dirname "$0")/bench-overlaps-repo.sh"
mk() { overlaps_repo "$1"; mkdir -p "$1/home"; }
mk "$work/a"; mk "$work/b"
python3 - "$old" "$new" "$work" "$runs" <<'PY'
import json, os, subprocess, sys, time
old, new, work, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
sid = "3f6c1b2a-7d4e-4c8b-9a1f-2e5d8c7b6a01"
sides = {"before": (old, f"{work}/a"), "after": (new, f"{work}/b")}
def env(w): return dict(os.environ, CONDUCTOR_HOME=f"{w}/home")
def hook(b, w, path):
    data = json.dumps({"session_id": sid, "cwd": f"{w}/app", "permission_mode": "default", "hook_event_name": "PreToolUse",
        "tool_name": "Edit", "tool_input": {"file_path": path, "old_string": "a", "new_string": "b"}}).encode()
    r = subprocess.run([b, "hook", "claude"], input=data, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env(w)); assert r.returncode == 0
def overlaps(b, w):
    t = time.perf_counter()
    r = subprocess.run([b, "--json", "overlaps"], cwd=f"{w}/app", stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env(w))
    ms = (time.perf_counter() - t) * 1000
    assert r.returncode == 0 and json.loads(r.stdout)["overlaps"], r
    return ms, json.loads(r.stdout)
for name, (b, w) in sides.items():
    hook(b, w, f"{w}/app/src/own.rs"); hook(b, w, f"{w}/app/src/hot.rs")
cold = {name: overlaps(b, w)[0] for name, (b, w) in sides.items()}
t = {name: [] for name in sides}
outs = {}
for n in range(runs):
    for name, (b, w) in sides.items():
        with open(f"{w}/wt1/src/warm.rs", "a") as f: f.write(f"// again {n}\n")
        hook(b, w, f"{w}/app/src/warm.rs")
        ms, out = overlaps(b, w)
        t[name].append(ms)
        outs[name] = out
strip = lambda o: json.dumps({k: ([dict(t, sessions=[]) for t in v] if k == "worktrees" else v) for k, v in o.items()}, sort_keys=True).replace(work + "/a", "W").replace(work + "/b", "W")
print("same output:", strip(outs["before"]) == strip(outs["after"]))
med = {}
for name in sides:
    x = sorted(t[name]); med[name] = x[len(x) // 2]
    print(f"{name:<7} first run {cold[name]:7.1f} ms; then median {med[name]:7.1f} ms  p95 {x[min(len(x)-1, int(0.95*len(x)))]:7.1f} ms (n={runs})")
pairs = sorted(a / b for a, b in zip(t["after"], t["before"]))
print(f"after/before: ratio of medians {med['after']/med['before']:.2f}, median of paired ratios {pairs[len(pairs)//2]:.2f}")
PY
