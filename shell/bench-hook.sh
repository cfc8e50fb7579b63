#!/usr/bin/env bash
# Measure `conductor hook claude` (PreToolUse), `conductor hook codex` (apply_patch) and `conductor prompt`
# latency at 1,000 live claims.
# Usage: shell/bench-hook.sh [RUNS]   (builds the release binary; uses a throwaway home)
# Prints p50/p95/max in milliseconds per case. Targets: hook p95 < 50 ms, prompt < 5 ms.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-200}
cargo build --release --quiet
bin=$PWD/target/release/conductor
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export CONDUCTOR_HOME=$work/home NO_COLOR=1
proj=$work/proj
mkdir -p "$proj/src"
cd "$proj"

# Session A holds 1,000 files (registered through the hook, like a real session).
sa=3f6c1b2a-7d4e-4c8b-9a1f-2e5d8c7b6a01
sb=9b2e4d6f-1a3c-4e5b-8d7f-0c2a4e6b8d02
printf '{"session_id":"%s","cwd":"%s","hook_event_name":"SessionStart","source":"startup"}' "$sa" "$proj" | "$bin" hook claude >/dev/null
printf '{"session_id":"%s","cwd":"%s","hook_event_name":"SessionStart","source":"startup"}' "$sb" "$proj" | "$bin" hook claude >/dev/null
ida=$("$bin" --json status | python3 -c 'import json,sys; print([i["id"] for i in json.load(sys.stdin)["instances"] if i.get("session_id")=="'$sa'"][0])')
idb=$("$bin" --json status | python3 -c 'import json,sys; print([i["id"] for i in json.load(sys.stdin)["instances"] if i.get("session_id")=="'$sb'"][0])')
files=()
for i in $(seq 1 1000); do files+=("src/f$i.rs"); done
"$bin" claim --instance "$ida" "${files[@]}" >/dev/null
"$bin" claim --instance "$idb" src/mine.rs >/dev/null
echo "state: $("$bin" --json status | python3 -c 'import json,sys; s=json.load(sys.stdin)["summary"]; print(s["active_count"], "instances,", s["total_files_claimed"], "claims")'), status.json $(wc -c <"$CONDUCTOR_HOME/status.json") bytes"

python3 - "$bin" "$proj" "$sb" "$idb" "$runs" <<'PY'
import json, subprocess, sys, time
bin, proj, sb, idb, runs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])

def payload(tool, path):
    return json.dumps({"session_id": sb, "transcript_path": "/tmp/t.jsonl", "cwd": proj, "permission_mode": "default",
                       "hook_event_name": "PreToolUse", "tool_name": tool,
                       "tool_input": {"file_path": path, "old_string": "a", "new_string": "b"}, "tool_use_id": "toolu_x"}).encode()

def measure(name, make_input, args, expect, want=None):
    times = []
    for i in range(runs):
        data = make_input(i)
        t = time.perf_counter()
        r = subprocess.run(args, input=data, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        times.append((time.perf_counter() - t) * 1000)
        assert r.returncode == expect, (name, r.returncode)
        assert want is None or want in r.stdout, (name, r.stdout)
    times.sort()
    p = lambda q: times[min(len(times) - 1, int(q * len(times)))]
    print(f"{name:<44} p50 {p(0.50):6.2f} ms  p95 {p(0.95):6.2f} ms  max {times[-1]:6.2f} ms  (n={runs})")

hook = [bin, "hook", "claude"]
measure("floor: process start (conductor --version)", lambda i: b"", [bin, "--version"], 0)
measure("PreToolUse Edit of a foreign file (deny)", lambda i: payload("Edit", f"{proj}/src/f{i % 1000 + 1}.rs"), hook, 0, b'"deny"')
measure("PreToolUse Edit of own file (allow)", lambda i: payload("Edit", f"{proj}/src/mine.rs"), hook, 0)
measure("PreToolUse Write of a free file (auto-claim)", lambda i: payload("Write", f"{proj}/src/new{i}.rs"), hook, 0)
measure("PreToolUse Bash (not an edit)", lambda i: json.dumps({"session_id": sb, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"}}).encode(), hook, 0)
def patch(i):
    text = f"*** Begin Patch\n*** Update File: src/mine.rs\n@@\n-a\n+b\n*** Add File: src/p{i}.rs\n+x\n*** Update File: src/f{i % 1000 + 1}.rs\n@@\n-a\n+b\n*** End Patch\n"
    return json.dumps({"session_id": "codex-bench", "cwd": proj, "hook_event_name": "PreToolUse", "model": "gpt-5-codex",
                       "permission_mode": "default", "tool_name": "apply_patch", "tool_input": {"command": text}, "tool_use_id": "call_x"}).encode()
measure("Codex apply_patch, 3 files, 1 foreign (deny)", patch, [bin, "hook", "codex"], 0, b'"deny"')
import os
os.environ["CONDUCTOR_INSTANCE_ID"] = idb
measure("prompt segment (conductor prompt)", lambda i: b"", [bin, "prompt"], 0)
PY
