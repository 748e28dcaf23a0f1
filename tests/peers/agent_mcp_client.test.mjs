// The agent as an MCP *client* of real servers from npm: `interpreter exec` starts
// @modelcontextprotocol/server-everything over stdio, connects to it over streamable HTTP,
// and starts @modelcontextprotocol/server-filesystem; it offers their tools to the (mock)
// model as mcp__<server>__*, and the calls' results reach the model and the JSONL stream.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { appendFileSync, mkdtempSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BIN_DIR, freePort, setUp } from "./common.mjs";

const SERVER = join(import.meta.dirname,
  "node_modules/@modelcontextprotocol/server-everything/dist/index.js");
const FILESYSTEM = join(import.meta.dirname,
  "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");

/** server-everything in its streamableHttp mode on a free port; resolves once it listens. */
async function startEverythingHttp() {
  const port = await freePort();
  const child = spawn(process.execPath, [SERVER, "streamableHttp"], {
    env: { PATH: process.env.PATH, PORT: String(port) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout.resume();
  await new Promise((resolve, reject) => {
    let stderr = "";
    const timer = setTimeout(() => { child.kill("SIGKILL"); reject(new Error(`server-everything did not listen\n${stderr}`)); }, 60000);
    child.stderr.on("data", (d) => {
      stderr += d;
      if (stderr.includes("listening on port")) { clearTimeout(timer); resolve(); }
    });
    child.once("exit", (code) => { clearTimeout(timer); reject(new Error(`server-everything exited (${code})\n${stderr}`)); });
  });
  return { url: `http://127.0.0.1:${port}/mcp`, stop: () => child.kill("SIGKILL") };
}

function jsonEvents(stdout) {
  return stdout.trim().split("\n").map((l) => JSON.parse(l));
}

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

test("exec calls tools of server-everything over streamable HTTP", async () => {
  const server = await startEverythingHttp();
  const ctx = await setUp([
    { tool: "mcp__remote__echo", args: { message: "hi-over-http" } },
    { tool: "mcp__remote__get_sum", args: { a: 20, b: 22 } },
    { text: "done" },
  ]);
  try {
    appendFileSync(join(ctx.home, "config.toml"),
      `\n[mcp_servers.remote]\nurl = "${server.url}"\nstartup_timeout_sec = 60\n` +
      `http_headers = { "X-Test" = "peer" }\n`);
    const out = await run(["exec", "--json", "--skip-git-repo-check", "use the tools"], ctx);
    assert.equal(out.code, 0, out.stderr);
    const events = jsonEvents(out.stdout);
    const startup = events.filter((e) => e.type === "item.completed" && e.item.type === "mcp_server_startup");
    assert.equal(startup.length, 1, out.stdout);
    assert.equal(startup[0].item.server, "remote");
    assert.equal(startup[0].item.status, "ready");
    assert.ok(startup[0].item.tools > 5, JSON.stringify(startup[0]));
    const calls = events.filter((e) => e.type === "item.completed" && e.item.type === "mcp_tool_call");
    assert.equal(calls.length, 2, out.stdout);
    assert.equal(calls[0].item.status, "completed");
    assert.match(JSON.stringify(calls[0].item.result), /Echo: hi-over-http/);
    assert.equal(calls[1].item.tool, "get-sum");
    assert.match(JSON.stringify(calls[1].item.result), /42/);
    await ctx.finish();
    const record = JSON.parse(readFileSync(ctx.record, "utf8"));
    assert.deepEqual(record.violations, []);
    const toolNames = record.requests[0].tools.map((t) => t.function.name);
    assert.ok(toolNames.includes("mcp__remote__echo"), toolNames.join(","));
  } finally {
    ctx.stop();
    server.stop();
  }
});

test("exec reads a file through server-filesystem", async () => {
  // The server resolves symlinks (macOS's /var → /private/var), so give it the real path.
  const dir = realpathSync(mkdtempSync(join(tmpdir(), "peer-files-")));
  const file = join(dir, "notes.txt");
  writeFileSync(file, "filesystem-server-says-hello\n");
  const ctx = await setUp([
    { tool: "mcp__files__read_text_file", args: { path: file } },
    { text: "done" },
  ]);
  try {
    appendFileSync(join(ctx.home, "config.toml"),
      `\n[mcp_servers.files]\ncommand = "${process.execPath}"\nargs = ["${FILESYSTEM}", "${dir}"]\n` +
      `startup_timeout_sec = 60\n`);
    const out = await run(["exec", "--json", "--skip-git-repo-check", "read the notes"], ctx);
    assert.equal(out.code, 0, out.stderr);
    const calls = jsonEvents(out.stdout).filter((e) => e.type === "item.completed" && e.item.type === "mcp_tool_call");
    assert.equal(calls.length, 1, out.stdout);
    assert.equal(calls[0].item.status, "completed", JSON.stringify(calls[0]));
    assert.match(JSON.stringify(calls[0].item.result), /filesystem-server-says-hello/);
  } finally {
    ctx.stop();
  }
});
