#!/usr/bin/env bash
# The MCP conformance suite's client auth scenarios against `interpreter mcp login`
# (see client.sh). Installs the pinned suite into this directory and builds the
# `interpreter` and `mock-model` binaries unless INTERPRETER_BIN_DIR is set.
set -euo pipefail
cd "$(dirname "$0")"
if [[ -z "${INTERPRETER_BIN_DIR:-}" ]]; then
  (cd ../.. && cargo build -p interpreter-cli -p interpreter-test-support --bins)
fi
npm ci --no-audit --no-fund
conformance() {
  timeout 900 node --import ./node20-compat.mjs \
    node_modules/@modelcontextprotocol/conformance/dist/index.js client \
    --command "$PWD/client.sh" --expected-failures expected-failures.yml "$@"
}
conformance --suite auth
# Auth scenarios outside the suite: the 2025-03-26 era and draft ones.
for scenario in \
  auth/2025-03-26-oauth-metadata-backcompat \
  auth/2025-03-26-oauth-endpoint-fallback \
  auth/resource-mismatch \
  auth/offline-access-scope \
  auth/offline-access-not-supported; do
  conformance --scenario "$scenario"
done
