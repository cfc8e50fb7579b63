#!/usr/bin/env bash
# Benchmark (not a test; issue 26): `post`, `dm` and `inbox --agent me` for one agent while
# another agent has 0, 1k or 10k pending inbox items; and (issue 35) a post to that other agent. Whole processes, medians of one run,
# compared as ratios against the home where the other agent has nothing (goal: within 1.5x).
# The other agent's items are written straight into its file (runtime/agents/other/inbox.json,
# the layout conductor writes), copies of one real item.
# Usage: shell/bench-inbox.sh [RUNS] [BIN]
#   RUNS: runs of each command per size (default 21).
#   BIN: the conductor binary (default: build the release binary; honours CARGO_TARGET_DIR).
set -euo pipefail
bin=${2:-${BIN:-}}   # the argument, else the variable BIN
bin=${bin:+$(realpath "$bin")}   # before the cd: a relative path is the caller's
cd "$(dirname "$0")/.."
runs=${1:-21}
tdir=${CARGO_TARGET_DIR:-$PWD/target}
if [ -z "$bin" ]; then
    cargo build --release --quiet --bin conductor
    bin=$tdir/release/conductor
fi
mkdir -p "$tdir"
work=$(mktemp -d "$tdir/bench-inbox.XXXXXX")
trap 'rm -rf "$work"' EXIT

python3 - "$bin" "$work" "$runs" <<'PY'
import json, os, statistics, subprocess, sys, time
bin, work, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])

def run(h, args):
    env = dict(os.environ, CONDUCTOR_HOME=h)
    t = time.perf_counter()
    r = subprocess.run([bin, "-q"] + args, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"{args} failed ({r.returncode}): {r.stderr.decode()}")
    return dt

def home(pending):
    h = os.path.join(work, f"home-{pending}")
    for a in ("me", "other"):
        run(h, ["agent", "register", a, "--watch", "ops"])
    if pending == 0:
        return h
    run(h, ["post", "ops", "@other seed", "--as", "ana"])
    p = os.path.join(h, "runtime/agents/other/inbox.json")
    doc = json.load(open(p))
    (iid, item), = doc["items"].items()
    shared = os.path.join(h, "runtime-inbox.json")
    counter = json.load(open(shared))
    n = counter["last_id"]
    for k in range(pending - 1):
        n += 1
        it = dict(item, id=f"inb-{n:06d}", mention_id=None)
        doc["items"][it["id"]] = it
    counter["last_id"] = n
    for path, d in ((p, doc), (shared, counter)):
        tmp = path + ".bench"
        with open(tmp, "w") as f:
            json.dump(d, f, indent=2)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    return h

sizes = [0, 1000, 10000]
homes = {n: home(n) for n in sizes}
res = {}
for k in range(runs):
    for n, h in homes.items():
        res.setdefault(("post", n), []).append(run(h, ["post", "ops", f"@me job {k}", "--as", "ana"]))
        res.setdefault(("dm", n), []).append(run(h, ["dm", "me", f"dm {k}", "--as", "ana"]))
        # Issue 35 item 3: a post *to* the agent with the backlog (appended, not rewritten).
        res.setdefault(("post @other", n), []).append(run(h, ["post", "ops", f"@other job {k}", "--as", "ana"]))
        res.setdefault(("inbox", n), []).append(run(h, ["inbox", "--agent", "me"]))
m = {k: statistics.median(v) for k, v in res.items()}
size = os.path.getsize(os.path.join(homes[10000], "runtime/agents/other/inbox.json"))
print(f"median of {runs} runs; other's inbox file at 10k items: {size / 1e6:.1f} MB; "
      f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
print("| what (agent me) | other: 0 | other: 1k | other: 10k | 10k / 0 | goal |")
print("|---|---|---|---|---|---|")
for what in ("post", "dm", "inbox", "post @other"):
    r = m[(what, 10000)] / m[(what, 0)]
    print(f"| `{what}` | " + " | ".join(f"{m[(what, n)] * 1e3:.2f} ms" for n in sizes)
          + f" | {r:.2f}x | <= 1.5x {'ok' if r <= 1.5 else 'MISSED'} |")
PY
