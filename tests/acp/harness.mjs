// Shared set-up for the TypeScript ACP client test: the scripted mock model, a fresh home
// and project per test, and `interpreter acp` driven by the official SDK's client app.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

export { acp };

export const BIN_DIR = process.env.INTERPRETER_BIN_DIR ?? join(import.meta.dirname, "../../target/debug");

/** Generous for a debug build on a loaded 2-core machine; only a hang reaches it. */
export const DEADLINE_MS = 30_000;

/** `promise`, or a rejection naming `what` once `ms` have passed. */
export function within(promise, ms, what) {
  let timer;
  const deadline = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// ---- the mock model's script -------------------------------------------------------

function chunk(delta, finishReason = null) {
  return { id: "c", object: "chat.completion.chunk", model: "mock-model",
    choices: [{ index: 0, delta, finish_reason: finishReason }] };
}

/** One model answer streamed as `pieces` of text; `delayMs` pauses between chunks. */
export function textTurn(pieces, { delayMs = 0 } = {}) {
  const list = Array.isArray(pieces) ? pieces : [pieces];
  return { chunks: [...list.map((p) => chunk({ content: p })), chunk({}, "stop")], chunk_delay_ms: delayMs };
}

/** One model answer that calls tool `name` with `args` under call id `id`. */
export function toolTurn(id, name, args) {
  return { chunks: [
    chunk({ tool_calls: [{ index: 0, id, type: "function", function: { name, arguments: JSON.stringify(args) } }] }),
    chunk({}, "tool_calls"),
  ] };
}

export const shellTurn = (id, command) => toolTurn(id, "shell", { command });

// ---- processes ---------------------------------------------------------------------

/** A port nothing listens on (bound, then released). */
export async function closedPort() {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Per-test resources, released in reverse order by `cleanUp()`; agents' stderr kept for
 * failure reports. */
export class Scenario {
  constructor() {
    this.home = mkdtempSync(join(tmpdir(), "acp-home-"));
    // The agent canonicalizes cwd; compare paths in the same form.
    this.work = realpathSync(mkdtempSync(join(tmpdir(), "acp-work-")));
    this.cleanups = [];
    this.agents = [];
  }

  env() {
    return { PATH: process.env.PATH, HOME: this.home, INTERPRETER_HOME: this.home, MOCK_API_KEY: "k" };
  }

  writeConfig(baseUrl) {
    writeFileSync(join(this.home, "config.toml"),
      `model = "mock-model"\nmodel_provider = "mock"\n\n[model_providers.mock]\nname = "mock"\n` +
      `base_url = "${baseUrl}"\nenv_key = "MOCK_API_KEY"\nwire_api = "chat"\n` +
      `request_max_retries = 0\nstream_max_retries = 0\n`);
  }

  /** Start mock-model with `turns` (one entry per model request) and point config.toml
   * at it. `finish()` stops it and returns its record. */
  async startModel(turns) {
    const scriptFile = join(this.home, "script.json");
    writeFileSync(scriptFile, JSON.stringify(turns));
    const recordFile = join(this.home, "record.json");
    const proc = spawn(join(BIN_DIR, "mock-model"), ["--script", scriptFile, "--record", recordFile],
      { stdio: ["pipe", "pipe", "inherit"] });
    const exited = new Promise((resolve) => proc.once("exit", resolve));
    const line = await within(new Promise((resolve) => createInterface({ input: proc.stdout }).once("line", resolve)),
      DEADLINE_MS, "mock-model printing its base_url");
    const { base_url: baseUrl } = JSON.parse(line);
    this.writeConfig(baseUrl);
    let record;
    const finish = async () => {
      if (record) return record;
      // Closing stdin tells it to write the record and exit.
      proc.stdin.end();
      await within(exited, 10_000, "mock-model exiting").catch(() => proc.kill("SIGKILL"));
      record = JSON.parse(readFileSync(recordFile, "utf8"));
      return record;
    };
    this.cleanups.push(() => { proc.stdin.end(); proc.kill("SIGKILL"); });
    this.model = { baseUrl, finish };
    return this.model;
  }

  /** Stop the model and fail on any conversation rule it saw broken. */
  async assertModelClean(assert) {
    const record = await this.model.finish();
    assert.deepEqual(record.violations, [], `mock model violations: ${JSON.stringify(record.violations)}`);
    return record;
  }

  /** Start `interpreter acp` (not yet initialized) behind an SDK client app. */
  startAgent() {
    const agent = new AgentProcess(this);
    this.agents.push(agent);
    this.cleanups.push(() => agent.kill());
    return agent;
  }

  stderr() {
    return this.agents.map((a, i) => `--- agent ${i} stderr ---\n${a.stderr.slice(-8000)}`).join("\n");
  }

  async cleanUp() {
    for (const cleanup of this.cleanups.reverse()) {
      try { await cleanup(); } catch { /* best effort */ }
    }
    for (const dir of [this.home, this.work]) rmSync(dir, { recursive: true, force: true });
  }
}

/** Run `body(scenario)`; on failure the agents' stderr joins the error. */
export async function inScenario(body) {
  const scenario = new Scenario();
  try {
    await body(scenario);
  } catch (error) {
    error.message += `\n${scenario.stderr()}`;
    throw error;
  } finally {
    await scenario.cleanUp();
  }
}

// The SDK reports agent messages it cannot parse (a notification whose params break the
// schema) on console.error and drops them; collect those so a test can fail on them.
const sdkComplaints = [];
const consoleError = console.error.bind(console);
console.error = (...args) => {
  sdkComplaints.push(args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" "));
  consoleError(...args);
};
export const takeSdkComplaints = () => sdkComplaints.splice(0);

/** One `interpreter acp` process and the SDK client connected to its stdio. Everything the
 * agent sends is recorded: `wire` (raw, in arrival order), `updates` (as the SDK's
 * session/update handler got them), `permissionRequests`, `reads`, `writes`. Tests set
 * `onPermission`, `onReadTextFile`, `onWriteTextFile` to answer agent→client requests. */
export class AgentProcess {
  constructor(scenario) {
    this.proc = spawn(join(BIN_DIR, "interpreter"), ["acp"],
      { cwd: scenario.work, env: scenario.env(), stdio: ["pipe", "pipe", "pipe"] });
    this.stderr = "";
    this.proc.stderr.setEncoding("utf8");
    this.proc.stderr.on("data", (text) => { this.stderr += text; });
    this.exited = new Promise((resolve) => this.proc.once("exit", (code, signal) => resolve({ code, signal })));
    this.wire = [];
    this.sent = [];
    this.updates = [];
    this.permissionRequests = [];
    this.reads = [];
    this.writes = [];
    this.waiters = new Set();
    this.onPermission = () => { throw new Error("this test expects no permission request"); };
    this.onReadTextFile = () => { throw acp.RequestError.resourceNotFound(); };
    this.onWriteTextFile = () => { throw new Error("this test expects no file write"); };

    const ndjson = acp.ndJsonStream(Writable.toWeb(this.proc.stdin), Readable.toWeb(this.proc.stdout));
    // Taps on both directions: the raw order of messages is what the protocol promises,
    // independent of how the SDK schedules its handlers.
    const incoming = ndjson.readable.pipeThrough(new TransformStream({
      transform: (message, controller) => { this.wire.push(message); controller.enqueue(message); this.wake(); },
    }));
    const outgoing = new TransformStream({
      transform: (message, controller) => { this.sent.push(message); controller.enqueue(message); },
    });
    outgoing.readable.pipeTo(ndjson.writable).catch(() => {});

    const app = acp.client({ name: "interpreter-acp-test" })
      .onNotification(acp.methods.client.session.update, ({ params }) => {
        this.updates.push(params);
        this.wake();
      })
      .onRequest(acp.methods.client.session.requestPermission, async (ctx) => {
        this.permissionRequests.push({ params: ctx.params, signal: ctx.signal, requestId: ctx.requestId });
        this.wake();
        return this.onPermission(ctx);
      })
      .onRequest(acp.methods.client.fs.readTextFile, async (ctx) => {
        this.reads.push(ctx.params);
        this.wake();
        return this.onReadTextFile(ctx);
      })
      .onRequest(acp.methods.client.fs.writeTextFile, async (ctx) => {
        this.writes.push(ctx.params);
        this.wake();
        return this.onWriteTextFile(ctx);
      });
    this.connection = app.connect({ readable: incoming, writable: outgoing.writable });
    this.agent = this.connection.agent;
  }

  wake() {
    for (const waiter of this.waiters) waiter();
  }

  /** Resolves with the first truthy `probe()` value, re-checked on every message and
   * every 50 ms (the SDK acts on a message after the tap has seen it, so a probe of the
   * SDK's state can turn true after the last message). */
  waitFor(probe, what, ms = DEADLINE_MS) {
    const found = probe();
    if (found) return Promise.resolve(found);
    let waiter;
    let poll;
    return within(new Promise((resolve) => {
      waiter = () => {
        const value = probe();
        if (value) resolve(value);
      };
      this.waiters.add(waiter);
      poll = setInterval(waiter, 50);
    }), ms, what).finally(() => { this.waiters.delete(waiter); clearInterval(poll); });
  }

  async initialize(clientCapabilities = {}) {
    return within(this.agent.request(acp.methods.agent.initialize,
      { protocolVersion: 1, clientCapabilities, clientInfo: { name: "interpreter-acp-test", version: "1.0.0" } }),
      DEADLINE_MS, "initialize");
  }

  async newSession(cwd, mcpServers = []) {
    const result = await within(this.agent.request(acp.methods.agent.session.new, { cwd, mcpServers }),
      DEADLINE_MS, "session/new");
    return result.sessionId;
  }

  setMode(sessionId, modeId) {
    return within(this.agent.request(acp.methods.agent.session.setMode, { sessionId, modeId }),
      DEADLINE_MS, `session/set_mode ${modeId}`);
  }

  /** Send a text prompt; the promise is the raw request (no deadline: callers add one). */
  prompt(sessionId, text) {
    return this.agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] });
  }

  cancel(sessionId) {
    return this.agent.notify(acp.methods.agent.session.cancel, { sessionId });
  }

  /** The `update` objects for `sessionId`, in the order the handler got them. */
  updatesOf(sessionId) {
    return this.updates.filter((n) => n.sessionId === sessionId).map((n) => n.update);
  }

  /** Close stdin (how an editor says goodbye) and wait for the process to exit. */
  async close() {
    this.proc.stdin.end();
    const status = await within(this.exited, DEADLINE_MS, "interpreter acp exiting after stdin closed");
    this.connection.close();
    return status;
  }

  kill() {
    this.connection.close();
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill("SIGKILL");
  }
}

/** Concatenated text of the `kind` chunks among `updates`. */
export function textOf(updates, kind = "agent_message_chunk") {
  return updates.filter((u) => u.sessionUpdate === kind && u.content?.type === "text").map((u) => u.content.text).join("");
}

/** The tool_call / tool_call_update updates about `toolCallId`, in order. */
export function toolUpdates(updates, toolCallId) {
  return updates.filter((u) => (u.sessionUpdate === "tool_call" || u.sessionUpdate === "tool_call_update")
    && u.toolCallId === toolCallId);
}

/** The last status a tool call reached. */
export function finalStatus(updates, toolCallId) {
  const statuses = toolUpdates(updates, toolCallId).map((u) => u.status).filter(Boolean);
  return statuses.at(-1);
}

/** Everything a person reading the tool call would see: its title and text content. */
export function shownText(toolCall) {
  const parts = [toolCall.title ?? ""];
  for (const item of toolCall.content ?? []) {
    if (item.type === "content" && item.content?.type === "text") parts.push(item.content.text);
    if (item.type === "diff") parts.push(item.path, item.newText ?? "");
  }
  return parts.join("\n");
}

/** A permission answer choosing the option of `kind` (allow_once, reject_once, …). */
export function choose(params, kind) {
  const option = params.options.find((o) => o.kind === kind);
  if (!option) throw new Error(`no ${kind} option in ${JSON.stringify(params.options)}`);
  return { outcome: { outcome: "selected", optionId: option.optionId } };
}
