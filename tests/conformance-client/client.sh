#!/usr/bin/env bash
# The client command the conformance suite runs per scenario, with the scenario's server
# URL as its last argument: configures that URL as an MCP server in a fresh agent home and
# runs `interpreter mcp login` non-interactively (the suite's authorization server approves
# without a user, so following its redirect replaces the browser). The login ends by
# connecting with the new tokens and listing the server's tools.
#
# Then a turn of `interpreter exec` (model mocked by `mock-model`) calls the server's
# `test-tool`, as a user's first task would. A server that refuses the call for lack of
# scope (the step-up scenario) makes the call fail with "run `interpreter mcp login
# conformance`"; like a user, the script then logs in again (which asks for the wider
# scope) and repeats the turn, which must then succeed.
set -euo pipefail
url="${*: -1}"
here="$(cd "$(dirname "$0")" && pwd)"
bin="${INTERPRETER_BIN_DIR:-$here/../../target/debug}"
home="$(mktemp -d)"
mock_pid=
cleanup() {
  if [[ -n "$mock_pid" ]]; then kill "$mock_pid" 2>/dev/null || true; fi
  rm -rf "$home"
}
trap cleanup EXIT

# The model: a call of the server's tool, then a final answer; twice, for a repeated turn.
node -e '
  const chunk = (delta, finish) => ({ id: "c", object: "chat.completion.chunk", model: "mock-model",
    choices: [{ index: 0, delta, finish_reason: finish }] });
  const call = { chunks: [chunk({ tool_calls: [{ index: 0, id: "call_1", type: "function",
    function: { name: "mcp__conformance__test_tool", arguments: "{}" } }] }, null), chunk({}, "tool_calls")] };
  const done = { chunks: [chunk({ content: "done" }, null), chunk({}, "stop")] };
  process.stdout.write(JSON.stringify([call, done, call, done]));' > "$home/script.json"
coproc MOCK { exec "$bin/mock-model" --script "$home/script.json"; }
mock_pid=$MOCK_PID
read -r -t 30 mock_line <&"${MOCK[0]}"
base_url="$(node -e 'process.stdout.write(JSON.parse(process.argv[1]).base_url)' "$mock_line")"

{
  printf 'model = "mock-model"\nmodel_provider = "mock"\n\n'
  printf '[model_providers.mock]\nname = "mock"\nbase_url = "%s"\nenv_key = "MOCK_API_KEY"\nwire_api = "chat"\nrequest_max_retries = 0\n\n' "$base_url"
  printf '[mcp_servers.conformance]\nurl = "%s"\nstartup_timeout_sec = 20\napproval = "never"\n\n' "$url"
  printf '[mcp_servers.conformance.oauth]\n'
  # The client ID metadata document URL the suite's CIMD scenarios expect; used only
  # where the authorization server advertises support for such documents.
  printf 'client_metadata_url = "https://conformance-test.local/client-metadata.json"\n'
  # Scenarios with a pre-registered client pass its credentials in the context.
  if [[ -n "${MCP_CONFORMANCE_CONTEXT:-}" ]]; then
    node -e '
      const ctx = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT);
      if (ctx.client_id) {
        console.log(`client_id = ${JSON.stringify(ctx.client_id)}`);
        if (ctx.client_secret) console.log(`client_secret_env_var = "CONFORMANCE_CLIENT_SECRET"`);
      }'
  fi
} > "$home/config.toml"

secret="$(node -e 'try { process.stdout.write(JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT || "{}").client_secret || "") } catch { }')"
agent() {
  INTERPRETER_HOME="$home" CONFORMANCE_CLIENT_SECRET="$secret" MOCK_API_KEY=k "$@"
}
login() { agent timeout 60 "$bin/interpreter" mcp login conformance --follow-redirect; }
# Prints the tool call's error message, or nothing when it succeeded.
turn() {
  agent timeout 60 "$bin/interpreter" exec --json --skip-git-repo-check -C "$home" \
    "use the test tool" </dev/null >"$home/turn.jsonl" || true
  node -e '
    const lines = require("fs").readFileSync(process.argv[1], "utf8").split("\n").filter(Boolean).map(JSON.parse);
    const call = lines.find((l) => l.type === "item.completed" && l.item.type === "mcp_tool_call");
    if (!call) console.log(`no completed mcp_tool_call item in: ${JSON.stringify(lines)}`);
    else if (call.item.error) console.log(call.item.error.message);' "$home/turn.jsonl"
}

login
failure="$(turn)"
if [[ "$failure" == *"interpreter mcp login conformance"* ]]; then
  echo "tool call refused: $failure" >&2
  login
  failure="$(turn)"
fi
if [[ -n "$failure" ]]; then
  echo "tool call failed: $failure" >&2
  exit 1
fi
