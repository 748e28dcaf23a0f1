// codex-acp (the ACP adapter for Codex, pinned) running `interpreter app-server` as its
// Codex (CODEX_PATH), driven by the official ACP TypeScript SDK's client app against
// the scripted mock model: a text prompt, an allowed command, cancel during a command,
// session/load after a restart, session/close.
//
// codex-acp also names each new session: after its first turn it runs one more turn on
// an ephemeral thread (model `gpt-5.6-luna`, an outputSchema). Whether that turn reaches
// the model is not what these tests are about, so every script ends in spare copies of
// the last answer: a title request, whenever it comes, takes one of those, and the
// test's own last request gets the same answer either way.
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import {
  acp, choose, DEADLINE_MS, finalStatus, inScenario, shellTurn, sleep, takeSdkComplaints, textOf, textTurn,
  toolUpdates, within,
} from "./harness.mjs";

// Each test stops at this even if a deadline inside it were missed.
const TEST_TIMEOUT_MS = 150_000;

/** `test` with the overall timeout, a fresh scenario, and a check that the SDK could parse
 * everything codex-acp sent. */
function scenario(name, body) {
  test(name, { timeout: TEST_TIMEOUT_MS }, (t) => inScenario(async (s) => {
    takeSdkComplaints();
    await body(s, t);
    assert.deepEqual(takeSdkComplaints(), [], "the SDK rejected messages from codex-acp");
  }, t));
}

/** `answer` as the last scripted turn, plus spares for title generation (one per new or
 * loaded session that the test prompts). */
const lastAnswer = (answer, spares = 2) => Array.from({ length: 1 + spares }, () => textTurn(answer));

async function startedAgent(s) {
  const agent = s.startAgent();
  const init = await agent.initialize();
  assert.equal(init.protocolVersion, 1, JSON.stringify(init));
  return { agent, init };
}

async function openSession(s, agent) {
  const created = await agent.newSession(s.work);
  assert.equal(typeof created.sessionId, "string", JSON.stringify(created));
  s.notes.push(`session/new: mode ${created.modes?.currentModeId}, model ${created.models?.currentModelId}`);
  return created.sessionId;
}

/** What codex-acp asked our server to run the turns with (approval policy, sandbox). */
function turnSettings(s, agent) {
  for (const m of agent.appServerTraffic().sent.filter((m) => m.method === "turn/start" && !m.params.outputSchema)) {
    s.notes.push(`turn/start: approvalPolicy ${JSON.stringify(m.params.approvalPolicy)}, ` +
      `approvalsReviewer ${JSON.stringify(m.params.approvalsReviewer)}, sandboxPolicy ${JSON.stringify(m.params.sandboxPolicy?.type)}`);
  }
}

// 1
scenario("initialize, session/new and a text prompt stream the model's text exactly", async (s) => {
  const pieces = ["Hel", "lo, ", "wor", "ld", "!"];
  await s.startModel([textTurn(pieces), ...lastAnswer("spare", 2)]);
  const { agent, init } = await startedAgent(s);
  assert.equal(init.agentInfo?.name, "@agentclientprotocol/codex-acp", JSON.stringify(init.agentInfo));
  assert.equal(init.agentInfo?.version, "2.6.0", JSON.stringify(init.agentInfo));
  const session = await openSession(s, agent);
  const result = await within(agent.prompt(session, "say hello"), DEADLINE_MS, "session/prompt");
  assert.equal(result.stopReason, "end_turn", JSON.stringify(result));
  // Exactly the model's text: no warning or notice from our server rendered into it.
  assert.equal(textOf(agent.updatesOf(session)), pieces.join(""), JSON.stringify(agent.updatesOf(session)));
  const requests = await s.assertModelClean(assert);
  assert.equal(requests.length, 1, "one model request for the prompt");
});

// 2
scenario("a command that asks permission is allowed, runs, and its tool call completes", async (s) => {
  const command = "touch allowed.txt";
  // codex-acp starts in mode "agent": approvals on-request, a workspace-write sandbox. There
  // a command runs in the sandbox without asking, unless the model asks to run it outside
  // (as Codex's models do when the sandbox is in the way): that is put to the user.
  await s.startModel([
    shellTurn("call_touch", command, { sandbox_permissions: "require_escalated", justification: "create a file" }),
    ...lastAnswer("touched it"),
  ]);
  const { agent } = await startedAgent(s);
  const session = await openSession(s, agent);
  agent.onPermission = ({ params }) => choose(params, "allow_once");
  const result = await within(agent.prompt(session, "make the file"), DEADLINE_MS, "session/prompt");
  turnSettings(s, agent);
  assert.equal(result.stopReason, "end_turn", JSON.stringify(result));
  assert.equal(agent.permissionRequests.length, 1, JSON.stringify(agent.permissionRequests.map((r) => r.params)));
  const ask = agent.permissionRequests[0].params;
  assert.equal(ask.sessionId, session);
  assert.ok(JSON.stringify(ask.toolCall).includes(command), `the command is shown: ${JSON.stringify(ask.toolCall)}`);
  const askedId = ask.toolCall.toolCallId;
  assert.ok(existsSync(join(s.work, "allowed.txt")), "the allowed command did not run");
  const updates = agent.updatesOf(session);
  assert.equal(finalStatus(updates, askedId), "completed", JSON.stringify(toolUpdates(updates, askedId)));
  assert.equal(textOf(updates), "touched it");
  const requests = await s.assertModelClean(assert);
  assert.equal(requests.length, 2, "the tool call and the answer after it");
});

// 3
scenario("session/cancel during a command ends the prompt cancelled and the command does not run on", async (s) => {
  await s.startModel([shellTurn("call_sleep", "sleep 3 && echo late > late.txt"), ...lastAnswer("after the cancel")]);
  const { agent } = await startedAgent(s);
  const session = await openSession(s, agent);
  agent.onPermission = ({ params }) => choose(params, "allow_once");
  const prompt = agent.prompt(session, "run it");
  prompt.catch(() => {});
  // In codex-acp's starting mode the command runs in the workspace sandbox without asking;
  // were it asked about, the answer (allow) goes back at once. Announced in progress, then
  // a moment to be sure it runs.
  await agent.waitFor(() => toolUpdates(agent.updatesOf(session), "call_sleep").some((u) => u.status === "in_progress"),
    "the command's tool call in progress");
  await sleep(500);
  assert.equal(finalStatus(agent.updatesOf(session), "call_sleep"), "in_progress", "the command ended before the cancel");
  s.notes.push(`permission requests for the command: ${agent.permissionRequests.length}`);
  const cancelledAt = Date.now();
  await agent.cancel(session);
  const result = await within(prompt, 10_000, "the prompt answering after session/cancel");
  assert.equal(result.stopReason, "cancelled", JSON.stringify(result));
  const answeredAfterMs = Date.now() - cancelledAt;
  s.notes.push(`prompt answered ${answeredAfterMs} ms after session/cancel`);
  // Well past the command's own end: had it not been killed, late.txt would be there.
  await sleep(5_000);
  assert.equal(existsSync(join(s.work, "late.txt")), false,
    `the cancelled command ran on (prompt answered ${answeredAfterMs} ms after the cancel)`);
  const status = finalStatus(agent.updatesOf(session), "call_sleep");
  assert.notEqual(status, "completed", JSON.stringify(toolUpdates(agent.updatesOf(session), "call_sleep")));
  // The session goes on.
  const countBefore = agent.updatesOf(session).length;
  const again = await within(agent.prompt(session, "and now?"), DEADLINE_MS, "the prompt after the cancel");
  assert.equal(again.stopReason, "end_turn", JSON.stringify(again));
  assert.equal(textOf(agent.updatesOf(session).slice(countBefore)), "after the cancel");
  const requests = await s.assertModelClean(assert);
  assert.equal(requests.length, 2, "the cancelled tool call and the prompt after it");
});

// 4
scenario("session/load after codex-acp and its app-server are killed replays the history, then prompts on", async (s) => {
  await s.startModel([shellTurn("call_write", "printf hi > out.txt"), textTurn("wrote out.txt"), ...lastAnswer("loaded and well", 3)]);
  const { agent: first } = await startedAgent(s);
  const session = await openSession(s, first);
  first.onPermission = ({ params }) => choose(params, "allow_once");
  const result = await within(first.prompt(session, "please write"), DEADLINE_MS, "session/prompt");
  assert.equal(result.stopReason, "end_turn", JSON.stringify(result));
  assert.equal(readFileSync(join(s.work, "out.txt"), "utf8"), "hi");
  assert.equal(first.appServers().length, 1, "codex-acp runs one app-server");
  await first.killHard();

  const { agent: second, init } = await startedAgent(s);
  assert.equal(init.agentCapabilities?.loadSession, true, JSON.stringify(init.agentCapabilities));
  const history = (u) => ["user_message_chunk", "agent_message_chunk", "tool_call", "tool_call_update"].includes(u.sessionUpdate);
  let seenAtAnswer;
  const loaded = await second.request(acp.methods.agent.session.load, { sessionId: session, cwd: s.work, mcpServers: [] })
    .then((response) => { seenAtAnswer = second.updatesOf(session); return response; });
  assert.ok(loaded !== undefined && loaded !== null, "session/load answered");
  // On the wire: every replayed history update comes before the answer to session/load.
  const loadId = second.sent.find((m) => m.method === "session/load").id;
  const answerAt = second.wire.findIndex((m) => m.id === loadId && m.method === undefined);
  const late = second.wire.slice(answerAt + 1)
    .filter((m) => m.method === "session/update" && m.params.sessionId === session && history(m.params.update));
  assert.deepEqual(late, [], "history replayed after the session/load answer");
  assert.equal(textOf(seenAtAnswer, "user_message_chunk"), "please write", JSON.stringify(seenAtAnswer));
  assert.equal(textOf(seenAtAnswer), "wrote out.txt", JSON.stringify(seenAtAnswer));
  const card = toolUpdates(seenAtAnswer, "call_write");
  assert.equal(card[0]?.sessionUpdate, "tool_call", JSON.stringify(seenAtAnswer));
  assert.ok(JSON.stringify(card[0]).includes("printf hi"), JSON.stringify(card[0]));
  assert.equal(finalStatus(seenAtAnswer, "call_write"), "completed", JSON.stringify(card));

  // One more prompt on the loaded session.
  const countBefore = second.updatesOf(session).length;
  const again = await within(second.prompt(session, "still there?"), DEADLINE_MS, "session/prompt after session/load");
  assert.equal(again.stopReason, "end_turn", JSON.stringify(again));
  assert.equal(textOf(second.updatesOf(session).slice(countBefore)), "loaded and well");
  const requests = await s.assertModelClean(assert);
  assert.equal(requests.length, 3, "the tool call, its answer, and the prompt after the load");
  // The prompt after the load carried the history from before the restart.
  const lastRequest = JSON.stringify(requests.at(-1));
  for (const part of ["please write", "wrote out.txt", "call_write", "still there?"]) {
    assert.ok(lastRequest.includes(part), `the request after the load lacks ${JSON.stringify(part)}`);
  }
});

// 5
scenario("session/close answers without error when codex-acp offers it", async (s, t) => {
  await s.startModel(lastAnswer("hello", 2));
  const { agent, init } = await startedAgent(s);
  if (!init.agentCapabilities?.sessionCapabilities?.close) {
    t.skip(`codex-acp does not offer session/close: ${JSON.stringify(init.agentCapabilities)}`);
    return;
  }
  const session = await openSession(s, agent);
  const result = await within(agent.prompt(session, "hi"), DEADLINE_MS, "session/prompt");
  assert.equal(result.stopReason, "end_turn", JSON.stringify(result));
  const closed = await agent.request(acp.methods.agent.session.close, { sessionId: session });
  assert.ok(closed !== undefined, "session/close answered");
  await s.assertModelClean(assert);
});
