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


async def test_a_2026_era_host_is_served_and_its_envelope_is_not_forwarded_upstream() -> None:
    from mcp import Client
    from mcp.client._memory import InMemoryTransport

    from resilient_mcp.host.server import build_server

    up = ScriptedUpstream()
    up.tool(
        "echo", lambda args: ok_text("hi", v=1), schema={"type": "object", "properties": {"x": {"type": "integer"}}}
    )
    async with proxied({"only": up.server()}, protocol="auto") as h:
        server = build_server(h.proxy)
        async with Client(InMemoryTransport(server), cache=None) as modern:
            assert modern.protocol_version == "2026-07-28"
            result = await modern.call_tool("echo", {"x": 1}, meta={"trace": "t-1"})
        assert not result.is_error, result.content
        assert result.structured_content == {"v": 1}
    assert up.calls == [("echo", {"x": 1})]
    assert up.metas[0].get("trace") == "t-1", "the host's own _meta is forwarded"
    # The envelope the upstream sees is the proxy's own hop (protocol: auto speaks 2026-07-28 to this upstream for a
    # 2026-07-28 host): the proxy's identity, never the host's.
    envelope = {k: v for k, v in up.metas[0].items() if k.startswith("io.modelcontextprotocol/")}
    assert envelope.get("io.modelcontextprotocol/clientInfo", {}).get("name") == "resilient-mcp", envelope


async def test_an_upstream_error_result_keeps_its_own_content_first_and_adds_the_observation() -> None:
    from tests.fixtures.scripted import error_text

    up = ScriptedUpstream()
    up.tool("fail", lambda args: error_text("disk is full"), annotations=types.ToolAnnotations(read_only_hint=True))
    async with proxied({"only": up.server()}, {"tools": {"fail": {"effect": "read_only"}}}) as h:
        result = await h.client.call_tool("fail", {})
    assert result.is_error
    texts = [c.text for c in result.content if isinstance(c, types.TextContent)]
    assert texts[0] == "disk is full", "the upstream's own error text must reach the model unchanged"
    assert texts[1].startswith("TOOL_ERROR:")
    obs = result.structured_content or {}
    assert obs["fault_type"] == "D4_permanent_execution_error"
    assert obs["upstream_message"] == {"untrusted": True, "text": "disk is full"}
