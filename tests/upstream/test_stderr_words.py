"""A wordless error result (the Python SDK's ``Error executing tool <name>``) paired with the exception the upstream
wrote on its stderr during that call, over a real stdio subprocess (tests/fixtures/wordless_server.py); the text
rules that pick that line are tested in ``tests/faults/test_stderr_words.py``."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.lowlevel
import mcp_types as types
import pytest

from resilient_mcp.faults import (
    Fault,
    PermanentExecutionError,
    PermissionDenied,
    TransientExecutionError,
)
from resilient_mcp.faults.classify import classify_result
from resilient_mcp.faults.stderr_words import STDERR_META_KEY, wordless
from resilient_mcp.faults.vocab import Basis
from resilient_mcp.policy.config import StdioUpstream
from resilient_mcp.upstream import NoHost, Upstream

SERVER = Path(__file__).resolve().parent.parent / "fixtures" / "wordless_server.py"


@asynccontextmanager
async def _wordless_server() -> AsyncIterator[Upstream]:
    config = StdioUpstream(command=sys.executable, args=[str(SERVER)], connect_timeout_s=120)
    async with Upstream("wordless", config, NoHost()).running(120) as up:
        yield up


async def _fault(up: Upstream, tool: str, arguments: dict[str, str] | None = None) -> Fault:
    result = await up.call_tool(tool, arguments or {}, timeout_s=60)
    assert result.is_error and wordless("\n".join(c.text for c in result.content if isinstance(c, types.TextContent)))
    fault = classify_result(result, tool=None)
    assert fault is not None
    return fault


@pytest.mark.anyio
async def test_a_wordless_crash_is_read_from_what_the_server_wrote_on_stderr_during_the_call() -> None:
    with anyio.fail_after(240):
        async with _wordless_server() as up:
            missing = await _fault(up, "lookup", {"name": "web-9"})
            assert type(missing) is PermanentExecutionError and not missing.is_transient
            assert missing.details["words_from"] == "stderr"
            assert missing.details["stderr_words"] == "LookupError: No such container: web-9"
            assert missing.details["basis"] != Basis.UNRECOGNISED.value
            assert missing.upstream_message is not None and "stderr" in missing.upstream_message
            assert "No such container: web-9" in missing.upstream_message

            refused = await _fault(up, "refused")
            assert type(refused) is TransientExecutionError and refused.is_transient
            assert "ConnectionRefusedError" in refused.details["stderr_words"]

            # in a chained traceback, the tool's own exception (not the cause, not the SDK's wrapper)
            chained = await _fault(up, "chained")
            assert type(chained) is PermissionDenied, chained.details
            assert chained.details["stderr_words"].startswith("PermissionError: authorization denied")


@pytest.mark.anyio
async def test_only_lines_written_since_the_call_was_sent_are_read() -> None:
    with anyio.fail_after(240):
        async with _wordless_server() as up:
            ok = await up.call_tool("noisy", {}, timeout_s=60)
            assert not ok.is_error
            fault = await _fault(up, "lookup", {"name": "web-9"})
            # the earlier "PermissionError: access denied" line belongs to the earlier call: not F2
            assert type(fault) is PermanentExecutionError
            assert "PermissionError" not in fault.details["stderr_words"]


@pytest.mark.anyio
async def test_with_another_call_in_flight_nothing_is_attributed_and_the_observation_says_so() -> None:
    with anyio.fail_after(240):
        async with _wordless_server() as up:
            results: dict[str, types.CallToolResult] = {}

            async def call(tool: str) -> None:
                results[tool] = await up.call_tool(tool, {}, timeout_s=60)

            async with anyio.create_task_group() as tg:
                tg.start_soon(call, "wait_then_fail")
                while not up._windows:  # until the first call is in flight (its window open)
                    await anyio.lowlevel.checkpoint()
                tg.start_soon(call, "release")
            failed = results["wait_then_fail"]
            assert failed.is_error and "unattributed" in (failed.meta or {})[STDERR_META_KEY]
            fault = classify_result(failed, tool=None)
            assert fault is not None and fault.details["basis"] == Basis.UNRECOGNISED.value
            assert not fault.is_transient and "in flight" in fault.details["stderr"]
            assert "words_from" not in fault.details


@pytest.mark.anyio
async def test_through_the_proxy_the_observation_quotes_the_stderr_words_and_says_where_they_came_from() -> None:
    from mcp import Client

    from resilient_mcp.host.server import build_server
    from resilient_mcp.policy import Policy, PolicyFile
    from resilient_mcp.policy.config import ProxyConfig
    from resilient_mcp.proxy.pipeline import Pipeline
    from resilient_mcp.proxy.proxy import Proxy

    cfg = ProxyConfig.model_validate(
        {
            "upstreams": {
                "engine": {
                    "command": sys.executable,
                    "args": [str(SERVER)],
                    "protocol": "legacy",
                    "connect_timeout_s": 120,
                }
            },
            "state_dir": ":memory:",
        }
    )
    proxy = Proxy(cfg, Policy(PolicyFile.model_validate({})), Pipeline)
    with anyio.fail_after(240):
        async with proxy.running(), Client(build_server(proxy), mode="legacy", cache=None) as client:
            result = await client.call_tool("lookup", {"name": "web-9"})
    assert result.is_error and isinstance(result.structured_content, dict)
    obs = result.structured_content
    assert obs["fault_type"] == "D4_permanent_execution_error", obs
    assert obs["details"]["words_from"] == "stderr"
    assert "No such container: web-9" in obs["upstream_message"]["text"]
    assert obs["upstream_message"]["untrusted"] is True
