"""The stdio host's end of input: every request read before stdin closed is answered before the proxy exits.

A host (or a shell pipe: ``printf '...' | resilient-mcp wrap -- server``) may write its requests and close its end at
once. The proxy then answers every request it read, the tools/call requests included, whichever path runs them (the
raw tools/call lane on or off: ``RESILIENT_MCP_RAW_TOOL_CALLS``), and exits: with its result, or, for a request still
running when the input ended, with the SDK's -32000 "Connection closed" (end of input is the host leaving). Run
through a real ``wrap`` process.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import child_env, probe_argv, proxy_argv

_HELLO = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "drain", "version": "1"}}


def _request(rid: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    return message


def _wrap(tmp_path: Path, lines: list[dict[str, Any]], lane: str) -> dict[Any, dict[str, Any]]:
    """The answers (by id) ``wrap -- probe_server`` wrote for ``lines``, sent at once with stdin closed after."""
    done = subprocess.run(
        proxy_argv("wrap", "--", *probe_argv(events=tmp_path / "events")),
        input="".join(json.dumps(line) + "\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=child_env(state_home=tmp_path, RESILIENT_MCP_RAW_TOOL_CALLS=lane),
    )
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return {a["id"]: a for a in answers if "id" in a} | {"stderr": {"text": done.stderr}}


@pytest.mark.parametrize("lane", ["on", "off"])
def test_an_initialize_alone_is_answered_when_stdin_closes_after_it(tmp_path: Path, lane: str) -> None:
    answers = _wrap(tmp_path, [_request(1, "initialize", _HELLO)], lane)
    assert answers.get(1, {}).get("result", {}).get("serverInfo"), answers


@pytest.mark.parametrize("lane", ["on", "off"])
def test_every_request_read_before_stdin_closed_is_answered(tmp_path: Path, lane: str) -> None:
    lines = [
        _request(1, "initialize", _HELLO),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        _request(2, "tools/list", {}),
        _request(3, "tools/call", {"name": "echo", "arguments": {"text": "first"}}),
        _request(4, "tools/call", {"name": "counter_add", "arguments": {"n": 2}}),
        _request(5, "tools/call", {"name": "echo", "arguments": {"text": "last"}}),
    ]
    answers = _wrap(tmp_path, lines, lane)
    stderr = answers.pop("stderr")["text"]
    assert sorted(answers) == [1, 2, 3, 4, 5], (answers, stderr[-4000:])
    assert answers[1]["result"]["serverInfo"]
    expected = {2: None, 3: "first", 4: "2", 5: "last"}
    for rid, text in expected.items():
        answer = answers[rid]
        if "error" in answer:
            assert answer["error"] == {"code": -32000, "message": "Connection closed"}, answer
        elif text is None:
            assert "echo" in {tool["name"] for tool in answer["result"]["tools"]}
        else:
            assert answer["result"]["content"][0]["text"] == text, answer


def test_a_ping_read_before_stdin_closed_is_answered(tmp_path: Path) -> None:
    """The answer is written by the task that sends it: a ping answered as the input ends is not lost in a hand-off
    to a writer task the end of input cancels (before the stdio wire, a ping after ``initialized`` got nothing)."""
    lines = [
        _request(1, "initialize", _HELLO),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        _request(2, "ping"),
    ]
    answers = _wrap(tmp_path, lines, "on")
    stderr = answers.pop("stderr")["text"]
    assert answers.get(2, {}).get("result") == {}, (answers, stderr[-4000:])
