"""Issue 20, items 4 and 5: large results from a remote upstream (a real HTTP server on 127.0.0.1).

Before: the SDK read a streamable-HTTP JSON body whole, without a limit (500 MB took the proxy to 2.6 GB; an endless
body grew until the attempt timed out, ``C3`` maybe executed), and an SSE event over its 1 MiB limit ended the call
as ``C2`` "connection lost, may have executed" and tore a ``type: sse`` upstream down. Now every body and event is
bounded by the upstream's ``max_message_bytes`` as it arrives (``upstream/http_cap.py``): past it the call gets an
``E4_oversized_result`` observation (the result was produced: too large), the rest is never read, and the upstream
stays connected.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from resilient_mcp.host.server import build_server
from resilient_mcp.policy import Policy, PolicyFile
from resilient_mcp.policy.config import ProxyConfig
from resilient_mcp.proxy.pipeline import Pipeline
from resilient_mcp.proxy.proxy import Proxy
from tests.harness import observation, text
from tests.helpers import free_port, running, wait_until

pytestmark = pytest.mark.anyio

HOSTILE = Path(__file__).with_name("hostile_http_upstream.py")
LIMIT = 2_000_000
CALL_S = 60.0


@asynccontextmanager
async def client_of(tmp: Path, transport: str, limit: int | None = LIMIT) -> AsyncIterator[Client]:
    """An in-process proxy in front of the hostile HTTP upstream (a real subprocess on a loopback port)."""
    port = free_port()
    argv = [sys.executable, str(HOSTILE), "--port", str(port), "--sent", str(tmp / "sent")]
    with running(argv, tmp / "hostile.stderr") as process:
        wait_until(lambda: _listening(port), 30, "the hostile upstream listening", process=process)
        path = "/sse" if transport == "sse" else "/mcp"
        upstream: dict[str, Any] = {"url": f"http://127.0.0.1:{port}{path}", "type": transport, "protocol": "legacy"}
        if limit is not None:
            upstream["max_message_bytes"] = limit
        config = ProxyConfig.model_validate({"upstreams": {"h": upstream}, "state_dir": ":memory:"})
        proxy = Proxy(config, Policy(PolicyFile.model_validate({})), Pipeline)
        async with (
            proxy.running(startup_timeout_s=30),
            Client(build_server(proxy), mode="legacy", cache=None) as client,
        ):
            yield client


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _oversized(result: Any) -> dict[str, Any]:
    obs = observation(result)
    assert obs["fault_type"] == "E4_oversized_result", obs
    assert obs["retry_safety"] != "maybe_executed" and obs["details"]["max_message_bytes"] == LIMIT
    return obs


async def test_a_json_result_over_max_message_bytes_is_e4_and_the_upstream_stays_usable(tmp_path: Path) -> None:
    async with client_of(tmp_path, "streamable-http") as client:
        with anyio.fail_after(CALL_S):
            big = await client.call_tool("big_json", {"bytes": LIMIT + 500_000})
            after = await client.call_tool("echo", {"text": "still here"})
    assert _oversized(big)["details"]["original_size_bytes"] > LIMIT
    assert not after.is_error and text(after) == "still here"


async def test_an_endless_json_body_is_stopped_at_the_limit_not_read_until_the_timeout(tmp_path: Path) -> None:
    async with client_of(tmp_path, "streamable-http") as client:
        with anyio.fail_after(CALL_S):
            endless = await client.call_tool("endless_json", {})
            after = await client.call_tool("echo", {"text": "still here"})
            sent = await anyio.to_thread.run_sync(
                lambda: wait_until(lambda: (tmp_path / "sent").exists(), CALL_S, "the endless body's end")
            )
    assert sent and _oversized(endless)
    assert not after.is_error
    # what the server got out before the proxy closed the connection: the limit plus socket buffers, not the stream
    written = int((tmp_path / "sent").read_text().split()[0])
    assert written < LIMIT + 32_000_000, written


async def test_a_streamable_http_sse_event_over_1_mib_arrives_and_one_over_the_limit_is_e4(tmp_path: Path) -> None:
    async with client_of(tmp_path, "streamable-http") as client:
        with anyio.fail_after(CALL_S):
            under = await client.call_tool("big_sse", {"bytes": 1_500_000})  # over the SDK's 1 MiB, under ours
            over = await client.call_tool("big_sse", {"bytes": LIMIT + 100_000})
            after = await client.call_tool("echo", {"text": "still here"})
    assert not under.is_error, observation(under)
    assert _oversized(over) and not after.is_error


async def test_a_legacy_sse_event_over_1_mib_is_e4_and_the_sse_connection_is_kept(tmp_path: Path) -> None:
    async with client_of(tmp_path, "sse", limit=LIMIT) as client:
        with anyio.fail_after(CALL_S):
            over = await client.call_tool("big_sse", {"bytes": 1_200_000})
            after = await client.call_tool("echo", {"text": "same connection"})
    obs = observation(over)
    assert obs["fault_type"] == "E4_oversized_result", obs
    assert obs["details"]["max_message_bytes"] == 1024 * 1024, "type: sse is capped at the SDK's event limit"
    assert not after.is_error and text(after) == "same connection"
