"""Telemetry through the real binary: every front end runs a turn with the caller's W3C
trace context, exporting to an OTLP/HTTP receiver that decodes with the official protobuf
definitions (receiver.py), and the tests check

  - the span tree: `invoke_agent` a child of the caller's span, in the caller's trace,
    with `chat` and `execute_tool` spans below it, and their GenAI attributes;
  - that each model request carried the trace (`traceparent` naming its `chat` span);
  - that no prompt, answer, tool argument or tool output is exported by default, and that
    they are when content capture is asked for;
  - the GenAI metrics and the turn metric;
  - `/metrics` on the mcp-server's HTTP listener, scraped by Debian's real `prometheus`
    (when PROMETHEUS names its binary) and queried through its HTTP API.

The front ends: `exec` (TRACEPARENT), `mcp-server` over stdio (`params._meta.traceparent`)
and HTTP (the `traceparent` header), `app-server` over stdio (the request's `trace`),
`acp` (`_meta.traceparent` on `session/prompt`).

Usage: test_telemetry.py [-k SUBSTRING]...  Prints PASS/FAIL per scenario; exits 1 on a
failure. TELEMETRY_KEEP=1 keeps the temporary homes."""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from receiver import Receiver

BIN_DIR = Path(os.environ.get("INTERPRETER_BIN_DIR",
                              Path(__file__).parent / "../../target/debug")).resolve()
DEADLINE = 60.0

PROMPT = "PROMPT-CANARY-7f3a"
ANSWER = "ANSWER-CANARY-19b2"
PLAN_STEP = "PLAN-CANARY-c41d"
TOOL_OUTPUT = "TOOL-OUTPUT-CANARY-88e0"
CANARIES = [PROMPT, ANSWER, PLAN_STEP, TOOL_OUTPUT]


# ---------------------------------------------------------------------------------------
# The scripted model


def chunk(delta, finish=None):
    return {"id": "c", "object": "chat.completion.chunk", "model": "mock-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def usage_chunk():
    return {"id": "c", "object": "chat.completion.chunk", "model": "mock-model", "choices": [],
            "usage": {"prompt_tokens": 120, "completion_tokens": 7, "total_tokens": 127,
                      "prompt_tokens_details": {"cached_tokens": 100}}}


def tool_step(name, arguments):
    call = {"index": 0, "id": "call_1", "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}
    return {"chunks": [chunk({"tool_calls": [call]}), chunk({}, "tool_calls"), usage_chunk()]}


def text_step(text):
    return {"chunks": [chunk({"content": text}), chunk({}, "stop"), usage_chunk()]}


def plan_turn():
    return [tool_step("update_plan", {"plan": [{"step": PLAN_STEP, "status": "in_progress"}]}),
            text_step(ANSWER)]


def command_turn():
    return [tool_step("shell", {"command": ["echo", TOOL_OUTPUT]}), text_step(ANSWER)]


class Caller:
    """The caller's span, as an orchestrator would send it."""

    def __init__(self):
        self.trace_id = secrets.token_hex(16)
        self.span_id = secrets.token_hex(8)
        self.traceparent = f"00-{self.trace_id}-{self.span_id}-01"


class Home:
    """mock-model with a script, a home whose config points at it, and the environment that
    exports to the receiver."""

    def __init__(self, steps, receiver, extra_env=None, otel_table=""):
        self.home = Path(tempfile.mkdtemp(prefix="telemetry-home-"))
        self.work = Path(tempfile.mkdtemp(prefix="telemetry-work-"))
        script = self.home / "script.json"
        script.write_text(json.dumps(steps))
        self.record_path = self.home / "record.json"
        self.mock = subprocess.Popen(
            [str(BIN_DIR / "mock-model"), "--script", str(script), "--record", str(self.record_path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        base_url = json.loads(self.mock.stdout.readline())["base_url"]
        (self.home / "config.toml").write_text(
            'model = "mock-model"\nmodel_provider = "mock"\n\n'
            '[mcp_server]\nevents = false\n\n'
            '[model_providers.mock]\nname = "mock"\n'
            f'base_url = "{base_url}"\nenv_key = "MOCK_API_KEY"\nwire_api = "chat"\n'
            'request_max_retries = 0\n' + otel_table)
        self.env = {"PATH": os.environ["PATH"], "HOME": str(self.home),
                    "INTERPRETER_HOME": str(self.home), "MOCK_API_KEY": "k",
                    "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
                    "OTEL_METRIC_EXPORT_INTERVAL": "500"}
        self.env.update(extra_env or {})

    def record(self):
        """Stops the mock and returns what it saw."""
        if self.mock.poll() is None:
            self.mock.stdin.close()
            self.mock.wait(timeout=10)
        return json.loads(self.record_path.read_text())

    def close(self):
        if self.mock.poll() is None:
            self.mock.kill()
            self.mock.wait(timeout=10)
        if not os.environ.get("TELEMETRY_KEEP"):
            shutil.rmtree(self.home, ignore_errors=True)
            shutil.rmtree(self.work, ignore_errors=True)


class Stdio:
    """A JSON-RPC peer on a child's stdin/stdout, every read with a deadline."""

    def __init__(self, args, home):
        self.proc = subprocess.Popen([str(BIN_DIR / "interpreter"), *args], cwd=str(home.work),
                                     env=home.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.lines = queue.Queue()
        self.stderr = []
        self.next_id = 1
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=self._pump_err, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _pump_err(self):
        for line in self.proc.stderr:
            self.stderr.append(line)

    def send(self, message):
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def request(self, method, params, **extra):
        rid = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params, **extra})
        return self.until(lambda m: m.get("id") == rid and ("result" in m or "error" in m))

    def until(self, matches, deadline=DEADLINE):
        end = time.monotonic() + deadline
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no matching message within {deadline}s; stderr: {''.join(self.stderr)[-2000:]}")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(f"the process ended; stderr: {''.join(self.stderr)[-2000:]}")
            message = json.loads(line)
            # Answer the requests a front end may send (none expected with these scripts).
            if "method" in message and "id" in message and "result" not in message:
                self.send({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "no"}})
                continue
            if matches(message):
                return message

    def close(self):
        """Ends the process the way its host would (stdin closed), so it flushes."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError("the process did not exit after stdin closed")


# ---------------------------------------------------------------------------------------
# Checks


def wait_for(what, condition, deadline=20.0):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def check_turn(receiver, caller, record, front_end, tool, content_expected=False):
    """The exported turn: its tree under the caller's span, its attributes, the trace on the
    model requests, and what content it carries."""
    spans = receiver.spans()
    turns = [s for s in spans if s["name"] == "invoke_agent interpreter"]
    assert len(turns) == 1, f"one invoke_agent span, got {[s['name'] for s in spans]}"
    turn = turns[0]
    assert turn["trace_id"] == caller.trace_id, "the turn is in the caller's trace"
    assert turn["parent_span_id"] == caller.span_id, "the turn's parent is the caller's span"
    a = turn["attributes"]
    assert a["gen_ai.operation.name"] == "invoke_agent"
    assert a["gen_ai.agent.name"] == "interpreter"
    assert a["gen_ai.conversation.id"], a
    assert a["gen_ai.request.model"] == "mock-model"
    assert a["gen_ai.provider.name"] == "mock"
    assert a["interpreter.front_end"] == front_end, a
    assert a["interpreter.turn.outcome"] == "completed", a
    assert a["gen_ai.usage.input_tokens"] == 240, a
    assert a["gen_ai.usage.output_tokens"] == 14, a
    assert a["gen_ai.usage.cache_read.input_tokens"] == 200, a
    assert turn["resource"]["service.name"] == "interpreter", turn["resource"]
    assert turn["resource"]["interpreter.front_end"] == front_end

    chats = [s for s in spans if s["name"] == "chat mock-model"]
    assert len(chats) == 2, [s["name"] for s in spans]
    for chat in chats:
        assert chat["parent_span_id"] == turn["span_id"]
        assert chat["trace_id"] == caller.trace_id
        assert chat["kind"] == 3, "chat spans are CLIENT spans"
        ca = chat["attributes"]
        assert ca["gen_ai.operation.name"] == "chat"
        assert ca["gen_ai.request.model"] == "mock-model"
        assert ca["gen_ai.response.model"] == "mock-model", ca
        assert ca["gen_ai.usage.input_tokens"] == 120, ca
        assert ca["gen_ai.usage.output_tokens"] == 7, ca
        assert ca["gen_ai.usage.cache_read.input_tokens"] == 100, ca
        assert "gen_ai.response.time_to_first_chunk" in ca, ca
    reasons = sorted(tuple(c["attributes"]["gen_ai.response.finish_reasons"]) for c in chats)
    assert reasons == [("stop",), ("tool_calls",)], reasons

    tools = [s for s in spans if s["name"] == f"execute_tool {tool}"]
    assert len(tools) == 1, [s["name"] for s in spans]
    ta = tools[0]["attributes"]
    assert tools[0]["parent_span_id"] == turn["span_id"]
    assert ta["gen_ai.tool.name"] == tool and ta["gen_ai.tool.call.id"] == "call_1", ta
    assert ta["interpreter.tool.outcome"] == "completed", ta

    # Each model request carried the trace, naming its own chat span.
    parents = record["traceparents"]
    assert len(parents) == 2 and all(parents), parents
    chat_ids = {c["span_id"] for c in chats}
    for parent in parents:
        version, trace_id, span_id, flags = parent.split("-")
        assert trace_id == caller.trace_id, (parent, caller.trace_id)
        assert span_id in chat_ids, (parent, chat_ids)

    text = receiver.everything_as_text()
    if content_expected:
        assert PROMPT in text and ANSWER in text, "content capture was asked for"
    else:
        leaked = [c for c in CANARIES if c in text]
        assert not leaked, f"content exported without being asked for: {leaked}"
    assert not receiver.errors, receiver.errors


def check_metrics(receiver):
    names = wait_for("the GenAI metrics", lambda: (
        {"gen_ai.client.token.usage", "gen_ai.client.operation.duration", "interpreter.turns",
         "interpreter.tool.calls"} <= receiver.metric_names()) and receiver.metric_names())
    for metric in receiver.metrics():
        text = json.dumps(metric)
        assert "conversation.id" not in text and "turn.id" not in text, \
            f"a metric label that is not bounded: {metric['name']}"
    return names


# ---------------------------------------------------------------------------------------
# Scenarios


def scenario_exec(receiver):
    caller = Caller()
    home = Home(command_turn(), receiver,
                {"TRACEPARENT": caller.traceparent, "TRACESTATE": "vendor=caller"})
    try:
        done = subprocess.run(
            [str(BIN_DIR / "interpreter"), "exec", "--json",
             "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check", PROMPT],
            cwd=str(home.work), env=home.env, capture_output=True, text=True, timeout=DEADLINE)
        assert done.returncode == 0, done.stderr
        # exec flushed before it exited: everything is there already.
        check_turn(receiver, caller, home.record(), "exec", "shell")
        spans = receiver.spans()
        shell = next(s for s in spans if s["name"] == "execute_tool shell")
        assert shell["attributes"]["process.exit.code"] == 0, shell
        assert receiver.metric_names() >= {"gen_ai.client.token.usage", "interpreter.turns"}, \
            receiver.metric_names()
        # Logs, when exported, are in the trace of what they report.
        for record in receiver.logs():
            if record["trace_id"]:
                assert record["trace_id"] == caller.trace_id, record
    finally:
        home.close()


def scenario_exec_content_capture(receiver):
    caller = Caller()
    home = Home(plan_turn(), receiver,
                {"TRACEPARENT": caller.traceparent,
                 "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
                 "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})
    try:
        done = subprocess.run(
            [str(BIN_DIR / "interpreter"), "exec", "--json", "--skip-git-repo-check", PROMPT],
            cwd=str(home.work), env=home.env, capture_output=True, text=True, timeout=DEADLINE)
        assert done.returncode == 0, done.stderr
        assert set(receiver.content_types) == {"application/json"}, receiver.content_types
        check_turn(receiver, caller, home.record(), "exec", "update_plan", content_expected=True)
    finally:
        home.close()


def scenario_exec_mcp_call_carries_the_trace(receiver):
    """A call to an MCP server the agent uses: a CLIENT span under the tool's span, and the
    request's `_meta.traceparent` naming it (SEP-414)."""
    caller = Caller()
    calls = Path(tempfile.mkdtemp(prefix="telemetry-mcp-")) / "requests.jsonl"
    server = Path(__file__).resolve().parent / "mcp_recorder.py"
    table = (f'\n[mcp_servers.rec]\ncommand = "{sys.executable}"\n'
             f'args = ["{server}", "{calls}", "dup"]\n')
    home = Home([tool_step("mcp__rec__echo", {"text": TOOL_OUTPUT}), text_step(ANSWER)], receiver,
                {"TRACEPARENT": caller.traceparent}, otel_table=table)
    try:
        done = subprocess.run(
            [str(BIN_DIR / "interpreter"), "exec", "--dangerously-bypass-approvals-and-sandbox",
             "--skip-git-repo-check", PROMPT],
            cwd=str(home.work), env=home.env, capture_output=True, text=True, timeout=DEADLINE)
        assert done.returncode == 0, done.stderr
        check_turn(receiver, caller, home.record(), "exec", "mcp__rec__echo")
        spans = receiver.spans()
        tool = next(s for s in spans if s["name"] == "execute_tool mcp__rec__echo")
        call = next(s for s in spans if s["name"] == "tools/call echo")
        assert call["parent_span_id"] == tool["span_id"] and call["kind"] == 3, call
        assert call["attributes"]["interpreter.mcp.server"] == "rec", call
        requests = [json.loads(line) for line in calls.read_text().splitlines()]
        sent = next(r for r in requests if r.get("method") == "tools/call")
        parent = sent["params"]["_meta"]["traceparent"]
        assert parent.split("-")[1] == caller.trace_id and parent.split("-")[2] == call["span_id"], \
            (parent, call)
        # The agent's warning about the server (it lists `echo` twice), logged while the
        # turn ran: an OTel log record in the turn's trace.
        turn = next(s for s in spans if s["name"] == "invoke_agent interpreter")
        twice = [r for r in receiver.logs() if "twice" in json.dumps(r["body"])]
        assert twice, receiver.logs()
        for record in twice:
            assert record["trace_id"] == caller.trace_id, record
            assert record["span_id"] in {turn["span_id"], tool["span_id"]}, record
            assert record["severity"].upper().startswith("WARN"), record
    finally:
        home.close()
        shutil.rmtree(calls.parent, ignore_errors=True)


def scenario_exec_grpc(receiver):
    """OTLP over gRPC, with headers as metadata."""
    caller = Caller()
    home = Home(plan_turn(), receiver,
                {"TRACEPARENT": caller.traceparent, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                 "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.grpc_url,
                 "OTEL_EXPORTER_OTLP_HEADERS": "x-tenant=t2"})
    try:
        done = subprocess.run(
            [str(BIN_DIR / "interpreter"), "exec", "--skip-git-repo-check", PROMPT],
            cwd=str(home.work), env=home.env, capture_output=True, text=True, timeout=DEADLINE)
        assert done.returncode == 0, done.stderr
        assert set(receiver.content_types) == {"application/grpc"}, receiver.content_types
        assert all(h.get("x-tenant") == "t2" for h in receiver.headers), receiver.headers
        check_turn(receiver, caller, home.record(), "exec", "update_plan")
        assert receiver.metric_names() >= {"gen_ai.client.token.usage"}, receiver.metric_names()
    finally:
        home.close()


def scenario_exec_codex_otel_table(receiver):
    """A Codex `[otel]` table means the same here: traces to its endpoint, no variables."""
    caller = Caller()
    table = (f'\n[otel]\nenvironment = "ci"\n'
             f'trace_exporter = {{ otlp-http = {{ endpoint = "{receiver.url}/v1/traces", '
             f'protocol = "binary", headers = {{ "x-tenant" = "t1" }} }} }}\n')
    home = Home(plan_turn(), receiver, {"TRACEPARENT": caller.traceparent}, otel_table=table)
    del home.env["OTEL_EXPORTER_OTLP_ENDPOINT"]
    try:
        done = subprocess.run(
            [str(BIN_DIR / "interpreter"), "exec", "--skip-git-repo-check", PROMPT],
            cwd=str(home.work), env=home.env, capture_output=True, text=True, timeout=DEADLINE)
        assert done.returncode == 0, done.stderr
        check_turn(receiver, caller, home.record(), "exec", "update_plan")
        assert all(h.get("x-tenant") == "t1" for h in receiver.headers), receiver.headers
        turn = next(s for s in receiver.spans() if s["name"] == "invoke_agent interpreter")
        assert turn["resource"]["deployment.environment.name"] == "ci"
        assert not receiver.requests["/v1/metrics"] and not receiver.requests["/v1/logs"], \
            "only traces were configured"
    finally:
        home.close()


def scenario_mcp_stdio(receiver):
    caller = Caller()
    home = Home(plan_turn(), receiver)
    peer = Stdio(["mcp-server"], home)
    try:
        init = peer.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                           "clientInfo": {"name": "telemetry-test", "version": "1"}})
        assert "result" in init, init
        peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        result = peer.request("tools/call", {
            "name": "codex", "arguments": {"prompt": PROMPT},
            "_meta": {"traceparent": caller.traceparent, "tracestate": "vendor=caller"}})
        assert "result" in result and not result["result"].get("isError"), result
        peer.close()
        check_turn(receiver, caller, home.record(), "mcp-server", "update_plan")
        check_metrics(receiver)
    finally:
        peer.proc.kill()
        home.close()


class HttpMcp:
    """`interpreter mcp-server --listen http://127.0.0.1:0/mcp` with its bearer token."""

    def __init__(self, home, extra_args=()):
        self.proc = subprocess.Popen(
            [str(BIN_DIR / "interpreter"), "mcp-server", "--listen", "http://127.0.0.1:0/mcp",
             *extra_args],
            cwd=str(home.work), env=home.env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.url = None
        self.metrics_url = None
        token_file = None
        ready = threading.Event()
        self.stderr = []

        def pump():
            nonlocal token_file
            for line in self.proc.stderr:
                self.stderr.append(line)
                if m := re.search(r"metrics on (http://\S+)", line):
                    self.metrics_url = m.group(1)
                if m := re.search(r"listening on (http://\S+)", line):
                    self.url = m.group(1)
                if m := re.search(r"bearer token file: (.+)$", line.rstrip("\n")):
                    token_file = m.group(1)
                if self.url and token_file:
                    ready.set()

        threading.Thread(target=pump, daemon=True).start()
        assert ready.wait(DEADLINE), f"the server did not start: {''.join(self.stderr)}"
        self.token = Path(token_file).read_text().strip()
        self.base = self.url.rsplit("/", 1)[0]
        self.session = None
        self.next_id = 1

    def post(self, message, headers=None):
        request = urllib.request.Request(self.url, data=json.dumps(message).encode(), method="POST")
        request.add_header("content-type", "application/json")
        request.add_header("accept", "application/json, text/event-stream")
        request.add_header("authorization", f"Bearer {self.token}")
        request.add_header("mcp-protocol-version", "2025-06-18")
        if self.session:
            request.add_header("mcp-session-id", self.session)
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        with urllib.request.urlopen(request, timeout=DEADLINE) as response:
            self.session = response.headers.get("mcp-session-id") or self.session
            body = response.read().decode()
        if "id" not in message:
            return None
        for line in body.splitlines():
            if line.startswith("data:") and line[5:].strip():
                answer = json.loads(line[5:])
                if answer.get("id") == message["id"]:
                    return answer
        if body.strip().startswith("{"):
            return json.loads(body)
        raise AssertionError(f"no answer to {message['method']}: {body[:500]}")

    def request(self, method, params, headers=None):
        rid = self.next_id
        self.next_id += 1
        return self.post({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}, headers)

    def metrics(self, token=True):
        request = urllib.request.Request(self.base + "/metrics")
        if token:
            request.add_header("authorization", f"Bearer {self.token}")
        with urllib.request.urlopen(request, timeout=DEADLINE) as response:
            return response.status, response.headers.get("content-type"), response.read().decode()

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError("the server did not stop on SIGTERM")


def http_turn(server, caller):
    init = server.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                         "clientInfo": {"name": "telemetry-test", "version": "1"}})
    assert "result" in init, init
    server.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    # The trace in the HTTP header only (no _meta): the header is honoured too.
    result = server.request("tools/call", {"name": "codex", "arguments": {"prompt": PROMPT}},
                            headers={"traceparent": caller.traceparent})
    assert "result" in result and not result["result"].get("isError"), result


def scenario_mcp_http(receiver):
    caller = Caller()
    home = Home(plan_turn(), receiver)
    server = HttpMcp(home)
    try:
        http_turn(server, caller)
        # /metrics: behind the token, Prometheus text, bounded labels.
        try:
            server.metrics(token=False)
            raise AssertionError("/metrics answered without the token")
        except urllib.error.HTTPError as error:
            assert error.code == 401, error.code
        status, kind, text = server.metrics()
        assert status == 200 and kind.startswith("text/plain"), (status, kind)
        assert re.search(r'^interpreter_turns_total\{.*outcome="completed".*\} 1$', text, re.M), text
        assert "gen_ai_client_token_usage" in text, text
        assert caller.trace_id not in text and "conversation" not in text
        server.stop()
        check_turn(receiver, caller, home.record(), "mcp-server", "update_plan")
        check_metrics(receiver)
    finally:
        server.proc.kill()
        home.close()


def scenario_metrics_listen_port(receiver):
    """`--metrics-listen`: /metrics on a loopback port of its own, without the token; any
    other address is refused at start."""
    home = Home(plan_turn(), receiver)
    server = HttpMcp(home, ["--metrics-listen", "127.0.0.1:0"])
    try:
        http_turn(server, Caller())
        assert server.metrics_url, "".join(server.stderr)
        with urllib.request.urlopen(server.metrics_url, timeout=DEADLINE) as response:
            text = response.read().decode()
        assert re.search(r'^interpreter_turns_total\{.*outcome="completed".*\} 1$', text, re.M), text
        server.stop()
        refused = subprocess.run(
            [str(BIN_DIR / "interpreter"), "mcp-server", "--listen", "http://127.0.0.1:0/mcp",
             "--metrics-listen", "0.0.0.0:0"],
            cwd=str(home.work), env=home.env, capture_output=True, text=True, timeout=DEADLINE)
        assert refused.returncode == 1, refused
        assert "--metrics-listen must be a loopback address" in refused.stderr, refused.stderr
    finally:
        server.proc.kill()
        home.close()


def scenario_app_server(receiver):
    caller = Caller()
    home = Home(plan_turn(), receiver)
    peer = Stdio(["app-server"], home)
    try:
        init = peer.request("initialize", {"clientInfo": {"name": "telemetry-test", "version": "1"}})
        assert "result" in init, init
        started = peer.request("thread/start", {"approvalPolicy": "never", "sandbox": "read-only"})
        thread_id = started["result"]["thread"]["id"]
        turn = peer.request("turn/start",
                            {"threadId": thread_id, "input": [{"type": "text", "text": PROMPT}]},
                            trace={"traceparent": caller.traceparent, "tracestate": "vendor=caller"})
        assert "result" in turn, turn
        peer.until(lambda m: m.get("method") == "turn/completed")
        peer.close()
        check_turn(receiver, caller, home.record(), "app-server", "update_plan")
        turn_span = next(s for s in receiver.spans() if s["name"] == "invoke_agent interpreter")
        assert turn_span["attributes"]["gen_ai.conversation.id"] == thread_id
        check_metrics(receiver)
    finally:
        peer.proc.kill()
        home.close()


def scenario_acp(receiver):
    caller = Caller()
    home = Home(plan_turn(), receiver)
    peer = Stdio(["acp"], home)
    try:
        init = peer.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        assert "result" in init, init
        session = peer.request("session/new", {"cwd": str(home.work), "mcpServers": []})
        session_id = session["result"]["sessionId"]
        result = peer.request("session/prompt", {
            "sessionId": session_id, "prompt": [{"type": "text", "text": PROMPT}],
            "_meta": {"traceparent": caller.traceparent}})
        assert result.get("result", {}).get("stopReason") == "end_turn", result
        peer.close()
        check_turn(receiver, caller, home.record(), "acp", "update_plan")
        check_metrics(receiver)
    finally:
        peer.proc.kill()
        home.close()


def scenario_prometheus_scrapes_metrics(receiver):
    """Debian's prometheus scrapes the mcp-server's /metrics with the listener's token, and
    its query API answers with what the turn counted."""
    prometheus = os.environ.get("PROMETHEUS")
    if not prometheus:
        print("note: PROMETHEUS is not set (scripts/prometheus ensure); skipping the scrape")
        return
    caller = Caller()
    home = Home(plan_turn(), receiver)
    server = HttpMcp(home)
    storage = Path(tempfile.mkdtemp(prefix="telemetry-prom-"))
    prom = None
    try:
        http_turn(server, caller)
        target = server.base.removeprefix("http://")
        token_file = storage / "token"
        token_file.write_text(server.token)
        (storage / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: interpreter\n"
            f"    authorization:\n      credentials_file: {token_file}\n"
            f"    static_configs:\n      - targets: ['{target}']\n")
        prom_port = free_port()
        prom = subprocess.Popen(
            [prometheus, f"--config.file={storage / 'prometheus.yml'}",
             f"--storage.tsdb.path={storage / 'data'}",
             f"--web.listen-address=127.0.0.1:{prom_port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        api = f"http://127.0.0.1:{prom_port}/api/v1"

        def query(expression):
            url = f"{api}/query?query={urllib.parse.quote(expression)}"
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    answer = json.loads(response.read())
            except (urllib.error.URLError, ConnectionError):
                return None
            return answer["data"]["result"] if answer.get("status") == "success" else None

        up = wait_for("prometheus to scrape the target",
                      lambda: (r := query('up{job="interpreter"}')) and r[0]["value"][1] == "1" and r,
                      deadline=60)
        assert up
        turns = wait_for("the turn counter in prometheus",
                         lambda: query('sum(interpreter_turns_total{outcome="completed"})'), deadline=30)
        assert float(turns[0]["value"][1]) == 1.0, turns
        tokens = wait_for("the token histogram in prometheus",
                          lambda: query('sum by (gen_ai_token_type) (gen_ai_client_token_usage_sum)'),
                          deadline=30)
        by_type = {r["metric"].get("gen_ai_token_type"): float(r["value"][1]) for r in tokens}
        assert by_type == {"input": 240.0, "output": 14.0}, by_type
        server.stop()
    finally:
        if prom:
            prom.terminate()
            prom.wait(timeout=20)
        server.proc.kill()
        home.close()
        shutil.rmtree(storage, ignore_errors=True)


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SCENARIOS = [
    scenario_exec,
    scenario_exec_content_capture,
    scenario_exec_mcp_call_carries_the_trace,
    scenario_exec_grpc,
    scenario_exec_codex_otel_table,
    scenario_mcp_stdio,
    scenario_mcp_http,
    scenario_metrics_listen_port,
    scenario_app_server,
    scenario_acp,
    scenario_prometheus_scrapes_metrics,
]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("-k", action="append", default=[])
    args = parser.parse_args()
    failed = 0
    for scenario in SCENARIOS:
        name = scenario.__name__.removeprefix("scenario_")
        if args.k and not any(k in name for k in args.k):
            continue
        receiver = Receiver()
        started = time.monotonic()
        try:
            scenario(receiver)
            print(f"PASS {name} ({time.monotonic() - started:.1f}s)", flush=True)
        except Exception:  # noqa: BLE001 - report every failure and go on
            failed += 1
            print(f"FAIL {name}", flush=True)
            traceback.print_exc()
        finally:
            receiver.close()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
