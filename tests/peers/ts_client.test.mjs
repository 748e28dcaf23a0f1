// The official TypeScript MCP client drives `interpreter mcp-server`: a tool call with an
// approval answered through the SDK's elicitation handler, and a cancel through an
// AbortSignal (which the SDK turns into notifications/cancelled).
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { BIN_DIR, setUp } from "./common.mjs";

async function connect(ctx) {
  const client = new Client({ name: "peer-ts", version: "0.0.0" }, { capabilities: { elicitation: {} } });
  const elicitations = [];
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    elicitations.push(request.params);
    return { action: "accept", content: { decision: "approved" } };
  });
  const transport = new StdioClientTransport({
    command: join(BIN_DIR, "interpreter"), args: ["mcp-server"], cwd: ctx.work, env: ctx.env, stderr: "inherit",
  });
  await client.connect(transport);
  return { client, elicitations };
}

test("call with an approval round trip", { timeout: 120000 }, async () => {
  const ctx = await setUp([{ command: "touch from_ts.txt" }, { text: "Made it." }]);
  const { client, elicitations } = await connect(ctx);
  try {
    const tools = await client.listTools();
    assert.deepEqual(tools.tools.map((t) => t.name), ["codex", "codex-reply"]);
    const progress = [];
    const result = await client.callTool(
      { name: "codex", arguments: { prompt: "make a file", "approval-policy": "untrusted", sandbox: "danger-full-access" } },
      undefined,
      { onprogress: (p) => progress.push(p.progress), resetTimeoutOnProgress: true, timeout: 90000 },
    );
    assert.equal(result.isError, undefined);
    assert.equal(result.structuredContent.content, "Made it.");
    assert.ok(result.structuredContent.threadId);
    assert.equal(elicitations.length, 1);
    // The SDK keeps only the spec fields; the correlation fields are checked in the Rust tests.
    assert.match(elicitations[0].message, /touch from_ts\.txt/);
    assert.equal(elicitations[0].requestedSchema.properties.decision.type, "string");
    assert.ok(existsSync(join(ctx.work, "from_ts.txt")));
    assert.ok(progress.length > 0);
    for (let i = 1; i < progress.length; i++) assert.ok(progress[i] > progress[i - 1]);
  } finally {
    await client.close();
    ctx.stop();
  }
});

test("cancel through an AbortSignal, then reply on the thread", { timeout: 120000 }, async () => {
  const ctx = await setUp([{ command: "echo $$ > sleeper.pid; exec sleep 120" }, { text: "Back again." }]);
  const { client } = await connect(ctx);
  try {
    const abort = new AbortController();
    let threadId;
    client.setNotificationHandler(
      (await import("zod")).z.object({ method: (await import("zod")).z.literal("codex/event"), params: (await import("zod")).z.any() }),
      (n) => { threadId ??= n.params._meta.threadId; },
    );
    const call = client.callTool(
      { name: "codex", arguments: { prompt: "sleep", "approval-policy": "never", sandbox: "danger-full-access" } },
      undefined,
      { signal: abort.signal, timeout: 90000 },
    );
    const pidFile = join(ctx.work, "sleeper.pid");
    const deadline = Date.now() + 60000;
    while (!existsSync(pidFile) || !readFileSync(pidFile, "utf8").trim()) {
      assert.ok(Date.now() < deadline, "command never started");
      await new Promise((r) => setTimeout(r, 50));
    }
    const pid = Number(readFileSync(pidFile, "utf8").trim());
    abort.abort("user stop");
    await assert.rejects(call);
    const killDeadline = Date.now() + 30000;
    while (existsSync(`/proc/${pid}`) && !readFileSync(`/proc/${pid}/stat`, "utf8").includes(") Z ")) {
      assert.ok(Date.now() < killDeadline, "command survived the cancel");
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.ok(threadId, "no codex/event carried the threadId");
    const reply = await client.callTool({ name: "codex-reply", arguments: { threadId, prompt: "go on" } }, undefined, { timeout: 90000 });
    assert.equal(reply.structuredContent.content, "Back again.");
  } finally {
    await client.close();
    ctx.stop();
  }
});
