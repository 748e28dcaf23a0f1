#!/usr/bin/env bash
# codex-acp (the Agent Client Protocol adapter for Codex; pinned) running
# `interpreter app-server` as its Codex binary (CODEX_PATH), driven by the official ACP
# TypeScript client SDK against the scripted mock model. Installs both into this
# directory (node_modules/; .npmrc leaves out the real Codex binary, an optional
# dependency codex-acp only runs when CODEX_PATH is unset) and runs the test. Needs the
# debug binaries `interpreter` and `mock-model`; builds them unless INTERPRETER_BIN_DIR
# is set.
set -euo pipefail
cd "$(dirname "$0")"
if [[ -z "${INTERPRETER_BIN_DIR:-}" ]]; then
  (cd ../.. && cargo build -p interpreter-cli -p interpreter-test-support --bins)
fi
npm ci --no-audit --no-fund
timeout 600 node --test codex_acp.test.mjs
