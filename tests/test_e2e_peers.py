"""End to end against real third-party MCP servers: what a host sees through the proxy equals what it sees directly.

``resilient-mcp wrap -- CMD`` runs as a real subprocess, driven by the SDK's ``mcp.Client`` over stdio, next to a
second ``Client`` talking to the same server directly. Peers: PyPI ``mcp-server-time==2026.10.19`` and npm
``@modelcontextprotocol/server-everything@2026.8.31`` (tests skip with the reason when one is not installed).

Cancellation is proven on the probe fixture (tests/fixtures/probe_server.py), which records cancellations to a
file: server-everything's ``trigger-long-running-operation`` ignores its abort signal and its SDK only drops the
response, so a cancellation has no effect there that a test could observe. Against server-everything the test
proves what can be seen: the cancelled call ends at once and the proxy stays usable.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import stdio_client

from tests.helpers import (
    MCP_SERVER_TIME,
    REPO,
    SERVER_EVERYTHING,
    await_until,
    child_env,
    node_binary,
    probe_argv,
    proxy_argv,
    read_events,
    server_everything_missing,
    server_time_missing,
)

pytestmark = pytest.mark.anyio

START_S = 60.0
"""Bound on a whole test that starts both clients (the proxy's startup includes the upstream's)."""

_EVERYTHING_MISSING = server_everything_missing()
_TIME_MISSING = server_time_missing()
needs_everything = [
    pytest.mark.peers,
    pytest.mark.skipif(_EVERYTHING_MISSING is not None, reason=_EVERYTHING_MISSING or ""),
]
needs_time = [pytest.mark.peers, pytest.mark.skipif(_TIME_MISSING is not None, reason=_TIME_MISSING or "")]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --- clients ---------------------------------------------------------------------------------------------------------


async def _no_sampling(ctx: ClientRequestContext, params: types.CreateMessageRequestParams) -> types.ErrorData:
    return types.ErrorData(code=types.INVALID_REQUEST, message="tests do not sample")


async def _no_elicitation(ctx: ClientRequestContext, params: types.ElicitRequestParams) -> types.ErrorData:
    return types.ErrorData(code=types.INVALID_REQUEST, message="tests do not elicit")


async def _no_roots(ctx: ClientRequestContext) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[])


def _client(argv: list[str], errlog: Any) -> Client:
    """A legacy-mode ``Client`` over stdio to ``argv``, with the full environment and stderr to ``errlog``.

    It declares sampling, elicitation and roots like the proxy's own upstream connection does: server-everything
    registers some tools only for clients with those capabilities, so the direct view must ask for the same."""
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=child_env(), cwd=REPO)
    return Client(
        stdio_client(params, errlog=errlog),
        mode="legacy",
        cache=None,
        sampling_callback=_no_sampling,
        elicitation_callback=_no_elicitation,
        list_roots_callback=_no_roots,
    )


@asynccontextmanager
async def direct_and_proxied(argv: list[str], logs: Path) -> AsyncIterator[tuple[Client, Client]]:
    """One client straight to the server, one through ``resilient-mcp wrap -- argv``; both stopped on exit."""
    async with AsyncExitStack() as stack:
        direct_log = stack.enter_context((logs / "direct.stderr").open("w"))
        proxy_log = stack.enter_context((logs / "proxy.stderr").open("w"))
        direct = await stack.enter_async_context(_client(argv, direct_log))
        proxied = await stack.enter_async_context(_client(proxy_argv("wrap", "--", *argv), proxy_log))
        yield direct, proxied


def _everything_argv() -> list[str]:
    node = node_binary()
    assert node is not None
    return [node, str(SERVER_EVERYTHING), "stdio"]


def _time_argv() -> list[str]:
    return [str(MCP_SERVER_TIME), "--local-timezone", "UTC"]


def _dumps(items: list[Any], key: str = "name") -> list[dict[str, Any]]:
    return sorted((item.model_dump(mode="json") for item in items), key=lambda d: str(d[key]))


async def _tools(client: Client) -> list[dict[str, Any]]:
    return _dumps((await client.list_tools()).tools)


async def _settled_tools(proxied: Client, expected: list[dict[str, Any]], limit_s: float = 15.0) -> list[dict[str, Any]]:
    """The proxy's tool list once it names the expected tools: an upstream's list_changed right after startup
    (server-everything sends several) is applied asynchronously, so the first listing may predate it."""
    names = [t["name"] for t in expected]
    latest: list[dict[str, Any]] = []

    async def names_match() -> bool:
        nonlocal latest
        latest = await _tools(proxied)
        return [t["name"] for t in latest] == names

    with anyio.move_on_after(limit_s):
        while not await names_match():
            await anyio.sleep(0.05)
    return latest


def _texts(result: types.CallToolResult) -> list[str]:
    return [c.text for c in result.content if isinstance(c, types.TextContent)]


# --- mcp-server-time -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("_", [None], ids=["mcp-server-time"])
@pytest.mark.usefixtures("_")
async def test_time_server_tools_list_the_same_through_the_proxy_as_directly(tmp_path: Path) -> None:
    pass


del test_time_server_tools_list_the_same_through_the_proxy_as_directly
