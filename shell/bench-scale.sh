#!/usr/bin/env bash
# Benchmark of costs that should stay flat as the home grows (not a test; issue 26), whole
# processes, measured in one run and compared as ratios of medians:
#   1. `queue submit` of N independent jobs, per job, at N = 1k, 10k, 100k (goal: the 100k
#      figure within 1.5x of the 1k one).
#   2. a one-job submit beside 100k archived jobs (queue-finished.jsonl; 100 workspaces of
#      1,000) against a home with one archived job: into a new workspace, and into an archived
#      workspace depending on one of its completed jobs (goal: within 1.5x). The first such
#      submit after the archive appears rebuilds the archive's index; that one is shown apart.
#   3. `post`, `dm` and `inbox --agent` for one agent while another agent has 0 or 10k pending
#      inbox items (goal: within 1.5x; each agent's inbox is its own file). Finer: shell/bench-inbox.sh.
# Usage: shell/bench-scale.sh [ROUNDS] [BIN]
#   ROUNDS: rounds of the submit sizes and runs of the one-command cases (x7) (default 3).
#   BIN: the conductor binary to measure (default: build the release binary; honours
#   CARGO_TARGET_DIR). Homes are made under target/ (or $CARGO_TARGET_DIR) and removed at the end.
set -euo pipefail
bin=${2:-${BIN:-}}   # the argument, else the variable BIN
bin=${bin:+$(realpath "$bin")}   # before the cd: a relative path is the caller's
cd "$(dirname "$0")/.."
rounds=${1:-3}
tdir=${CARGO_TARGET_DIR:-$PWD/target}
if [ -z "$bin" ]; then
    cargo build --release --quiet --bin conductor
    bin=$tdir/release/conductor
fi
mkdir -p "$tdir"
work=$(mktemp -d "$tdir/bench-scale.XXXXXX")
trap 'rm -rf "$work"' EXIT

python3 - "$bin" "$work" "$rounds" <<'PY'
import json, os, shutil, statistics, subprocess, sys, time
bin, work, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
runs = 7 * rounds
homes = [0]

def home():
    homes[0] += 1
    h = os.path.join(work, f"home-{homes[0]}")
    return h

def run(h, args, stdin=None, check=True):
    env = dict(os.environ, CONDUCTOR_HOME=h)
    t = time.perf_counter()
    r = subprocess.run([bin, "-q"] + args, input=stdin, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        if check:
            sys.exit(f"{args} failed ({r.returncode}): {r.stderr.decode()}")
        return None
    return dt

def manifest(ws, ids, deps=()):
    return json.dumps({"workspace": ws, "jobs": [
        {"id": i, "prompt": "no-op", "depends_on": list(deps)} for i in ids]}).encode()

rows = []  # (what, small label, small s, large label, large s, goal)

# 1. submit, per job
sizes = [1000, 10000, 100000]
per = {n: [] for n in sizes}
for r in range(rounds):
    for n in sizes:
        h = home()
        per[n].append(run(h, ["queue", "submit", "-"], manifest("b", [f"j{i}" for i in range(n)])) / n)
med = {n: statistics.median(v) for n, v in per.items()}
for n in sizes[1:]:
    rows.append(("queue submit, per job", "1k jobs", med[1000], f"{n // 1000}k jobs", med[n], 1.5))

# 2. one-job submit beside the archive
def archived_job(ws, i):
    t = "2026-01-01T00:00:00Z"
    return json.dumps({"id": f"j{i}", "workspace": ws, "prompt": "no-op", "docs": [], "secrets": [],
        "workdir": "/workspace", "depends_on": [], "outcomes": [], "timeout_minutes": 30.0,
        "agent": "build", "submitted_at": t, "state": {"state": "completed", "since": t,
        "attempts": 1, "started_at": t, "finished_at": t, "exit_code": 0, "runner": "local"}})

def archive_home(n_ws, per_ws):
    h = home()
    run(h, ["queue", "submit", "-"], manifest("seed", ["s"]))  # creates the home
    with open(os.path.join(h, "queue-finished.jsonl"), "w") as f:
        for w in range(n_ws):
            for i in range(per_ws):
                f.write(archived_job(f"a{w}", i) + "\n")
    os.chmod(os.path.join(h, "queue-finished.jsonl"), 0o600)
    return h

small, big = archive_home(1, 1), archive_home(100, 1000)
first = {}
for name, h in (("small", small), ("big", big)):
    # The first submit that needs the archive (re)builds its index.
    first[name] = run(h, ["queue", "submit", "-"], manifest("a0", ["warm"], ["j0"]), check=False)
deps = None not in first.values()  # builds before issue 26 refused any outside dependency
res = {}
for k in range(runs):
    for name, h in (("small", small), ("big", big)):
        res.setdefault(("new", name), []).append(
            run(h, ["queue", "submit", "-"], manifest(f"n{k}", ["x"])))
        if deps:
            res.setdefault(("dep", name), []).append(
                run(h, ["queue", "submit", "-"], manifest("a0", [f"x{k}"], ["j0"])))
m = {k: statistics.median(v) for k, v in res.items()}
rows.append(("1-job submit, new workspace", "1 archived", m[("new", "small")],
             "100k archived", m[("new", "big")], 1.5))
if deps:
    rows.append(("1-job submit, dep on archived job", "1 archived", m[("dep", "small")],
                 "100k archived", m[("dep", "big")], 1.5))
    rows.append(("  first one (index rebuild)", "1 archived", first["small"], "100k archived",
                 first["big"], None))

# 3. one agent's post / dm / inbox beside another agent's 10k pending items
def inbox_home(pending):
    h = home()
    for a in ("me", "other"):
        run(h, ["agent", "register", a, "--watch", "ops"])
    run(h, ["post", "ops", "@other seed", "--as", "ana"])
    if pending > 1:
        # The other agent's items, in its own file (runtime/agents/<name>/inbox.json).
        p = os.path.join(h, "runtime/agents/other/inbox.json")
        shared = os.path.join(h, "runtime-inbox.json")
        doc, counter = json.load(open(p)), json.load(open(shared))
        (iid, item), = doc["items"].items()
        n = counter["last_id"]
        for k in range(pending - 1):
            n += 1
            it = dict(item, id=f"inb-{n:06d}", mention_id=None)
            doc["items"][it["id"]] = it
        counter["last_id"] = n
        for path, d in ((p, doc), (shared, counter)):
            tmp = path + ".bench"
            with open(tmp, "w") as f:
                json.dump(d, f)
            os.chmod(tmp, 0o600)
            os.replace(tmp, path)
    return h

ih = {0: inbox_home(1), 10000: inbox_home(10000)}
res = {}
for k in range(runs):
    for n, h in ih.items():
        res.setdefault(("post", n), []).append(run(h, ["post", "ops", f"@me job {k}", "--as", "ana"]))
        res.setdefault(("dm", n), []).append(run(h, ["dm", "me", f"dm {k}", "--as", "ana"]))
        res.setdefault(("inbox", n), []).append(run(h, ["inbox", "--agent", "me"]))
m = {k: statistics.median(v) for k, v in res.items()}
for what in ("post", "dm", "inbox"):
    rows.append((f"`{what}` for agent me", "other: 1 item", m[(what, 0)],
                 "other: 10k items", m[(what, 10000)], 1.5))

def fmt(s):
    return f"{s * 1e6:.0f} us" if s < 1e-3 else f"{s * 1e3:.1f} ms"

print(f"median of {rounds} round(s) (submit sizes) / {runs} runs (one-command cases); "
      f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
print(f"| what | small | large | ratio | goal |")
print(f"|---|---|---|---|---|")
for what, sl, s, ll, l, goal in rows:
    ok = "" if goal is None else (f"<= {goal}x " + ("ok" if l / s <= goal else "MISSED"))
    print(f"| {what} | {fmt(s)} ({sl}) | {fmt(l)} ({ll}) | {l / s:.2f}x | {ok} |")
print(f"100k-job submit in all: {med[100000] * 100000:.2f} s")
PY
