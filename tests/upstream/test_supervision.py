"""Upstream supervision with real processes: a stdio upstream killed with SIGKILL, idle or in the middle of a call.

The proxy runs as a subprocess (``resilient-mcp serve``) with two probe upstreams; the test is its MCP client.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from tests.helpers import await_until, child_env, probe_argv, read_events, read_pid_file, write_yaml

pytestmark = pytest.mark.anyio


def _text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def _proxy(tmp_path: Path) -> tuple[StdioServerParameters, dict[str, Path]]:
    files = {
        "a_pid": tmp_path / "a.pid",
        "a_events": tmp_path / "a.events",
        "b_pid": tmp_path / "b.pid",
    }
    a = probe_argv(files["a_pid"], files["a_events"])
    b = probe_argv(files["b_pid"])
    # The probe marks `slow` read-only: a policy that says otherwise keeps the in-flight call unretried (its C2 seen).
    policy = write_yaml(tmp_path / "policy.yaml", {"tools": {"a__slow": {"effect": "write_unsafe"}}})
    config = write_yaml(
        tmp_path / "proxy.yaml",
        {
            "upstreams": {"a": {"command": a[0], "args": a[1:]}, "b": {"command": b[0], "args": b[1:]}},
            "state_dir": str(tmp_path / "state"),
            "policies": [str(policy)],
        },
    )
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "resilient_mcp.cli", "--log-format", "json", "serve", "--config", str(config)],
        env=child_env(),
    )
    return params, files


async def _pid(client: Client, tool: str) -> int:
    result = await client.call_tool(tool, {})
    assert not result.is_error, _text(result)
    return int(_text(result))


async def test_killed_idle_upstream_is_restarted_and_serves_the_next_call(tmp_path: Path) -> None:
    params, files = _proxy(tmp_path)
    with anyio.fail_after(60):
        async with Client(params, mode="legacy", cache=None) as client:
            first = await _pid(client, "a__pid")
            b_pid = await _pid(client, "b__pid")
            os.kill(first, signal.SIGKILL)
            # the proxy notices the exit at once and starts a new process, which writes its own pid file
            await await_until(lambda: (p := read_pid_file(files["a_pid"])) is not None and p != first, 20, "restart")
            second = await _pid(client, "a__pid")
            assert second != first
            assert await _pid(client, "b__pid") == b_pid, "the other upstream must be untouched"


async def test_call_in_flight_when_upstream_dies_gets_an_error_result_and_the_next_call_succeeds(
    tmp_path: Path,
) -> None:
    params, files = _proxy(tmp_path)
    with anyio.fail_after(60):
        async with Client(params, mode="legacy", cache=None) as client:
            victim = await _pid(client, "a__pid")
            outcome: dict[str, Any] = {}

            async def slow_call() -> None:
                outcome["result"] = await client.call_tool("a__slow", {"seconds": 30, "steps": 1})

            async with anyio.create_task_group() as tg:
                tg.start_soon(slow_call)
                await await_until(
                    lambda: any(e.startswith("slow_started") for e in read_events(files["a_events"])), 20, "slow call"
                )
                os.kill(victim, signal.SIGKILL)
            result: types.CallToolResult = outcome["result"]
            assert result.is_error
            obs = result.structured_content or {}
            assert obs["fault_type"] == "C2_connection_lost_after_send"
            assert obs["side_effect_status"] == "unknown"
            assert "died" in _text(result)
            echoed = await client.call_tool("a__echo", {"text": "after"})
            assert not echoed.is_error and _text(echoed) == "after"
            assert await _pid(client, "a__pid") != victim
