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

/** nginx round robin over `upstreams` ("127.0.0.1:PORT"), logging which one served each
 * request; resolves to {url, served(), stop()}. */
async function startNginx(upstreams) {
  const dir = mkdtempSync(join(tmpdir(), "peer-nginx-"));
  mkdirSync(join(dir, "logs"));
  const port = await freePort();
  const log = join(dir, "logs", "upstream.log");
  const conf = join(dir, "nginx.conf");
  writeFileSync(conf, `worker_processes 1;
error_log ${dir}/logs/error.log warn;
events { worker_connections 256; }
http {
  log_format upstream '$upstream_addr';
  access_log ${log} upstream;
  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi; uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;
  upstream ${UPSTREAM} {
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
    served: () => (existsSync(log) ? readFileSync(log, "utf8").split("\n").filter(Boolean) : []),
    stop: async () => { proc.kill("SIGKILL"); await exited; },
  };
}

test("v2 through nginx to three replicas: an approval retry and one thread across all of them",
  { timeout: 180000, skip: missing ? `${missing} is not set` : false }, async () => {
    const ctx = await setUp([
      { command: "touch from_the_fleet.txt" }, { text: "Made it." },
      { text: "Reply 1." }, { text: "Reply 2." }, { text: "Reply 3." },
    ], { topLevel: `thread_store = "${PG_URL}"\n`, config: "[mcp_server]\nrequest_state_key_file = \"request-state.keys\"\n" });
    // One home for all three (three ports of one machine): the token file and the
    // request-state keyring the first replica creates are the ones the others read.
    const replicas = [];
    let nginx;
    let client;
    try {
      for (let i = 0; i < 3; i++) replicas.push(await startHttpServer(ctx, ["--allow-host", UPSTREAM]));
      nginx = await startNginx(replicas.map((r) => new URL(r.url).host));
      const headers = [];
      const transport = new StreamableHTTPClientTransport(new URL(nginx.url), {
        requestInit: { headers: { Authorization: `Bearer ${replicas[0].token}` } },
        fetch: (url, init) => {
          const body = typeof init?.body === "string" ? JSON.parse(init.body) : undefined;
          headers.push({ body, headers: new Headers(init?.headers) });
          return fetch(url, init);
        },
      });
      client = new Client({ name: "peer-ts-v2-fleet", version: "0.0.0" },
        { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: "auto" } });
      const elicitations = [];
      client.setRequestHandler("elicitation/create", async (request) => {
        elicitations.push(request.params);
        return { action: "accept", content: { decision: "approved" } };
      });
      await client.connect(transport);
      assert.equal(client.getNegotiatedProtocolVersion(), MODERN);
      const tools = await client.listTools();
      const reply = tools.tools.find((t) => t.name === "codex-reply");
      assert.equal(reply?.inputSchema?.properties?.threadId?.["x-mcp-header"], "ThreadId");

      const first = await client.callTool({ name: "codex", arguments: {
        prompt: "make a file", cwd: ctx.work, sandbox: "danger-full-access", "approval-policy": "untrusted",
      } }, { timeout: 90000 });
      assert.ok(!first.isError, JSON.stringify(first));
      assert.equal(first.structuredContent.content, "Made it.");
      assert.equal(elicitations.length, 1, "want one approval");
      assert.ok(existsSync(join(ctx.work, "from_the_fleet.txt")), "the approved command did not run");
      const threadId = first.structuredContent.threadId;
      assert.match(threadId, /^[0-9a-f-]{36}$/);

      // Three replies in a row: round robin lands them on three replicas.
      for (const n of [1, 2, 3]) {
        const answer = await client.callTool({ name: "codex-reply", arguments: { threadId, prompt: `reply ${n}` } },
          { timeout: 90000 });
        assert.ok(!answer.isError, JSON.stringify(answer));
        assert.equal(answer.structuredContent.content, `Reply ${n}.`);
        assert.equal(answer.structuredContent.threadId, threadId);
      }
      const replies = headers.filter((h) => h.body?.method === "tools/call" && h.body.params?.name === "codex-reply");
      assert.equal(replies.length, 3);
      for (const h of replies) assert.equal(h.headers.get("mcp-param-threadid"), threadId, "the SDK sent no routing header");
      const served = new Set(nginx.served());
      assert.equal(served.size, 3, `want every replica to have served requests, got ${[...served]}`);

      await client.close();
      client = undefined;
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
      await client?.close();
      await nginx?.stop();
      for (const r of replicas) await r.stop();
      ctx.stop();
    }
  });
