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
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
echo "installing (npm -g): ${need[*]}"
npm install -g --no-fund --no-audit --loglevel=error "${need[@]}" >/dev/null
