// The TypeScript SDK driving `interpreter` exactly as SDK users do: a thread is started,
// answered by the scripted mock model, then resumed in a new process.
//
// Binaries come from INTERPRETER_BIN and MOCK_MODEL_BIN (run.sh sets both).

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync, readFileSync, rmSync, realpathSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import readline from "node:readline";
import { Codex } from "@openai/codex-sdk";

const INTERPRETER_BIN = process.env.INTERPRETER_BIN;
const MOCK_MODEL_BIN = process.env.MOCK_MODEL_BIN;
const STARTUP_DEADLINE_MS = 30_000;
const TEST_DEADLINE_MS = 120_000;

function chunk(delta, finishReason = null) {
  return {
    id: "chatcmpl-sdk",
    object: "chat.completion.chunk",
    model: "mock-model",
    choices: [{ index: 0, delta, finish_reason: finishReason }],
  };
}

function usageChunk(prompt, completion) {
  return {
    id: "chatcmpl-sdk",
    object: "chat.completion.chunk",
    model: "mock-model",
    choices: [],
    usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion },
  };
}

function answer(text) {
  return { chunks: [chunk({ content: text }), chunk({}, "stop"), usageChunk(11, 4)] };
}

// Starts `mock-model --script FILE --record FILE`; resolves once it printed its base URL.
async function startMock(dir, responses) {
  const script = path.join(dir, "script.json");
  const record = path.join(dir, "record.json");
  writeFileSync(script, JSON.stringify(responses));
  const child = spawn(MOCK_MODEL_BIN, ["--script", script, "--record", record], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const lines = readline.createInterface({ input: child.stdout });
  const firstLine = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("mock-model did not start in time")), STARTUP_DEADLINE_MS);
    lines.once("line", (line) => {
      clearTimeout(timer);
      resolve(line);
    });
    child.once("error", reject);
    child.once("exit", (code) => reject(new Error(`mock-model exited early with ${code}`)));
  });
  const { base_url: baseUrl } = JSON.parse(await firstLine);
  const exited = new Promise((resolve) => child.once("exit", resolve));
  let stopping = null;
  // Closing stdin asks the mock to write its record and exit. Idempotent.
  const stop = () => {
    stopping ??= new Promise((resolve) => {
      const timer = setTimeout(() => {
        child.kill("SIGKILL");
        resolve();
      }, STARTUP_DEADLINE_MS);
      exited.then(() => {
        clearTimeout(timer);
        resolve();
      });
      child.stdin.end();
    });
    return stopping;
  };
  const readRecord = () => JSON.parse(readFileSync(record, "utf8"));
  return { baseUrl, stop, readRecord };
}

function writeHome(home, baseUrl) {
  writeFileSync(
    path.join(home, "config.toml"),
    [
      'model = "mock-model"',
      'model_provider = "mock"',
      "",
      "[model_providers.mock]",
      'name = "mock"',
      `base_url = "${baseUrl}"`,
      'env_key = "MOCK_API_KEY"',
      'wire_api = "chat"',
      "request_max_retries = 0",
      "",
    ].join("\n"),
  );
}

test("thread.run and resumeThread().run work through the SDK", { timeout: TEST_DEADLINE_MS }, async () => {
  assert.ok(INTERPRETER_BIN, "set INTERPRETER_BIN to the interpreter binary");
  assert.ok(MOCK_MODEL_BIN, "set MOCK_MODEL_BIN to the mock-model binary");
  const root = realpathSync(mkdtempSync(path.join(tmpdir(), "interpreter-sdk-")));
  const home = path.join(root, "home");
  const work = path.join(root, "work");
  mkdirSync(home);
  mkdirSync(work);
  const mock = await startMock(root, [answer("Hello from the mock."), answer("Still the mock.")]);
  try {
    writeHome(home, mock.baseUrl);
    const codex = new Codex({
      codexPathOverride: INTERPRETER_BIN,
      // The SDK replaces the whole environment with this map.
      env: {
        PATH: process.env.PATH ?? "",
        HOME: home,
        INTERPRETER_HOME: home,
        MOCK_API_KEY: "sdk-test-key",
      },
    });

    const thread = codex.startThread({ skipGitRepoCheck: true, workingDirectory: work });
    const first = await thread.run("Say hello.");
    assert.equal(first.finalResponse, "Hello from the mock.");
    assert.ok(thread.id, "thread id is known after the first turn");
    assert.equal(first.usage?.input_tokens, 11);
    assert.equal(first.usage?.output_tokens, 4);

    const resumed = codex.resumeThread(thread.id, { skipGitRepoCheck: true, workingDirectory: work });
    const second = await resumed.run("Again.");
    assert.equal(second.finalResponse, "Still the mock.");
    assert.equal(resumed.id, thread.id);

    await mock.stop();
    const { requests, violations } = mock.readRecord();
    assert.deepEqual(violations, []);
    assert.equal(requests.length, 2);
    const replayed = JSON.stringify(requests[1].messages);
    assert.ok(replayed.includes("Say hello."), "first prompt replayed on resume");
    assert.ok(replayed.includes("Hello from the mock."), "first answer replayed on resume");
  } finally {
    await mock.stop();
    rmSync(root, { recursive: true, force: true });
  }
});
