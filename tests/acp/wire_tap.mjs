// `node wire_tap.mjs LOG COMMAND ARGS...`: runs COMMAND (an ACP agent) with its stdin and
// stdout passed through, and appends every line each way to LOG as
// `{"dir": "in" | "out", "pid": N, "at": ms, "line": ...}` (`in`: client → agent). A client
// under test points at this instead of `interpreter acp`, so the test sees the JSON-RPC
// exchanged whichever client process spoke it. Closing stdin closes the agent's; a
// SIGTERM or SIGINT is passed on; the tap exits as the agent does.
import { spawn } from "node:child_process";
import { appendFileSync } from "node:fs";
import { createInterface } from "node:readline";

const [log, command, ...args] = process.argv.slice(2);
const agent = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });

function record(dir, line) {
  let parsed;
  try { parsed = JSON.parse(line); } catch { parsed = line; }
  appendFileSync(log, `${JSON.stringify({ dir, pid: process.pid, at: Date.now(), line: parsed })}\n`);
}

createInterface({ input: process.stdin, crlfDelay: Infinity }).on("line", (line) => {
  record("in", line);
  agent.stdin.write(`${line}\n`);
}).on("close", () => agent.stdin.end());
agent.stdin.on("error", () => {});

createInterface({ input: agent.stdout, crlfDelay: Infinity }).on("line", (line) => {
  record("out", line);
  process.stdout.write(`${line}\n`);
});
process.stdout.on("error", () => {});

for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => agent.kill(signal));
// "close": after the agent's last line went through.
agent.on("close", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
