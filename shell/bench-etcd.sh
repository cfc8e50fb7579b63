#!/usr/bin/env bash
# Benchmark of the shared store (not a test), issue 12: one `claim` (and its `release`) against a
# three-member etcd cluster on loopback ports, beside the same claim in a file home, in one run;
# plus how soon `watch` on one "host" prints a claim made on another.
# Usage: [BIN=path] shell/bench-etcd.sh [RUNS]   (default 100; needs etcd: apt-get install etcd-server)
#   BIN: the conductor binary (default: build the release binary; honours CARGO_TARGET_DIR).
# Cases run interleaved, round-robin, so machine noise hits both alike; prints median and p95 in
# ms per call and their ratio.
set -euo pipefail
BIN=${BIN:+$(realpath "$BIN")}   # before the cd: a relative path is the caller's
cd "$(dirname "$0")/.."
runs=${1:-100}
. shell/bench-bin.sh   # $bin: BIN, else the release build
. shell/bench-etcd-cluster.sh   # $work, $etcd_hosts: three members, killed on exit
store="etcd://$etcd_hosts/bench"
mkdir -p "$work/proj/src"
cd "$work/proj"

python3 - "$bin" "$work" "$runs" "$store" <<'PY'
import json, os, subprocess, sys, time
bin, work, runs, store = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
proj = os.path.join(work, "proj")
files = dict(os.environ, CONDUCTOR_HOME=os.path.join(work, "f"))
files.pop("CONDUCTOR_STORE", None)
etcd = dict(os.environ, CONDUCTOR_HOME=os.path.join(work, "e"), CONDUCTOR_STORE=store, CONDUCTOR_HOST="bench-a")
other = dict(etcd, CONDUCTOR_HOME=os.path.join(work, "o"), CONDUCTOR_HOST="bench-b")
def start(e):
    out = subprocess.run([bin, "--json", "start", "bench", "--priority", "P1"], env=e, cwd=proj, capture_output=True, check=True).stdout
    return json.loads(out)["instance_id"]
ids = {"files": start(files), "etcd": start(etcd)}
envs = {"files": files, "etcd": etcd}
times = {(k, op): [] for k in envs for op in ("claim", "release")}
for r in range(runs):
    for k, e in envs.items():
        for op in ("claim", "release"):
            t = time.perf_counter()
            p = subprocess.run([bin, "--json", op, "--instance", ids[k], "src/bench.rs"], cwd=proj, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            times[(k, op)].append((time.perf_counter() - t) * 1000)
            if p.returncode != 0:
                sys.exit(f"{k} {op} failed: {p.stderr.decode()}")
def q(v, p):
    v = sorted(v); return v[min(len(v) - 1, int(p * len(v)))]
print(f"{runs} runs, medians and p95 in ms per call (interleaved)")
print(f"{'case':<32}{'p50':>8}{'p95':>8}")
for (k, op), v in times.items():
    print(f"{op + ', ' + ('file home' if k == 'files' else 'etcd, 3 members'):<32}{q(v, .5):8.2f}{q(v, .95):8.2f}")
for op in ("claim", "release"):
    print(f"ratio etcd/file home, {op}: p50 {q(times[('etcd', op)], .5) / q(times[('files', op)], .5):.2f}x, p95 {q(times[('etcd', op)], .95) / q(times[('files', op)], .95):.2f}x")

# watch on host b sees a claim made on host a: from the claim command's start to the line.
start(other)
lat = []
w = subprocess.Popen([bin, "--json", "watch", "--types", "claim.granted"], cwd=proj, env=other, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
time.sleep(0.5)
for r in range(min(runs, 50)):
    t = time.perf_counter()
    subprocess.run([bin, "claim", "--instance", ids["etcd"], f"src/w{r}.rs"], cwd=proj, env=etcd, stdout=subprocess.DEVNULL, check=True)
    w.stdout.readline()
    lat.append((time.perf_counter() - t) * 1000)
w.kill()
print(f"claim on host a → printed by watch on host b: p50 {q(lat, .5):.2f} ms, p95 {q(lat, .95):.2f} ms ({len(lat)} claims, including the claim itself)")
print(f"load average (1, 5, 15 min) at the end: {' '.join(open('/proc/loadavg').read().split()[:3])} on {os.cpu_count()} CPUs")
PY
