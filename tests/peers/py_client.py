"""The official Python MCP client drives `interpreter mcp-server`: a tool call with an
approval answered by the SDK's elicitation callback, then a cancel sent as
notifications/cancelled, then a reply on the same thread. Exits non-zero on failure."""

import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

BIN_DIR = Path(os.environ.get("INTERPRETER_BIN_DIR", Path(__file__).parent / "../../target/debug"))
DEADLINE = timedelta(seconds=90)


def chunk(delta, finish=None):
    return {"id": "c", "object": "chat.completion.chunk", "model": "mock-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def command_step(call_id, command):
    call = {"index": 0, "id": call_id, "type": "function",
            "function": {"name": "shell", "arguments": json.dumps({"command": command})}}
    return {"chunks": [chunk({"tool_calls": [call]}), chunk({}, "tool_calls")]}


def text_step(text):
    return {"chunks": [chunk({"content": text}), chunk({}, "stop")]}


def start_mock(home, steps):
    script = home / "script.json"
    script.write_text(json.dumps(steps))
    mock = subprocess.Popen([str(BIN_DIR / "mock-model"), "--script", str(script)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    base_url = json.loads(mock.stdout.readline())["base_url"]
    (home / "config.toml").write_text(
        # Strict clients (this SDK validates every notification) turn custom events off.
        'model = "mock-model"\nmodel_provider = "mock"\n\n[mcp_server]\nevents = false\n\n[model_providers.mock]\nname = "mock"\n'
        f'base_url = "{base_url}"\nenv_key = "MOCK_API_KEY"\nwire_api = "chat"\nrequest_max_retries = 0\n')
    return mock


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


async def main():
    home = Path(tempfile.mkdtemp(prefix="peer-home-"))
    work = Path(tempfile.mkdtemp(prefix="peer-work-"))
    mock = start_mock(home, [
        command_step("call_0", "touch from_py.txt"), text_step("Made it."),
        command_step("call_1", "echo $$ > sleeper.pid; exec sleep 120"),
        text_step("Back again."),
    ])
    elicitations = []

    async def on_elicit(context, params):
        elicitations.append(params)
        return types.ElicitResult(action="accept", content={"decision": "approved"})

    server = StdioServerParameters(
        command=str(BIN_DIR / "interpreter"), args=["mcp-server"], cwd=str(work),
        env={"PATH": os.environ["PATH"], "HOME": str(home), "INTERPRETER_HOME": str(home),
             "MOCK_API_KEY": "k"})
    try:
        async with stdio_client(server) as (read, write):
            async with ClientSession(read, write, elicitation_callback=on_elicit,
                                     read_timeout_seconds=DEADLINE) as session:
                await session.initialize()
                tools = await session.list_tools()
                assert [t.name for t in tools.tools] == ["codex", "codex-reply"], tools

                progress = []

                async def on_progress(value, total, message):
                    progress.append(value)

                result = await session.call_tool(
                    "codex", {"prompt": "make a file", "approval-policy": "untrusted",
                              "sandbox": "danger-full-access"},
                    progress_callback=on_progress)
                assert not result.isError, result
                assert result.structuredContent["content"] == "Made it.", result
                thread_id = result.structuredContent["threadId"]
                assert len(elicitations) == 1 and "touch from_py.txt" in elicitations[0].message
                assert (work / "from_py.txt").exists()
                assert progress and all(a < b for a, b in zip(progress, progress[1:])), progress

                # Cancel: the SDK's public notification API with the id of the call.
                pid_file = work / "sleeper.pid"
                async with anyio.create_task_group() as tg:
                    # The id the session will give its next request.
                    request_id = session._request_id

                    async def run_call():
                        await session.call_tool("codex-reply", {"threadId": thread_id, "prompt": "sleep"})
                        raise AssertionError("a cancelled call got a response")

                    tg.start_soon(run_call)
                    await wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), "the command")
                    pid = int(pid_file.read_text().strip())
                    await session.send_notification(types.ClientNotification(types.CancelledNotification(
                        params=types.CancelledNotificationParams(requestId=request_id, reason="user stop"))))
                    await wait_for(lambda: not alive(pid), "the command to die", 30)
                    # No response comes for a cancelled request; stop waiting for one.
                    await anyio.sleep(1)
                    tg.cancel_scope.cancel()

                reply = await session.call_tool("codex-reply", {"threadId": thread_id, "prompt": "go on"})
                assert reply.structuredContent["content"] == "Back again.", reply
    finally:
        mock.stdin.close()
        mock.kill()
        mock.wait(timeout=10)
    print("python peer: ok")


if __name__ == "__main__":
    anyio.run(main)
    sys.exit(0)
