// Shared set-up for the TypeScript peer test: a fresh home, the mock model process with
// a script, and the config pointing `interpreter mcp-server` at it.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer } from "node:net";
import { createInterface } from "node:readline";

/** Whether `pid` runs (a zombie does not). The process can exit between any two looks at
 * /proc, so a vanished stat file means dead. */
export function alive(pid) {
  try {
    return !readFileSync(`/proc/${pid}/stat`, "utf8").includes(") Z ");
  } catch (error) {
    if (error.code === "ENOENT" || error.code === "ESRCH") return false;
    throw error;
  }
}

/** A TCP port that was free a moment ago. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

export const BIN_DIR = process.env.INTERPRETER_BIN_DIR ?? join(import.meta.dirname, "../../target/debug");

function toolCall(id, name, args) {
  return [
    { id: "c", object: "chat.completion.chunk", model: "mock-model",
      choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id, type: "function",
        function: { name, arguments: JSON.stringify(args) } }] }, finish_reason: null }] },
    { id: "c", object: "chat.completion.chunk", model: "mock-model",
      choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] },
  ];
}

function text(t) {
  return [
    { id: "c", object: "chat.completion.chunk", model: "mock-model",
      choices: [{ index: 0, delta: { content: t }, finish_reason: null }] },
    { id: "c", object: "chat.completion.chunk", model: "mock-model",
      choices: [{ index: 0, delta: {}, finish_reason: "stop" }] },
  ];
}

/** Scripted turns: [{command}|{tool, args}|{text}] → mock-model script entries. */
export function script(steps) {
  return steps.map((s, i) => ({
    chunks: s.command ? toolCall(`call_${i}`, "shell", { command: s.command })
      : s.tool ? toolCall(`call_${i}`, s.tool, s.args ?? {})
      : text(s.text),
  }));
}

/** Start mock-model with `steps`; returns {home, work, env, stop()} (and `record`, the
 * file mock-model writes the requests it saw to when it stops). `config` is appended to
 * config.toml (whole tables, e.g. "[mcp_server]\nprogress_interval_sec = 2\n"); `topLevel`
 * keys go before the first table (e.g. `thread_store = "postgres://…"\n`). */
export async function setUp(steps, { config = "", topLevel = "" } = {}) {
  const home = mkdtempSync(join(tmpdir(), "peer-home-"));
  const work = mkdtempSync(join(tmpdir(), "peer-work-"));
  const scriptFile = join(home, "script.json");
  writeFileSync(scriptFile, JSON.stringify(script(steps)));
  const record = join(home, "record.json");
  const mock = spawn(join(BIN_DIR, "mock-model"), ["--script", scriptFile, "--record", record],
    { stdio: ["pipe", "pipe", "inherit"] });
  const firstLine = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("mock-model did not start")), 30000);
    createInterface({ input: mock.stdout }).once("line", (line) => { clearTimeout(timer); resolve(line); });
  });
  const { base_url } = JSON.parse(firstLine);
  writeFileSync(join(home, "config.toml"),
    `model = "mock-model"\nmodel_provider = "mock"\n${topLevel}\n[model_providers.mock]\nname = "mock"\n` +
    `base_url = "${base_url}"\nenv_key = "MOCK_API_KEY"\nwire_api = "chat"\nrequest_max_retries = 0\n` + (config ? `\n${config}` : ""));
  const env = { PATH: process.env.PATH, HOME: home, INTERPRETER_HOME: home, MOCK_API_KEY: "k" };
  // Closing stdin is how mock-model is told to stop; SIGKILL makes sure it does.
  const exited = new Promise((resolve) => mock.once("exit", resolve));
  return {
    home, work, env, record,
    stop: () => { mock.stdin.end(); mock.kill("SIGKILL"); },
    // Close stdin and wait (bounded) for the record file to be written.
    finish: async () => {
      mock.stdin.end();
      const timer = setTimeout(() => mock.kill("SIGKILL"), 10000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Start `interpreter mcp-server --listen http://127.0.0.1:0/mcp` in `ctx`'s home; resolves
 * to {url, token, tokenFile, proc, stop()} once stderr has named the URL and the token file. */
export async function startHttpServer(ctx, extraArgs = []) {
  const proc = spawn(join(BIN_DIR, "interpreter"), ["mcp-server", "--listen", "http://127.0.0.1:0/mcp", ...extraArgs],
    { cwd: ctx.work, env: ctx.env, stdio: ["ignore", "ignore", "pipe"] });
  let url, tokenFile;
  const seen = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`HTTP server did not start; stderr: ${seen.join("\n")}`)), 30000);
    proc.once("exit", (code) => { clearTimeout(timer); reject(new Error(`HTTP server exited (${code}); stderr: ${seen.join("\n")}`)); });
    createInterface({ input: proc.stderr }).on("line", (line) => {
      process.stderr.write(`${line}\n`);
      if (url === undefined || tokenFile === undefined) seen.push(line);
      url ??= line.match(/listening on (http:\/\/\S+)/)?.[1];
      tokenFile ??= line.match(/bearer token file: (.+)$/)?.[1]?.trim();
      const noAuth = extraArgs.includes("--no-auth");
      if (url && (tokenFile || noAuth)) { clearTimeout(timer); resolve(); }
    });
  });
  const token = tokenFile ? readFileSync(tokenFile, "utf8").trim() : undefined;
  const exited = new Promise((resolve) => proc.once("exit", resolve));
  return {
    url, token, tokenFile, proc,
    stop: async () => { proc.kill("SIGKILL"); await exited; },
  };
}
