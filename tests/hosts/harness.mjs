// Shared pieces of the host tests: a recording HTTP server on loopback that plays a host's
// own model, a bounded runner for the host process, and the sub-agent set-up (mock-model
// and `interpreter mcp-server`) borrowed from the peer tests.
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";

export { BIN_DIR, freePort, setUp, startHttpServer } from "../peers/common.mjs";

export const NODE_MODULES = join(import.meta.dirname, "node_modules");

/** Every wait has a deadline; a host run that outlives this is killed and the test fails.
 * A run takes seconds; on a machine loaded well past its cores Claude Code's own start-up
 * alone has taken over a minute, hence the margin. */
export const HOST_DEADLINE_MS = Number(process.env.HOSTS_DEADLINE_MS ?? 150000);

/**
 * An HTTP server on 127.0.0.1 (port 0) that records every request and answers with
 * `route(request, res)`, where `request` is {method, path, query, headers, body (parsed JSON
 * when it is JSON), raw}. `route` returns false for requests it does not know; those get 404
 * and are recorded as `unhandled`.
 */
export async function startModelServer(route) {
  const requests = [];
  const unhandled = [];
  const errors = [];
  const server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", async () => {
      const raw = Buffer.concat(chunks).toString("utf8");
      let body = raw;
      try { body = raw ? JSON.parse(raw) : undefined; } catch { /* not JSON */ }
      const url = new URL(req.url, "http://127.0.0.1");
      const record = {
        method: req.method, path: url.pathname, query: Object.fromEntries(url.searchParams),
        headers: req.headers, body, raw,
      };
      requests.push(record);
      try {
        const handled = await route(record, res);
        if (handled === false) {
          unhandled.push(record);
          res.writeHead(404, { "content-type": "application/json" });
          res.end(JSON.stringify({ error: { code: 404, message: `mock: no route for ${req.method} ${url.pathname}` } }));
        }
      } catch (error) {
        errors.push(error);
        if (!res.headersSent) res.writeHead(500, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { code: 500, message: `mock: ${error.stack ?? error}` } }));
      }
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  return {
    port, origin: `http://127.0.0.1:${port}`, requests, unhandled, errors,
    stop: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  };
}

/** Write `events` as a server-sent event stream: each is {event?, data} (data is JSON).
 * `done` ends it with `data: [DONE]`, as the Chat Completions stream does. */
export function sendSse(res, events, { done = false } = {}) {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
  for (const { event, data } of events) {
    res.write(`${event ? `event: ${event}\n` : ""}data: ${JSON.stringify(data)}\n\n`);
  }
  if (done) res.write("data: [DONE]\n\n");
  res.end();
}

export function sendJson(res, body, status = 200) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

/** A fresh, empty directory (HOME, CODEX_HOME, …). */
export function freshDir(prefix) {
  return mkdtempSync(join(tmpdir(), prefix));
}

export function ensureDir(path) {
  mkdirSync(path, { recursive: true });
  return path;
}

/**
 * Run a host to the end, in its own process group, with stdin closed. Resolves to
 * {code, signal, stdout, stderr, ms}; after `deadlineMs` the whole group is killed and the
 * promise rejects with what the host wrote.
 */
export function runHost(command, args, { env, cwd, deadlineMs = HOST_DEADLINE_MS }) {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const child = spawn(command, args, { env, cwd, stdio: ["ignore", "pipe", "pipe"], detached: true });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => { stdout += d; });
    child.stderr.on("data", (d) => { stderr += d; });
    const killGroup = () => { try { process.kill(-child.pid, "SIGKILL"); } catch { /* gone */ } };
    const timer = setTimeout(() => {
      killGroup();
      reject(new Error(`${command} ${args.join(" ")}: no exit within ${deadlineMs} ms\n--- stderr\n${stderr}\n--- stdout\n${stdout}`));
    }, deadlineMs);
    child.once("error", (error) => { clearTimeout(timer); reject(error); });
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      // Whatever the host left behind in its group (a stdio MCP server) goes too.
      killGroup();
      resolve({ code, signal, stdout, stderr, ms: Date.now() - started });
    });
  });
}

/** This process's process group (field 5 of /proc/self/stat), never to be killed. */
function ownGroup() {
  return Number(readFileSync("/proc/self/stat", "utf8").replace(/^.*\) /s, "").split(" ")[2]);
}

/** The processes whose environment has HOME=`home`, each as {pid, pgid}. */
export function processesWithHome(home) {
  const found = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (!readFileSync(`/proc/${entry}/environ`, "utf8").split("\0").includes(`HOME=${home}`)) continue;
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      if (stat.includes(") Z ")) continue;
      found.push({ pid: Number(entry), pgid: Number(stat.replace(/^.*\) /s, "").split(" ")[2]) });
    } catch { /* gone, or not ours to read */ }
  }
  return found;
}

/**
 * Kill every process a host left behind that still runs with HOME=`home` (a daemon it
 * detached into its own session), with the process group of each (what the daemon started),
 * and wait (bounded) until none is left. Resolves to the command lines that were killed.
 */
export async function killByHome(home, { deadlineMs = 10000 } = {}) {
  const own = ownGroup();
  const killed = [];
  const until = Date.now() + deadlineMs;
  for (;;) {
    const left = processesWithHome(home);
    if (left.length === 0) return killed;
    if (Date.now() > until) throw new Error(`still running with HOME=${home}: ${left.map((p) => p.pid)}`);
    for (const { pid, pgid } of left) {
      try { killed.push(readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ").trim()); } catch { /* gone */ }
      if (pgid !== own && pgid > 1) { try { process.kill(-pgid, "SIGKILL"); } catch { /* gone */ } }
      try { process.kill(pid, "SIGKILL"); } catch { /* gone */ }
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The environment every host run starts from: no inherited secrets, proxies or config. */
export function baseEnv(home, extra = {}) {
  return {
    PATH: process.env.PATH,
    HOME: home,
    USER: process.env.USER ?? "tester",
    LANG: "C.UTF-8",
    TERM: "dumb",
    NO_COLOR: "1",
    TMPDIR: process.env.TMPDIR ?? tmpdir(),
    NO_PROXY: "127.0.0.1,localhost",
    no_proxy: "127.0.0.1,localhost",
    ...extra,
  };
}

/** The first UUID in `text` (the thread id a model would copy from a tool result). */
export function findUuid(text) {
  return text.match(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i)?.[0];
}
