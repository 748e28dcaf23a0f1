// The agent as an MCP *client* of a real server from npm: `interpreter exec` starts
// @modelcontextprotocol/server-everything over stdio, offers its tools to the (mock) model
// as mcp__everything__*, and the calls' results reach the model and the JSONL stream.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { appendFileSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { BIN_DIR, setUp } from "./common.mjs";

const SERVER = join(import.meta.dirname,
  "node_modules/@modelcontextprotocol/server-everything/dist/index.js");

function run(args, { env, cwd }, deadlineMs = 120000) {
  return new Promise((resolve, reject) => {
    const child = spawn(join(BIN_DIR, "interpreter"), args, { env, cwd, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => { stdout += d; });
    child.stderr.on("data", (d) => { stderr += d; });
    const timer = setTimeout(() => { child.kill("SIGKILL"); reject(new Error(`timed out\n${stderr}`)); }, deadlineMs);
    child.on("exit", (code) => { clearTimeout(timer); resolve({ code, stdout, stderr }); });
  });
}

test("exec calls tools of server-everything through the MCP client", async () => {
  const ctx = await setUp([
    { tool: "mcp__everything__echo", args: { message: "hi-everything" } },
    { tool: "mcp__everything__get_sum", args: { a: 2, b: 40 } },
    { text: "done" },
  ]);
  try {
    appendFileSync(join(ctx.home, "config.toml"),
      `\n[mcp_servers.everything]\ncommand = "${process.execPath}"\nargs = ["${SERVER}"]\n` +
      `startup_timeout_sec = 60\n`);
    const out = await run(["exec", "--json", "--skip-git-repo-check", "use the tools"], ctx);
    assert.equal(out.code, 0, out.stderr);
    const events = out.stdout.trim().split("\n").map((l) => JSON.parse(l));
    const calls = events.filter((e) => e.type === "item.completed" && e.item.type === "mcp_tool_call");
    assert.equal(calls.length, 2, out.stdout);
    assert.equal(calls[0].item.server, "everything");
    assert.equal(calls[0].item.tool, "echo");
    assert.equal(calls[0].item.status, "completed");
    assert.match(JSON.stringify(calls[0].item.result), /Echo: hi-everything/);
    assert.equal(calls[1].item.tool, "get-sum");
    assert.match(JSON.stringify(calls[1].item.result), /42/);
    await ctx.finish();
    const record = JSON.parse(readFileSync(ctx.record, "utf8"));
    assert.deepEqual(record.violations, []);
    const toolNames = record.requests[0].tools.map((t) => t.function.name);
    assert.ok(toolNames.includes("mcp__everything__echo"), toolNames.join(","));
    assert.match(JSON.stringify(record.requests[2].messages), /Echo: hi-everything/);
  } finally {
    ctx.stop();
  }
});
