#!/usr/bin/env bash
# Our app-server protocol schema against Codex's (the npm package @openai/codex, pinned in
# package.json): both sides' `app-server generate-json-schema` output, compared method by
# method by compare.py (stdlib Python). Fails on a difference that is not in allowlist.json,
# and on an allow-listed one that no longer occurs. Needs the debug binary `interpreter`;
# builds it unless INTERPRETER_BIN_DIR is set. Extra arguments go to compare.py (e.g.
# --write-allowlist after a reviewed change; then replace every TODO with a why).
set -euo pipefail
cd "$(dirname "$0")"
if [[ -z "${INTERPRETER_BIN_DIR:-}" ]]; then
  (cd ../.. && cargo build -p interpreter-cli --bins)
fi
bin_dir="${INTERPRETER_BIN_DIR:-../../target/debug}"
npm ci --no-audit --no-fund --loglevel=error
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
out="$("$bin_dir/interpreter" app-server generate-json-schema "$tmp/ours" 2>&1)" || { echo "$out" >&2; exit 1; }
node_modules/.bin/codex app-server generate-json-schema --out "$tmp/codex-stable"
node_modules/.bin/codex app-server generate-json-schema --experimental --out "$tmp/codex-experimental"
python3 compare.py --ours "$tmp/ours" --codex-stable "$tmp/codex-stable" \
  --codex-experimental "$tmp/codex-experimental" --docs ../../docs/app-server.md "$@"
