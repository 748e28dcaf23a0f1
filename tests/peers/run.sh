#!/usr/bin/env bash
# Official MCP SDK clients (TypeScript v1 and v2, Python 2.x; pinned) against `interpreter mcp-server`.
# Installs both into this directory (node_modules/, .venv/) and runs them. Needs the debug
# binaries `interpreter` and `mock-model`; builds them unless INTERPRETER_BIN_DIR is set.
# The fleet test (ts_client_v2_fleet.test.mjs) also needs INTERPRETER_TEST_PG_URL and
# INTERPRETER_NGINX, which scripts/test exports; it skips without them.
set -euo pipefail
cd "$(dirname "$0")"
if [[ -z "${INTERPRETER_BIN_DIR:-}" ]]; then
  (cd ../.. && cargo build -p interpreter-cli -p interpreter-test-support --bins)
fi
npm ci --no-audit --no-fund
[[ -x .venv/bin/python ]] || python3 -m venv .venv
.venv/bin/pip install -q -r requirements.txt
timeout 600 node --test ts_client.test.mjs ts_client_v2.test.mjs ts_client_v2_fleet.test.mjs agent_mcp_client.test.mjs
timeout 600 .venv/bin/python py_client.py
