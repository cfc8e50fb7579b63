#!/usr/bin/env bash
# Measure what knowing other worktrees' changes costs an edit hook (issue 32, section 3): one
# repository with 8 live worktrees (the main one and 7 linked) and 2,000 changed files among them
# (250 each: half committed on the worktree's branch, half uncommitted; src/hot.rs changed in two
# linked worktrees), a Claude Code session in the main worktree.
# Usage: shell/bench-overlaps.sh [RUNS]   (builds the release binary unless BIN names one; uses a
# throwaway home and repository). Prints medians and the ratios against the goals, in one run,
# cases interleaved round-robin, the order turned by one case each round:
#   baseline      PreToolUse Edit of the session's own file in a plain directory with the same
#                 files (what the hook costs without worktrees: today's hook)
#   no overlap    the same edit in the main worktree, a file no other worktree changed (the 7 other
#                 worktrees' changes come from their caches)
#   overlap       an edit of src/hot.rs, which two other worktrees changed (the model is told)
#   after change  an edit of src/warm.rs right after the other worktree that changed it changed it
#                 again (that worktree is measured again with git: the cache's miss)
#   overlaps      `conductor overlaps` in the main worktree (runs git in every worktree)
# Goals: overlap / baseline <= 2.0x; `conductor overlaps` under 200 ms. BENCH_VERBOSE=1 prints every
# sample.
set -euo pipefail
BIN=${BIN:+$(realpath "$BIN")}   # before the cd: a relative path is the caller's
cd "$(dirname "$0")/.."
runs=${1:-50}
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet
  BIN=$PWD/target/release/conductor
fi
echo "binary: $BIN ($("$BIN" --version))"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export CONDUCTOR_HOME=$work/home NO_COLOR=1 GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@example.com GIT_COMMITTER_NAME=b GIT_COMMITTER_EMAIL=b@example.com

repo=$work/app
plain=$work/plain
. shell/bench-overlaps-repo.sh
overlaps_repo "$work"
# The same 2,500 files outside any repository.
mkdir -p "$plain"
git -C "$repo" archive HEAD src | tar -x -C "$plain"
echo "repository: $(git -C "$repo" worktree list | wc -l) worktrees, $(git -C "$repo" ls-files | wc -l) files; git $(git --version | cut -d' ' -f3)"

echo "load average (1, 5, 15 min) at the start: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
python3 - "$BIN" "$repo" "$plain" "$work" "$runs" <<'PY'
import json, os, subprocess, sys, time
bin, repo, plain, work, runs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
sid = "3f6c1b2a-7d4e-4c8b-9a1f-2e5d8c7b6a01"

def edit(cwd, path):
    return json.dumps({"session_id": sid, "cwd": cwd, "permission_mode": "default", "hook_event_name": "PreToolUse",
                       "tool_name": "Edit", "tool_input": {"file_path": path, "old_string": "a", "new_string": "b"}}).encode()

def hook(data, want=None):
    t = time.perf_counter()
    r = subprocess.run([bin, "hook", "claude"], input=data, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    ms = (time.perf_counter() - t) * 1000
    assert r.returncode == 0, r
    assert want is None or want in r.stdout, (want, r.stdout)
    return ms

def overlaps():
    t = time.perf_counter()
    r = subprocess.run([bin, "--json", "overlaps"], cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    ms = (time.perf_counter() - t) * 1000
    assert r.returncode == 0 and json.loads(r.stdout)["overlaps"], r
    return ms

# The session claims its files once (the steady state is an edit of a file it holds).
hook(edit(plain, f"{plain}/src/own.rs"))
hook(edit(repo, f"{repo}/src/own.rs"))
hook(edit(repo, f"{repo}/src/hot.rs"), b"another worktree")
hook(edit(repo, f"{repo}/src/warm.rs"), b"another worktree")
n = [0]
def after_change():
    n[0] += 1
    with open(f"{work}/wt1/src/warm.rs", "a") as f:
        f.write(f"// again {n[0]}\n")
    return hook(edit(repo, f"{repo}/src/warm.rs"), b"another worktree")

cases = [
    ("baseline: plain directory, own file", lambda: hook(edit(plain, f"{plain}/src/own.rs"))),
    ("no overlap: 8 worktrees, own file", lambda: hook(edit(repo, f"{repo}/src/own.rs"))),
    ("overlap: src/hot.rs changed in 2 others", lambda: hook(edit(repo, f"{repo}/src/hot.rs"), b"another worktree")),
    ("after change: another worktree just wrote it", after_change),
    ("conductor overlaps", overlaps),
]
times = {name: [] for name, _ in cases}
# The order turns by one case each round, so every case follows `conductor overlaps` (twenty-odd
# git processes, which leave the next process slower) equally often: in a fixed order the case
# after it paid for it alone.
for k in range(runs):
    for name, f in cases[k % len(cases):] + cases[:k % len(cases)]:
        times[name].append(f())
med = {}
for name, _ in cases:
    t = sorted(times[name])
    med[name] = t[len(t) // 2]
    print(" ".join(f"{x:.0f}" for x in times[name])) if os.environ.get("BENCH_VERBOSE") else None
    print(f"{name:<46} median {med[name]:8.2f} ms  p95 {t[min(len(t) - 1, int(0.95 * len(t)))]:8.2f} ms  (n={runs})")
base = med[cases[0][0]]
for name, _ in cases[1:4]:
    print(f"{name:<46} / baseline = {med[name] / base:5.2f}x")
ok_hook = med[cases[2][0]] / base <= 2.0
ok_ov = med["conductor overlaps"] < 200
print(f"goal overlap hook <= 2.0x baseline: {'met' if ok_hook else 'MISSED'}; "
      f"goal conductor overlaps < 200 ms: {'met' if ok_ov else 'MISSED'}")
PY
echo "load average (1, 5, 15 min) at the end: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
