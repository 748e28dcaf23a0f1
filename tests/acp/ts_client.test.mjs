// The official ACP TypeScript SDK (client app over stdio) driving `interpreter acp`
// against the scripted mock model: capabilities, streaming, permissions, cancel,
// concurrent sessions, load after a restart, editor MCP servers, the client's file
// system, and malformed input.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { test } from "node:test";
import {
  BIN_DIR, DEADLINE_MS, Scenario, acp, choose, closedPort, finalStatus, inScenario, shellTurn, shownText,
  sleep, takeSdkComplaints, textOf, textTurn, toolTurn, toolUpdates, within,
} from "./harness.mjs";

// Each test stops at this even if a deadline inside it were missed.
const TEST_TIMEOUT_MS = 120_000;

/** `test` with the overall timeout, a fresh scenario, and a check that the SDK could parse
 * everything the agent sent. */
function scenario(name, body) {
  test(name, { timeout: TEST_TIMEOUT_MS }, () => inScenario(async (s) => {
    takeSdkComplaints();
    await body(s);
    assert.deepEqual(takeSdkComplaints(), [], "the SDK rejected messages from the agent");
  }));
}

async function startedAgent(s, clientCapabilities) {
  const agent = s.startAgent();
  const init = await agent.initialize(clientCapabilities);
  assert.equal(init.protocolVersion, 1);
  return agent;
}

// 1
scenario("initialize answers with its capabilities while no model server is reachable", async (s) => {
  // Config points at a port nothing listens on: initialize must not need the model.
  s.writeConfig(`http://127.0.0.1:${await closedPort()}/v1`);
  const agent = s.startAgent();
  const init = await agent.initialize({ fs: { readTextFile: false, writeTextFile: false } });
  assert.equal(init.protocolVersion, 1);
  const caps = init.agentCapabilities;
  assert.equal(caps.loadSession, true, JSON.stringify(init));
  assert.equal(caps.promptCapabilities?.image, true, JSON.stringify(init));
  assert.equal(caps.promptCapabilities?.embeddedContext, true, JSON.stringify(init));
  for (const capability of ["list", "resume", "close", "delete"]) {
    assert.equal(typeof caps.sessionCapabilities?.[capability], "object", `${capability}: ${JSON.stringify(init)}`);
    assert.notEqual(caps.sessionCapabilities[capability], null, `${capability}: ${JSON.stringify(init)}`);
  }
});

// 2
scenario("a prompt streams each text piece once and ends end_turn", async (s) => {
  const pieces = ["Hel", "lo, ", "wor", "ld", "!"];
  await s.startModel([textTurn(pieces)]);
  const agent = await startedAgent(s);
  const session = await agent.newSession(s.work);
  const result = await within(agent.prompt(session, "say hello"), DEADLINE_MS, "prompt");
  assert.equal(result.stopReason, "end_turn");
  assert.equal(textOf(agent.updatesOf(session)), pieces.join(""));
  await s.assertModelClean(assert);
});

/** Scenarios 3 and 4: a command that asks; the client answers with option `kind`. */
async function permissionScenario(s, kind) {
  const file = kind === "allow_once" ? "allowed.txt" : "rejected.txt";
  const command = `touch ${file}`;
  const finalText = kind === "allow_once" ? "touched it" : "ok, left it alone";
  await s.startModel([shellTurn("call_touch", command), textTurn(finalText)]);
  const agent = await startedAgent(s);
  const session = await agent.newSession(s.work);
  let announcedBefore;
  agent.onPermission = ({ params }) => {
    // What the editor had been shown when the question came.
    announcedBefore = agent.updatesOf(session).filter((u) => u.sessionUpdate === "tool_call");
    return choose(params, kind);
  };
  const result = await within(agent.prompt(session, "make the file"), DEADLINE_MS, "prompt");
  assert.equal(result.stopReason, "end_turn");
  assert.equal(agent.permissionRequests.length, 1, JSON.stringify(agent.permissionRequests.map((r) => r.params)));
  const ask = agent.permissionRequests[0].params;
  assert.equal(ask.sessionId, session);
  const askedId = ask.toolCall.toolCallId;
  assert.ok(announcedBefore.some((u) => u.toolCallId === askedId),
    `the question is about ${askedId}, announced were ${JSON.stringify(announcedBefore)}`);
  const announced = announcedBefore.find((u) => u.toolCallId === askedId);
  assert.ok(shownText(ask.toolCall).includes(command) || shownText(announced).includes(command),
    `the command is shown: ${JSON.stringify(ask.toolCall)} / ${JSON.stringify(announced)}`);
  const updates = agent.updatesOf(session);
  assert.equal(existsSync(join(s.work, file)), kind === "allow_once");
  assert.equal(finalStatus(updates, askedId), kind === "allow_once" ? "completed" : "failed",
    JSON.stringify(toolUpdates(updates, askedId)));
  assert.equal(textOf(updates), finalText);
  await s.assertModelClean(assert);
}

// 3
scenario("an allowed command runs and its tool call completes", (s) => permissionScenario(s, "allow_once"));

// 4
scenario("a rejected command does not run, fails, and the turn goes on", (s) => permissionScenario(s, "reject_once"));

// 5
scenario("cancel while the answer streams ends the prompt cancelled", async (s) => {
  // 40 pieces, 250 ms apart: ten seconds of streaming, far longer than the cancel needs.
  const pieces = Array.from({ length: 40 }, (_, i) => `w${i} `);
  await s.startModel([textTurn(pieces, { delayMs: 250 })]);
  const agent = await startedAgent(s);
  const session = await agent.newSession(s.work);
  const prompt = agent.prompt(session, "talk for a while");
  await agent.waitFor(() => textOf(agent.updatesOf(session)).length > 0, "the first streamed text");
  await agent.cancel(session);
  const result = await within(prompt, 8_000, "the prompt answering after session/cancel");
  assert.equal(result.stopReason, "cancelled");
  const shown = textOf(agent.updatesOf(session));
  assert.ok(pieces.join("").startsWith(shown) && shown.length < pieces.join("").length,
    `a strict prefix of the answer was shown: ${JSON.stringify(shown)}`);
  // Nothing more for a cancelled turn.
  const countAtAnswer = agent.updatesOf(session).length;
  await sleep(1_000);
  assert.deepEqual(agent.updatesOf(session).slice(countAtAnswer), [], "updates after the cancelled answer");
  await s.assertModelClean(assert);
});

// 6
scenario("cancel during a command kills it and the session goes on", async (s) => {
  await s.startModel([shellTurn("call_sleep", "sleep 3 && echo late > late.txt"), textTurn("after the cancel")]);
  const agent = await startedAgent(s);
  const session = await agent.newSession(s.work);
  agent.onPermission = ({ params }) => choose(params, "allow_once");
  const prompt = agent.prompt(session, "run it");
  await agent.waitFor(() => toolUpdates(agent.updatesOf(session), "call_sleep").some((u) => u.status === "in_progress"),
    "the command's tool call in progress");
  const cancelledAt = Date.now();
  await agent.cancel(session);
  const result = await within(prompt, 10_000, "the prompt answering after session/cancel");
  assert.equal(result.stopReason, "cancelled");
  const answeredAfterMs = Date.now() - cancelledAt;
  const countAtAnswer = agent.updatesOf(session).length;
  // Well past the command's own end: had it not been killed, late.txt would be there.
  await sleep(5_000);
  assert.equal(existsSync(join(s.work, "late.txt")), false,
    `the cancelled command ran on (prompt answered ${answeredAfterMs} ms after the cancel)`);
  assert.deepEqual(agent.updatesOf(session).slice(countAtAnswer), [], "updates after the cancelled answer");
  const again = await within(agent.prompt(session, "and now?"), DEADLINE_MS, "the prompt after the cancel");
  assert.equal(again.stopReason, "end_turn");
  assert.equal(textOf(agent.updatesOf(session).slice(countAtAnswer)), "after the cancel");
  await s.assertModelClean(assert);
});

// 7
scenario("cancel during a permission question withdraws it and the command does not run", async (s) => {
  await s.startModel([shellTurn("call_ask", "touch asked.txt")]);
  const agent = await startedAgent(s);
  const session = await agent.newSession(s.work);
  let withdrawn = false;
  // Leave the question open; per the protocol a cancelled turn's question is answered
  // `cancelled`, which is what this editor does once the agent withdraws it.
  agent.onPermission = ({ signal }) => within(new Promise((resolve) => {
    const answer = () => { withdrawn = true; resolve({ outcome: { outcome: "cancelled" } }); };
    if (signal.aborted) answer();
    else signal.addEventListener("abort", answer, { once: true });
  }), DEADLINE_MS, "the agent withdrawing its question").catch(() => ({ outcome: { outcome: "cancelled" } }));
  const prompt = agent.prompt(session, "make the file");
  await agent.waitFor(() => agent.permissionRequests.length > 0, "the permission request");
  await agent.cancel(session);
  const result = await within(prompt, 10_000, "the prompt answering after session/cancel");
  assert.equal(result.stopReason, "cancelled");
  const question = agent.wire.find((m) => m.method === "session/request_permission");
  const fromQuestionOn = () => JSON.stringify(agent.wire.slice(agent.wire.indexOf(question)));
  await agent.waitFor(() => withdrawn, "$/cancel_request for the open question", 10_000)
    .catch((error) => { throw new Error(`${error.message}; from the question on the agent sent ${fromQuestionOn()}`); });
  const withdrawal = agent.wire.find((m) => m.method === "$/cancel_request");
  assert.equal(withdrawal?.params?.requestId, question.id, fromQuestionOn());
  await sleep(1_000);
  assert.equal(existsSync(join(s.work, "asked.txt")), false, "the command ran although the turn was cancelled");
  await s.assertModelClean(assert);
});

// 8
scenario("two sessions prompting at once each get only their own updates", async (s) => {
  // Streamed slowly so the two turns overlap.
  const texts = ["first answer from the model", "second answer, a different one"];
  const split = (t) => t.split(/(?<= )/);
  await s.startModel(texts.map((t) => textTurn(split(t), { delayMs: 80 })));
  const agent = await startedAgent(s);
  const a = await agent.newSession(s.work);
  const b = await agent.newSession(s.work);
  assert.notEqual(a, b);
  const [ra, rb] = await within(Promise.all([agent.prompt(a, "one"), agent.prompt(b, "two")]), DEADLINE_MS, "both prompts");
  assert.equal(ra.stopReason, "end_turn");
  assert.equal(rb.stopReason, "end_turn");
  const textA = textOf(agent.updatesOf(a));
  const textB = textOf(agent.updatesOf(b));
  assert.ok(texts.includes(textA), `session a got ${JSON.stringify(textA)}`);
  assert.ok(texts.includes(textB), `session b got ${JSON.stringify(textB)}`);
  assert.notEqual(textA, textB);
  const strangers = agent.updates.filter((n) => n.sessionId !== a && n.sessionId !== b);
  assert.deepEqual(strangers, [], "session/update for a session this client did not open");
  await s.assertModelClean(assert);
});

// 9
scenario("session/load after a restart replays the history before it answers", async (s) => {
  await s.startModel([shellTurn("call_write", "printf hi > out.txt"), textTurn("wrote out.txt")]);
  const first = await startedAgent(s);
  const session = await first.newSession(s.work);
  await first.setMode(session, "full-access");
  const result = await within(first.prompt(session, "please write"), DEADLINE_MS, "prompt");
  assert.equal(result.stopReason, "end_turn");
  assert.equal(readFileSync(join(s.work, "out.txt"), "utf8"), "hi");
  await first.close();

  const second = await startedAgent(s);
  let seenAtAnswer;
  const loaded = await within(
    second.agent.request(acp.methods.agent.session.load, { sessionId: session, cwd: s.work, mcpServers: [] })
      .then((response) => { seenAtAnswer = second.updatesOf(session); return response; }),
    DEADLINE_MS, "session/load");
  assert.ok(loaded !== undefined);
  // On the wire: every replayed update comes before the answer to session/load.
  const loadId = second.sent.find((m) => m.method === "session/load").id;
  const answerAt = second.wire.findIndex((m) => m.id === loadId && m.method === undefined);
  const replayed = second.wire.filter((m) => m.method === "session/update" && m.params.sessionId === session);
  assert.ok(replayed.length > 0, "no replay");
  // Only the slash commands, offered once the session is open, may follow the answer.
  const lateUpdates = second.wire.slice(answerAt + 1)
    .filter((m) => m.method === "session/update" && m.params.update.sessionUpdate !== "available_commands_update");
  assert.deepEqual(lateUpdates, [], "history replayed after the session/load answer");
  // And through the SDK: the handler had them all by the time the request resolved.
  assert.equal(textOf(seenAtAnswer, "user_message_chunk"), "please write", JSON.stringify(seenAtAnswer));
  assert.equal(textOf(seenAtAnswer), "wrote out.txt", JSON.stringify(seenAtAnswer));
  const card = toolUpdates(seenAtAnswer, "call_write");
  assert.equal(card[0]?.sessionUpdate, "tool_call", JSON.stringify(seenAtAnswer));
  assert.ok(shownText(card[0]).includes("printf hi"), JSON.stringify(card[0]));
  assert.equal(finalStatus(seenAtAnswer, "call_write"), "completed");
  await s.assertModelClean(assert);
});

// 10
scenario("an editor-supplied stdio MCP server's tool is called and its result reaches the model", async (s) => {
  const marker = "hello from the editor";
  await s.startModel([toolTurn("call_echo", "mcp__mock__echo", { text: marker }), textTurn("the server echoed")]);
  const agent = await startedAgent(s);
  const session = await agent.newSession(s.work,
    [{ name: "mock", command: join(BIN_DIR, "mock-mcp-server"), args: [], env: [] }]);
  // Whether an MCP call asks is the agent's policy; if it does, allow it.
  agent.onPermission = ({ params }) => choose(params, "allow_once");
  const result = await within(agent.prompt(session, "echo something"), DEADLINE_MS, "prompt");
  assert.equal(result.stopReason, "end_turn");
  const updates = agent.updatesOf(session);
  const card = toolUpdates(updates, "call_echo");
  assert.equal(card[0]?.sessionUpdate, "tool_call", JSON.stringify(updates));
  assert.equal(finalStatus(updates, "call_echo"), "completed", JSON.stringify(card));
  assert.equal(textOf(updates), "the server echoed");
  const record = await s.assertModelClean(assert);
  assert.equal(record.requests.length, 2, JSON.stringify(record.requests));
  const toolResults = record.requests[1].messages.filter((m) => m.role === "tool");
  assert.ok(toolResults.some((m) => m.tool_call_id === "call_echo" && JSON.stringify(m.content).includes(marker)),
    `the tool result in the second request: ${JSON.stringify(toolResults)}`);
});

// 11
scenario("with the client's file system, patches read the editor's buffer and write through the client", async (s) => {
  writeFileSync(join(s.work, "a.txt"), "one\n");
  await s.startModel([
    toolTurn("call_update", "apply_patch",
      { input: "*** Begin Patch\n*** Update File: a.txt\n@@\n one\n two\n+three\n*** End Patch" }),
    toolTurn("call_add", "apply_patch", { input: "*** Begin Patch\n*** Add File: new.txt\n+fresh\n*** End Patch" }),
    textTurn("patched both"),
  ]);
  const agent = await startedAgent(s, { fs: { readTextFile: true, writeTextFile: true } });
  const aPath = join(s.work, "a.txt");
  const newPath = join(s.work, "new.txt");
  // The editor holds unsaved changes to a.txt; other files read as missing.
  agent.onReadTextFile = ({ params }) => {
    if (params.path === aPath) return { content: "one\ntwo\n" };
    throw acp.RequestError.resourceNotFound(params.path);
  };
  // This editor only records writes (into its buffers): nothing must reach the disk.
  agent.onWriteTextFile = () => ({});
  const session = await agent.newSession(s.work);
  await agent.setMode(session, "full-access");
  const result = await within(agent.prompt(session, "patch the files"), DEADLINE_MS, "prompt");
  assert.equal(result.stopReason, "end_turn");
  const updates = agent.updatesOf(session);
  const statuses = { update: finalStatus(updates, "call_update"), add: finalStatus(updates, "call_add") };
  assert.ok(agent.reads.some((r) => r.path === aPath && r.sessionId === session),
    `fs/read_text_file of a.txt; reads: ${JSON.stringify(agent.reads)}; tool statuses ${JSON.stringify(statuses)}; ` +
    `a.txt on disk now ${JSON.stringify(readFileSync(aPath, "utf8"))}`);
  const writesTo = (path) => agent.writes.filter((w) => w.path === path).map((w) => w.content);
  assert.deepEqual(writesTo(aPath), ["one\ntwo\nthree\n"], `writes: ${JSON.stringify(agent.writes)}`);
  assert.deepEqual(writesTo(newPath), ["fresh\n"], `writes: ${JSON.stringify(agent.writes)}`);
  assert.equal(readFileSync(aPath, "utf8"), "one\n", "a.txt on disk changed");
  assert.equal(existsSync(newPath), false, "new.txt was written to disk");
  assert.deepEqual(statuses, { update: "completed", add: "completed" });
  await s.assertModelClean(assert);
});

// 13
scenario("the slash commands are offered, /compact summarises, and session/delete removes a session", async (s) => {
  await s.startModel([textTurn(["first answer"]), textTurn(["SUMMARY: said hello"]), textTurn(["after the summary"])]);
  const agent = await startedAgent(s);
  const session = await agent.newSession(s.work);
  const offered = await within((async () => {
    for (;;) {
      const update = agent.updatesOf(session).find((u) => u.sessionUpdate === "available_commands_update");
      if (update) return update;
      await sleep(20);
    }
  })(), DEADLINE_MS, "available_commands_update");
  assert.ok(offered.availableCommands.some((c) => c.name === "compact"), JSON.stringify(offered));
  for (const text of ["hello", "/compact", "go on"]) {
    const result = await within(agent.prompt(session, text), DEADLINE_MS, `prompt ${text}`);
    assert.equal(result.stopReason, "end_turn");
  }
  assert.ok(textOf(agent.updatesOf(session)).includes("Compacted the conversation"));

  const list = () => within(agent.agent.request(acp.methods.agent.session.list, { cwd: s.work }), DEADLINE_MS, "session/list");
  assert.ok((await list()).sessions.some((x) => x.sessionId === session));
  await within(agent.agent.request(acp.methods.agent.session.delete, { sessionId: session }), DEADLINE_MS, "session/delete");
  assert.ok(!(await list()).sessions.some((x) => x.sessionId === session));
  await assert.rejects(
    within(agent.agent.request(acp.methods.agent.session.load, { sessionId: session, cwd: s.work, mcpServers: [] }), DEADLINE_MS, "session/load"),
    (error) => error.code === -32002 || JSON.stringify(error).includes("-32002"),
  );
  await s.assertModelClean(assert);
});

// 12: raw lines, no SDK: what an editor's broken client could send.
test("malformed input gets the right errors and the agent keeps serving", { timeout: TEST_TIMEOUT_MS }, async () => {
  const s = new Scenario();
  let proc;
  let stderr = "";
  try {
    await s.startModel([]);
    proc = spawn(join(BIN_DIR, "interpreter"), ["acp"], { cwd: s.work, env: s.env(), stdio: ["pipe", "pipe", "pipe"] });
    proc.stderr.setEncoding("utf8");
    proc.stderr.on("data", (t) => { stderr += t; });
    const lines = [];
    let wake = () => {};
    createInterface({ input: proc.stdout }).on("line", (line) => { lines.push(line); wake(); });
    /** The next line from the agent, parsed. */
    const next = async (what) => {
      if (lines.length === 0) {
        await within(new Promise((resolve) => { wake = resolve; }), DEADLINE_MS, what);
      }
      return JSON.parse(lines.shift());
    };
    const send = (text) => proc.stdin.write(`${text}\n`);
    const request = async (id, method, params) => {
      send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
      const reply = await next(`the answer to ${method}`);
      assert.equal(reply.id, id, JSON.stringify(reply));
      return reply;
    };

    const init = await request(1, "initialize", { protocolVersion: 1, clientCapabilities: {} });
    assert.equal(init.result?.protocolVersion, 1, JSON.stringify(init));

    send("this is not json");
    const parse = await next("the answer to a non-JSON line");
    assert.equal(parse.error?.code, -32700, JSON.stringify(parse));
    assert.equal(parse.id, null);

    const unknown = await request(2, "session/fly", {});
    assert.equal(unknown.error?.code, -32601, JSON.stringify(unknown));

    const noCwd = await request(3, "session/new", { mcpServers: [] });
    assert.equal(noCwd.error?.code, -32602, JSON.stringify(noCwd));

    const missing = await request(4, "session/prompt",
      { sessionId: "no-such-session", prompt: [{ type: "text", text: "hi" }] });
    assert.equal(missing.error?.code, -32002, JSON.stringify(missing));

    const fresh = await request(5, "session/new", { cwd: s.work, mcpServers: [] });
    assert.equal(typeof fresh.result?.sessionId, "string", JSON.stringify(fresh));
    // The new session's command list follows its answer, sometimes in the same read
    // (found by CI); anything else would be output nobody asked for.
    const extra = lines.filter((line) => JSON.parse(line).params?.update?.sessionUpdate !== "available_commands_update");
    assert.equal(extra.length, 0, `unexpected extra output: ${extra.join("\n")}`);
    await s.assertModelClean(assert);
  } catch (error) {
    error.message += `\n--- agent stderr ---\n${stderr.slice(-8000)}`;
    throw error;
  } finally {
    proc?.kill("SIGKILL");
    await s.cleanUp();
  }
});
