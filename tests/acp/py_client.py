"""The official ACP Python SDK's client side driving `interpreter acp` against the
scripted mock model: streaming, permissions allowed and rejected, cancel during a command,
load after a restart, an editor-supplied MCP server, and the client's file system.

A plain asyncio script: every wait has a deadline, the whole run has one too, and it exits
non-zero when any scenario fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import acp
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    Implementation,
    McpServerStdio,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)

HERE = Path(__file__).resolve().parent
BIN_DIR = Path(os.environ.get("INTERPRETER_BIN_DIR") or HERE / "../../target/debug").resolve()
# Generous for a debug build on a loaded 2-core machine; only a hang reaches it.
DEADLINE = 30.0
SCENARIO_TIMEOUT = 120.0
OVERALL_TIMEOUT = 540.0


# ---- the mock model's script ---------------------------------------------------------


def _chunk(delta: dict, finish_reason: str | None = None) -> dict:
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "model": "mock-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def text_turn(*pieces: str, delay_ms: int = 0) -> dict:
    """One model answer streamed as `pieces`."""
    chunks = [_chunk({"content": p}) for p in pieces] + [_chunk({}, "stop")]
    return {"chunks": chunks, "chunk_delay_ms": delay_ms}


def tool_turn(call_id: str, name: str, args: dict) -> dict:
    """One model answer that calls tool `name` with `args`."""
    call = {"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
    return {"chunks": [_chunk({"tool_calls": [call]}), _chunk({}, "tool_calls")]}


def shell_turn(call_id: str, command: str) -> dict:
    return tool_turn(call_id, "shell", {"command": command})


# ---- checks on what the agent sent ---------------------------------------------------


def text_of(updates: list[dict], kind: str = "agent_message_chunk") -> str:
    return "".join(
        u["content"]["text"]
        for u in updates
        if u.get("sessionUpdate") == kind and u.get("content", {}).get("type") == "text"
    )


def tool_updates(updates: list[dict], call_id: str) -> list[dict]:
    return [
        u
        for u in updates
        if u.get("sessionUpdate") in ("tool_call", "tool_call_update") and u.get("toolCallId") == call_id
    ]


def final_status(updates: list[dict], call_id: str) -> str | None:
    statuses = [u["status"] for u in tool_updates(updates, call_id) if u.get("status")]
    return statuses[-1] if statuses else None


def shown_text(tool_call: dict) -> str:
    """Title and text content: what a person reading the tool call sees."""
    parts = [tool_call.get("title") or ""]
    for item in tool_call.get("content") or []:
        if item.get("type") == "content" and item.get("content", {}).get("type") == "text":
            parts.append(item["content"]["text"])
    return "\n".join(parts)


def choose(params: dict, kind: str) -> RequestPermissionResponse:
    """The permission answer choosing the option of `kind`."""
    for option in params["options"]:
        if option["kind"] == kind:
            return RequestPermissionResponse(outcome=AllowedOutcome(option_id=option["optionId"], outcome="selected"))
    raise AssertionError(f"no {kind} option in {params['options']}")


def check(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def dump(model: Any) -> Any:
    """An SDK model as it looks on the wire."""
    if isinstance(model, list):
        return [dump(m) for m in model]
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def wait_for(probe: Callable[[], Any], what: str, timeout: float = DEADLINE) -> Any:
    """The first truthy `probe()` value, polled until `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s: {what}")
        await asyncio.sleep(0.02)


async def within(awaitable: Any, what: str, timeout: float = DEADLINE) -> Any:
    try:
        return await asyncio.wait_for(awaitable, timeout)
    except asyncio.TimeoutError:
        raise AssertionError(f"timed out after {timeout} s: {what}") from None


# ---- the editor side -----------------------------------------------------------------


class EditorClient:
    """The client callbacks the SDK routes agent messages to. Records everything; tests
    set `on_permission`, `on_read`, `on_write` to answer."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, dict]] = []
        self.permission_requests: list[dict] = []
        self.announced_at_question: list[list[dict]] = []
        self.reads: list[dict] = []
        self.writes: list[dict] = []
        # Raw messages from the agent in arrival order (the SDK's stream observer).
        self.wire: list[dict] = []
        self.sent: list[dict] = []
        self.on_permission: Callable[[dict], RequestPermissionResponse] = self._no_permission
        self.on_read: Callable[[dict], ReadTextFileResponse] = self._no_read
        self.on_write: Callable[[dict], WriteTextFileResponse] = self._no_write

    @staticmethod
    def _no_permission(params: dict) -> RequestPermissionResponse:
        raise AssertionError(f"this test expects no permission request: {params}")

    @staticmethod
    def _no_read(params: dict) -> ReadTextFileResponse:
        raise acp.RequestError.resource_not_found(params["path"])

    @staticmethod
    def _no_write(params: dict) -> WriteTextFileResponse:
        raise AssertionError(f"this test expects no file write: {params}")

    def observe(self, event: Any) -> None:
        (self.wire if event.direction.value == "incoming" else self.sent).append(event.message)

    def updates_of(self, session_id: str) -> list[dict]:
        return [u for s, u in self.updates if s == session_id]

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, dump(update)))

    async def request_permission(self, options: list, session_id: str, tool_call: Any, **kwargs: Any):
        params = {"sessionId": session_id, "toolCall": dump(tool_call), "options": dump(options)}
        self.permission_requests.append(params)
        # What the editor had been shown when the question came.
        self.announced_at_question.append(
            [u for u in self.updates_of(session_id) if u.get("sessionUpdate") == "tool_call"]
        )
        return self.on_permission(params)

    async def read_text_file(self, session_id: str, path: str, line=None, limit=None, **kwargs: Any):
        params = {"sessionId": session_id, "path": path, "line": line, "limit": limit}
        self.reads.append(params)
        return self.on_read(params)

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any):
        params = {"sessionId": session_id, "path": path, "content": content}
        self.writes.append(params)
        return self.on_write(params)


class SdkComplaints(logging.Handler):
    """The SDK logs (and drops) agent messages it cannot parse or handle; collect them."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(self.format(record))


COMPLAINTS = SdkComplaints()
logging.getLogger().addHandler(COMPLAINTS)


class Scenario:
    """A fresh home and project, the mock model, and agents started in them."""

    def __init__(self) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="acp-py-home-"))
        # The agent canonicalizes cwd; compare paths in the same form.
        self.work = Path(tempfile.mkdtemp(prefix="acp-py-work-")).resolve()
        self.model: asyncio.subprocess.Process | None = None
        self.record: dict | None = None
        self.stderr_files: list[Path] = []

    def env(self) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(self.home),
            "INTERPRETER_HOME": str(self.home),
            "MOCK_API_KEY": "k",
        }

    async def start_model(self, turns: list[dict]) -> None:
        script = self.home / "script.json"
        script.write_text(json.dumps(turns))
        self.model = await asyncio.create_subprocess_exec(
            str(BIN_DIR / "mock-model"),
            "--script",
            str(script),
            "--record",
            str(self.home / "record.json"),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        line = await within(self.model.stdout.readline(), "mock-model printing its base_url")
        base_url = json.loads(line)["base_url"]
        (self.home / "config.toml").write_text(
            f'model = "mock-model"\nmodel_provider = "mock"\n\n[model_providers.mock]\nname = "mock"\n'
            f'base_url = "{base_url}"\nenv_key = "MOCK_API_KEY"\nwire_api = "chat"\n'
            f"request_max_retries = 0\nstream_max_retries = 0\n"
        )

    async def finish_model(self) -> dict:
        """Stop the model (closing stdin makes it write its record) and fail on any
        conversation rule it saw broken."""
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

    @contextlib.asynccontextmanager
    async def agent(self, client: EditorClient, capabilities: ClientCapabilities | None = None):
        """`interpreter acp` spawned by the SDK, initialized; yields (connection, process).
        Leaving closes its stdin and waits for it to exit."""
        stderr_path = self.home / f"agent-{len(self.stderr_files)}.stderr"
        self.stderr_files.append(stderr_path)
        with stderr_path.open("wb") as stderr:
            async with acp.spawn_agent_process(
                client,
                str(BIN_DIR / "interpreter"),
                "acp",
                env=self.env(),
                cwd=self.work,
                transport_kwargs={"stderr": stderr, "shutdown_timeout": DEADLINE},
                observers=[client.observe],
            ) as (conn, process):
                init = await within(
                    conn.initialize(
                        protocol_version=1,
                        client_capabilities=capabilities or ClientCapabilities(),
                        client_info=Implementation(name="interpreter-acp-py-test", version="1.0.0"),
                    ),
                    "initialize",
                )
                check(init.protocol_version == 1, f"initialize: {init}")
                yield conn, process

    def stderr(self) -> str:
        parts = []
        for i, path in enumerate(self.stderr_files):
            with contextlib.suppress(OSError):
                parts.append(f"--- agent {i} stderr ---\n{path.read_text(errors='replace')[-8000:]}")
        return "\n".join(parts)

    async def clean_up(self) -> None:
        if self.model is not None and self.model.returncode is None:
            self.model.kill()
            await self.model.wait()
        shutil.rmtree(self.home, ignore_errors=True)
        shutil.rmtree(self.work, ignore_errors=True)


async def new_session(conn: Any, cwd: Path, mcp_servers: list | None = None) -> str:
    response = await within(conn.new_session(cwd=str(cwd), mcp_servers=mcp_servers or []), "session/new")
    return response.session_id


def prompt(conn: Any, session_id: str, text: str):
    return conn.prompt(session_id=session_id, prompt=[acp.text_block(text)])


# ---- scenarios -----------------------------------------------------------------------


async def streams_each_piece_once(s: Scenario) -> None:
    pieces = ["Hel", "lo, ", "wor", "ld", "!"]
    await s.start_model([text_turn(*pieces)])
    client = EditorClient()
    async with s.agent(client) as (conn, _):
        session = await new_session(conn, s.work)
        result = await within(prompt(conn, session, "say hello"), "prompt")
        check(result.stop_reason == "end_turn", f"stop reason {result.stop_reason}")
        shown = text_of(client.updates_of(session))
        check(shown == "".join(pieces), f"streamed text {shown!r}")
    await s.finish_model()


async def _permission(s: Scenario, kind: str) -> None:
    file = "allowed.txt" if kind == "allow_once" else "rejected.txt"
    command = f"touch {file}"
    final_text = "touched it" if kind == "allow_once" else "ok, left it alone"
    await s.start_model([shell_turn("call_touch", command), text_turn(final_text)])
    client = EditorClient()
    client.on_permission = lambda params: choose(params, kind)
    async with s.agent(client) as (conn, _):
        session = await new_session(conn, s.work)
        result = await within(prompt(conn, session, "make the file"), "prompt")
        check(result.stop_reason == "end_turn", f"stop reason {result.stop_reason}")
        check(len(client.permission_requests) == 1, f"permission requests: {client.permission_requests}")
        ask = client.permission_requests[0]
        asked_id = ask["toolCall"]["toolCallId"]
        announced = [u for u in client.announced_at_question[0] if u["toolCallId"] == asked_id]
        check(announced != [], f"question about {asked_id}, announced: {client.announced_at_question[0]}")
        check(
            command in shown_text(ask["toolCall"]) or command in shown_text(announced[0]),
            f"the command is shown: {ask['toolCall']} / {announced[0]}",
        )
        updates = client.updates_of(session)
        check((s.work / file).exists() == (kind == "allow_once"), f"{file} exists: {(s.work / file).exists()}")
        expected = "completed" if kind == "allow_once" else "failed"
        check(final_status(updates, asked_id) == expected, f"tool call updates: {tool_updates(updates, asked_id)}")
        check(text_of(updates) == final_text, f"final text {text_of(updates)!r}")
    await s.finish_model()


async def allowed_command_completes(s: Scenario) -> None:
    await _permission(s, "allow_once")


async def rejected_command_fails(s: Scenario) -> None:
    await _permission(s, "reject_once")


async def cancel_during_a_command(s: Scenario) -> None:
    await s.start_model([shell_turn("call_sleep", "sleep 3 && echo late > late.txt"), text_turn("after the cancel")])
    client = EditorClient()
    client.on_permission = lambda params: choose(params, "allow_once")
    async with s.agent(client) as (conn, _):
        session = await new_session(conn, s.work)
        running = asyncio.ensure_future(prompt(conn, session, "run it"))
        await wait_for(
            lambda: any(u.get("status") == "in_progress" for u in tool_updates(client.updates_of(session), "call_sleep"))
            or running.done(),
            "the command's tool call in progress",
        )
        check(not running.done(), f"the prompt ended before the command ran: {running}")
        cancelled_at = time.monotonic()
        await conn.cancel(session_id=session)
        result = await within(running, "the prompt answering after session/cancel", 10)
        check(result.stop_reason == "cancelled", f"stop reason {result.stop_reason}")
        answered_after = time.monotonic() - cancelled_at
        count_at_answer = len(client.updates_of(session))
        # Well past the command's own end: had it not been killed, late.txt would be there.
        await asyncio.sleep(5)
        check(
            not (s.work / "late.txt").exists(),
            f"the cancelled command ran on (prompt answered {answered_after:.2f} s after the cancel)",
        )
        late = client.updates_of(session)[count_at_answer:]
        check(late == [], f"updates after the cancelled answer: {late}")
        again = await within(prompt(conn, session, "and now?"), "the prompt after the cancel")
        check(again.stop_reason == "end_turn", f"stop reason {again.stop_reason}")
        after = text_of(client.updates_of(session)[count_at_answer:])
        check(after == "after the cancel", f"text after the cancel {after!r}")
    await s.finish_model()


async def load_after_restart_replays_first(s: Scenario) -> None:
    await s.start_model([shell_turn("call_write", "printf hi > out.txt"), text_turn("wrote out.txt")])
    first = EditorClient()
    async with s.agent(first) as (conn, _):
        session = await new_session(conn, s.work)
        await within(conn.set_session_mode(session_id=session, mode_id="full-access"), "session/set_mode")
        result = await within(prompt(conn, session, "please write"), "prompt")
        check(result.stop_reason == "end_turn", f"stop reason {result.stop_reason}")
    # Leaving the block closed stdin and waited for the process to end.
    check((s.work / "out.txt").read_text() == "hi", "out.txt")

    second = EditorClient()
    async with s.agent(second) as (conn, _):
        await within(conn.load_session(cwd=str(s.work), session_id=session, mcp_servers=[]), "session/load")
        seen_at_answer = second.updates_of(session)
        # On the wire: every replayed update comes before the answer to session/load.
        load_id = next(m["id"] for m in second.sent if m.get("method") == "session/load")
        answer_at = next(i for i, m in enumerate(second.wire) if m.get("id") == load_id and "method" not in m)
        replayed = [m for m in second.wire[:answer_at] if m.get("method") == "session/update"]
        check(replayed != [], "no replay before the session/load answer")
        # Only the slash commands, offered once the session is open, may follow the answer.
        late = [
            m
            for m in second.wire[answer_at + 1 :]
            if m.get("method") == "session/update"
            and m["params"]["update"].get("sessionUpdate") != "available_commands_update"
        ]
        check(late == [], f"history replayed after the session/load answer: {late}")
        # And through the SDK: the callbacks had them when the request returned.
        check(text_of(seen_at_answer, "user_message_chunk") == "please write", f"replay: {seen_at_answer}")
        check(text_of(seen_at_answer) == "wrote out.txt", f"replay: {seen_at_answer}")
        card = tool_updates(seen_at_answer, "call_write")
        check(card != [] and card[0]["sessionUpdate"] == "tool_call", f"replay: {seen_at_answer}")
        check("printf hi" in shown_text(card[0]), f"tool call: {card[0]}")
        check(final_status(seen_at_answer, "call_write") == "completed", f"tool call: {card}")
    await s.finish_model()


async def editor_mcp_server(s: Scenario) -> None:
    marker = "hello from the editor"
    await s.start_model([tool_turn("call_echo", "mcp__mock__echo", {"text": marker}), text_turn("the server echoed")])
    client = EditorClient()
    # Whether an MCP call asks is the agent's policy; if it does, allow it.
    client.on_permission = lambda params: choose(params, "allow_once")
    server = McpServerStdio(name="mock", command=str(BIN_DIR / "mock-mcp-server"), args=[], env=[])
    async with s.agent(client) as (conn, _):
        session = await new_session(conn, s.work, [server])
        result = await within(prompt(conn, session, "echo something"), "prompt")
        check(result.stop_reason == "end_turn", f"stop reason {result.stop_reason}")
        updates = client.updates_of(session)
        card = tool_updates(updates, "call_echo")
        check(card != [] and card[0]["sessionUpdate"] == "tool_call", f"updates: {updates}")
        check(final_status(updates, "call_echo") == "completed", f"tool call: {card}")
        check(text_of(updates) == "the server echoed", f"text {text_of(updates)!r}")
    record = await s.finish_model()
    check(len(record["requests"]) == 2, f"model requests: {record['requests']}")
    results = [m for m in record["requests"][1]["messages"] if m.get("role") == "tool"]
    check(
        any(m.get("tool_call_id") == "call_echo" and marker in json.dumps(m.get("content")) for m in results),
        f"the tool result in the second request: {results}",
    )


async def client_file_system(s: Scenario) -> None:
    a_path = s.work / "a.txt"
    new_path = s.work / "new.txt"
    a_path.write_text("one\n")
    await s.start_model(
        [
            tool_turn(
                "call_update",
                "apply_patch",
                {"input": "*** Begin Patch\n*** Update File: a.txt\n@@\n one\n two\n+three\n*** End Patch"},
            ),
            tool_turn("call_add", "apply_patch", {"input": "*** Begin Patch\n*** Add File: new.txt\n+fresh\n*** End Patch"}),
            text_turn("patched both"),
        ]
    )
    client = EditorClient()

    # The editor holds unsaved changes to a.txt; other files read as missing.
    def read(params: dict) -> ReadTextFileResponse:
        if params["path"] == str(a_path):
            return ReadTextFileResponse(content="one\ntwo\n")
        raise acp.RequestError.resource_not_found(params["path"])

    client.on_read = read
    # This editor only records writes (into its buffers): nothing must reach the disk.
    client.on_write = lambda params: WriteTextFileResponse()
    capabilities = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True, write_text_file=True))
    async with s.agent(client, capabilities) as (conn, _):
        session = await new_session(conn, s.work)
        await within(conn.set_session_mode(session_id=session, mode_id="full-access"), "session/set_mode")
        result = await within(prompt(conn, session, "patch the files"), "prompt")
        check(result.stop_reason == "end_turn", f"stop reason {result.stop_reason}")
        updates = client.updates_of(session)
    observed = {
        "reads": client.reads,
        "writes": client.writes,
        "statuses": {"update": final_status(updates, "call_update"), "add": final_status(updates, "call_add")},
        "a.txt on disk": a_path.read_text(),
        "new.txt on disk": new_path.exists(),
    }
    check(any(r["path"] == str(a_path) for r in client.reads), f"fs/read_text_file of a.txt; observed {observed}")
    writes_to = lambda path: [w["content"] for w in client.writes if w["path"] == str(path)]  # noqa: E731
    check(writes_to(a_path) == ["one\ntwo\nthree\n"], f"write of a.txt; observed {observed}")
    check(writes_to(new_path) == ["fresh\n"], f"write of new.txt; observed {observed}")
    check(a_path.read_text() == "one\n", f"a.txt on disk changed; observed {observed}")
    check(not new_path.exists(), f"new.txt written to disk; observed {observed}")
    check(observed["statuses"] == {"update": "completed", "add": "completed"}, f"observed {observed}")
    await s.finish_model()


SCENARIOS = [
    streams_each_piece_once,
    allowed_command_completes,
    rejected_command_fails,
    cancel_during_a_command,
    load_after_restart_replays_first,
    editor_mcp_server,
    client_file_system,
]


async def run_all() -> tuple[int, int]:
    passed = failed = 0
    for scenario_fn in SCENARIOS:
        s = Scenario()
        COMPLAINTS.records.clear()
        started = time.monotonic()
        try:
            await asyncio.wait_for(scenario_fn(s), SCENARIO_TIMEOUT)
            check(COMPLAINTS.records == [], f"the SDK logged errors: {COMPLAINTS.records}")
            passed += 1
            print(f"ok - {scenario_fn.__name__} ({time.monotonic() - started:.1f} s)", flush=True)
        except BaseException as error:  # noqa: BLE001 - report every failure and go on
            if isinstance(error, KeyboardInterrupt):
                raise
            failed += 1
            print(f"not ok - {scenario_fn.__name__}: {error!r}", flush=True)
            traceback.print_exc()
            print(s.stderr(), file=sys.stderr, flush=True)
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
