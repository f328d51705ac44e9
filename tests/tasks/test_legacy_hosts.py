"""A handshake-era host (it cannot poll tasks) and a call that outlives its patience, through real processes: the mcp
2.3 ``Client`` in legacy mode over stdio, ``resilient-mcp wrap`` with a policy, the ledger server as the upstream.

The host gets a STILL_RUNNING observation with a handle once ``task.handoff_s`` has passed (set low here; 50 s by
default, under the 60 s common hosts wait); the same call again waits for the same execution; ``read_task_result``
returns the result once the upstream answers. The ledger counts executions: one.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from tests.helpers import await_until, child_env, proxy_argv, write_yaml

pytestmark = pytest.mark.anyio

LEDGER = Path(__file__).parents[1] / "fixtures" / "ledger_server.py"
LIMIT_S = 120.0


def _text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


async def test_a_legacy_host_gets_a_handle_then_the_result_of_one_execution(tmp_path: Path) -> None:
    ledger, gate = tmp_path / "ledger.txt", tmp_path / "gate"
    long_running = {"timeouts": {"attempt_s": 600, "total_s": 600}, "task": {"handoff_s": 1}}
    policy = write_yaml(tmp_path / "policy.yaml", {"version": 1, "tools": {"append": long_running}})
    argv = proxy_argv("wrap", "--policy", str(policy), "--state-dir", str(tmp_path / "state"), "--")
    argv += [sys.executable, str(LEDGER), "--ledger", str(ledger)]
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=child_env(tmp_path / "xdg"))
    with anyio.fail_after(LIMIT_S):
        async with Client(params, mode="legacy") as client:
            assert "read_task_result" not in {t.name for t in (await client.list_tools()).tools}
            first = await client.call_tool("append", {"entry": "report", "gate": str(gate)})
            assert first.is_error and _text(first).startswith("STILL_RUNNING: append is still running")
            observation = first.structured_content
            assert observation is not None and observation["code"] == "STILL_RUNNING"
            handle = observation["details"]["handle"]
            assert f'read_task_result(handle="{handle}")' in _text(first)
            await await_until(lambda: _lines(ledger) == ["report"], LIMIT_S, "the upstream's side effect")

            again = await client.call_tool("append", {"entry": "report", "gate": str(gate)})
            assert again.structured_content is not None
            assert again.structured_content["details"]["handle"] == handle, "the same call joins the running one"
            assert "read_task_result" in {t.name for t in (await client.list_tools()).tools}

            waiting = await client.call_tool("read_task_result", {"handle": handle, "wait_s": 0})
            assert waiting.is_error and waiting.structured_content is not None
            assert waiting.structured_content["code"] == "STILL_RUNNING"

            gate.touch()
            done = await client.call_tool("read_task_result", {"handle": handle, "wait_s": 50})
            assert not done.is_error and _text(done) == "appended report"
            unknown = await client.call_tool("read_task_result", {"handle": "not-a-handle"})
            assert unknown.is_error and _text(unknown).startswith("UNKNOWN_HANDLE")
    assert _lines(ledger) == ["report"], "one execution, whatever the host did meanwhile"
