// The TypeScript SDK v2 client (`@modelcontextprotocol/client`, 2026-07-28, its default
// `auto` negotiation) against a fleet: three `interpreter mcp-server` replicas on one
// PostgreSQL thread store behind a real nginx round robin. What a platform team's callers
// meet: the SDK's own `Mcp-Param-ThreadId` headers (from the `x-mcp-header` in our tool
// schemas) must pass the replicas' checks, an approval's InputRequiredResult retry must
// open on whichever replica it lands on, and one thread continued by calls that land on
// every replica must keep its whole history.
//
// Needs INTERPRETER_TEST_PG_URL (scripts/postgres) and INTERPRETER_NGINX (scripts/nginx
// ensure), which scripts/test exports; skipped without them unless INTERPRETER_REQUIRE_PG=1.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { freePort, setUp, startHttpServer } from "./common.mjs";

const MODERN = "2026-07-28";
// nginx sends its upstream's name as Host; the replicas accept it with --allow-host.
const UPSTREAM = "fleet";
const PG_URL = process.env.INTERPRETER_TEST_PG_URL;
const NGINX = process.env.INTERPRETER_NGINX;
const REQUIRED = process.env.INTERPRETER_REQUIRE_PG === "1";
const missing = !PG_URL ? "INTERPRETER_TEST_PG_URL" : !NGINX ? "INTERPRETER_NGINX" : null;
if (missing && REQUIRED) throw new Error(`INTERPRETER_REQUIRE_PG=1 but ${missing} is not set`);

/** nginx over `upstreams` ("127.0.0.1:PORT"), round robin, or with `hashOnThread` the
 * routing docs/fleet.md gives (hash on `Mcp-Param-ThreadId`, else per request), logging
 * which upstream served each request and the thread header it carried; resolves to
 * {url, served(), stop()}, `served()` giving [{upstream, thread}]. */
async function startNginx(upstreams, { hashOnThread = false } = {}) {
  const dir = mkdtempSync(join(tmpdir(), "peer-nginx-"));
  mkdirSync(join(dir, "logs"));
  const port = await freePort();
  const log = join(dir, "logs", "upstream.log");
  const conf = join(dir, "nginx.conf");
  // One process (no master): the SIGKILL in stop() leaves no worker behind on the port.
  writeFileSync(conf, `master_process off;
worker_processes 1;
error_log ${dir}/logs/error.log warn;
events { worker_connections 256; }
http {
  log_format upstream '$upstream_addr $http_mcp_param_threadid';
  access_log ${log} upstream;
${hashOnThread ? `  map $http_mcp_param_threadid $route_key { "" $request_id; default $http_mcp_param_threadid; }` : ""}
  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi; uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;
  upstream ${UPSTREAM} {
${hashOnThread ? "    hash $route_key consistent;" : ""}
${upstreams.map((u) => `    server ${u} max_fails=1 fail_timeout=5s;`).join("\n")}
  }
  server {
    listen 127.0.0.1:${port};
    location /mcp {
      proxy_pass http://${UPSTREAM};
      proxy_http_version 1.1;
      proxy_buffering off;
      proxy_read_timeout 3600s;
    }
  }
}
`);
  const proc = spawn(NGINX, ["-p", dir, "-c", conf, "-g", `daemon off; pid ${dir}/nginx.pid;`],
    { stdio: ["ignore", "ignore", "inherit"] });
  const exited = new Promise((resolve) => proc.once("exit", resolve));
  const deadline = Date.now() + 30000;
  for (;;) {
    const up = await new Promise((resolve) => {
      const socket = connect(port, "127.0.0.1", () => { socket.destroy(); resolve(true); });
      socket.once("error", () => resolve(false));
    });
    if (up) break;
    assert.ok(Date.now() < deadline, "nginx did not start");
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    served: () => (existsSync(log) ? readFileSync(log, "utf8").split("\n").filter(Boolean) : [])
      .map((line) => { const [upstream, thread] = line.split(" "); return { upstream, thread: thread === "-" ? undefined : thread }; }),
    stop: async () => { proc.kill("SIGKILL"); await exited; },
  };
}

/** Three replicas on the store behind nginx (`nginxOptions` as `startNginx` takes them),
 * the mock model scripted with `steps`, and a connected v2 client that accepts every
 * approval. One home for all three (three ports of one machine): the token file, the
 * request-state keyring and the fleet replica key the first replica creates are the ones
 * the others read. */
async function startFleet(steps, nginxOptions = {}) {
  const ctx = await setUp(steps, {
    topLevel: `thread_store = "${PG_URL}"\n`,
    config: "[mcp_server]\nrequest_state_key_file = \"request-state.keys\"\n",
  });
  const fleet = { ctx, replicas: [], sent: [], elicitations: [] };
  fleet.stop = async () => {
    await fleet.client?.close();
    await fleet.nginx?.stop();
    for (const r of fleet.replicas) await r.stop();
    ctx.stop();
  };
  try {
    for (let i = 0; i < 3; i++) fleet.replicas.push(await startHttpServer(ctx, ["--allow-host", UPSTREAM]));
    fleet.nginx = await startNginx(fleet.replicas.map((r) => new URL(r.url).host), nginxOptions);
    const transport = new StreamableHTTPClientTransport(new URL(fleet.nginx.url), {
      requestInit: { headers: { Authorization: `Bearer ${fleet.replicas[0].token}` } },
      // Every request as the SDK sent it, headers included.
      fetch: (url, init) => {
        const body = typeof init?.body === "string" ? JSON.parse(init.body) : undefined;
        fleet.sent.push({ body, headers: new Headers(init?.headers) });
        return fetch(url, init);
      },
    });
    fleet.client = new Client({ name: "peer-ts-v2-fleet", version: "0.0.0" },
      { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: "auto" } });
    fleet.client.setRequestHandler("elicitation/create", async (request) => {
      fleet.elicitations.push(request.params);
      return { action: "accept", content: { decision: "approved" } };
    });
    await fleet.client.connect(transport);
    assert.equal(fleet.client.getNegotiatedProtocolVersion(), MODERN);
    return fleet;
  } catch (error) {
    await fleet.stop();
    throw error;
  }
}

/** `codex-reply` on `threadId` with "reply N", for each N, checking each answer is the
 * scripted "Reply N." of that thread and that the SDK sent it with the routing header.
 * Returns how many `codex-reply` requests went without the header: a client that has not
 * listed the tools does not know of the header, the replica refuses such a call as the
 * 2026-07-28 revision says, and the SDK lists the tools and sends it again with it. */
/** The requests nginx logged, once `done(log)` holds or 10 s have passed: nginx logs a
 * request when its response has ended, which may be just after the client read the
 * answer (found by CI: the last reply was not in the log yet). */
async function servedOnce(fleet, done) {
  const deadline = Date.now() + 10000;
  for (;;) {
    const served = fleet.nginx.served();
    if (done(served) || Date.now() > deadline) return served;
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function replies(fleet, threadId, numbers) {
  for (const n of numbers) {
    const answer = await fleet.client.callTool({ name: "codex-reply", arguments: { threadId, prompt: `reply ${n}` } },
      { timeout: 90000 });
    assert.ok(!answer.isError, JSON.stringify(answer));
    assert.equal(answer.structuredContent.content, `Reply ${n}.`);
    assert.equal(answer.structuredContent.threadId, threadId);
  }
  const sent = fleet.sent.filter((h) => h.body?.method === "tools/call" && h.body.params?.name === "codex-reply");
  const routed = sent.filter((h) => h.headers.get("mcp-param-threadid") === threadId);
  assert.equal(routed.length, numbers.length, "the SDK sent no routing header");
  return sent.length - routed.length;
}

const skip = missing ? `${missing} is not set` : false;

test("v2 through nginx to three replicas: an approval retry and one thread across all of them",
  { timeout: 180000, skip }, async () => {
    const fleet = await startFleet([
      { command: "touch from_the_fleet.txt" }, { text: "Made it." },
      { text: "Reply 1." }, { text: "Reply 2." }, { text: "Reply 3." },
    ]);
    const { ctx, client } = fleet;
    try {
      const tools = await client.listTools();
      const reply = tools.tools.find((t) => t.name === "codex-reply");
      assert.equal(reply?.inputSchema?.properties?.threadId?.["x-mcp-header"], "ThreadId");

      const first = await client.callTool({ name: "codex", arguments: {
        prompt: "make a file", cwd: ctx.work, sandbox: "danger-full-access", "approval-policy": "untrusted",
      } }, { timeout: 90000 });
      assert.ok(!first.isError, JSON.stringify(first));
      assert.equal(first.structuredContent.content, "Made it.");
      assert.equal(fleet.elicitations.length, 1, "want one approval");
      assert.ok(existsSync(join(ctx.work, "from_the_fleet.txt")), "the approved command did not run");
      const threadId = first.structuredContent.threadId;
      assert.match(threadId, /^[0-9a-f-]{36}$/);

      // Three replies in a row: round robin lands them on three replicas.
      assert.equal(await replies(fleet, threadId, [1, 2, 3]), 0, "the tools were listed: every call had the header");
      const upstreams = (log) => new Set(log.map((r) => r.upstream));
      const served = upstreams(await servedOnce(fleet, (log) => upstreams(log).size >= 3));
      assert.equal(served.size, 3, `want every replica to have served requests, got ${[...served]}`);

      await client.close();
      fleet.client = undefined;
      await ctx.finish();
      const record = JSON.parse(readFileSync(ctx.record, "utf8"));
      assert.deepEqual(record.violations, []);
      // The last model request, made by whichever replica ran the third reply, holds the
      // whole conversation: every earlier turn came back from the store.
      const last = JSON.stringify(record.requests.at(-1));
      for (const said of ["make a file", "Made it.", "reply 1", "Reply 1.", "reply 2", "Reply 2.", "reply 3"]) {
        assert.ok(last.includes(said), `the last model request lacks ${JSON.stringify(said)}`);
      }
    } finally {
      await fleet.stop();
    }
  });

test("v2 through nginx hashing on Mcp-Param-ThreadId, as docs/fleet.md routes: a thread's calls stay on one replica",
  { timeout: 180000, skip }, async () => {
    const fleet = await startFleet([
      { text: "Started." }, { text: "Reply 1." }, { text: "Reply 2." }, { text: "Reply 3." },
    ], { hashOnThread: true });
    try {
      const first = await fleet.client.callTool({ name: "codex", arguments: {
        prompt: "start", cwd: fleet.ctx.work, "approval-policy": "never",
      } }, { timeout: 90000 });
      assert.equal(first.structuredContent.content, "Started.");
      const threadId = first.structuredContent.threadId;
      // No tools/list first: the first reply goes without the header, is refused, and
      // is sent again with it once the SDK has listed the tools.
      assert.equal(await replies(fleet, threadId, [1, 2, 3]), 1);
      const log = await servedOnce(fleet,
        (entries) => entries.filter((r) => r.thread === threadId).length >= 3);
      const routed = log.filter((r) => r.thread === threadId);
      assert.equal(routed.length, 3, JSON.stringify(log));
      assert.equal(new Set(routed.map((r) => r.upstream)).size, 1, `one thread's calls went to several replicas: ${JSON.stringify(routed)}`);
    } finally {
      await fleet.stop();
    }
  });
