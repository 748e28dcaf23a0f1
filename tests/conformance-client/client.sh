#!/usr/bin/env bash
# The client command the conformance suite runs per scenario, with the scenario's server
# URL as its last argument: configures that URL as an MCP server in a fresh agent home and
# runs `interpreter mcp login` non-interactively (the suite's authorization server approves
# without a user, so following its redirect replaces the browser). The login ends by
# connecting with the new tokens and listing the server's tools.
set -euo pipefail
url="${*: -1}"
here="$(cd "$(dirname "$0")" && pwd)"
bin="${INTERPRETER_BIN_DIR:-$here/../../target/debug}"
home="$(mktemp -d)"
trap 'rm -rf "$home"' EXIT

{
  printf '[mcp_servers.conformance]\nurl = "%s"\nstartup_timeout_sec = 20\n' "$url"
  # Scenarios with a pre-registered client pass its credentials in the context.
  if [[ -n "${MCP_CONFORMANCE_CONTEXT:-}" ]]; then
    node -e '
      const ctx = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT);
      if (ctx.client_id) {
        console.log(`\n[mcp_servers.conformance.oauth]\nclient_id = ${JSON.stringify(ctx.client_id)}`);
        if (ctx.client_secret) console.log(`client_secret_env_var = "CONFORMANCE_CLIENT_SECRET"`);
      }'
  fi
} > "$home/config.toml"

secret="$(node -e 'try { process.stdout.write(JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT || "{}").client_secret || "") } catch { }')"
INTERPRETER_HOME="$home" CONFORMANCE_CLIENT_SECRET="$secret" \
  timeout 60 "$bin/interpreter" mcp login conformance --follow-redirect
