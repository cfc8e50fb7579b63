#!/usr/bin/env bash
# Compare two conductor binaries on `hook claude` (PreToolUse of a file another session holds, denied) at
# 1,000 live claims, interleaved round-robin so noise hits both alike (not a test).
# Usage: shell/bench-hook-compare.sh OLD_BINARY NEW_BINARY [RUNS]   (default 100; needs jq, python3)
set -euo pipefail
old=$(realpath "$1") new=$(realpath "$2") runs=${3:-100}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
proj=$work/proj; mkdir -p $proj/src; cd $proj
export CONDUCTOR_HOME=$work/seed NO_COLOR=1
sa=3f6c1b2a-7d4e-4c8b-9a1f-2e5d8c7b6a01; sb=9b2e4d6f-1a3c-4e5b-8d7f-0c2a4e6b8d02
for s in $sa $sb; do printf '{"session_id":"%s","cwd":"%s","hook_event_name":"SessionStart","source":"startup"}' $s $proj | $old hook claude >/dev/null; done
ida=$($old --json status | jq -r --arg s $sa '.instances[]|select(.session_id==$s)|.id')
files=(); for i in $(seq 1 1000); do files+=("src/f$i.rs"); done
$old claim --instance $ida "${files[@]}" >/dev/null
cp -a $work/seed $work/old; cp -a $work/seed $work/new
echo "load average (1, 5, 15 min) at the start: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
python3 - "$old" "$new" "$work" "$proj" "$sb" "$runs" <<'PY'
import json, subprocess, sys, time, os, statistics
old, new, work, proj, sb, runs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6])
t = {"old": [], "new": []}
for i in range(runs):
    for name, b in (("old", old), ("new", new)):
        env = dict(os.environ, CONDUCTOR_HOME=f"{work}/{name}")
        data = json.dumps({"session_id": sb, "cwd": proj, "hook_event_name": "PreToolUse", "tool_name": "Edit",
                           "tool_input": {"file_path": f"{proj}/src/f{i % 1000 + 1}.rs", "old_string": "a", "new_string": "b"}}).encode()
        s = time.perf_counter()
        r = subprocess.run([b, "hook", "claude"], input=data, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        t[name].append((time.perf_counter() - s) * 1000)
        assert b'"deny"' in r.stdout, (name, r.stdout)
o, n = statistics.median(t["old"]), statistics.median(t["new"])
print(f"hook claude PreToolUse deny at 1,000 claims, {runs} interleaved runs: old p50 {o:.2f} ms, new p50 {n:.2f} ms, new/old {n/o:.2f}x")
print(f"load average (1, 5, 15 min) at the end: {' '.join(open('/proc/loadavg').read().split()[:3])} on {os.cpu_count()} CPUs")
PY
