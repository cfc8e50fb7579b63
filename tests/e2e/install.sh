#!/usr/bin/env bash
# Installs the agent CLIs that tests/it/e2e_agents.rs runs, at pinned versions, with npm -g.
# Each is installed only when that version is missing, so a second run does nothing.
set -euo pipefail
if ! command -v npm >/dev/null; then
  echo "tests/e2e/install.sh: npm is missing (install Node.js 20+ and npm)" >&2
  exit 1
fi
pins=(
  "@anthropic-ai/claude-code@2.1.197"
  "@openai/codex@0.169.0"
  "@google/gemini-cli@0.61.0"
  "opencode-ai@1.18.33"
  "@mariozechner/pi-coding-agent@0.73.1"
)
have=$(npm ls -g --depth=0 2>/dev/null || true)
need=()
for pin in "${pins[@]}"; do
  # "name@version" as npm ls prints it: "├── name@version"
  if ! grep -qF -- " ${pin}" <<<"$have"; then
    need+=("$pin")
  fi
done
# OpenCode installs @opencode-ai/plugin into every config directory it loads (.opencode/,
# ~/.config/opencode/) at its first start; offline that waits ~80 s for npm to give up. The suite
# runs offline, so it seeds those directories from this copy (tests/it/e2e_agents.rs).
seed="${CONDUCTOR_E2E_CACHE:-$HOME/.cache/conductor-e2e}/opencode-plugin-1.18.33"
if [ ! -f "$seed/node_modules/@opencode-ai/plugin/package.json" ]; then
  echo "installing (npm, into $seed): @opencode-ai/plugin@1.18.33"
  mkdir -p "$seed"
  printf '{"dependencies":{"@opencode-ai/plugin":"1.18.33"}}\n' > "$seed/package.json"
  # In the background, beside the global install below (the two take about as long).
  (cd "$seed" && npm install --no-fund --no-audit --loglevel=error >/dev/null) &
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "installing (npm -g): ${need[*]}"
  npm install -g --no-fund --no-audit --loglevel=error "${need[@]}" >/dev/null
fi
wait_all() { local rc=0; for job in $(jobs -p); do wait "$job" || rc=$?; done; return $rc; }
wait_all
