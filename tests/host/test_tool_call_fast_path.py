"""The tools/call fast path (``ToolCallFastPath``): same answers as the SDK's handler path, without its models."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any, cast

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.server import Server
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.runner import _extract_meta
from mcp.shared.exceptions import MCPError
from mcp_types import methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError

from resilient_mcp.host import toolcall as host_toolcall
from resilient_mcp.host.server import build_server
from resilient_mcp.host.toolcall import ToolCallFastPath
from tests.fixtures.scripted import ScriptedUpstream, error_text, ok_text
from tests.harness import proxied

pytestmark = pytest.mark.anyio

PARAMS: list[Any] = [
    {"name": "echo"},
    {"name": "echo", "arguments": {"x": 1}},
    {"name": "echo", "arguments": None},
    {"name": "echo", "arguments": {}, "_meta": {"progressToken": 7, "trace": "t"}},
    {"name": "echo", "_meta": {"progressToken": "p"}},
    {"name": "echo", "_meta": None},
    {"name": "echo", "_meta": {}},
    {"name": "echo", "_meta": {"progressToken": [1]}},
    {"name": "echo", "_meta": {"progressToken": None}},
    {"name": "echo", "_meta": "x"},
    {"name": "echo", "arguments": [1]},
    {"name": "echo", "arguments": "{}"},
    {"name": 3},
    {"name": None},
    {"arguments": {}},
    {},
    None,
    {"name": "echo", "task": {"ttl": 1000}},
    {"name": "echo", "extra": 1},
]


def _ctx(params: Any, version: str, *, initialized: bool = True) -> ServerRequestContext[Any, Any]:
    session = SimpleNamespace(client_params=object() if initialized else None)
    return ServerRequestContext(
        session=cast(Any, session),
        lifespan_context={},
        protocol_version=version,
        method="tools/call",
        params=params,
        request_id=1,
        meta=_extract_meta(params),
    )


def _sdk_accepts(params: Any, version: str) -> types.CallToolRequestParams | None:
    try:
        methods.validate_client_request("tools/call", version, params)
        return types.CallToolRequestParams.model_validate({} if params is None else params, by_name=False)
    except ValidationError:
        return None


Taken = tuple[str, Any, Any]
"""What the fast path hands to ``run_tool_call``: the tool name, the arguments and the request's ``_meta``."""
FastPath = Callable[[ServerRequestContext[Any, Any]], Awaitable[Taken | None]]


@pytest.fixture
def fast_path(monkeypatch: pytest.MonkeyPatch) -> FastPath:
    """The fast path on one request: what it hands to ``run_tool_call`` (name, arguments, meta), or ``None`` when
    it passes the request on to the SDK (``call_next``)."""
    taken: list[Taken] = []

    async def run_tool_call(proxy: Any, ctx: Any, name: str, arguments: Any, meta: Any) -> types.CallToolResult:
        taken.append((name, arguments, meta))
        return types.CallToolResult(content=[])

    monkeypatch.setattr(host_toolcall, "run_tool_call", run_tool_call)

    async def run(ctx: ServerRequestContext[Any, Any]) -> Taken | None:
        passed: list[str] = []

        async def call_next(ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
            passed.append(ctx.method)
            return {}

        taken.clear()
        await ToolCallFastPath(cast(Any, None))(ctx, call_next)
        assert len(taken) + len(passed) == 1, "the request was neither run nor passed on exactly once"
        return taken[0] if taken else None

    return run


@pytest.mark.parametrize("version", sorted(HANDSHAKE_PROTOCOL_VERSIONS))
@pytest.mark.parametrize("params", PARAMS)
async def test_the_fast_path_takes_only_params_the_sdk_accepts_and_reads_them_as_the_sdk_does(
    params: Any, version: str, fast_path: FastPath
) -> None:
    taken = await fast_path(_ctx(params, version))
    typed = _sdk_accepts(params, version)
    if taken is None:
        return  # the SDK path handles it, rejection included
    assert typed is not None, f"the fast path took params the SDK rejects: {params!r}"
    assert taken == (typed.name, typed.arguments, typed.meta)


async def test_the_fast_path_takes_the_common_shapes_and_leaves_modern_and_uninitialized_calls_to_the_sdk(
    fast_path: FastPath,
) -> None:
    plain = {"name": "echo", "arguments": {"x": 1}, "_meta": {"progressToken": 1}}
    for version in ("2025-11-25", "2024-11-05"):
        taken = await fast_path(_ctx(plain, version))
        assert taken is not None and taken[:2] == ("echo", {"x": 1}), version
    assert await fast_path(_ctx(plain, "2026-07-28")) is None
    assert await fast_path(_ctx(plain, "2025-11-25", initialized=False)) is None


class _Spy:
    """A middleware behind the fast path: sees the methods the fast path passed on to the SDK."""

    def __init__(self) -> None:
        self.methods: list[str] = []

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        self.methods.append(ctx.method)
        return await call_next(ctx)


def _progress_upstream() -> Server[Any]:
    async def list_tools(ctx: ServerRequestContext[Any, Any], params: Any) -> types.ListToolsResult:
        schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
        return types.ListToolsResult(tools=[types.Tool(name="work", input_schema=schema)])

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> Any:
        for i in range(3):
            await ctx.session.report_progress(i + 1, 3, f"step {i + 1}")
        return types.CallToolResult(content=[types.TextContent(text="done")], structured_content={"n": 3})

    return Server("progress", on_list_tools=list_tools, on_call_tool=call_tool)


async def test_a_handshake_era_call_bypasses_the_sdk_handler_and_still_relays_progress() -> None:
    async with proxied({"only": _progress_upstream()}) as h:
        server = build_server(h.proxy)
        spy = _Spy()
        server.middleware.append(spy)
        seen: list[tuple[float, float | None, str | None]] = []

        async def on_progress(p: float, total: float | None, message: str | None) -> None:
            seen.append((p, total, message))

        async with Client(server, mode="legacy", cache=None) as client:
            with anyio.fail_after(5):
                result = await client.call_tool("work", {"n": 3}, progress_callback=on_progress)
        assert not result.is_error, result.content
        assert result.structured_content == {"n": 3}
        assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
        assert "tools/call" not in spy.methods, "the call went through the SDK's handler path"


async def _answers(*, fast: bool) -> list[dict[str, Any]]:
    """The answers of one fresh proxy (its own upstream and session memory) to the same calls."""
    up = ScriptedUpstream()
    up.tool("ok", lambda args: ok_text(f"ok {args}", echoed=args))
    up.tool("bad", lambda args: error_text("it broke", {"retry": False}))
    out: list[dict[str, Any]] = []
    async with proxied({"only": up.server()}) as h:
        server = build_server(h.proxy)
        assert any(isinstance(m, ToolCallFastPath) for m in server.middleware)
        if not fast:
            server.middleware = [m for m in server.middleware if not isinstance(m, ToolCallFastPath)]
        async with Client(server, mode="legacy", cache=None) as client:
            for name, args in [("ok", {"a": 1}), ("bad", {}), ("ok", None), ("bad", {}), ("missing", {"a": 1})]:
                try:
                    out.append(_timeless((await client.call_tool(name, args)).model_dump(exclude={"meta"})))
                except MCPError as exc:
                    out.append(_timeless(exc.error.model_dump()))
    return out


def _timeless(value: Any) -> Any:
    """``value`` without wall-clock measurements (elapsed_ms of attempts), which differ between any two runs."""
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if k != "elapsed_ms"}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


async def test_answers_with_and_without_the_fast_path_are_the_same() -> None:
    fast, slow = await _answers(fast=True), await _answers(fast=False)
    assert fast == slow
    assert fast[-1]["message"] == "Unknown tool: missing"
