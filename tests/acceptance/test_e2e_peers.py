"""End to end against real third-party MCP servers: what a host sees through the proxy equals what it sees directly.

``resilient-mcp wrap -- CMD`` runs as a real subprocess, driven by the SDK's ``mcp.Client`` over stdio, next to a
second ``Client`` talking to the same server directly. Peers: PyPI ``mcp-server-time==2026.10.19`` and npm
``@modelcontextprotocol/server-everything@2026.8.31`` (tests skip with the reason when one is not installed).

Cancellation is proven on the probe fixture (tests/fixtures/probe_server.py), which records cancellations to a
file: server-everything's ``trigger-long-running-operation`` ignores its abort signal and its SDK only drops the
response, so a cancellation has no effect there that a test could observe. Against server-everything the test
proves what can be seen: the cancelled call ends at once and the proxy stays usable.

Tests that need a peer are marked ``peers``; the probe-based cancellation test needs nothing third-party and is
not, so it runs wherever the package does.
"""

from __future__ import annotations

import json
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
    child_pids,
    node_binary,
    pids_with_env,
    probe_argv,
    proxy_argv,
    read_events,
    server_everything_missing,
    server_time_missing,
    stop_leftovers,
)

pytestmark = pytest.mark.anyio

START_S = 60.0
"""Bound on a whole test that starts both clients (the proxy's startup includes the upstream's)."""

_EVERYTHING_MISSING = server_everything_missing()
_TIME_MISSING = server_time_missing()
needs_everything = pytest.mark.skipif(_EVERYTHING_MISSING is not None, reason=_EVERYTHING_MISSING or "")
needs_time = pytest.mark.skipif(_TIME_MISSING is not None, reason=_TIME_MISSING or "")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --- clients ---------------------------------------------------------------------------------------------------------


async def _no_sampling(
    context: ClientRequestContext, params: types.CreateMessageRequestParams
) -> types.CreateMessageResult | types.ErrorData:
    return types.ErrorData(code=types.INVALID_REQUEST, message="tests do not sample")


async def _no_elicitation(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult | types.ErrorData:
    return types.ErrorData(code=types.INVALID_REQUEST, message="tests do not elicit")


async def _no_roots(context: ClientRequestContext) -> types.ListRootsResult | types.ErrorData:
    return types.ListRootsResult(roots=[])


def _client(
    argv: list[str], errlog: Any, state_home: Path, on_message: ToolListChanges | None = None, mode: str = "legacy"
) -> Client:
    """A legacy-mode ``Client`` over stdio to ``argv``, with the full environment and stderr to ``errlog``.

    It declares sampling, elicitation and roots like the proxy's own upstream connection does: server-everything
    registers some tools only for clients with those capabilities, so the direct view must ask for the same."""
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=child_env(state_home), cwd=REPO)
    return Client(
        stdio_client(params, errlog=errlog),
        mode=mode,
        cache=None,
        sampling_callback=_no_sampling,
        elicitation_callback=_no_elicitation,
        list_roots_callback=_no_roots,
        message_handler=on_message,
    )


@asynccontextmanager
async def direct_and_proxied(
    argv: list[str], logs: Path, changes: ToolListChanges | None = None, mode: str = "legacy", protocol: str = "legacy"
) -> AsyncIterator[tuple[Client, Client]]:
    """One client straight to the server, one through ``resilient-mcp wrap -- argv`` (whose tool list changes
    ``changes`` counts); both stopped on exit, and so are the proxy's upstreams if the proxy left any behind
    (test_lifecycle.py is where that fails a test)."""
    async with AsyncExitStack() as stack:
        direct_log = stack.enter_context((logs / "direct.stderr").open("w"))
        proxy_log = stack.enter_context((logs / "proxy.stderr").open("w"))
        state = logs / "state"
        direct = await stack.enter_async_context(_client(argv, direct_log, state, mode=mode))
        upstreams: list[int] = []
        stack.callback(stop_leftovers, upstreams)  # runs after the proxied client is closed
        proxied = await stack.enter_async_context(
            _client(proxy_argv("wrap", "--protocol", protocol, "--", *argv), proxy_log, state, changes, mode=mode)
        )
        for proxy_pid in pids_with_env("XDG_STATE_HOME", str(state), "resilient_mcp.cli"):
            upstreams.extend(child_pids(proxy_pid))
        yield direct, proxied


def _connections(logs: Path) -> list[str]:
    """The protocol version of each upstream connection the proxy made ready, from its JSON log."""
    lines = (logs / "proxy.stderr").read_text().splitlines()
    ready = [json.loads(line) for line in lines if line.startswith("{") and '"upstream_ready"' in line]
    return [str(r["protocol"]) for r in ready]


def _everything_argv() -> list[str]:
    node = node_binary()
    assert node is not None
    return [node, str(SERVER_EVERYTHING), "stdio"]


def _time_argv() -> list[str]:
    return [str(MCP_SERVER_TIME), "--local-timezone", "UTC"]


def _dumps(items: list[Any], key: str = "name") -> list[dict[str, Any]]:
    return sorted((item.model_dump(mode="json") for item in items), key=lambda d: str(d[key]))


async def _tools(client: Client) -> list[dict[str, Any]]:
    return _upstream_only(_dumps((await client.list_tools()).tools))


class ToolListChanges:
    """A message handler counting the ``notifications/tools/list_changed`` a client receives."""

    def __init__(self) -> None:
        self.count = 0
        self._changed = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.count += 1
            self._changed.set()
            self._changed = anyio.Event()

    async def wait_beyond(self, count: int) -> None:
        """Return once more than ``count`` notifications have arrived."""
        while self.count <= count:
            await self._changed.wait()


async def _settled_tools(
    proxied: Client, changes: ToolListChanges, expected: list[dict[str, Any]], limit_s: float = 15.0
) -> list[dict[str, Any]]:
    """The proxy's tool list once it names the expected tools. An upstream's list_changed right after startup
    (server-everything sends several) is applied asynchronously, so the first listing may predate it; the proxy
    then tells its host with a list_changed of its own, which this waits for (bounded) before listing again."""
    names = [t["name"] for t in expected]
    latest: list[dict[str, Any]] = []
    with anyio.move_on_after(limit_s):
        while True:
            seen = changes.count
            latest = await _tools(proxied)
            if [t["name"] for t in latest] == names:
                break
            await changes.wait_beyond(seen)
    return latest


PROXY_URI_SCHEME = "resilient-mcp://"
PROXY_TOOL_NAMES = {"read_stored_output"}
"""What resilient-mcp adds of its own (the pages of capped outputs); left out when comparing with the upstream."""


def _upstream_only(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        item
        for item in items
        if item.get("name") not in PROXY_TOOL_NAMES
        and not str(item.get("uri") or item.get("uri_template") or "").startswith(PROXY_URI_SCHEME)
    ]


def _texts(result: types.CallToolResult) -> list[str]:
    return [c.text for c in result.content if isinstance(c, types.TextContent)]


# --- mcp-server-time -------------------------------------------------------------------------------------------------


@pytest.mark.peers
@needs_time
async def test_time_server_tools_list_the_same_through_the_proxy_as_directly(tmp_path: Path) -> None:
    changes = ToolListChanges()
    with anyio.fail_after(START_S):
        async with direct_and_proxied(_time_argv(), tmp_path, changes) as (direct, proxied):
            expected = await _tools(direct)
            assert {t["name"] for t in expected} == {"get_current_time", "convert_time"}
            assert await _settled_tools(proxied, changes, expected) == expected


def _undated(value: Any) -> Any:
    """``value`` with calendar dates and weekdays blanked: convert_time uses today's date, which may change between
    the direct and the proxied call (at midnight); the times and offsets stay compared."""
    text = re.sub(r"\d{4}-\d{2}-\d{2}", "DATE", repr(value))
    return re.sub(r"(Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day", "DAY", text)


@pytest.mark.peers
@needs_time
async def test_time_server_convert_time_gives_the_same_result_through_the_proxy(tmp_path: Path) -> None:
    args = {"source_timezone": "UTC", "time": "12:30", "target_timezone": "Asia/Tokyo"}
    with anyio.fail_after(START_S):
        async with direct_and_proxied(_time_argv(), tmp_path) as (direct, proxied):
            want = (await direct.call_tool("convert_time", args)).model_dump(mode="json")
            got = (await proxied.call_tool("convert_time", args)).model_dump(mode="json")
    assert not got["is_error"]
    assert got["structured_content"]["target"]["datetime"].endswith("T21:30:00+09:00")
    assert _undated(got) == _undated(want)


@pytest.mark.peers
@needs_time
async def test_time_server_current_time_has_the_same_shape_through_the_proxy(tmp_path: Path) -> None:
    args = {"timezone": "Asia/Tokyo"}
    with anyio.fail_after(START_S):
        async with direct_and_proxied(_time_argv(), tmp_path) as (direct, proxied):
            want = await direct.call_tool("get_current_time", args)
            got = await proxied.call_tool("get_current_time", args)
    assert not got.is_error
    assert got.structured_content is not None and want.structured_content is not None
    assert got.structured_content.keys() == want.structured_content.keys()
    assert got.structured_content["timezone"] == want.structured_content["timezone"] == "Asia/Tokyo"
    assert got.structured_content["datetime"].endswith("+09:00")
    assert [c.type for c in got.content] == [c.type for c in want.content] == ["text"]


@pytest.mark.peers
@needs_time
async def test_a_2026_host_meets_the_time_server_in_the_2026_era_through_the_proxy(tmp_path: Path) -> None:
    """``wrap --protocol auto`` (the default) with one stdio host: a 2026-07-28 host's one connection to a server
    that speaks that era (mcp-server-time, Python SDK) is a 2026-07-28 one, negotiated as the host would."""
    args = {"source_timezone": "UTC", "time": "12:30", "target_timezone": "Asia/Tokyo"}
    with anyio.fail_after(START_S):
        async with direct_and_proxied(_time_argv(), tmp_path, mode="auto", protocol="auto") as (direct, proxied):
            want = (await direct.call_tool("convert_time", args)).model_dump(mode="json")
            got = (await proxied.call_tool("convert_time", args)).model_dump(mode="json")
            eras = (direct.protocol_version, proxied.protocol_version)
    assert eras == ("2026-07-28", "2026-07-28")
    assert not got["is_error"] and _undated(got) == _undated(want)
    assert _connections(tmp_path) == ["2026-07-28"]  # one connection, in the host's era


# --- server-everything -----------------------------------------------------------------------------------------------

EVERYTHING_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("echo", {"message": "through the proxy"}),
    ("get-sum", {"a": 2, "b": 40}),
    ("get-structured-content", {"location": "New York"}),
    ("get-annotated-message", {"messageType": "error", "includeImage": True}),
    ("get-tiny-image", {}),
    ("get-resource-links", {"count": 2}),
]


@pytest.mark.peers
@needs_everything
async def test_everything_tools_list_the_same_through_the_proxy_as_directly(tmp_path: Path) -> None:
    changes = ToolListChanges()
    with anyio.fail_after(START_S):
        async with direct_and_proxied(_everything_argv(), tmp_path, changes) as (direct, proxied):
            expected = await _tools(direct)
            assert len(expected) >= 13
            assert await _settled_tools(proxied, changes, expected) == expected


@pytest.mark.peers
@needs_everything
async def test_everything_calls_give_the_same_results_through_the_proxy(tmp_path: Path) -> None:
    with anyio.fail_after(START_S):
        async with direct_and_proxied(_everything_argv(), tmp_path) as (direct, proxied):
            for name, args in EVERYTHING_CALLS:
                want = (await direct.call_tool(name, args)).model_dump(mode="json")
                got = (await proxied.call_tool(name, args)).model_dump(mode="json")
                assert not got["is_error"], (name, got)
                assert got == want, name


@pytest.mark.peers
@needs_everything
async def test_everything_progress_reaches_the_client_through_the_proxy(tmp_path: Path) -> None:
    reported: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reported.append((progress, total))

    with anyio.fail_after(START_S):
        async with direct_and_proxied(_everything_argv(), tmp_path) as (_, proxied):
            result = await proxied.call_tool(
                "trigger-long-running-operation", {"duration": 0.3, "steps": 3}, progress_callback=on_progress
            )
    assert not result.is_error
    assert _texts(result) == ["Long running operation completed. Duration: 0.3 seconds, Steps: 3."]
    assert reported == [(1, 3), (2, 3), (3, 3)]


@pytest.mark.peers
@needs_everything
async def test_everything_a_call_cancelled_by_the_client_ends_and_the_proxy_stays_usable(tmp_path: Path) -> None:
    first_progress = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        first_progress.set()

    with anyio.fail_after(START_S):
        async with direct_and_proxied(_everything_argv(), tmp_path) as (_, proxied):
            async with anyio.create_task_group() as tg:
                cancelled = anyio.CancelScope()

                async def long_call() -> None:
                    with cancelled:
                        args = {"duration": 60, "steps": 120}
                        await proxied.call_tool("trigger-long-running-operation", args, progress_callback=on_progress)
                        pytest.fail("the long call finished although it was cancelled")

                tg.start_soon(long_call)
                await first_progress.wait()
                cancelled.cancel()
            with anyio.fail_after(5):
                after = await proxied.call_tool("echo", {"message": "still here"})
    assert cancelled.cancelled_caught
    assert _texts(after) == ["Echo: still here"]


@pytest.mark.peers
@needs_everything
async def test_everything_resources_templates_and_prompts_list_the_same_through_the_proxy(tmp_path: Path) -> None:
    with anyio.fail_after(START_S):
        async with direct_and_proxied(_everything_argv(), tmp_path) as (direct, proxied):
            resources = _dumps((await direct.list_resources()).resources, "uri")
            templates = _dumps((await direct.list_resource_templates()).resource_templates, "uri_template")
            prompts = _dumps((await direct.list_prompts()).prompts)
            assert resources and templates and prompts
            assert _upstream_only(_dumps((await proxied.list_resources()).resources, "uri")) == resources
            proxied_templates = _dumps((await proxied.list_resource_templates()).resource_templates, "uri_template")
            assert _upstream_only(proxied_templates) == templates
            assert _dumps((await proxied.list_prompts()).prompts) == prompts
            want = (await direct.get_prompt("simple-prompt")).model_dump(mode="json")
            assert (await proxied.get_prompt("simple-prompt")).model_dump(mode="json") == want


@pytest.mark.peers
@needs_everything
async def test_everything_reading_a_resource_gives_the_same_contents_through_the_proxy(tmp_path: Path) -> None:
    with anyio.fail_after(START_S):
        async with direct_and_proxied(_everything_argv(), tmp_path) as (direct, proxied):
            static = [r for r in (await direct.list_resources()).resources if "/static/" in str(r.uri)]
            assert static, "server-everything lists no static resource"
            uri = str(static[0].uri)
            want = (await direct.read_resource(uri)).model_dump(mode="json")
            got = (await proxied.read_resource(uri)).model_dump(mode="json")
    assert got["contents"] == want["contents"]
    assert got["contents"][0]["uri"] == uri


# --- cancellation reaches the upstream (probe fixture) ---------------------------------------------------------------


async def test_a_call_cancelled_by_the_client_is_cancelled_upstream_and_the_proxy_stays_usable(tmp_path: Path) -> None:
    events = tmp_path / "probe.events"
    argv = proxy_argv("wrap", "--", *probe_argv(events=events))
    with (tmp_path / "proxy.stderr").open("w") as errlog, anyio.fail_after(START_S):
        async with _client(argv, errlog, tmp_path / "state") as client:
            async with anyio.create_task_group() as tg:
                cancelled = anyio.CancelScope()

                async def long_call() -> None:
                    with cancelled:
                        await client.call_tool("slow", {"seconds": 60, "steps": 60})
                        pytest.fail("the slow call finished although it was cancelled")

                tg.start_soon(long_call)
                started = await await_until(
                    lambda: [e for e in read_events(events) if e.startswith("slow_started ")], 15, "slow call started"
                )
                cancelled.cancel()
            request_id = started[0].split(" ", 1)[1]
            await await_until(lambda: f"cancelled {request_id}" in read_events(events), 10, "upstream cancellation")

            echoed = await client.call_tool("echo", {"text": "after the cancel"})
            assert _texts(echoed) == ["after the cancel"]
            added = await client.call_tool("counter_add", {"n": 5})
            assert _texts(added) == ["5"]
    assert cancelled.cancelled_caught
    lines = read_events(events)
    assert f"slow_done {request_id}" not in lines
    assert lines.count("counter_add 5 5") == 1


@pytest.mark.peers
@needs_everything
async def test_a_2026_host_meets_server_everything_over_its_handshake_connection(tmp_path: Path) -> None:
    """A TypeScript server answers ``server/discover`` with -32601: the one connection falls back to ``initialize``
    (as the host's own does directly), and the 2026-07-28 host is served over it, with the same results as
    directly."""
    with anyio.fail_after(START_S):
        async with direct_and_proxied(_everything_argv(), tmp_path, mode="auto", protocol="auto") as (direct, proxied):
            eras = (direct.protocol_version, proxied.protocol_version)
            for name, args in EVERYTHING_CALLS[:3]:
                want = (await direct.call_tool(name, args)).model_dump(mode="json")
                got = (await proxied.call_tool(name, args)).model_dump(mode="json")
                assert not got["is_error"], (name, got)
                # The 2026-07-28 envelope names the server the host talks to (the proxy); the rest is the upstream's.
                assert set(got.pop("meta") or {}) == {"io.modelcontextprotocol/serverInfo"}
                assert want.pop("meta") is None
                assert got == want, name
    assert eras == ("2025-11-25", "2026-07-28")  # the TypeScript server falls back; the proxy speaks 2026-07-28
    assert _connections(tmp_path) == ["2025-11-25"]  # one connection, no second attempt
