#!/usr/bin/env bash
# The Codex Python SDK (pinned in requirements.txt) against `interpreter app-server`.
# Installs it into .venv/ here and runs sdk_client.py. Needs the debug binaries
# `interpreter` and `mock-model`; builds them unless INTERPRETER_BIN_DIR is set.
set -euo pipefail
cd "$(dirname "$0")"
if [[ -z "${INTERPRETER_BIN_DIR:-}" ]]; then
  (cd ../.. && cargo build -p interpreter-cli -p interpreter-test-support --bins)
fi
[[ -x .venv/bin/python ]] || python3 -m venv .venv
# --no-deps: every dependency is pinned in the file, and the SDK's bundled runtime binary
# is deliberately left out (codex_bin points at ours).
.venv/bin/pip install -q --no-deps -r requirements.txt
timeout 300 .venv/bin/python sdk_client.py
