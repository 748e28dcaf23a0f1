#!/usr/bin/env bash
# Real MCP hosts (pinned in package.json: Gemini CLI, Codex CLI, Claude Code, OpenCode, Qwen
# Code, Cline CLI; native binaries through their optionalDependencies, Qwen Code on the
# pinned Node 22) driving `interpreter mcp-server` over stdio and over `--listen` with the
# bearer token, each host with a scripted mock of its own model on loopback. Needs the debug
# binaries `interpreter` and `mock-model`; builds them unless INTERPRETER_BIN_DIR is set.
# HOSTS=codex,claude runs a subset; HOSTS_WRITE_FIXTURES=1 rewrites fixtures/ (what each
# host sent its model on the codex-reply turn).
set -euo pipefail
cd "$(dirname "$0")"
if [[ -z "${INTERPRETER_BIN_DIR:-}" ]]; then
  (cd ../.. && cargo build -p interpreter-cli -p interpreter-test-support --bins)
fi
# Not `npm ci`: the builds of OpenCode, Cline and Qwen Code's clipboard helper for other
# platforms (optional dependencies) cannot be fetched here, so the lock cannot list them and
# `npm ci` counts them as missing. With every dependency pinned and the lock present, this
# installs what the lock says and writes neither file.
npm install --no-save --no-audit --no-fund
files=()
IFS=, read -ra hosts <<<"${HOSTS:-gemini,codex,claude,opencode,qwen,cline}"
for host in "${hosts[@]}"; do files+=("$host.test.mjs"); done
timeout 1200 node --test --test-concurrency=1 "${files[@]}"
