"""Transparent passthrough through the in-memory client → proxy → upstream path."""

from __future__ import annotations

import mcp_types as types
import pytest

from tests.fixtures.scripted import ScriptedUpstream, ok_text
from tests.harness import proxied

pytestmark = pytest.mark.anyio


def _upstream(name: str, *tools: str) -> ScriptedUpstream:
    up = ScriptedUpstream(name=name)
    for t in tools:
        up.tool(t, lambda args, t=t: ok_text(f"{t}:{args}", echoed=args))
    return up


async def test_single_upstream_keeps_tool_names_and_metadata() -> None:
    up = ScriptedUpstream()
    up.tool(
        "search",
        schema={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        output_schema={"type": "object", "properties": {"hits": {"type": "integer"}}},
        annotations=types.ToolAnnotations(title="Search", read_only_hint=True),
        handler=lambda args: ok_text("1 hit", hits=1),
    )
    async with proxied({"only": up.server()}) as h:
        listed = (await h.client.list_tools()).tools
        assert [t.model_dump() for t in listed] == [t.model_dump() for t in up.tools]
        result = await h.client.call_tool("search", {"q": "x"})
        assert not result.is_error
        assert result.structured_content == {"hits": 1}
        assert up.calls == [("search", {"q": "x"})]


async def test_several_upstreams_are_prefixed_and_routed() -> None:
    a, b = _upstream("a", "search"), _upstream("b", "search", "fetch")
    async with proxied({"alpha": a.server(), "beta": b.server()}) as h:
        names = sorted(t.name for t in (await h.client.list_tools()).tools)
        assert names == ["alpha__search", "beta__fetch", "beta__search"]
        await h.client.call_tool("beta__search", {"q": 1})
        assert b.calls == [("search", {"q": 1})] and a.calls == []
