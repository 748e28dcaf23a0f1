// The official TypeScript MCP client drives `interpreter mcp-server`, over stdio and over
// streamable HTTP (`--listen http://127.0.0.1:0/mcp` with the bearer token the server
// writes to a file): a call with an approval answered through the SDK's elicitation
// handler, a cancel through an AbortSignal (which the SDK turns into
// notifications/cancelled), and a 30 s command that outlives a 10 s request timeout because
// progress notifications restart it. Over HTTP also: a wrong Origin gets 403, a missing or
// wrong token 401.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { BIN_DIR, alive, setUp, startHttpServer } from "./common.mjs";

/** Connect a client to a new server for `ctx` on `transport` ("stdio" | "http"). */
async function connect(ctx, transport) {
  const client = new Client({ name: "peer-ts", version: "0.0.0" }, { capabilities: { elicitation: {} } });
  const elicitations = [];
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    elicitations.push(request.params);
    return { action: "accept", content: { decision: "approved" } };
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
  await client.connect(clientTransport);
  return {
    client, elicitations, server,
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


for (const transport of ["stdio", "http"]) {
  test(`${transport}: call with an approval round trip`, { timeout: 120000 }, async () => {
    const ctx = await setUp([{ command: "touch from_ts.txt" }, { text: "Made it." }]);
    const peer = await connect(ctx, transport);
    try {
      const tools = await peer.client.listTools();
      const names = tools.tools.map((t) => t.name);
      for (const name of ["codex", "codex-reply", "codex-status", "codex-wait"]) assert.ok(names.includes(name), names);
      const progress = [];
      const result = await peer.client.callTool(
        { name: "codex", arguments: { prompt: "make a file", cwd: ctx.work, "approval-policy": "untrusted", sandbox: "danger-full-access" } },
        undefined,
        { onprogress: (p) => progress.push(p.progress), resetTimeoutOnProgress: true, timeout: 90000 },
      );
      assert.ok(!result.isError, JSON.stringify(result));
      assert.equal(result.structuredContent.content, "Made it.");
      assert.ok(result.structuredContent.threadId);
      assert.equal(peer.elicitations.length, 1);
      // The SDK keeps only the spec fields; the correlation fields are checked in the Rust tests.
      assert.match(peer.elicitations[0].message, /touch from_ts\.txt/);
      assert.equal(peer.elicitations[0].requestedSchema.properties.decision.type, "string");
      assert.ok(existsSync(join(ctx.work, "from_ts.txt")));
      assert.ok(progress.length > 0);
      for (let i = 1; i < progress.length; i++) assert.ok(progress[i] > progress[i - 1]);
    } finally {
      await peer.close();
      ctx.stop();
    }
  });

  test(`${transport}: cancel through an AbortSignal, then reply on the thread`, { timeout: 120000 }, async () => {
    const ctx = await setUp([
      { text: "Ready." },
      { command: "echo $$ > sleeper.pid; exec sleep 120" },
      { text: "Back again." },
    ]);
    const peer = await connect(ctx, transport);
    try {
      const first = await peer.client.callTool(
        { name: "codex", arguments: { prompt: "get ready", cwd: ctx.work, "approval-policy": "never", sandbox: "danger-full-access" } },
        undefined, { timeout: 90000 });
      const threadId = first.structuredContent.threadId;
      assert.ok(threadId);
      const abort = new AbortController();
      const call = peer.client.callTool(
        { name: "codex-reply", arguments: { threadId, prompt: "sleep" } },
        undefined,
        { signal: abort.signal, timeout: 90000 },
      );
      const pidFile = join(ctx.work, "sleeper.pid");
      await waitFor(() => existsSync(pidFile) && readFileSync(pidFile, "utf8").trim(), "the command to start");
      const pid = Number(readFileSync(pidFile, "utf8").trim());
      abort.abort("user stop");
      await assert.rejects(call);
      await waitFor(() => !alive(pid), "the command to die after the cancel", 30000);
      const reply = await peer.client.callTool({ name: "codex-reply", arguments: { threadId, prompt: "go on" } }, undefined, { timeout: 90000 });
      assert.equal(reply.structuredContent.content, "Back again.");
    } finally {
      await peer.close();
      ctx.stop();
    }
  });

  test(`${transport}: a 30 s command outlives a 10 s timeout that progress restarts`, { timeout: 120000 }, async () => {
    const ctx = await setUp([{ command: "sleep 30" }, { text: "Slept." }]);
    const peer = await connect(ctx, transport);
    try {
      const progress = [];
      const started = Date.now();
      const result = await peer.client.callTool(
        { name: "codex", arguments: { prompt: "sleep", cwd: ctx.work, "approval-policy": "never", sandbox: "danger-full-access" } },
        undefined,
        { timeout: 10000, resetTimeoutOnProgress: true, onprogress: (p) => progress.push({ at: Date.now(), ...p }) },
      );
      assert.ok(Date.now() - started >= 30000, "the command did not take 30 s");
      assert.ok(!result.isError, JSON.stringify(result));
      assert.equal(result.structuredContent.content, "Slept.");
      const during = progress.filter((p) => p.at > started + 2000 && p.at < started + 30000);
      assert.ok(during.length >= 3, `want progress during the command, got ${JSON.stringify(progress)}`);
    } finally {
      await peer.close();
      ctx.stop();
    }
  });
}

test("http: a wrong Origin gets 403, a missing or wrong token 401", { timeout: 60000 }, async () => {
  const ctx = await setUp([]);
  const server = await startHttpServer(ctx);
  try {
    const body = JSON.stringify({
      jsonrpc: "2.0", id: 1, method: "initialize",
      params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "peer-ts", version: "0.0.0" } },
    });
    const headers = { "Content-Type": "application/json", Accept: "application/json, text/event-stream" };
    const expectStatus = async (extra, status) => {
      const response = await fetch(server.url, { method: "POST", headers: { ...headers, ...extra }, body });
      const text = await response.text();
      assert.equal(response.status, status, `${JSON.stringify(extra)}: ${text}`);
    };
    await expectStatus({ Authorization: `Bearer ${server.token}` }, 200);
    await expectStatus({ Authorization: `Bearer ${server.token}`, Origin: "http://evil.example" }, 403);
    await expectStatus({ Authorization: `Bearer ${server.token}`, Origin: "http://localhost:1" }, 403);
    await expectStatus({}, 401);
    await expectStatus({ Authorization: "Bearer not-the-token" }, 401);
    await expectStatus({ Authorization: `Basic ${server.token}` }, 401);
  } finally {
    await server.stop();
    ctx.stop();
  }
});

test("http: --no-auth is refused off loopback", { timeout: 30000 }, async () => {
  const ctx = await setUp([]);
  try {
    const { spawnSync } = await import("node:child_process");
    const run = spawnSync(join(BIN_DIR, "interpreter"), ["mcp-server", "--listen", "http://0.0.0.0:0/mcp", "--no-auth"],
      { cwd: ctx.work, env: ctx.env, encoding: "utf8", timeout: 20000 });
    assert.notEqual(run.status, 0, "the server started without auth on 0.0.0.0");
    assert.match(run.stderr, /loopback/);
  } finally {
    ctx.stop();
  }
});
