"""The official Python MCP client (mcp 2.x, pinned in requirements.txt) drives
`interpreter mcp-server`.

Every scenario runs for each combination of
  - transport: stdio (the SDK spawns the server) and streamable HTTP
    (`--listen http://127.0.0.1:0/mcp`, bearer token from the file the server names), and
  - era: `Client(mode="auto")`, which probes `server/discover` and must end up on
    2026-07-28 (stateless, approvals as InputRequiredResult retries), and
    `Client(mode="legacy")` (initialize handshake, approvals as `elicitation/create`).

Scenarios: list tools; a plain call; an approved command that really runs; a declined
one that does not; no approval request to a client without elicitation; a forged
`requestState` and a replayed one, both refused (2026-07-28 only); a cancel in the
middle of a command; progress during a longer command with a short timeout that
restarts on every progress notification; `codex-reply` after restarting the server; a
background turn followed with codex-status and codex-wait. The model is the
`mock-model` binary with a script per scenario.

Usage: py_client.py [-k SUBSTRING]... (run only scenarios whose id contains one of them).
A failure prints its traceback to stderr; PEER_KEEP=1 keeps the temporary homes.
Prints one PASS/FAIL line per scenario and exits non-zero if any failed."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client, StdioServerParameters, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

BIN_DIR = Path(os.environ.get("INTERPRETER_BIN_DIR", Path(__file__).parent / "../../target/debug")).resolve()
MODERN = "2026-07-28"
SCENARIO_SECONDS = 120


# ---------------------------------------------------------------------------------------
# The scripted model


def chunk(delta, finish=None):
    return {"id": "c", "object": "chat.completion.chunk", "model": "mock-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def command_step(call_id, command):
    call = {"index": 0, "id": call_id, "type": "function",
            "function": {"name": "shell", "arguments": json.dumps({"command": command})}}
    return {"chunks": [chunk({"tool_calls": [call]}), chunk({}, "tool_calls")]}


def text_step(text):
    return {"chunks": [chunk({"content": text}), chunk({}, "stop")]}


class Mock:
    """mock-model with a script, and the home (config.toml) that points the server at it."""

    def __init__(self, steps, *, progress_interval_sec=None):
        self.home = Path(tempfile.mkdtemp(prefix="peer-home-"))
        self.work = Path(tempfile.mkdtemp(prefix="peer-work-"))
        script = self.home / "script.json"
        script.write_text(json.dumps(steps))
        self.proc = subprocess.Popen([str(BIN_DIR / "mock-model"), "--script", str(script)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        base_url = json.loads(self.proc.stdout.readline())["base_url"]
        server_section = "[mcp_server]\nevents = false\n"
        if progress_interval_sec is not None:
            server_section += f"progress_interval_sec = {progress_interval_sec}\n"
        (self.home / "config.toml").write_text(
            # Strict clients (this SDK validates every notification) turn custom events off.
            f'model = "mock-model"\nmodel_provider = "mock"\n\n{server_section}\n'
            '[model_providers.mock]\nname = "mock"\n'
            f'base_url = "{base_url}"\nenv_key = "MOCK_API_KEY"\nwire_api = "chat"\nrequest_max_retries = 0\n')
        self.env = {"PATH": os.environ["PATH"], "HOME": str(self.home), "INTERPRETER_HOME": str(self.home),
                    "MOCK_API_KEY": "k"}

    def stop(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        self.proc.kill()
        self.proc.wait(timeout=10)
        if not os.environ.get("PEER_KEEP"):
            shutil.rmtree(self.home, ignore_errors=True)
            shutil.rmtree(self.work, ignore_errors=True)


# ---------------------------------------------------------------------------------------
# Servers: stdio (spawned by the SDK) or HTTP (spawned here)


class HttpServer:
    """`interpreter mcp-server --listen http://127.0.0.1:0/mcp`: reads the URL and the
    token file from its stderr."""

    def __init__(self, mock: Mock):
        self.proc = subprocess.Popen(
            [str(BIN_DIR / "interpreter"), "mcp-server", "--listen", "http://127.0.0.1:0/mcp"],
            cwd=str(mock.work), env=mock.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True)
        self.url = None
        token_file = None
        ready = threading.Event()
        lines = []

        def pump():
            nonlocal token_file
            for line in self.proc.stderr:
                sys.stderr.write(line)
                lines.append(line)
                if m := re.search(r"listening on (http://\S+)", line):
                    self.url = m.group(1)
                if m := re.search(r"bearer token file: (.+)$", line.rstrip("\n")):
                    token_file = m.group(1).strip()
                if self.url and token_file:
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(30) or not (self.url and token_file):
            self.stop()
            raise AssertionError(f"HTTP server did not announce its URL and token file; stderr: {''.join(lines)!r}")
        path = Path(token_file)
        mode = path.stat().st_mode & 0o777
        assert mode == 0o600, f"token file mode is {oct(mode)}, want 0o600"
        self.token = path.read_text().strip()

    def stop(self):
        self.proc.kill()
        self.proc.wait(timeout=10)


@dataclass
class Peer:
    """What a scenario gets: the connected client and what its callbacks saw."""

    client: Client
    mock: Mock
    elicitations: list = field(default_factory=list)
    rounds: list = field(default_factory=list)
    """The result type of every tools/call round the session sent: on 2026-07-28 an
    approval is an InputRequiredResult round followed by the retry's CallToolResult."""

    def expect_approval_rounds(self, mode):
        want = ["InputRequiredResult", "CallToolResult"] if mode == "auto" else ["CallToolResult"]
        assert self.rounds == want, f"tools/call rounds {self.rounds}, want {want}"


@asynccontextmanager
async def connect(transport, mode, mock, *, decision="approved"):
    """Start a server on `transport` for `mock`'s home and connect a `Client(mode=mode)`.
    The elicitation callback answers every request with `decision` ("decline" answers
    with the decline action); with `decision=None` the client has no callback, so it does
    not declare the elicitation capability."""
    elicitations = []

    async def on_elicit(context, params):
        elicitations.append(params)
        if decision == "decline":
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"decision": decision})

    http = None
    if transport == "stdio":
        server = StdioServerParameters(command=str(BIN_DIR / "interpreter"), args=["mcp-server"],
                                       cwd=str(mock.work), env=mock.env)
    else:
        http = HttpServer(mock)
        http_client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {http.token}"},
                                         timeout=httpx2.Timeout(30, read=300))
        server = streamable_http_client(http.url, http_client=http_client)
    try:
        async with Client(server, mode=mode, elicitation_callback=on_elicit if decision else None,
                          client_info=types.Implementation(name="peer-py", version="0.0.0")) as client:
            if mode == "auto":
                assert client.protocol_version == MODERN, (
                    f"auto mode negotiated {client.protocol_version}, want {MODERN} via server/discover")
            else:
                assert client.protocol_version != MODERN, client.protocol_version
            peer = Peer(client, mock, elicitations)
            session_call_tool = client.session.call_tool

            async def counting_call_tool(*args, **kwargs):
                result = await session_call_tool(*args, **kwargs)
                peer.rounds.append(type(result).__name__)
                return result

            # Client.call_tool drives its MRTR rounds through session.call_tool.
            client.session.call_tool = counting_call_tool
            yield peer
    finally:
        if http is not None:
            await http_client.aclose()
            http.stop()


def codex_args(mock, prompt, **extra):
    return {"prompt": prompt, "cwd": str(mock.work), "sandbox": "danger-full-access", **extra}


async def wait_for(predicate, what, seconds=60):
    end = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await anyio.sleep(0.05)


def alive(pid):
    try:
        return ") Z " not in Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False


# ---------------------------------------------------------------------------------------
# Scenarios: each gets (transport, mode) and runs against a fresh home and server


async def list_tools(transport, mode):
    mock = Mock([])
    try:
        async with connect(transport, mode, mock) as peer:
            tools = await peer.client.list_tools()
            names = [t.name for t in tools.tools]
            for name in ("codex", "codex-reply", "codex-status", "codex-wait"):
                assert name in names, names
            codex = next(t for t in tools.tools if t.name == "codex")
            props = codex.input_schema["properties"]
            for arg in ("prompt", "approval-policy", "sandbox", "background"):
                assert arg in props, sorted(props)
    finally:
        mock.stop()


async def plain_call(transport, mode):
    mock = Mock([text_step("Hello from the mock.")])
    try:
        async with connect(transport, mode, mock) as peer:
            result = await peer.client.call_tool("codex", codex_args(mock, "say hello"))
            assert not result.is_error, result
            assert result.structured_content["content"] == "Hello from the mock.", result
            assert result.structured_content["threadId"], result
            assert any(c.type == "text" and "Hello from the mock." in c.text for c in result.content), result
            assert peer.elicitations == [], peer.elicitations
    finally:
        mock.stop()


async def approved_command(transport, mode):
    mock = Mock([command_step("call_0", "touch approved.txt"), text_step("Made it.")])
    try:
        async with connect(transport, mode, mock) as peer:
            result = await peer.client.call_tool(
                "codex", codex_args(mock, "make a file", **{"approval-policy": "untrusted"}))
            assert not result.is_error, result
            assert result.structured_content["content"] == "Made it.", result
            assert len(peer.elicitations) == 1, peer.elicitations
            peer.expect_approval_rounds(mode)
            elicitation = peer.elicitations[0]
            assert "touch approved.txt" in elicitation.message, elicitation
            assert "decision" in elicitation.requested_schema["properties"], elicitation
            assert (mock.work / "approved.txt").exists(), "the approved command did not run"
    finally:
        mock.stop()


async def declined_command(transport, mode):
    mock = Mock([command_step("call_0", "touch declined.txt"), text_step("Did not make it.")])
    try:
        async with connect(transport, mode, mock, decision="decline") as peer:
            result = await peer.client.call_tool(
                "codex", codex_args(mock, "make a file", **{"approval-policy": "untrusted"}))
            assert len(peer.elicitations) == 1, peer.elicitations
            peer.expect_approval_rounds(mode)
            assert not (mock.work / "declined.txt").exists(), "a declined command ran"
            # A declined command is reported to the model, which ends the turn normally.
            assert not result.is_error, result
            assert result.structured_content["content"] == "Did not make it.", result
    finally:
        mock.stop()


async def no_elicitation_capability(transport, mode):
    """A client that did not declare elicitation is never asked (no elicitation/create, no
    InputRequiredResult); the server's fallback (deny by default) decides and says so."""
    mock = Mock([command_step("call_0", "touch unasked.txt"), text_step("Carried on.")])
    try:
        async with connect(transport, mode, mock, decision=None) as peer:
            result = await peer.client.call_tool(
                "codex", codex_args(mock, "make a file", **{"approval-policy": "untrusted"}))
            assert peer.rounds == ["CallToolResult"], peer.rounds
            assert not result.is_error, result
            assert not (mock.work / "unasked.txt").exists(), "the fallback ran the command"
            content = result.structured_content["content"]
            assert content.startswith("Carried on."), content
            assert "does not support elicitation" in content, content
    finally:
        mock.stop()


async def forged_request_state(transport, mode):
    """A tools/call retry carrying inputResponses and a requestState the server never
    issued must not run anything."""
    mock = Mock([command_step("call_0", "touch forged.txt"), text_step("Forged.")])
    try:
        async with connect(transport, mode, mock) as peer:
            approve = types.ElicitResult(action="accept", content={"decision": "approved"})
            try:
                result = await peer.client.session.call_tool(
                    "codex", codex_args(mock, "make a file", **{"approval-policy": "untrusted"}),
                    input_responses={"approval": approve, "exec-approval": approve},
                    request_state="eyJ0aHJlYWQiOiJmb3JnZWQifQ.Zm9yZ2Vk",
                    allow_input_required=True)
            except MCPError as error:
                refused = f"JSON-RPC error {error.code}: {error}"
            else:
                assert isinstance(result, types.CallToolResult), (
                    f"a forged requestState got {type(result).__name__}, want an error: {result}")
                assert result.is_error, f"a forged requestState was accepted: {result}"
                refused = "isError result"
            await anyio.sleep(1)
            assert not (mock.work / "forged.txt").exists(), "the forged approval ran the command"
            assert peer.elicitations == [], peer.elicitations
            print(f"    forged requestState refused: {refused}")
    finally:
        mock.stop()


async def replayed_request_state(transport, mode):
    """Driving the MRTR rounds by hand: the approval retry runs the command once; sending
    the same retry (same inputResponses, same requestState) again is refused."""
    mock = Mock([command_step("call_0", "echo ran >> runs.txt"), text_step("Ran once."), text_step("Again?")])
    try:
        async with connect(transport, mode, mock) as peer:
            args = codex_args(mock, "run once", **{"approval-policy": "untrusted"})
            first = await peer.client.session.call_tool("codex", args, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult), first
            assert first.request_state, first
            (key, request), = first.input_requests.items()
            assert request.method == "elicitation/create", request
            responses = {key: types.ElicitResult(action="accept", content={"decision": "approved"})}
            done = await peer.client.session.call_tool(
                "codex", args, input_responses=responses, request_state=first.request_state,
                allow_input_required=True)
            assert isinstance(done, types.CallToolResult) and not done.is_error, done
            assert done.structured_content["content"] == "Ran once.", done
            runs = mock.work / "runs.txt"
            assert runs.read_text() == "ran\n", runs.read_text()
            try:
                again = await peer.client.session.call_tool(
                    "codex", args, input_responses=responses, request_state=first.request_state,
                    allow_input_required=True)
            except MCPError as error:
                refused = f"JSON-RPC error {error.code}: {error}"
            else:
                assert isinstance(again, types.CallToolResult) and again.is_error, (
                    f"a replayed requestState was accepted: {again}")
                refused = "isError result"
            await anyio.sleep(1)
            assert runs.read_text() == "ran\n", f"the replay ran the command again: {runs.read_text()!r}"
            print(f"    replayed requestState refused: {refused}")
    finally:
        mock.stop()


async def cancel_command(transport, mode):
    """Cancelling the SDK call (which sends notifications/cancelled, or on 2026-07-28
    HTTP closes the request stream) kills the running command."""
    mock = Mock([command_step("call_0", "echo $$ > sleeper.pid; exec sleep 120"), text_step("Never.")])
    try:
        async with connect(transport, mode, mock) as peer:
            pid_file = mock.work / "sleeper.pid"
            finished = []
            async with anyio.create_task_group() as tg:
                async def run_call():
                    await peer.client.call_tool(
                        "codex", codex_args(mock, "sleep", **{"approval-policy": "never"}))
                    finished.append(True)

                tg.start_soon(run_call)
                await wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), "the command")
                pid = int(pid_file.read_text().strip())
                assert alive(pid)
                tg.cancel_scope.cancel()
            assert not finished, "the call finished instead of being cancelled"
            await wait_for(lambda: not alive(pid), "the command to die after the cancel", 30)
            # The connection is still usable.
            tools = await peer.client.list_tools(cache_mode="bypass")
            assert any(t.name == "codex" for t in tools.tools)
    finally:
        mock.stop()


async def progress_resets_timeout(transport, mode):
    """An 8 s command under a 3 s idle timeout that starts over on every progress
    notification. mcp 2.3.0's own read timeout never restarts on progress, so the
    watchdog lives here: no SDK timeout, and a cancel scope pushed forward by the
    progress callback (cancelling it makes the SDK cancel the request)."""
    mock = Mock([command_step("call_0", "sleep 8"), text_step("Slept.")], progress_interval_sec=1)
    idle_timeout = 3.0
    try:
        async with connect(transport, mode, mock) as peer:
            progress = []
            with anyio.CancelScope() as watchdog:
                watchdog.deadline = anyio.current_time() + idle_timeout

                async def on_progress(value, total, message):
                    progress.append((anyio.current_time(), value, message))
                    watchdog.deadline = anyio.current_time() + idle_timeout

                started = anyio.current_time()
                result = await peer.client.call_tool(
                    "codex", codex_args(mock, "sleep a while", **{"approval-policy": "never"}),
                    progress_callback=on_progress)
            assert not watchdog.cancelled_caught, (
                f"no progress for {idle_timeout}s; progress so far: {progress}")
            elapsed = anyio.current_time() - started
            assert elapsed > 8, elapsed
            assert not result.is_error, result
            assert result.structured_content["content"] == "Slept.", result
            values = [v for _, v, _ in progress]
            assert all(a < b for a, b in zip(values, values[1:])), values
            during = [t for t, _, _ in progress if started + 1 < t < started + 8]
            assert len(during) >= 3, f"want progress during the command, got {progress}"
    finally:
        mock.stop()


async def reply_after_restart(transport, mode):
    mock = Mock([text_step("First answer."), text_step("Second answer.")])
    try:
        async with connect(transport, mode, mock) as peer:
            first = await peer.client.call_tool("codex", codex_args(mock, "first"))
            assert first.structured_content["content"] == "First answer.", first
            thread_id = first.structured_content["threadId"]
        # The server is gone (stdio: the SDK closed it; HTTP: killed); start a new one on
        # the same home.
        async with connect(transport, mode, mock) as peer:
            reply = await peer.client.call_tool("codex-reply", {"threadId": thread_id, "prompt": "second"})
            assert not reply.is_error, reply
            assert reply.structured_content["threadId"] == thread_id, reply
            assert reply.structured_content["content"] == "Second answer.", reply
    finally:
        mock.stop()


async def background_turn(transport, mode):
    """`background: true` returns at once; codex-status and codex-wait follow the turn."""
    mock = Mock([command_step("call_0", "sleep 3"), text_step("Done in the background.")])
    try:
        async with connect(transport, mode, mock) as peer:
            started = time.monotonic()
            first = await peer.client.call_tool(
                "codex", codex_args(mock, "work", background=True, **{"approval-policy": "never"}))
            assert time.monotonic() - started < 2.5, "a background call waited for the turn"
            assert not first.is_error, first
            thread_id = first.structured_content["threadId"]
            assert first.structured_content["status"] == "running", first
            assert first.structured_content["content"] == "", first
            status = await peer.client.call_tool("codex-status", {"threadId": thread_id})
            assert status.structured_content["threadId"] == thread_id, status
            assert status.structured_content["status"] == "running", status
            waited = await peer.client.call_tool("codex-wait", {"threadId": thread_id, "timeoutSec": 1})
            assert waited.structured_content["status"] == "running", waited
            final = await peer.client.call_tool("codex-wait", {"threadId": thread_id, "timeoutSec": 60})
            assert not final.is_error, final
            assert final.structured_content["content"] == "Done in the background.", final
            assert final.structured_content.get("status", "completed") == "completed", final
            status = await peer.client.call_tool("codex-status", {"threadId": thread_id})
            assert status.structured_content["status"] in ("completed", "idle"), status
            assert status.structured_content["content"] == "Done in the background.", status
    finally:
        mock.stop()


SCENARIOS = [list_tools, plain_call, approved_command, declined_command, no_elicitation_capability,
             forged_request_state, replayed_request_state, cancel_command, progress_resets_timeout,
             reply_after_restart, background_turn]


def cases():
    for transport in ("stdio", "http"):
        for mode in ("auto", "legacy"):
            for scenario in SCENARIOS:
                if scenario in (forged_request_state, replayed_request_state) and mode == "legacy":
                    continue  # requestState exists only in 2026-07-28
                yield f"{transport}/{mode}/{scenario.__name__}", scenario, transport, mode


def leaves(error):
    """The exceptions inside (nested) exception groups, or the error itself."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


async def main(filters):
    failed = []
    ran = 0
    for case_id, scenario, transport, mode in cases():
        if filters and not any(f in case_id for f in filters):
            continue
        ran += 1
        started = time.monotonic()
        try:
            with anyio.fail_after(SCENARIO_SECONDS):
                await scenario(transport, mode)
        except Exception as error:  # one scenario's failure must not stop the others
            failed.append(case_id)
            detail = "; ".join("".join(traceback.format_exception_only(leaf)).strip() for leaf in leaves(error))
            print(f"FAIL {case_id} ({time.monotonic() - started:.1f}s): {detail}", flush=True)
            traceback.print_exc()
        else:
            print(f"PASS {case_id} ({time.monotonic() - started:.1f}s)", flush=True)
    print(f"python peer (mcp 2.x): {ran - len(failed)}/{ran} passed")
    if failed:
        print("failed: " + ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("-k", action="append", default=[], help="run only scenarios whose id contains this")
    args = parser.parse_args()
    sys.exit(anyio.run(main, args.k))
