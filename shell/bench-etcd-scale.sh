#!/usr/bin/env bash
# Benchmark of the shared store at scale (not a test), issue 36 §2: what one `claim` (and its
# `release`) costs when 100, 1,000, 10,000 and 20,000 claims are live, on a three-member etcd
# cluster on loopback ports started with etcd's DEFAULT flags (so its default 1.5 MiB request
# limit applies); whether 20,000 live claims can be held at all; and how long `status --json`
# takes at 10,000 claims.
# Usage: [BIN=path] shell/bench-etcd-scale.sh [RUNS]   (default 20; needs etcd: apt-get install etcd-server)
#   BIN: the conductor binary (default: build the release binary; honours CARGO_TARGET_DIR).
# Each size lives in its own prefix, filled by one instance with `claim` calls of 1,000 files. A
# fill that fails (a store that cannot hold that many claims) is reported and that size is left out
# of the timings. Then a second instance claims one free file and releases it on every prefix in
# turn (round-robin, so machine noise hits every size alike); claim and release are timed
# separately. Prints medians and p95 in ms per call, the ratios to the 100-claim case, and a
# markdown table.
set -euo pipefail
BIN=${BIN:+$(realpath "$BIN")}   # before the cd: a relative path is the caller's
cd "$(dirname "$0")/.."
runs=${1:-20}
. shell/bench-bin.sh   # $bin: BIN, else the release build
. shell/bench-etcd-cluster.sh   # $work, $etcd_hosts: three members with default flags, killed on exit
hosts=$etcd_hosts
mkdir -p "$work/proj/src"
cd "$work/proj"

python3 - "$bin" "$work" "$runs" "$hosts" <<'PY'
import base64, json, os, subprocess, sys, time, urllib.request
bin, work, runs, hosts = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
proj = os.path.join(work, "proj")
sizes = [100, 1000, 10000, 20000]
batch = 1000  # files per `claim` call

def env(n):
    e = dict(os.environ, CONDUCTOR_HOME=os.path.join(work, f"h{n}"), CONDUCTOR_STORE=f"etcd://{hosts}/scale{n}",
             CONDUCTOR_HOST="bench", CONDUCTOR_WATCH_EDITS="0", NO_COLOR="1")
    return e

def run(n, args, check=True):
    p = subprocess.run([bin, *args], env=env(n), cwd=proj, capture_output=True, text=True)
    if check and p.returncode != 0:
        sys.exit(f"{args} on {n} claims failed (exit {p.returncode}): {p.stderr.strip()}")
    return p

def start(n, task):
    return json.loads(run(n, ["--json", "start", task, "--priority", "P1"]).stdout)["instance_id"]

def largest_value(n):
    """(bytes, key) of the largest value under the prefix, read through etcd's JSON gateway."""
    pre = f"/scale{n}/".encode()
    end = pre[:-1] + bytes([pre[-1] + 1])
    body = json.dumps({"key": base64.b64encode(pre).decode(), "range_end": base64.b64encode(end).decode()}).encode()
    url = f"http://{hosts.split(',')[0]}/v3/kv/range"
    r = json.load(urllib.request.urlopen(urllib.request.Request(url, body, {"Content-Type": "application/json"}), timeout=60))
    kvs = r.get("kvs", [])
    best = max(kvs, key=lambda kv: len(base64.b64decode(kv.get("value", ""))), default=None)
    if best is None:
        return 0, "-", 0
    return len(base64.b64decode(best.get("value", ""))), base64.b64decode(best["key"]).decode(), len(kvs)

fill = {}    # n -> (ok, claims held, seconds, message)
probe = {}   # n -> instance id of the timed claims
for n in sizes:
    holder = start(n, f"fill{n}")
    t = time.perf_counter()
    held, msg, calls = 0, "", 0
    for first in range(0, n, batch):
        calls += 1
        files = [f"src/d{i // 100}/f{i}.rs" for i in range(first, min(n, first + batch))]
        p = run(n, ["--json", "claim", "--instance", holder, *files], check=False)
        if p.returncode != 0:
            err = (p.stderr.strip().splitlines() or [""])[0]
            try:
                v = json.loads(p.stdout)
                err = f"{v.get('reason')}: {v.get('message', '')}"
            except Exception:
                pass
            msg = f"claim of files {first}..{first + len(files) - 1} failed (exit {p.returncode}): {err}"
            break
        held += len(files)
    secs = time.perf_counter() - t
    # What the store really holds: the holder's claims as `status --json` lists them.
    st = run(n, ["--json", "status"], check=False)
    try:
        listed = sum(len(i.get("files_claimed", [])) for i in json.loads(st.stdout)["instances"])
    except Exception:
        listed = -1
    ok = held == n and listed == n
    fill[n] = (ok, listed, secs, msg)
    try:
        size, key, keys = largest_value(n)
    except Exception as e:
        size, key, keys = 0, f"not read: {e}", "?"
    state = "ok" if ok else "FAILED"
    print(f"fill {n:>6} claims: {state}, {listed} listed by status, {secs:.1f} s in {calls} claim calls; "
          f"{keys} keys under the prefix, largest value {size / 1024:.0f} KiB ({key})", flush=True)
    if msg:
        print(f"  {msg[:400]}", flush=True)
    if listed > 0:
        probe[n] = start(n, f"probe{n}")

# A size whose fill failed is still timed at what it holds (labelled so): the old layout's curve.
timed = [n for n in sizes if n in probe]
times = {(n, op): [] for n in timed for op in ("claim", "release")}
for r in range(runs):
    for n in timed:
        for op in ("claim", "release"):
            t = time.perf_counter()
            p = subprocess.run([bin, "--json", op, "--instance", probe[n], "src/probe/free.rs"], cwd=proj, env=env(n),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            times[(n, op)].append((time.perf_counter() - t) * 1000)
            if p.returncode != 0:
                sys.exit(f"{op} at {n} claims failed (exit {p.returncode}): {p.stderr.decode().strip()}")

# status --json at each size held (the goal is at 10,000): a few runs each.
status_runs = 5
status_ms = {n: [] for n in timed}
for r in range(status_runs):
    for n in timed:
        t = time.perf_counter()
        run(n, ["--json", "status"])
        status_ms[n].append((time.perf_counter() - t) * 1000)

def q(v, p):
    v = sorted(v); return v[min(len(v) - 1, int(p * len(v)))]
print()
print(f"{runs} runs, medians and p95 in ms per call (interleaved round-robin over the sizes); "
      f"status --json: median of {status_runs}")
def ratio(n, op="claim"):
    if n in timed and 100 in timed:
        a, b = times[(n, op)], times[(100, op)]
        r = f"p50 {q(a, .5) / q(b, .5):.2f}x, p95 {q(a, .95) / q(b, .95):.2f}x"
        return r if fill[n][0] else f"{r} -- at {fill[n][1]:,} claims only: the fill of {n:,} failed"
    return "n/a (that size could not be filled)"
print()
print("| live claims | fill (claims held) | claim p50 (ms) | claim p95 (ms) | release p50 (ms) | release p95 (ms) | status --json p50 (ms) |")
print("|---:|:---|---:|---:|---:|---:|---:|")
for n in sizes:
    if n in timed:
        print(f"| {n:,} | {'ok' if fill[n][0] else 'FAILED'} ({fill[n][1]:,}) | {q(times[(n, 'claim')], .5):.1f} | {q(times[(n, 'claim')], .95):.1f} | "
              f"{q(times[(n, 'release')], .5):.1f} | {q(times[(n, 'release')], .95):.1f} | {q(status_ms[n], .5):.0f} |")
    else:
        print(f"| {n:,} | FAILED ({fill[n][1]:,}) | – | – | – | – | – |")
print()
print(f"claim@10k / claim@100: {ratio(10000)}   (goal: p50 <= 1.5x)")
print(f"claim@20k / claim@100: {ratio(20000)}")
print(f"release@10k / release@100: {ratio(10000, 'release')}")
s10 = f"{q(status_ms[10000], .5):.0f} ms" if 10000 in timed else "n/a"
if 10000 in timed and not fill[10000][0]:
    s10 += f" -- at {fill[10000][1]:,} claims only: the fill of 10,000 failed"
print(f"status --json at 10,000 claims: median {s10}   (goal: < 1000 ms)")
print(f"20,000 live claims held with etcd's default request limit: {'yes' if fill[20000][0] else 'NO'}"
      + ("" if fill[20000][0] else f" ({fill[20000][3][:200]})"))

print(f"load average (1, 5, 15 min) at the end: {' '.join(open('/proc/loadavg').read().split()[:3])} on {os.cpu_count()} CPUs")
PY
