#!/usr/bin/env bash
# The official Agent Client Protocol client SDKs (TypeScript and Python; pinned) driving
# `interpreter acp` against the scripted mock model. Installs both into this directory
# (node_modules/, .venv/) and runs them. Needs the debug binaries `interpreter`,
# `mock-model` and `mock-mcp-server`; builds them unless INTERPRETER_BIN_DIR is set.
set -euo pipefail
cd "$(dirname "$0")"
if [[ -z "${INTERPRETER_BIN_DIR:-}" ]]; then
  (cd ../.. && cargo build -p interpreter-cli -p interpreter-test-support --bins)
fi
npm ci --no-audit --no-fund
[[ -x .venv/bin/python ]] || python3 -m venv .venv
.venv/bin/pip install -q -r requirements.txt
timeout 600 node --test ts_client.test.mjs
timeout 600 .venv/bin/python py_client.py
