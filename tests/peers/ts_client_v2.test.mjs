// The TypeScript SDK v2 client (`@modelcontextprotocol/client`, the line that implements
// 2026-07-28) drives `interpreter mcp-server` with `versionNegotiation: {mode: "auto"}`,
// over stdio and over streamable HTTP: the connection must negotiate 2026-07-28 through
// `server/discover`; an approval arrives as an InputRequiredResult the SDK fulfils through
// the `elicitation/create` handler and retries; a declined one does not run; a cancel
// through an AbortSignal kills the command; a 12 s command outlives a 5 s timeout that
// progress restarts. (ts_client.test.mjs covers the v1 SDK, which speaks the legacy era.)
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { BIN_DIR, alive, setUp, startHttpServer } from "./common.mjs";

const MODERN = "2026-07-28";

async function connect(ctx, transport, { decision = "approved" } = {}) {
  const client = new Client({ name: "peer-ts-v2", version: "0.0.0" },
    { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: "auto" } });
  const elicitations = [];
  client.setRequestHandler("elicitation/create", async (request) => {
    elicitations.push(request.params);
    return decision === "decline" ? { action: "decline" } : { action: "accept", content: { decision } };
  });
  let server;
  let clientTransport;
  if (transport === "stdio") {
    clientTransport = new StdioClientTransport({
      command: join(BIN_DIR, "interpreter"), args: ["mcp-server"], cwd: ctx.work, env: ctx.env, stderr: "inherit",
    });
  } else {
    server = await startHttpServer(ctx);
    clientTransport = new StreamableHTTPClientTransport(new URL(server.url), {
      requestInit: { headers: { Authorization: `Bearer ${server.token}` } },
    });
  }
  // Every message the client sends, to see the MRTR retry on the wire.
  const sent = [];
  const send = clientTransport.send.bind(clientTransport);
  clientTransport.send = (message, options) => { sent.push(message); return send(message, options); };
  await client.connect(clientTransport);
  assert.equal(client.getNegotiatedProtocolVersion(), MODERN, "auto mode did not negotiate 2026-07-28");
  return {
    client, elicitations, sent,
    retries: () => sent.filter((m) => m.method === "tools/call" && m.params?.inputResponses),
    close: async () => {
      await client.close();
      await server?.stop();
    },
  };
}

async function waitFor(predicate, what, ms = 60000) {
  const deadline = Date.now() + ms;
  while (!predicate()) {
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const args = (ctx, prompt, extra = {}) => ({ prompt, cwd: ctx.work, sandbox: "danger-full-access", ...extra });

for (const transport of ["stdio", "http"]) {
  test(`v2 ${transport}: approval through an InputRequiredResult retry`, { timeout: 120000 }, async () => {
    const ctx = await setUp([{ command: "touch from_ts_v2.txt" }, { text: "Made it." }]);
    const peer = await connect(ctx, transport);
    try {
      const tools = await peer.client.listTools();
      assert.ok(tools.tools.some((t) => t.name === "codex"));
      const result = await peer.client.callTool(
        { name: "codex", arguments: args(ctx, "make a file", { "approval-policy": "untrusted" }) },
        { timeout: 90000 });
      assert.ok(!result.isError, JSON.stringify(result));
      assert.equal(result.structuredContent.content, "Made it.");
      assert.equal(peer.elicitations.length, 1);
      assert.match(peer.elicitations[0].message, /touch from_ts_v2\.txt/);
      assert.ok(existsSync(join(ctx.work, "from_ts_v2.txt")), "the approved command did not run");
      const retries = peer.retries();
      assert.equal(retries.length, 1, "want one tools/call retry carrying inputResponses");
      assert.ok(typeof retries[0].params.requestState === "string" && retries[0].params.requestState, "the retry has no requestState");
      assert.equal(Object.values(retries[0].params.inputResponses)[0].content.decision, "approved");
    } finally {
      await peer.close();
      ctx.stop();
    }
  });

  test(`v2 ${transport}: a declined approval does not run the command`, { timeout: 120000 }, async () => {
    const ctx = await setUp([{ command: "touch declined.txt" }, { text: "Did not make it." }]);
    const peer = await connect(ctx, transport, { decision: "decline" });
    try {
      const result = await peer.client.callTool(
        { name: "codex", arguments: args(ctx, "make a file", { "approval-policy": "untrusted" }) },
        { timeout: 90000 });
      assert.equal(peer.elicitations.length, 1);
      assert.ok(!existsSync(join(ctx.work, "declined.txt")), "a declined command ran");
      assert.equal(peer.retries().length, 1, "want one tools/call retry carrying the decline");
      assert.equal(result.structuredContent.content, "Did not make it.");
    } finally {
      await peer.close();
      ctx.stop();
    }
  });

  test(`v2 ${transport}: cancel through an AbortSignal kills the command`, { timeout: 120000 }, async () => {
    const ctx = await setUp([{ command: "echo $$ > sleeper.pid; exec sleep 120" }, { text: "Never." }]);
    const peer = await connect(ctx, transport);
    try {
      const abort = new AbortController();
      const call = peer.client.callTool(
        { name: "codex", arguments: args(ctx, "sleep", { "approval-policy": "never" }) },
        { signal: abort.signal, timeout: 90000 });
      const pidFile = join(ctx.work, "sleeper.pid");
      await waitFor(() => existsSync(pidFile) && readFileSync(pidFile, "utf8").trim(), "the command to start");
      const pid = Number(readFileSync(pidFile, "utf8").trim());
      abort.abort("user stop");
      await assert.rejects(call);
      await waitFor(() => !alive(pid), "the command to die after the cancel", 30000);
      const tools = await peer.client.listTools();
      assert.ok(tools.tools.some((t) => t.name === "codex"), "the connection is not usable after a cancel");
    } finally {
      await peer.close();
      ctx.stop();
    }
  });

  test(`v2 ${transport}: a 12 s command outlives a 5 s timeout that progress restarts`, { timeout: 120000 }, async () => {
    const ctx = await setUp([{ command: "sleep 12" }, { text: "Slept." }], { config: "[mcp_server]\nprogress_interval_sec = 2\n" });
    const peer = await connect(ctx, transport);
    try {
      const progress = [];
      const started = Date.now();
      const result = await peer.client.callTool(
        { name: "codex", arguments: args(ctx, "sleep", { "approval-policy": "never" }) },
        { timeout: 5000, resetTimeoutOnProgress: true, onprogress: (p) => progress.push({ at: Date.now(), ...p }) });
      assert.ok(Date.now() - started >= 12000, "the command did not take 12 s");
      assert.ok(!result.isError, JSON.stringify(result));
      assert.equal(result.structuredContent.content, "Slept.");
      assert.ok(progress.filter((p) => p.at > started + 1000 && p.at < started + 12000).length >= 3,
        `want progress during the command, got ${JSON.stringify(progress)}`);
    } finally {
      await peer.close();
      ctx.stop();
    }
  });
}
