#!/usr/bin/env bash
# Real MCP hosts (pinned in package.json: Gemini CLI, Codex CLI, Claude Code, native binaries
# through their optionalDependencies) driving `interpreter mcp-server` over stdio and over
# `--listen` with the bearer token, each host with a scripted mock of its own model on
# loopback. Needs the debug binaries `interpreter` and `mock-model`; builds them unless
# INTERPRETER_BIN_DIR is set. HOSTS=codex,claude runs a subset; HOSTS_WRITE_FIXTURES=1
# rewrites fixtures/ (what each host sent its model on the codex-reply turn).
set -euo pipefail
cd "$(dirname "$0")"
if [[ -z "${INTERPRETER_BIN_DIR:-}" ]]; then
  (cd ../.. && cargo build -p interpreter-cli -p interpreter-test-support --bins)
fi
npm ci --no-audit --no-fund
files=()
IFS=, read -ra hosts <<<"${HOSTS:-gemini,codex,claude}"
for host in "${hosts[@]}"; do files+=("$host.test.mjs"); done
timeout 600 node --test --test-concurrency=1 "${files[@]}"
