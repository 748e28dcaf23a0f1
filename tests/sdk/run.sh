#!/usr/bin/env bash
# Runs the TypeScript SDK against the `interpreter` binary and the `mock-model` mock.
# Builds both (debug) unless INTERPRETER_BIN and MOCK_MODEL_BIN are already set.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

if [[ -z "${INTERPRETER_BIN:-}" || -z "${MOCK_MODEL_BIN:-}" ]]; then
  (cd "$repo" && cargo build --quiet -p interpreter-cli --bin interpreter -p interpreter-test-support --bin mock-model)
  target="${CARGO_TARGET_DIR:-$repo/target}"
  export INTERPRETER_BIN="${INTERPRETER_BIN:-$target/debug/interpreter}"
  export MOCK_MODEL_BIN="${MOCK_MODEL_BIN:-$target/debug/mock-model}"
fi

cd "$here"
# --omit=optional: the SDK's dependency carries a large platform binary as an optional
# package; these tests always point the SDK at our binary instead.
npm ci --omit=optional --no-audit --no-fund
node --test
