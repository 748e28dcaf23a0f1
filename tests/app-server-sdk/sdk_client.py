"""The Codex Python SDK (openai-codex, pinned) drives `interpreter app-server` over stdio
against the mock model: it launches our binary through CodexConfig.codex_bin, starts a
thread, runs two turns on it, lists and reads the thread, names and compacts it, and runs a
goal to completion with the goal helpers. Exits non-zero on failure."""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from openai_codex import ApprovalMode, Codex, CodexConfig

BIN_DIR = Path(os.environ.get("INTERPRETER_BIN_DIR", Path(__file__).parent / "../../target/debug")).resolve()


def chunk(delta, finish=None):
    return {"id": "c", "object": "chat.completion.chunk", "model": "mock-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def text_step(text):
    return {"chunks": [chunk({"content": text}), chunk({}, "stop")]}


def command_step(call_id, command):
    call = {"index": 0, "id": call_id, "type": "function",
            "function": {"name": "shell", "arguments": json.dumps({"command": command})}}
    return {"chunks": [chunk({"tool_calls": [call]}), chunk({}, "tool_calls")]}


def update_goal_step(call_id, status):
    call = {"index": 0, "id": call_id, "type": "function",
            "function": {"name": "update_goal", "arguments": json.dumps({"status": status})}}
    return {"chunks": [chunk({"tool_calls": [call]}), chunk({}, "tool_calls")]}


def run_goal(codex, thread):
    """The SDK's goal helpers: a goal whose turns the server starts, to completion."""
    client = codex._client
    state, first_turn = client.start_goal_operation(thread.id, "Write the changelog")
    try:
        seen = []
        while not state.is_finished():
            seen.append(client.next_goal_notification(state).method)
    finally:
        state.finish()
        client.unregister_goal_operation(state)
    assert state.status.value == "complete", (state.status, seen)
    assert seen.count("turn/started") == 2, seen
    assert state.logical_turn_id == first_turn, state
    paused = client.pause_goal(thread.id)
    assert paused.goal.status.value == "paused", paused
    assert paused.goal.objective == "Write the changelog", paused
    assert client.thread_goal_clear(thread.id).cleared is True
    assert client.thread_goal_clear(thread.id).cleared is False


def main():
    with tempfile.TemporaryDirectory() as home_dir, tempfile.TemporaryDirectory() as work_dir:
        home = Path(home_dir)
        script = home / "script.json"
        script.write_text(json.dumps([
            text_step("first answer"),
            command_step("call_1", "echo from-sdk"),
            text_step("second answer"),
            text_step("SUMMARY: a greeting and a command"),
            # The goal's two turns: a start, then the model ends the goal.
            text_step("started on the changelog"),
            update_goal_step("call_goal", "complete"),
            text_step("the changelog is written"),
        ]))
        mock = subprocess.Popen([str(BIN_DIR / "mock-model"), "--script", str(script)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            base_url = json.loads(mock.stdout.readline())["base_url"]
            (home / "config.toml").write_text(
                'model = "mock-model"\nmodel_provider = "mock"\n\n[model_providers.mock]\nname = "mock"\n'
                f'base_url = "{base_url}"\nenv_key = "MOCK_API_KEY"\nwire_api = "chat"\nrequest_max_retries = 0\n')
            config = CodexConfig(
                codex_bin=str(BIN_DIR / "interpreter"),
                cwd=work_dir,
                env={"INTERPRETER_HOME": str(home), "MOCK_API_KEY": "test-key", "RUST_LOG": "warn"},
            )
            with Codex(config) as codex:
                assert codex.metadata.serverInfo.name == "interpreter", codex.metadata
                thread = codex.thread_start(approval_mode=ApprovalMode.deny_all, sandbox=None)
                first = thread.run("hello")
                assert first.final_response == "first answer", first
                assert first.status.value == "completed", first
                second = thread.run("run a command")
                assert second.final_response == "second answer", second
                kinds = [item.root.type for item in second.items]
                assert "commandExecution" in kinds, kinds
                command = next(i.root for i in second.items if i.root.type == "commandExecution")
                assert command.aggregated_output.endswith("from-sdk\n"), command
                listed = codex.thread_list()
                assert [t.id for t in listed.data] == [thread.id], listed
                read = thread.read(include_turns=True)
                assert len(read.thread.turns) == 2, read
                models = codex.models()
                assert models.data[0].id == "mock-model", models
                thread.set_name("Greeting and a command")
                named = thread.read()
                assert named.thread.name == "Greeting and a command", named
                thread.compact()
                # The compaction runs as a turn of its own; wait for the thread to be idle.
                deadline = time.monotonic() + 60
                while True:
                    read = thread.read(include_turns=True)
                    if len(read.thread.turns) == 3 and read.thread.turns[-1].status.value == "completed":
                        break
                    assert time.monotonic() < deadline, read
                    time.sleep(0.1)
                kinds = [item.root.type for item in read.thread.turns[-1].items]
                assert "contextCompaction" in kinds, kinds
                run_goal(codex, thread)
        finally:
            mock.kill()
            mock.wait(timeout=10)
    print("app-server SDK test: 1 passed, 0 failed")


if __name__ == "__main__":
    try:
        main()
    except Exception as exc:  # noqa: BLE001 - report any failure as a test failure
        print(f"app-server SDK test failed: {exc!r}", file=sys.stderr)
        print("app-server SDK test: 0 passed, 1 failed")
        sys.exit(1)
