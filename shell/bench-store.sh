#!/usr/bin/env bash
# Benchmark of the store (not a test), issue 8's targets: one `claim` at 1,000 and at 10,000 live
# claims, `status --json` at 1,000, the protocol's reference recipe (flock + jq + mv) on the same
# 1,000-claim state, and a claim in a home that also holds big ledgers of the other domains
# (when this build has them), which must cost the same as in a home without them.
# Usage: [BIN=path] shell/bench-store.sh [RUNS]   (default 100; throwaway homes)
#   BIN: the conductor binary (default: build the release binary; honours CARGO_TARGET_DIR).
# Cases run interleaved, round-robin, so machine noise hits all of them alike; prints median and
# p95 in ms per call, and ratios measured in the same run.
set -euo pipefail
BIN=${BIN:+$(realpath "$BIN")}   # before the cd: a relative path is the caller's
cd "$(dirname "$0")/.."
runs=${1:-100}
. shell/bench-bin.sh   # $bin: BIN, else the release build
echo "binary: $bin ($("$bin" --version))"
command -v jq >/dev/null || { echo "jq is needed for the baseline (apt install jq)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/proj/src"
cd "$work/proj"

# A home with N claims: instances x files-per-instance (at most 1,000 files per call).
fill() { # home instances files
  local home=$1 n=$2 per=$3
  for i in $(seq 1 "$n"); do
    id=$(CONDUCTOR_HOME=$home "$bin" --json start "task $i" --project bench --priority P1 | jq -r .instance_id)
    files=(); for f in $(seq 1 "$per"); do files+=("src/i$i-f$f.rs"); done
    [ "$per" -eq 0 ] || CONDUCTOR_HOME=$home "$bin" claim --instance "$id" "${files[@]}" >/dev/null
  done
}
fill "$work/k1" 10 100
fill "$work/k10" 10 1000
fill "$work/empty" 1 0
# The same empty protocol state, plus the other domains' big documents (issue 8: a claim must not
# depend on them). Filled by shell/fill-domains.sh when this build has the runtime and queue.
fill "$work/domains" 1 0
if "$bin" queue --help >/dev/null 2>&1; then
  CONDUCTOR_HOME=$work/domains "$OLDPWD/shell/fill-domains.sh" "$bin" 10000
fi
echo "state sizes: 1,000 claims $(wc -c <"$work/k1/status.json") B, 10,000 claims $(wc -c <"$work/k10/status.json") B"
echo "home with other domains: $(du -sk "$work/domains" | cut -f1) KiB"
mkdir -p "$work/jq" && cp "$work/k1/status.json" "$work/jq/status.json"
echo "load average (1, 5, 15 min) at the start: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"

python3 - "$bin" "$work" "$runs" <<'PY'
import json, os, resource, subprocess, sys, time
bin, work, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
proj = os.path.join(work, "proj")
def env(h): return dict(os.environ, CONDUCTOR_HOME=os.path.join(work, h))
def first_id(h):
    out = subprocess.run([bin, "--json", "status"], env=env(h), cwd=proj, capture_output=True, check=True).stdout
    return json.loads(out)["instances"][0]["id"]
ids = {h: first_id(h) for h in ["k1", "k10", "empty", "domains"]}
jq_home = os.path.join(work, "jq")
f = os.path.join(proj, "src/bench.rs")
jq_claim = f'''exec 200>"{jq_home}/status.lock"; flock -w 5 200 || exit 1
jq --arg f "{f}" --arg id "{ids['k1']}" '.global_claims[$f]=$id | (.instances[] | select(.id==$id) | .files_claimed) += [$f]' "{jq_home}/status.json" > "{jq_home}/status.json.tmp"
mv "{jq_home}/status.json.tmp" "{jq_home}/status.json"'''
jq_release = f'''exec 200>"{jq_home}/status.lock"; flock -w 5 200 || exit 1
jq --arg f "{f}" --arg id "{ids['k1']}" 'del(.global_claims[$f]) | (.instances[] | select(.id==$id) | .files_claimed) -= [$f]' "{jq_home}/status.json" > "{jq_home}/status.json.tmp"
mv "{jq_home}/status.json.tmp" "{jq_home}/status.json"'''
def claim(h): return ([bin, "--json", "claim", "--instance", ids[h], "src/bench.rs"], [bin, "--json", "release", "--instance", ids[h], "src/bench.rs"], env(h))
cases = {
    "process start (--version)": ([bin, "--version"], None, env("empty")),
    "status --json, 1,000 claims": ([bin, "--json", "status"], None, env("k1")),
    "claim, empty home": claim("empty"),
    "claim, empty protocol + other domains": claim("domains"),
    "claim, 1,000 claims": claim("k1"),
    "claim, 10,000 claims": claim("k10"),
    "jq recipe: claim, 1,000 claims": (["bash", "-c", jq_claim], ["bash", "-c", jq_release], env("k1")),
}
times = {k: [] for k in cases}
cpu = {k: [] for k in cases}
def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN); return r.ru_utime + r.ru_stime
for r in range(runs):
    for name, (cmd, undo, e) in cases.items():
        c0 = child_cpu()
        t = time.perf_counter()
        p = subprocess.run(cmd, cwd=proj, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        times[name].append((time.perf_counter() - t) * 1000)
        cpu[name].append((child_cpu() - c0) * 1000)
        if p.returncode != 0:
            sys.exit(f"{name}: exit {p.returncode}: {p.stderr.decode()}")
        if undo:
            p = subprocess.run(undo, cwd=proj, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            if p.returncode != 0:
                sys.exit(f"{name} (undo): exit {p.returncode}: {p.stderr.decode()}")
def q(v, p):
    v = sorted(v); return v[min(len(v) - 1, int(p * len(v)))]
med = {k: q(v, 0.5) for k, v in times.items()}
print(f"{runs} rounds, interleaved; milliseconds per call (the claim is timed, its release is not);")
print("cpu = user+system time of the process (less sensitive to a busy machine than wall time)")
print(f"{'case':40} {'p50':>8} {'p95':>8} {'cpu p50':>8}")
for k, v in times.items():
    print(f"{k:40} {med[k]:8.2f} {q(v, 0.95):8.2f} {q(cpu[k], 0.5):8.2f}")
print(f"load average (1, 5, 15 min) at the end: {' '.join(open('/proc/loadavg').read().split()[:3])} on {os.cpu_count()} CPUs")
print(f"jq recipe / conductor, claim at 1,000 claims:    {med['jq recipe: claim, 1,000 claims'] / med['claim, 1,000 claims']:.1f}x")
print(f"claim at 10,000 / at 1,000 claims:               {med['claim, 10,000 claims'] / med['claim, 1,000 claims']:.2f}x")
print(f"claim with other domains / empty home:           {med['claim, empty protocol + other domains'] / med['claim, empty home']:.2f}x")
PY
