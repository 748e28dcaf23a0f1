// The scenarios every host runs, over stdio and over `--listen http` with the bearer token:
// 1. its model calls `codex`, reads the thread id from the result it was handed, continues
//    the thread with `codex-reply`, then ends with a text; the sub-agent's second model
//    request carries the first turn's history;
// 2. its model calls `codex-reply` with a made-up thread id (the result it reads names the
//    id), then `codex` on a command that needs an approval, which the host gives in its own
//    way (Codex declines, Claude Code cancels; Gemini, OpenCode, Qwen Code and Cline cannot
//    be asked: the fallback denies): the command does not run.
// The assertions are about what the host's model received (the mock records every request),
// and nothing the host started may still run after it (no process left with its HOME).
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { SERVER } from "./hosts.mjs";
import {
  BIN_DIR, HOST_DEADLINE_MS, ensureDir, freshDir, killByHome, processesWithHome, setUp, startHttpServer,
} from "./harness.mjs";

const TOOLS = ["codex", "codex-reply", "codex-status", "codex-wait"];
const FIXTURES = join(import.meta.dirname, "fixtures");

/** The thread id as a model would copy it out of the text it was given: labelled `threadId`. */
export function threadIdIn(text) {
  const uuid = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";
  return text.match(new RegExp(`threadId\\W{1,6}(${uuid})`, "i"))?.[1];
}

/** How the host reaches the server: it starts it (stdio), or the test did (HTTP). */
function serverSpec(ctx, http) {
  if (http) return { http: { url: http.url, token: http.token } };
  return { stdio: { command: join(BIN_DIR, "interpreter"), args: ["mcp-server"], env: ctx.env, cwd: ctx.work } };
}

/** Everything worth seeing when an assertion fails. */
function explain(out, model) {
  const tail = (s, n = 6000) => (s.length > n ? `…${s.slice(-n)}` : s);
  return [
    `exit: ${out?.code} ${out?.signal ?? ""} after ${out?.ms} ms`,
    `script problems: ${JSON.stringify(model.script.problems)}`,
    `mock errors: ${model.errors.map((e) => e.stack ?? e).join("\n")}`,
    `unhandled: ${model.unhandled.map((r) => `${r.method} ${r.path}`).join(", ")}`,
    `requests: ${model.requests.map((r) => `${r.kind ?? "?"} ${r.method} ${r.path}`).join(", ")}`,
    `--- host stderr lines that name an error\n${(out?.stderr ?? "").split("\n").filter((l) => /\[MCP error\]|^\s*(\w*Error|error|ERROR)\b/.test(l)).slice(0, 20).map((l) => l.slice(0, 400)).join("\n")}`,
    `--- host stderr\n${tail(out?.stderr ?? "")}`,
    `--- host stdout\n${tail(out?.stdout ?? "")}`,
  ].join("\n");
}

/** Replace this run's temporary paths and ids so a fixture reads the same every time. */
function sanitize(value, ctx, home) {
  const ids = new Map();
  return JSON.parse(JSON.stringify(value)
    .replaceAll(ctx.work, "/tmp/WORK").replaceAll(ctx.home, "/tmp/SUBAGENT_HOME").replaceAll(home, "/tmp/HOST_HOME")
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi, (id) => {
      if (!ids.has(id)) ids.set(id, `<uuid-${ids.size + 1}>`);
      return ids.get(id);
    })
    .replace(/Wall time: [0-9.]+ seconds/g, "Wall time: <t> seconds")
    .replace(/(mcp_\w+(?:-\w+)?)_\d{13}_(\d+)/g, "$1_<ms>_$2"));
}

/** Nothing the host started may outlive it: no process left with its HOME (a moment is
 * allowed for its killed process group to go). */
async function assertNothingLeft(home) {
  let left = processesWithHome(home);
  for (const until = Date.now() + 3000; left.length && Date.now() < until; left = processesWithHome(home)) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const described = left.map(({ pid }) => {
    try { return `${pid} ${readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ").trim()}`; } catch { return `${pid}`; }
  });
  assert.deepEqual(described, [], `left running with the host's HOME ${home}`);
}

/** Put what the host's model was handed into the test's output (TAP diagnostics). */
function note(t, out, seen) {
  t.diagnostic(`host exited ${out.code} after ${out.ms} ms`);
  if (out.leftovers?.length) t.diagnostic(`killed after the host exited: ${out.leftovers.join("; ")}`);
  for (const [step, results] of Object.entries(seen)) {
    if (!Array.isArray(results)) continue;
    for (const r of results) {
      t.diagnostic(`${step}: ${r.name}${r.isError ? " (error)" : ""}: ${JSON.stringify(r.text).slice(0, 400)}`);
    }
  }
}

async function readRecord(ctx) {
  await ctx.finish();
  return JSON.parse(readFileSync(ctx.record, "utf8"));
}

export function defineHostTests(host) {
  const variants = [{ label: "stdio", transport: "stdio" }, { label: "http", transport: "http" }, ...(host.variants ?? [])];
  for (const { label, transport, env: hostEnv, approvalsOnly } of variants) {
    // A variant that changes only how approvals travel runs only the approval scenario.
    if (!approvalsOnly) test(`${host.title} over ${label}: codex, then codex-reply with the thread id its model read`,
      { timeout: HOST_DEADLINE_MS + 60000 }, async (t) => {
        const FIRST = "Say the first answer.";
        const SECOND = "Now say the second answer.";
        const ctx = await setUp([{ text: "first answer" }, { text: "second answer" }]);
        const http = transport === "http" ? await startHttpServer(ctx) : undefined;
        const seen = {};
        const model = await host.startModel([
          () => ({ tool: "codex", args: { prompt: FIRST, cwd: ctx.work } }),
          ({ results }) => {
            seen.first = results;
            seen.threadId = threadIdIn(results.map((r) => r.text).join("\n"));
            return { tool: "codex-reply", args: { threadId: seen.threadId ?? "no-thread-id-in-the-result", prompt: SECOND } };
          },
          ({ results }) => {
            seen.second = results;
            return { text: "All done: both answers are in." };
          },
        ]);
        const home = freshDir(`host-${host.name}-`);
        let out;
        try {
          out = await host.run({ home, model, server: serverSpec(ctx, http), prompt: "Use the interp tools twice.", cwd: ctx.work, extraEnv: hostEnv });
          const why = explain(out, model);
          note(t, out, seen);
          await assertNothingLeft(home);
          assert.equal(out.code, 0, why);
          assert.deepEqual(model.errors, [], why);
          assert.deepEqual(model.script.problems, [], why);
          const turns = model.script.turns;
          assert.ok(turns.length > 0, `the host never offered the ${SERVER} tools to its model (the server did not connect)\n${why}`);
          assert.equal(turns.length, 3, why);
          for (const tool of TOOLS) assert.ok(host.offers(turns[0].request, tool), `${tool} not offered\n${why}`);

          // Turn 2: the model was handed the first answer and a thread id it can copy.
          assert.equal(seen.first.length, 1, `one tool result in the model's second request\n${why}`);
          assert.notEqual(seen.first[0].isError, true, `codex failed: ${seen.first[0].text}\n${why}`);
          assert.match(seen.first[0].text, /first answer/, why);
          assert.ok(seen.threadId, `no thread id in what the model received: ${JSON.stringify(seen.first[0].text)}`);

          // Turn 3: the reply on that thread came back.
          assert.equal(seen.second.length, 1, why);
          assert.notEqual(seen.second[0].isError, true, `codex-reply failed: ${seen.second[0].text}\n${why}`);
          assert.match(seen.second[0].text, /second answer/, why);
          assert.equal(threadIdIn(seen.second[0].text), seen.threadId, `codex-reply answered for another thread\n${why}`);
          assert.match(out.stdout, /All done: both answers are in\./, why);

          // The thread really continued: the sub-agent's second request holds the first turn.
          const record = await readRecord(ctx);
          assert.equal(record.requests.length, 2, JSON.stringify(record.requests.map((r) => r.messages?.length)));
          const history = JSON.stringify(record.requests[1].messages);
          for (const part of [FIRST, "first answer", SECOND]) assert.ok(history.includes(part), `${part} missing from ${history}`);

          if (process.env.HOSTS_WRITE_FIXTURES === "1" && label === "stdio") {
            ensureDir(FIXTURES);
            const fixture = {
              host: host.title,
              note: "What the host sent its own model on the turn after codex-reply (trimmed: the system prompt and other tools left out; temporary paths and ids replaced).",
              request: sanitize(host.transcript(turns[2].request), ctx, home),
            };
            writeFileSync(join(FIXTURES, `${host.name}-reply-turn.json`), `${JSON.stringify(fixture, null, 2)}\n`);
          }
        } finally {
          await killByHome(home);
          ctx.stop();
          await http?.stop();
          await model.stop();
        }
      });

    test(`${host.title} over ${label}: a made-up thread id, then an approval the host answers its own way`,
      { timeout: HOST_DEADLINE_MS + 60000 }, async (t) => {
        const BAD = "0badc0de-1111-4222-8333-444444444444";
        const ctx = await setUp([{ command: "touch approved.txt" }, { text: "The command was not run." }]);
        const http = transport === "http" ? await startHttpServer(ctx) : undefined;
        const seen = {};
        const model = await host.startModel([
          () => ({ tool: "codex-reply", args: { threadId: BAD, prompt: "Continue." } }),
          ({ results }) => {
            seen.bad = results;
            return { tool: "codex", args: { prompt: "Create approved.txt.", cwd: ctx.work, "approval-policy": "untrusted", sandbox: "danger-full-access" } };
          },
          ({ results }) => {
            seen.approval = results;
            return { text: "Finished." };
          },
        ]);
        const home = freshDir(`host-${host.name}-`);
        let out;
        try {
          out = await host.run({ home, model, server: serverSpec(ctx, http), prompt: "Try the interp tools.", cwd: ctx.work, extraEnv: hostEnv });
          const why = explain(out, model);
          note(t, out, seen);
          await assertNothingLeft(home);
          assert.equal(out.code, 0, why);
          assert.deepEqual(model.errors, [], why);
          assert.deepEqual(model.script.problems, [], why);
          assert.ok(model.script.turns.length > 0, `the host never offered the ${SERVER} tools to its model (the server did not connect)\n${why}`);
          assert.equal(model.script.turns.length, 3, why);

          // The made-up id: the model reads an error that names it.
          assert.equal(seen.bad.length, 1, why);
          assert.notEqual(seen.bad[0].isError, false, `an unknown thread should be an error result: ${seen.bad[0].text}`);
          assert.ok(seen.bad[0].text.includes(BAD), `the error does not name the id: ${seen.bad[0].text}\n${why}`);
          assert.match(seen.bad[0].text, /not found|unknown|no (live|saved) thread/i, why);

          // The approval: nothing ran, the turn went on, and the model was told.
          assert.ok(!existsSync(join(ctx.work, "approved.txt")), `approved.txt was created\n${why}`);
          assert.equal(seen.approval.length, 1, why);
          const result = seen.approval[0].text;
          assert.match(result, /The command was not run\./, why);
          if (host.elicitation === "none") {
            // No elicitation capability: mcp_server.elicitation_fallback (deny) applied, and said so.
            assert.match(result, /Approvals:[\s\S]*denied automatically: this client does not support elicitation/, why);
          } else {
            // The host answered the elicitation itself (decline / cancel): no fallback note.
            assert.doesNotMatch(result, /Approvals:/, why);
          }
          const record = await readRecord(ctx);
          assert.equal(record.requests.length, 2, JSON.stringify(record.requests.map((r) => r.messages?.length)));
          const toolMessages = record.requests[1].messages.filter((m) => m.role === "tool");
          assert.equal(toolMessages.length, 1, JSON.stringify(record.requests[1].messages));
          t.diagnostic(`the sub-agent's model was told: ${JSON.stringify(toolMessages[0].content).slice(0, 300)}`);
        } finally {
          await killByHome(home);
          ctx.stop();
          await http?.stop();
          await model.stop();
        }
      });
  }
}
