"""JupyterLab's ACP chat panel, jupyter-sidekick (PyPI, pinned in
requirements-jupyter.txt), driving `interpreter acp` against the scripted mock model.

jupyter-sidekick is a Jupyter Server extension (the ACP client: it starts the agent,
speaks ACP with the official Python SDK and answers the agent's requests) plus a
JupyterLab panel in the browser that talks to it over REST and one websocket per chat.
This script plays the panel: it runs a real `jupyter-server` on loopback with the
extension configured for `interpreter acp` (through wire_tap.mjs, so the JSON-RPC
exchanged is checked too) and sends what the panel sends: bind a chat, prompt, answer
permission questions and the editor's file reads and writes, switch mode and config
options, close and resume a chat. The browser UI itself is not run.

A plain asyncio script: every wait has a deadline, the whole run has one too, and it exits
non-zero when any scenario fails.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from tornado.websocket import websocket_connect

HERE = Path(__file__).resolve().parent
BIN_DIR = Path(os.environ.get("INTERPRETER_BIN_DIR") or HERE / "../../target/debug").resolve()
DEADLINE = 30.0
SCENARIO_TIMEOUT = 120.0
OVERALL_TIMEOUT = 540.0
TOKEN = "interpreter-acp-test"


# ---- the mock model's script ---------------------------------------------------------


def _chunk(delta: dict, finish_reason: str | None = None) -> dict:
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "model": "mock-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def text_turn(*pieces: str) -> dict:
    return {"chunks": [_chunk({"content": p}) for p in pieces] + [_chunk({}, "stop")]}


def tool_turn(call_id: str, name: str, args: dict) -> dict:
    call = {"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
    return {"chunks": [_chunk({"tool_calls": [call]}), _chunk({}, "tool_calls")]}


def shell_turn(call_id: str, command: str) -> dict:
    return tool_turn(call_id, "shell", {"command": command})


def check(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


async def within(awaitable: Any, what: str, timeout: float = DEADLINE) -> Any:
    try:
        return await asyncio.wait_for(awaitable, timeout)
    except asyncio.TimeoutError:
        raise AssertionError(f"timed out after {timeout} s: {what}") from None


def processes_of(home: Path) -> list[int]:
    """The processes this scenario started (the server, the tap, the agent), found by
    their private HOME."""
    mark = f"HOME={home}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if mark in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                found.append(int(entry))
        except OSError:
            pass
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ---- the scenario: mock model, Jupyter server, the panel's requests -------------------


class Scenario:
    def __init__(self) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="acp-jupyter-home-"))
        self.work = Path(tempfile.mkdtemp(prefix="acp-jupyter-work-")).resolve()
        self.wire_log = self.home / "wire.ndjson"
        self.model: asyncio.subprocess.Process | None = None
        self.server: asyncio.subprocess.Process | None = None
        self.record: dict | None = None
        self.base = ""
        self.http = AsyncHTTPClient()

    def env(self) -> dict[str, str]:
        jupyter = self.home / "jupyter"
        return {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(self.home),
            "INTERPRETER_HOME": str(self.home),
            "MOCK_API_KEY": "k",
            "JUPYTER_CONFIG_DIR": str(jupyter / "config"),
            "JUPYTER_DATA_DIR": str(jupyter / "data"),
            "JUPYTER_RUNTIME_DIR": str(jupyter / "runtime"),
            "JUPYTER_PLATFORM_DIRS": "1",
        }

    async def start_model(self, turns: list[dict]) -> None:
        script = self.home / "script.json"
        script.write_text(json.dumps(turns))
        self.model = await asyncio.create_subprocess_exec(
            str(BIN_DIR / "mock-model"), "--script", str(script), "--record", str(self.home / "record.json"),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )
        line = await within(self.model.stdout.readline(), "mock-model printing its base_url")
        base_url = json.loads(line)["base_url"]
        (self.home / "config.toml").write_text(
            f'model = "mock-model"\nmodel_provider = "mock"\n\n[model_providers.mock]\nname = "mock"\n'
            f'base_url = "{base_url}"\nenv_key = "MOCK_API_KEY"\nwire_api = "chat"\n'
            f"request_max_retries = 0\nstream_max_retries = 0\n"
        )

    async def finish_model(self) -> dict:
        if self.record is None:
            assert self.model is not None
            self.model.stdin.close()
            try:
                await asyncio.wait_for(self.model.wait(), 10)
            except asyncio.TimeoutError:
                self.model.kill()
                await self.model.wait()
            self.record = json.loads((self.home / "record.json").read_text())
        check(self.record["violations"] == [], f"mock model violations: {self.record['violations']}")
        return self.record

    async def start_server(self) -> None:
        """`jupyter-server` on loopback with jupyter-sidekick configured for the agent, as a
        user's jupyter_server_config.json would (see docs/acp.md)."""
        config_dir = self.home / "jupyter" / "config"
        config_dir.mkdir(parents=True)
        node = shutil.which("node")
        check(node is not None, "node is needed for wire_tap.mjs")
        harness = {
            "id": "interpreter",
            "display_name": "Interpreter",
            "command": node,
            "args": [str(HERE / "wire_tap.mjs"), str(self.wire_log), str(BIN_DIR / "interpreter"), "acp"],
        }
        (config_dir / "jupyter_server_config.json").write_text(json.dumps({"AcpExtension": {"harnesses": [harness]}}))
        port = free_port()
        self.base = f"127.0.0.1:{port}"
        log = (self.home / "server.log").open("wb")
        self.server = await asyncio.create_subprocess_exec(
            str(Path(sys.executable).parent / "jupyter-server"),
            "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={TOKEN}", "--ServerApp.open_browser=False",
            "--ServerApp.allow_root=True", f"--ServerApp.root_dir={self.work}",
            cwd=self.work, env=self.env(), stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log,
            start_new_session=True,
        )
        deadline = time.monotonic() + DEADLINE
        while True:
            try:
                await self.get("/api/status")
                return
            except (ConnectionError, OSError, HTTPClientError):
                check(self.server.returncode is None, f"jupyter-server exited: {self.server_log()}")
                check(time.monotonic() < deadline, f"jupyter-server not answering: {self.server_log()}")
                await asyncio.sleep(0.2)

    def server_log(self) -> str:
        path = self.home / "server.log"
        return path.read_text(errors="replace")[-6000:] if path.exists() else ""

    async def request(self, method: str, path: str, body: dict | None = None) -> Any:
        response = await self.http.fetch(HTTPRequest(
            f"http://{self.base}{path}", method=method,
            headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"},
            body=json.dumps(body) if body is not None else None,
            request_timeout=DEADLINE, connect_timeout=DEADLINE,
        ))
        return json.loads(response.body or b"null")

    async def get(self, path: str) -> Any:
        return await self.request("GET", path)

    async def post(self, path: str, body: dict) -> Any:
        return await self.request("POST", path, body)

    # ---- what the agent and the client exchanged (wire_tap.mjs) ----

    def wire(self) -> list[dict]:
        if not self.wire_log.exists():
            return []
        return [json.loads(line) for line in self.wire_log.read_text().splitlines() if line]

    def calls(self, method: str) -> list[dict]:
        """Requests from the client with this method, each with the agent's answer."""
        wire = self.wire()
        found = []
        for request in (e for e in wire if e["dir"] == "in" and e["line"].get("method") == method):
            answer = next((e["line"] for e in wire if e["dir"] == "out" and e["pid"] == request["pid"]
                           and e["line"].get("id") == request["line"]["id"] and "method" not in e["line"]), None)
            found.append({"params": request["line"]["params"], "answer": answer})
        return found

    def wire_summary(self) -> str:
        return "\n".join(f"{e['pid']} {e['dir']} {json.dumps(e['line'])[:300]}" for e in self.wire())[-12000:]

    async def clean_up(self) -> None:
        if self.server is not None and self.server.returncode is None:
            # Stopping the server stops its extension, which closes every chat's agent.
            self.server.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.server.wait(), 10)
            except asyncio.TimeoutError:
                os.killpg(self.server.pid, signal.SIGKILL)
                await self.server.wait()
        if self.model is not None and self.model.returncode is None:
            self.model.kill()
            await self.model.wait()
        for pid in processes_of(self.home):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        shutil.rmtree(self.home, ignore_errors=True)
        shutil.rmtree(self.work, ignore_errors=True)


class Chat:
    """One chat panel: its websocket to the server. `turn()` sends a prompt and collects
    what the panel receives until `turn_end`, answering questions with `answer`."""

    def __init__(self, s: Scenario, chat_id: str) -> None:
        self.s = s
        self.chat_id = chat_id
        self.ws = None
        self.received: list[dict] = []

    async def bind(self) -> dict:
        bound = await self.s.post(f"/jupyter_sidekick/chats/{self.chat_id}/bind",
                                  {"harness_id": "interpreter", "cwd": str(self.s.work)})
        check(bound == {"harness_id": "interpreter"}, f"bind: {bound}")
        return await self.state()

    async def state(self) -> dict:
        return await self.s.get(f"/jupyter_sidekick/chats/{self.chat_id}/state")

    async def connect(self) -> None:
        self.ws = await within(websocket_connect(HTTPRequest(
            f"ws://{self.s.base}/jupyter_sidekick/chats/{self.chat_id}/stream",
            headers={"Authorization": f"token {TOKEN}"}, connect_timeout=DEADLINE, request_timeout=DEADLINE,
        )), "the chat's websocket")

    async def next_message(self, what: str) -> dict:
        raw = await within(self.ws.read_message(), what)
        check(raw is not None, f"the server closed the chat's websocket while waiting for {what}")
        message = json.loads(raw)
        self.received.append(message)
        return message

    async def until(self, kind: str, answer: Callable[[dict], dict | None] | None = None) -> list[dict]:
        """Messages up to and including the first of type `kind`."""
        seen = []
        while True:
            message = await self.next_message(kind)
            seen.append(message)
            if answer is not None and message.get("type") in ("permission_request", "fs_read", "fs_write"):
                reply = answer(message)
                check(reply is not None, f"this test expects no {message}")
                await self.ws.write_message(json.dumps(reply))
            if message.get("type") == kind:
                return seen

    async def until_seen(self, done: Callable[[list[dict]], bool], what: str) -> list[dict]:
        """Messages until `done(all seen so far)` holds."""
        seen: list[dict] = []
        while not done(seen):
            seen.append(await self.next_message(f"{what}; seen so far {seen}"))
        return seen

    async def turn(self, text: str, answer: Callable[[dict], dict | None] | None = None,
                   settled: Callable[[list[dict]], bool] = lambda seen: True) -> list[dict]:
        """Prompt, and collect until `turn_end` and `settled(seen)`: the extension relays
        the agent's updates from tasks of their own, so the last of them can reach the
        panel just after `turn_end` (the agent sent them all before its answer)."""
        await self.ws.write_message(json.dumps({"type": "prompt", "text": text}))
        seen = await self.until("turn_end", answer)
        seen += await self.until_seen(lambda more: settled(seen + more), f"the rest of the turn after {seen}")
        return seen

    async def close(self) -> None:
        if self.ws is not None:
            self.ws.close()
        check(await self.s.post(f"/jupyter_sidekick/chats/{self.chat_id}/close", {}) == {"ok": True}, "close")


def text_of(messages: list[dict], kind: str = "agent_message_chunk") -> str:
    return "".join(m.get("text", "") for m in messages if m.get("type") == kind)


def choose(kind: str) -> Callable[[dict], dict | None]:
    """Answer every permission question with the option of `kind`."""
    def answer(message: dict) -> dict | None:
        if message["type"] != "permission_request":
            return None
        option = next(o for o in message["options"] if o["kind"] == kind)
        return {"type": "permission_response", "request_id": message["request_id"], "option_id": option["option_id"]}
    return answer


def final_status(messages: list[dict], call_id: str) -> str | None:
    statuses = [m["status"] for m in messages if m.get("tool_call_id") == call_id and m.get("status")]
    return statuses[-1] if statuses else None


# ---- scenarios -----------------------------------------------------------------------


async def lists_binds_and_streams(s: Scenario) -> None:
    """The panel lists the agent, binds a chat to it, shows its modes, options and
    commands, and a prompt streams the answer."""
    pieces = ["Hel", "lo ", "from ", "the ", "agent"]
    await s.start_model([text_turn(*pieces)])
    await s.start_server()
    harnesses = (await s.get("/jupyter_sidekick/harnesses"))["harnesses"]
    check({"id": "interpreter", "display_name": "Interpreter", "available": True} in harnesses, f"{harnesses}")
    chat = Chat(s, "first")
    state = await chat.bind()
    check(state["selected_mode_id"] == "workspace-write", f"state: {state}")
    check([m["id"] for m in state["available_modes"]] == ["read-only", "workspace-write", "full-access"], f"{state}")
    options = {o["id"]: o for o in state["config_options"]}
    check(set(options) == {"mode", "model", "reasoning_effort"}, f"config options: {state['config_options']}")
    check(options["model"]["value"] == "mock-model", f"{options['model']}")
    check("high" in [v["id"] for v in options["reasoning_effort"]["options"]], f"{options['reasoning_effort']}")
    # The commands follow the session/new answer.
    deadline = time.monotonic() + DEADLINE
    while not state["available_commands"] and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        state = await chat.state()
    check([c["name"] for c in state["available_commands"]] == ["compact"], f"{state['available_commands']}")
    await chat.connect()
    messages = await chat.turn("say hello", settled=lambda m: text_of(m) == "".join(pieces))
    check(text_of(messages) == "".join(pieces), f"received {messages}")
    [prompt] = s.calls("session/prompt")
    check(prompt["params"]["prompt"] == [{"type": "text", "text": "say hello"}], f"{prompt}")
    check(prompt["answer"]["result"] == {"stopReason": "end_turn"}, f"{prompt}")
    [initialize] = s.calls("initialize")
    check(initialize["params"]["clientCapabilities"]["fs"] == {"readTextFile": True, "writeTextFile": True},
          f"{initialize}")
    await s.finish_model()


async def permission_answered_in_the_panel(s: Scenario) -> None:
    """A permission question shows in the panel; Allow runs the command, Reject does not."""
    await s.start_model([
        shell_turn("call_yes", "touch yes.txt"), text_turn("ran it"),
        shell_turn("call_no", "touch no.txt"), text_turn("left it"),
    ])
    await s.start_server()
    chat = Chat(s, "asks")
    await chat.bind()
    await chat.connect()
    allowed = await chat.turn("make yes.txt", choose("allow_once"), settled=lambda m: text_of(m) == "ran it")
    [question] = [m for m in allowed if m["type"] == "permission_request"]
    check(question["tool_call"]["tool_call_id"] == "call_yes", f"{question}")
    check("touch yes.txt" in question["tool_call"]["title"], f"{question}")
    check({o["kind"] for o in question["options"]} == {"allow_once", "allow_always", "reject_once"}, f"{question}")
    check((s.work / "yes.txt").exists(), "the allowed command did not run")
    check(final_status(allowed, "call_yes") == "completed", f"{allowed}")
    check(text_of(allowed) == "ran it", f"{allowed}")
    rejected = await chat.turn("make no.txt", choose("reject_once"), settled=lambda m: text_of(m) == "left it")
    check(not (s.work / "no.txt").exists(), "the rejected command ran")
    check(final_status(rejected, "call_no") == "failed", f"{rejected}")
    check(text_of(rejected) == "left it", f"{rejected}")
    await s.finish_model()


async def mode_and_options_from_the_panel(s: Scenario) -> None:
    """The panel's mode picker (session/set_mode) and config options
    (session/set_config_option) change what the next prompt does."""
    await s.start_model([shell_turn("call_fa", "touch fa.txt"), text_turn("made it")])
    await s.start_server()
    chat = Chat(s, "modes")
    await chat.bind()
    check(await s.post("/jupyter_sidekick/chats/modes/mode", {"mode_id": "full-access"}) == {"ok": True}, "mode")
    check(await s.post("/jupyter_sidekick/chats/modes/config-option",
                       {"config_id": "reasoning_effort", "value": "high"}) == {"ok": True}, "config option")
    [set_mode] = s.calls("session/set_mode")
    check(set_mode["params"]["modeId"] == "full-access" and "result" in set_mode["answer"], f"{set_mode}")
    [set_option] = s.calls("session/set_config_option")
    check("result" in set_option["answer"], f"{set_option}")
    state = await chat.state()
    check(state["selected_mode_id"] == "full-access", f"{state}")
    await chat.connect()
    # Full access: no question (an unexpected one fails the turn's answer function).
    messages = await chat.turn("make fa.txt", lambda m: None, settled=lambda m: text_of(m) == "made it")
    check((s.work / "fa.txt").exists(), f"the command did not run: {messages}")
    check(final_status(messages, "call_fa") == "completed", f"{messages}")
    record = await s.finish_model()
    check(record["requests"][0].get("reasoning_effort") == "high", f"{record['requests'][0]}")


async def edits_go_through_the_open_document(s: Scenario) -> None:
    """With the file open in JupyterLab, a patch reads the panel's live document (unsaved
    text included) and writes back into it; nothing reaches the disk."""
    (s.work / "a.txt").write_text("one\n")
    patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n one\n two\n+three\n*** End Patch"
    await s.start_model([tool_turn("call_patch", "apply_patch", {"input": patch}), text_turn("patched")])
    await s.start_server()
    chat = Chat(s, "edits")
    await chat.bind()
    await chat.connect()

    def panel(message: dict) -> dict | None:
        if message["type"] == "permission_request":
            return choose("allow_once")(message)
        if message["type"] == "fs_read" and message["path"] == "a.txt":
            return {"type": "fs_read_response", "request_id": message["request_id"], "found": True,
                    "text": "one\ntwo\n"}
        if message["type"] == "fs_write":
            return {"type": "fs_write_response", "request_id": message["request_id"], "applied": True}
        return None

    messages = await chat.turn("patch a.txt", panel, settled=lambda m: text_of(m) == "patched")
    writes = [m for m in messages if m["type"] == "fs_write"]
    check([(w["path"], w["text"]) for w in writes] == [("a.txt", "one\ntwo\nthree\n")], f"{messages}")
    check((s.work / "a.txt").read_text() == "one\n", "a.txt on disk changed")
    check(final_status(messages, "call_patch") == "completed", f"{messages}")
    # The agent read the panel's text (each read answered from the open document).
    reads = [e for e in s.wire() if e["dir"] == "out" and e["line"].get("method") == "fs/read_text_file"]
    check(reads and {e["line"]["params"]["path"] for e in reads} == {str(s.work / "a.txt")}, s.wire_summary())
    await s.finish_model()


async def closed_chat_resumes_with_history(s: Scenario) -> None:
    """A chat closed in the panel is listed by its first message; resuming it replays the
    conversation (session/load) into the panel, and the next prompt continues it."""
    await s.start_model([text_turn("first answer"), text_turn("second answer")])
    await s.start_server()
    chat = Chat(s, "resumable")
    await chat.bind()
    await chat.connect()
    await chat.turn("first question", settled=lambda m: text_of(m) == "first answer")
    await chat.close()
    chats = (await s.get("/jupyter_sidekick/chats"))["chats"]
    [listed] = [c for c in chats if c["chat_id"] == "resumable"]
    check(listed["title"] == "first question", f"{chats}")
    session_id = listed["session_id"]

    resumed = await s.post("/jupyter_sidekick/chats/resumable/resume", {})
    check(resumed == {"harness_id": "interpreter"}, f"resume: {resumed}")
    chat = Chat(s, "resumable")
    await chat.connect()
    # The agent replays everything before it answers session/load (checked on the wire
    # below); the extension may still relay some of it just after its `resumed`.
    replay = await chat.until_seen(
        lambda seen: any(m["type"] == "resumed" for m in seen) and text_of(seen) == "first answer",
        "the replayed conversation and `resumed`")
    check(text_of(replay, "user_message_chunk") == "first question", f"replayed {replay}")
    [load] = s.calls("session/load")
    check(load["params"]["sessionId"] == session_id and "result" in load["answer"], f"{load}")
    wire = s.wire()
    load_pid = next(e["pid"] for e in wire if e["line"].get("method") == "session/load")
    answer_at = next(i for i, e in enumerate(wire) if e["pid"] == load_pid and e["dir"] == "out"
                     and e["line"].get("id") == load["answer"]["id"] and "method" not in e["line"])
    late = [e for e in wire[answer_at + 1:] if e["line"].get("method") == "session/update"
            and e["line"]["params"]["update"]["sessionUpdate"] != "available_commands_update"]
    check(late == [], f"history replayed after the session/load answer: {late}")
    messages = await chat.turn("second question", settled=lambda m: text_of(m) == "second answer")
    check(text_of(messages) == "second answer", f"{messages}")
    record = await s.finish_model()
    said = [m["content"] for m in record["requests"][1]["messages"] if m["role"] in ("user", "assistant")]
    check(said[-3:] == ["first question", "first answer", "second question"], f"{said}")


SCENARIOS = [
    lists_binds_and_streams,
    permission_answered_in_the_panel,
    mode_and_options_from_the_panel,
    edits_go_through_the_open_document,
    closed_chat_resumes_with_history,
]


async def run_all() -> tuple[int, int]:
    passed = failed = 0
    for scenario_fn in SCENARIOS:
        s = Scenario()
        started = time.monotonic()
        try:
            await asyncio.wait_for(scenario_fn(s), SCENARIO_TIMEOUT)
            passed += 1
            print(f"ok - {scenario_fn.__name__} ({time.monotonic() - started:.1f} s)", flush=True)
        except BaseException as error:  # noqa: BLE001 - report every failure and go on
            if isinstance(error, KeyboardInterrupt):
                raise
            failed += 1
            print(f"not ok - {scenario_fn.__name__}: {error!r}", flush=True)
            traceback.print_exc()
            print(f"--- JSON-RPC exchanged ---\n{s.wire_summary()}\n--- jupyter-server ---\n{s.server_log()}",
                  file=sys.stderr, flush=True)
        finally:
            await s.clean_up()
    return passed, failed


def main() -> int:
    try:
        passed, failed = asyncio.run(asyncio.wait_for(run_all(), OVERALL_TIMEOUT))
    except asyncio.TimeoutError:
        print(f"the whole run took longer than {OVERALL_TIMEOUT} s", flush=True)
        return 1
    print(f"{passed} passed, {failed} failed", flush=True)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
