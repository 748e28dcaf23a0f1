// Shared set-up for the codex-acp peer test: the scripted mock model, fresh homes and a
// project per test, and codex-acp (CODEX_PATH = our `interpreter`, so it runs
// `interpreter app-server`) driven by the official ACP TypeScript SDK's client app.
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

export { acp };

export const BIN_DIR = process.env.INTERPRETER_BIN_DIR ?? join(import.meta.dirname, "../../target/debug");
const CODEX_ACP = join(import.meta.dirname, "node_modules/@agentclientprotocol/codex-acp/dist/index.js");

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

/** Whether `pid` runs (a zombie does not). */
export function alive(pid) {
  try {
    return !readFileSync(`/proc/${pid}/stat`, "utf8").includes(") Z ");
  } catch (error) {
    if (error.code === "ENOENT" || error.code === "ESRCH") return false;
    throw error;
  }
}

/** The pids of `pid`'s direct children. */
function childrenOf(pid) {
  try {
    return readdirSync(`/proc/${pid}/task`).flatMap((tid) =>
      readFileSync(`/proc/${pid}/task/${tid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number));
  } catch {
    return [];
  }
}

/** The command line of `pid`, as an argv array (empty once it is gone). */
function argvOf(pid) {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
  } catch {
    return [];
  }
}

// ---- the mock model's script -------------------------------------------------------

function chunk(delta, finishReason = null) {
  return { id: "c", object: "chat.completion.chunk", model: "mock-model",
    choices: [{ index: 0, delta, finish_reason: finishReason }] };
}

/** One model answer streamed as `pieces` of text. */
export function textTurn(pieces) {
  const list = Array.isArray(pieces) ? pieces : [pieces];
  return { chunks: [...list.map((p) => chunk({ content: p })), chunk({}, "stop")] };
}

/** One model answer that calls the shell tool with `command` (and `extra` arguments)
 * under call id `id`. */
export function shellTurn(id, command, extra = {}) {
  const args = JSON.stringify({ command, ...extra });
  return { chunks: [
    chunk({ tool_calls: [{ index: 0, id, type: "function", function: { name: "shell", arguments: args } }] }),
    chunk({}, "tool_calls"),
  ] };
}

/** The words codex-acp's title generation (an ephemeral thread, model `gpt-5.6-luna`, an
 * outputSchema) puts into its one request, after the first turn of a new session. */
const TITLE_PROMPT = "generate a very short title for a conversation";

/** Whether a recorded model request is codex-acp's title generation. */
export const isTitleRequest = (request) => JSON.stringify(request).includes(TITLE_PROMPT);

// ---- processes ---------------------------------------------------------------------

/** Per-test resources, released in reverse order by `cleanUp()`. Two homes: ours
 * (INTERPRETER_HOME: config, sessions) and the user's (HOME: what shells started by the
 * commands see), kept apart as they are on a real machine. */
export class Scenario {
  constructor() {
    this.root = mkdtempSync(join(tmpdir(), "codex-acp-"));
    this.home = join(this.root, "interpreter-home");
    this.userHome = join(this.root, "home");
    this.logs = join(this.root, "logs");
    for (const dir of [this.home, this.userHome, this.logs]) mkdirSync(dir);
    // The agent canonicalizes cwd; compare paths in the same form.
    this.work = realpathSync(mkdtempSync(join(tmpdir(), "codex-acp-work-")));
    this.cleanups = [];
    this.agents = [];
  }

  /** Start mock-model with `turns` (one entry per model request, in arrival order) and
   * point config.toml at it. `finish()` stops it and returns its record. */
  async startModel(turns) {
    const scriptFile = join(this.root, "script.json");
    writeFileSync(scriptFile, JSON.stringify(turns));
    const recordFile = join(this.root, "record.json");
    const proc = spawn(join(BIN_DIR, "mock-model"), ["--script", scriptFile, "--record", recordFile],
      { stdio: ["pipe", "pipe", "inherit"] });
    const exited = new Promise((resolve) => proc.once("exit", resolve));
    const line = await within(new Promise((resolve) => createInterface({ input: proc.stdout }).once("line", resolve)),
      DEADLINE_MS, "mock-model printing its base_url");
    const { base_url: baseUrl } = JSON.parse(line);
    writeFileSync(join(this.home, "config.toml"),
      `model = "mock-model"\nmodel_provider = "mock"\n\n[model_providers.mock]\nname = "mock"\n` +
      `base_url = "${baseUrl}"\nenv_key = "MOCK_API_KEY"\nwire_api = "chat"\n` +
      `request_max_retries = 0\nstream_max_retries = 0\n`);
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

  /** Stop the model, fail on any conversation rule it saw broken, and return the
   * requests apart from title generation's (whose count depends on whether our server
   * runs that turn at all). */
  async assertModelClean(assert) {
    // A title turn still on its way to the model would race its shutdown.
    for (const agent of this.agents) {
      await agent.waitFor(() => agent.titleGenerationSettled(), "title generation settling", 10_000)
        .catch(() => this.notes.push(`codex-acp ${agent.index}: title generation still running when the model stopped`));
    }
    const record = await this.model.finish();
    assert.deepEqual(record.violations, [], `mock model violations: ${JSON.stringify(record.violations)}`);
    const titles = record.requests.filter(isTitleRequest).length;
    this.notes.push(`model requests: ${record.requests.length} (title generation: ${titles})`);
    return record.requests.filter((r) => !isTitleRequest(r));
  }

  /** Start codex-acp (not yet initialized) behind an SDK client app. */
  startAgent() {
    const agent = new CodexAcp(this, this.agents.length);
    this.agents.push(agent);
    this.cleanups.push(() => agent.kill());
    return agent;
  }

  /** What to show when a test fails: per codex-acp, its stderr, the app-server
   * requests our server answered with an error, and the tail of its log. */
  report() {
    return this.agents.map((a) => [
      `--- codex-acp ${a.index} stderr ---`, a.stderr.slice(-4000),
      `--- codex-acp ${a.index}: app-server errors ---`,
      ...a.appServerErrors().map((e) => `${e.method}: ${JSON.stringify(e.error)}`),
      `--- codex-acp ${a.index}: app-server.log (tail) ---`, a.logText().slice(-6000),
    ].join("\n")).join("\n");
  }

  async cleanUp() {
    for (const cleanup of this.cleanups.reverse()) {
      try { await cleanup(); } catch { /* best effort */ }
    }
    rmSync(this.root, { recursive: true, force: true });
    rmSync(this.work, { recursive: true, force: true });
  }
}

/** Run `body(scenario)`; on failure the agents' stderr and logs join the error. */
export async function inScenario(body, t) {
  const scenario = new Scenario();
  scenario.notes = [];
  try {
    await body(scenario);
    // Refusals by our server that codex-acp got past (e.g. title generation), for the log.
    for (const agent of scenario.agents) {
      for (const e of agent.appServerErrors()) scenario.notes.push(`codex-acp ${agent.index}: app-server ${e.method} -> ${JSON.stringify(e.error)}`);
      const { stderr } = agent.appServerTraffic();
      if (stderr.trim()) scenario.notes.push(`codex-acp ${agent.index}: app-server stderr: ${JSON.stringify(stderr.slice(0, 600))}`);
    }
    for (const note of scenario.notes) t?.diagnostic(note);
  } catch (error) {
    error.message += `\n${scenario.notes.join("\n")}\n${scenario.report()}`;
    throw error;
  } finally {
    await scenario.cleanUp();
  }
}

// The SDK reports agent messages it cannot parse on console.error and drops them;
// collect those so a test can fail on them.
const sdkComplaints = [];
const consoleError = console.error.bind(console);
console.error = (...args) => {
  sdkComplaints.push(args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" "));
  consoleError(...args);
};
export const takeSdkComplaints = () => sdkComplaints.splice(0);

/** One codex-acp process (its own process group, so that it and the app-server it
 * spawns can be killed together) and the SDK client connected to its stdio. Everything
 * it sends is recorded: `wire` (raw, in arrival order), `updates`, `permissionRequests`. */
export class CodexAcp {
  constructor(scenario, index) {
    this.index = index;
    this.logDir = join(scenario.logs, `codex-acp-${index}`);
    this.proc = spawn(process.execPath, [CODEX_ACP], {
      cwd: scenario.work,
      detached: true,
      env: {
        PATH: process.env.PATH,
        HOME: scenario.userHome,
        CODEX_PATH: join(BIN_DIR, "interpreter"),
        INTERPRETER_HOME: scenario.home,
        MOCK_API_KEY: "k",
        APP_SERVER_LOGS: this.logDir,
      },
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.stderr = "";
    this.proc.stderr.setEncoding("utf8");
    this.proc.stderr.on("data", (text) => { this.stderr += text; });
    this.exited = new Promise((resolve) => this.proc.once("exit", (code, signal) => resolve({ code, signal })));
    this.wire = [];
    this.sent = [];
    this.updates = [];
    this.permissionRequests = [];
    this.waiters = new Set();
    this.onPermission = () => { throw new Error("this test expects no permission request"); };

    const ndjson = acp.ndJsonStream(Writable.toWeb(this.proc.stdin), Readable.toWeb(this.proc.stdout));
    const incoming = ndjson.readable.pipeThrough(new TransformStream({
      transform: (message, controller) => { this.wire.push(message); controller.enqueue(message); this.wake(); },
    }));
    const outgoing = new TransformStream({
      transform: (message, controller) => { this.sent.push(message); controller.enqueue(message); },
    });
    outgoing.readable.pipeTo(ndjson.writable).catch(() => {});

    const app = acp.client({ name: "interpreter-codex-acp-test" })
      .onNotification(acp.methods.client.session.update, ({ params }) => {
        this.updates.push(params);
        this.wake();
      })
      .onRequest(acp.methods.client.session.requestPermission, async (ctx) => {
        this.permissionRequests.push({ params: ctx.params, signal: ctx.signal });
        this.wake();
        return this.onPermission(ctx);
      })
      .onRequest(acp.methods.client.fs.readTextFile, async () => { throw acp.RequestError.resourceNotFound(); })
      .onRequest(acp.methods.client.fs.writeTextFile, async () => { throw new Error("this test expects no file write"); });
    this.connection = app.connect({ readable: incoming, writable: outgoing.writable });
    this.agent = this.connection.agent;
  }

  wake() {
    for (const waiter of this.waiters) waiter();
  }

  /** Resolves with the first truthy `probe()` value, re-checked on every message and
   * every 50 ms. */
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

  /** An ACP request with a deadline; an error answer names the method and its data. */
  request(method, params, what = method, ms = DEADLINE_MS) {
    return within(this.agent.request(method, params).catch((error) => {
      const wrapped = new Error(`${method} failed: ${error.message} ${JSON.stringify(error.data ?? null)}`);
      wrapped.code = error.code;
      throw wrapped;
    }), ms, what);
  }

  initialize() {
    return this.request(acp.methods.agent.initialize,
      { protocolVersion: 1, clientCapabilities: {}, clientInfo: { name: "interpreter-codex-acp-test", version: "1.0.0" } });
  }

  newSession(cwd) {
    return this.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
  }

  /** Send a text prompt; the raw request (no deadline: callers add one). */
  prompt(sessionId, text) {
    return this.agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] });
  }

  cancel(sessionId) {
    return this.agent.notify(acp.methods.agent.session.cancel, { sessionId });
  }

  updatesOf(sessionId) {
    return this.updates.filter((n) => n.sessionId === sessionId).map((n) => n.update);
  }

  /** The `interpreter app-server` processes codex-acp runs now. */
  appServers() {
    return childrenOf(this.proc.pid).filter((pid) => argvOf(pid).includes("app-server"));
  }

  /** SIGKILL codex-acp's whole process group (it and its app-server, as when an editor
   * dies) and wait until both are gone. */
  async killHard() {
    const servers = this.appServers();
    try { process.kill(-this.proc.pid, "SIGKILL"); } catch { /* already gone */ }
    await within(this.exited, DEADLINE_MS, "codex-acp exiting after SIGKILL");
    this.connection.close();
    const stillThere = () => servers.filter(alive);
    await this.waitForGone(stillThere);
    return servers;
  }

  async waitForGone(stillThere) {
    const deadline = Date.now() + 10_000;
    while (stillThere().length > 0 && Date.now() < deadline) await sleep(50);
    if (stillThere().length > 0) throw new Error(`app-server still running after codex-acp was killed: ${stillThere()}`);
  }

  kill() {
    this.connection.close();
    if (this.proc.exitCode === null && this.proc.signalCode === null) {
      try { process.kill(-this.proc.pid, "SIGKILL"); } catch { /* already gone */ }
    }
  }

  logText() {
    const file = join(this.logDir, "app-server.log");
    return existsSync(file) ? readFileSync(file, "utf8") : "";
  }

  /** The app-server traffic from codex-acp's log (APP_SERVER_LOGS): every chunk it
   * wrote to our stdin ([IN]) and read from our stdout ([OUT]), parsed into messages. */
  appServerTraffic() {
    const streams = { IN: "", OUT: "", ERR: "" };
    const blocks = this.logText().split(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} \[(IN|OUT|ERR|SYS|[A-Z_ ]+)\] /m);
    for (let i = 1; i + 1 < blocks.length; i += 2) {
      const tag = blocks[i];
      if (!(tag in streams)) continue;
      streams[tag] += blocks[i + 1].replace(/ \{"pid":\d+\}\n?$/, "");
    }
    const parse = (text) => text.split("\n").flatMap((line) => {
      try { return line.trim() ? [JSON.parse(line)] : []; } catch { return []; }
    });
    return { sent: parse(streams.IN), received: parse(streams.OUT), stderr: streams.ERR };
  }

  /** Whether codex-acp's title generation is not under way: never started, refused, or
   * its turn over (or codex-acp gone). */
  titleGenerationSettled() {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return true;
    const { sent, received } = this.appServerTraffic();
    const answer = (id) => received.find((m) => m.id === id && m.method === undefined);
    const ephemeralStarts = sent.filter((m) => m.method === "thread/start" && m.params?.ephemeral === true);
    const titleTurns = sent.filter((m) => m.method === "turn/start" && m.params?.outputSchema);
    if (ephemeralStarts.some((m) => !answer(m.id) || answer(m.id).error === undefined) && titleTurns.length < ephemeralStarts.length) {
      return false;
    }
    return titleTurns.every((m) => {
      const reply = answer(m.id);
      if (!reply) return false;
      return reply.error !== undefined || received.some((n) => n.method === "turn/completed" && n.params?.threadId === m.params.threadId);
    });
  }

  /** Requests codex-acp sent our app-server that it answered with an error. */
  appServerErrors() {
    const { sent, received } = this.appServerTraffic();
    const methods = new Map(sent.filter((m) => m.method && m.id !== undefined).map((m) => [m.id, m.method]));
    return received.filter((m) => m.error && m.method === undefined)
      .map((m) => ({ method: methods.get(m.id) ?? `(id ${m.id})`, error: m.error }));
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
  return toolUpdates(updates, toolCallId).map((u) => u.status).filter(Boolean).at(-1);
}

/** A permission answer choosing the option of `kind` (allow_once, reject_once, …). */
export function choose(params, kind) {
  const option = params.options.find((o) => o.kind === kind);
  if (!option) throw new Error(`no ${kind} option in ${JSON.stringify(params.options)}`);
  return { outcome: { outcome: "selected", optionId: option.optionId } };
}
