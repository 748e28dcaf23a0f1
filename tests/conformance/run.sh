#!/usr/bin/env bash
# The official MCP conformance suite (pinned in package.json), every server scenario, against
# `interpreter mcp-server --listen ... --no-auth`. Fails on a scenario failure not listed in
# expected-failures.txt and on a listed scenario that passes. Needs the debug binaries
# `interpreter` and `mock-model`; builds them unless INTERPRETER_BIN_DIR is set.
set -euo pipefail
cd "$(dirname "$0")"
if [[ -z "${INTERPRETER_BIN_DIR:-}" ]]; then
  (cd ../.. && cargo build -p interpreter-cli -p interpreter-test-support --bins)
fi
npm ci --no-audit --no-fund
timeout 900 node run.mjs
