#!/usr/bin/env bash
# Benchmark for issue 35 (not a test): a claim at 1,000 and at 10,000 live claims (ten instances of
# 100 or 1,000 claims; the claimant is one of them), each beside its own floor, the durable replace
# of a file the size of that status.json, in one run, interleaved round-robin, medians:
#   claim at 10,000 / at 1,000             goal <= 1.5x
#   durable replace 1.3 MB / 133 KB        what rewriting the whole file costs by itself
#   claim / durable replace, at each size
# With BEFORE=<another conductor binary> both binaries are timed, interleaved, in copies of the
# same homes (filled by BIN).
# Usage: [BEFORE=path] [BIN=path] shell/bench-claim-scale.sh [RUNS]   (default 40; needs python3)
set -euo pipefail
BIN=${BIN:+$(realpath "$BIN")}   # before the cd: a relative path is the caller's
cd "$(dirname "$0")/.."
runs=${1:-40}
. shell/bench-bin.sh   # $bin: BIN, else the release build
before=${BEFORE:+$(realpath "$BEFORE")}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. shell/bench-floor-programs.sh   # $tmp/floor/target/release/{hello,replace}
mkdir -p "$tmp/proj/src" "$tmp/scratch"
export CONDUCTOR_WATCH_EDITS=0 NO_COLOR=1
fill() { # home files-per-instance
  local home=$1 per=$2
  for i in $(seq 1 10); do
    id=$(cd "$tmp/proj" && CONDUCTOR_HOME=$home "$bin" --json start "task $i" --project bench --priority P1 |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["instance_id"])')
    [ "$i" -eq 1 ] && echo "$id" > "$home.id"
    files=(); for f in $(seq 1 "$per"); do files+=("src/i$i-f$f.rs"); done
    (cd "$tmp/proj" && CONDUCTOR_HOME=$home "$bin" claim --instance "$id" "${files[@]}" >/dev/null)
  done
}
fill "$tmp/k1" 100
fill "$tmp/k10" 1000
for k in k1 k10; do
  cp -a "$tmp/$k" "$tmp/$k-new"
  [ -n "$before" ] && cp -a "$tmp/$k" "$tmp/$k-old"
done
python3 - "$tmp" "$bin" "${before:-}" "$runs" <<'PY'
import os, statistics, subprocess, sys, time
tmp, new, old, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
replace = os.path.join(tmp, "floor/target/release/replace")
bins = {"new": new} | ({"old": old} if old else {})
size = {k: os.path.getsize(os.path.join(tmp, k, "status.json")) for k in ("k1", "k10")}
ids = {k: open(os.path.join(tmp, k + ".id")).read().strip() for k in ("k1", "k10")}
t = {}
def timed(key, cmd, env=None):
    s = time.perf_counter()
    r = subprocess.run(cmd, cwd=os.path.join(tmp, "proj"), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    t.setdefault(key, []).append((time.perf_counter() - s) * 1000)
    if r.returncode != 0:
        sys.exit(f"{cmd} failed: {r.stderr.decode()[:300]}")
for _ in range(runs):
    for k in ("k1", "k10"):
        timed(("replace", k), [replace, os.path.join(tmp, "scratch", k), str(size[k])])
        for b, path in bins.items():
            env = dict(os.environ, CONDUCTOR_HOME=os.path.join(tmp, f"{k}-{b}"))
            timed((b, k), [path, "--json", "claim", "--instance", ids[k], "src/bench.rs"], env)
            subprocess.run([path, "--json", "release", "--instance", ids[k], "src/bench.rs"],
                           cwd=os.path.join(tmp, "proj"), env=env, stdout=subprocess.DEVNULL, check=True)
m = {k: statistics.median(v) for k, v in t.items()}
print(f"median of {runs} interleaved runs, ms; status.json {size['k1'] / 1e3:.0f} KB at 1,000 claims, "
      f"{size['k10'] / 1e6:.2f} MB at 10,000; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
cols = [b for b in ("old", "new") if b in bins]
print("| what | at 1,000 | at 10,000 | 10,000 ÷ 1,000 |")
print("|---|---|---|---|")
def row(name, a, b):
    print(f"| {name} | {a:.2f} ms | {b:.2f} ms | {b / a:.2f}x |")
row("durable replace", m[("replace", "k1")], m[("replace", "k10")])
for b in cols:
    row(f"claim ({b})", m[(b, "k1")], m[(b, "k10")])
for b in cols:
    print(f"claim ({b}) ÷ durable replace: {m[(b, 'k1')] / m[('replace', 'k1')]:.2f}x at 1,000, "
          f"{m[(b, 'k10')] / m[('replace', 'k10')]:.2f}x at 10,000; goal 10,000 ÷ 1,000 <= 1.5x: "
          + ("met" if m[(b, 'k10')] / m[(b, 'k1')] <= 1.5 else f"missed by {m[(b, 'k10')] / m[(b, 'k1')] - 1.5:.2f}x"))
PY
