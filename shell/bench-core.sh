#!/usr/bin/env bash
# Benchmark of the core (not a test): what one conductor call costs, against the protocol's own
# reference recipe (conductor-protocol.md, "Concurrency Safety": flock -w 5, jq, mv), which is
# what the original plugin asks the model to run.
# Usage: [BIN=path] shell/bench-core.sh [RUNS]   (default 200; throwaway homes)
#   BIN: the conductor binary (default: build the release binary; honours CARGO_TARGET_DIR).
# Cases run interleaved, round-robin, so machine noise hits all of them alike; prints median and
# p95 in ms, and ratios against the jq recipe measured in the same run.
set -euo pipefail
BIN=${BIN:+$(realpath "$BIN")}   # before the cd: a relative path is the caller's
cd "$(dirname "$0")/.."
runs=${1:-200}
. shell/bench-bin.sh   # $bin: BIN, else the release build
echo "binary: $bin ($("$bin" --version))"
command -v jq >/dev/null || { echo "jq is needed for the baseline (apt install jq)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/proj/src" "$work/big" "$work/empty"
cd "$work/proj"

# A 1,000-claim home: 10 instances x 100 files.
export CONDUCTOR_HOME=$work/big
for i in $(seq 0 9); do
  id=$("$bin" --json start "task $i" --project bench --priority P1 | jq -r .instance_id)
  files=(); for f in $(seq 1 100); do files+=("src/i$i-f$f.rs"); done
  "$bin" claim --instance "$id" "${files[@]}" >/dev/null
done
echo "1,000-claim state: $(wc -c <"$work/big/status.json") bytes"
big_id=$("$bin" --json status | jq -r '.instances[0].id')
CONDUCTOR_HOME=$work/empty "$bin" --json start "solo" --project bench --priority P1 >/dev/null
empty_id=$(CONDUCTOR_HOME=$work/empty "$bin" --json status | jq -r '.instances[0].id')
# The jq recipe works on its own copy of the same 1,000-claim state.
mkdir -p "$work/jq" && cp "$work/big/status.json" "$work/jq/status.json"
echo "load average (1, 5, 15 min) at the start: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"

python3 - "$bin" "$work" "$big_id" "$empty_id" "$runs" <<'PY'
import os, subprocess, sys, time
bin, work, big_id, empty_id, runs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
proj = os.path.join(work, "proj")
env_big = dict(os.environ, CONDUCTOR_HOME=os.path.join(work, "big"))
env_empty = dict(os.environ, CONDUCTOR_HOME=os.path.join(work, "empty"))
jq_home = os.path.join(work, "jq")
f = os.path.join(proj, "src/bench.rs")
# The protocol's reference write: lock, read, jq, write a temp file, rename.
jq_claim = f'''exec 200>"{jq_home}/status.lock"; flock -w 5 200 || exit 1
jq --arg f "{f}" --arg id "{big_id}" '.global_claims[$f]=$id | (.instances[] | select(.id==$id) | .files_claimed) += [$f]' "{jq_home}/status.json" > "{jq_home}/status.json.tmp"
mv "{jq_home}/status.json.tmp" "{jq_home}/status.json"'''
jq_release = f'''exec 200>"{jq_home}/status.lock"; flock -w 5 200 || exit 1
jq --arg f "{f}" --arg id "{big_id}" 'del(.global_claims[$f]) | (.instances[] | select(.id==$id) | .files_claimed) -= [$f]' "{jq_home}/status.json" > "{jq_home}/status.json.tmp"
mv "{jq_home}/status.json.tmp" "{jq_home}/status.json"'''
jq_read = f'jq -c "{{instances, summary: {{active_count: (.instances|length), total_files_claimed: (.global_claims|length)}}}}" "{jq_home}/status.json"'
cases = {
    "process start (--version)": ([bin, "--version"], env_empty),
    "status, empty home": ([bin, "--json", "status"], env_empty),
    "claim+release, empty home": ([[bin, "--json", "claim", "--instance", empty_id, "src/bench.rs"],
                                   [bin, "--json", "release", "--instance", empty_id, "src/bench.rs"]], env_empty),
    "status, 1,000 claims": ([bin, "--json", "status"], env_big),
    "claim+release, 1,000 claims": ([[bin, "--json", "claim", "--instance", big_id, "src/bench.rs"],
                                     [bin, "--json", "release", "--instance", big_id, "src/bench.rs"]], env_big),
    "jq recipe: read, 1,000 claims": (["bash", "-c", jq_read], env_big),
    "jq recipe: claim+release, 1,000 claims": ([["bash", "-c", jq_claim], ["bash", "-c", jq_release]], env_big),
}
times = {k: [] for k in cases}
for r in range(runs):
    for name, (cmd, env) in cases.items():
        cmds = cmd if isinstance(cmd[0], list) else [cmd]
        t = time.perf_counter()
        for c in cmds:
            p = subprocess.run(c, cwd=proj, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            if p.returncode != 0:
                sys.exit(f"{name}: exit {p.returncode}: {p.stderr.decode()}")
        times[name].append((time.perf_counter() - t) * 1000)
def q(v, p):
    v = sorted(v); return v[min(len(v) - 1, int(p * len(v)))]
med = {k: q(v, 0.5) for k, v in times.items()}
print(f"{runs} rounds, interleaved; milliseconds per call (claim+release = two calls)")
print(f"{'case':42} {'median':>8} {'p95':>8}")
for k, v in times.items():
    print(f"{k:42} {med[k]:8.2f} {q(v, 0.95):8.2f}")
print(f"load average (1, 5, 15 min) at the end: {' '.join(open('/proc/loadavg').read().split()[:3])} on {os.cpu_count()} CPUs")
print(f"ratio, jq recipe / conductor, claim+release at 1,000 claims: {med['jq recipe: claim+release, 1,000 claims'] / med['claim+release, 1,000 claims']:.2f}x")
print(f"ratio, jq recipe / conductor, read at 1,000 claims:          {med['jq recipe: read, 1,000 claims'] / med['status, 1,000 claims']:.2f}x")
PY
