"""The response cache through the real path (client → proxy → scripted upstream) on a fake clock; the stage alone."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import anyio
import mcp_types as types
import pytest
from structlog.testing import capture_logs

from resilient_mcp.call.chain import ToolCall
from resilient_mcp.call.meta import CACHE_META
from resilient_mcp.policy import CacheRule, ToolRule
from resilient_mcp.proxy.pipeline import Pipeline, Services
from resilient_mcp.stages.cache import Cache, ResponseCache
from tests.conftest import FakeClock
from tests.fixtures.fault_links import observation, text_of
from tests.fixtures.scripted import ScriptedUpstream, error_text, ok_text
from tests.harness import Harness, proxied

pytestmark = pytest.mark.anyio

LIMIT_S = 30
CACHED = {"enabled": True, "ttl_s": 30}


@asynccontextmanager
async def shop(up: ScriptedUpstream, tools: dict[str, Any], clock: FakeClock) -> AsyncIterator[Harness]:
    services = Services(cache=ResponseCache(clock=clock))
    pipeline = partial(Pipeline, services=services)
    async with proxied({"shop": up.server()}, {"tools": tools}, pipeline=pipeline) as h:
        yield h


async def call(h: Harness, name: str, args: dict[str, Any]) -> types.CallToolResult:
    with anyio.fail_after(LIMIT_S):
        return await h.client.call_tool(name, args)


def counter(up: ScriptedUpstream, name: str) -> None:
    up.tool(name, lambda args: ok_text(f"{name} #{up.count(name)}", n=up.count(name)))


def cache_of(result: types.CallToolResult) -> Any:
    return (result.meta or {}).get(CACHE_META)


async def test_an_identical_read_within_the_ttl_is_served_from_the_cache_and_marked(clock: FakeClock) -> None:
    up = ScriptedUpstream(name="shop")
    counter(up, "lookup")
    async with shop(up, {"lookup": {"effect": "read_only", "cache": CACHED}}, clock) as h:
        first = await call(h, "lookup", {"q": "a", "page": 1})
        clock.now += 5
        second = await call(h, "lookup", {"page": 1, "q": "a"})  # same arguments, other key order
    assert up.count("lookup") == 1
    assert cache_of(first) is None
    assert cache_of(second) == {"age_ms": 5000, "ttl_s": 30}
    assert text_of(second) == text_of(first) == "lookup #1"
    assert second.structured_content == first.structured_content == {"n": 1}


async def test_after_the_ttl_the_read_goes_to_the_upstream_again(clock: FakeClock) -> None:
    up = ScriptedUpstream(name="shop")
    counter(up, "lookup")
    async with shop(up, {"lookup": {"effect": "read_only", "cache": CACHED}}, clock) as h:
        await call(h, "lookup", {"q": "a"})
        clock.now += 30
        later = await call(h, "lookup", {"q": "a"})
        again = await call(h, "lookup", {"q": "a"})
    assert up.count("lookup") == 2
    assert cache_of(later) is None and text_of(later) == "lookup #2"
    assert cache_of(again) == {"age_ms": 0, "ttl_s": 30} and text_of(again) == "lookup #2"


async def test_other_arguments_miss_the_cache(clock: FakeClock) -> None:
    up = ScriptedUpstream(name="shop")
    counter(up, "lookup")
    async with shop(up, {"lookup": {"effect": "read_only", "cache": CACHED}}, clock) as h:
        await call(h, "lookup", {"q": "a"})
        other = await call(h, "lookup", {"q": "b"})
    assert up.count("lookup") == 2
    assert cache_of(other) is None


async def test_a_failed_read_is_not_cached(clock: FakeClock) -> None:
    up = ScriptedUpstream(name="shop")
    up.tool(
        "lookup",
        ScriptedUpstream.sequence(lambda a: error_text("service temporarily unavailable"), lambda a: ok_text("found")),
    )
    tools = {"lookup": {"effect": "read_only", "retry": {"enabled": False}, "cache": CACHED}}
    async with shop(up, tools, clock) as h:
        failed = await call(h, "lookup", {"q": "a"})
        found = await call(h, "lookup", {"q": "a"})
        cached = await call(h, "lookup", {"q": "a"})
    assert observation(failed)["fault_type"] == "D1_transient_execution_error"
    assert text_of(found) == "found" and cache_of(found) is None
    assert cache_of(cached) is not None
    assert up.count("lookup") == 2


async def test_the_cache_is_off_by_default(clock: FakeClock) -> None:
    up = ScriptedUpstream(name="shop")
    counter(up, "lookup")
    async with shop(up, {"lookup": {"effect": "read_only"}}, clock) as h:
        await call(h, "lookup", {"q": "a"})
        second = await call(h, "lookup", {"q": "a"})
    assert up.count("lookup") == 2
    assert cache_of(second) is None


async def test_a_tool_that_is_not_read_only_is_never_cached_and_the_admin_is_warned_once(clock: FakeClock) -> None:
    up = ScriptedUpstream(name="shop")
    counter(up, "refresh")
    with capture_logs() as logs:
        async with shop(up, {"refresh": {"effect": "write_idempotent", "cache": CACHED}}, clock) as h:
            h.proxy.rebuild()  # compiled again: no second warning
            await call(h, "refresh", {"q": "a"})
            second = await call(h, "refresh", {"q": "a"})
    assert up.count("refresh") == 2
    assert cache_of(second) is None
    assert [e["tool"] for e in logs if e["event"] == "cache_ignored"] == ["refresh"]


# --- the stage alone --------------------------------------------------------------------------------------------


def read_call(args: dict[str, Any]) -> ToolCall:
    rule = ToolRule.model_validate({"effect": "read_only"})
    return ToolCall(name="lookup", arguments=args, upstream="shop", upstream_tool="lookup", rule=rule)


async def test_an_is_error_result_is_passed_on_but_not_stored(clock: FakeClock) -> None:
    store, sent = ResponseCache(clock=clock), []
    stage = Cache(CacheRule(enabled=True), store)

    async def upstream(call: ToolCall) -> types.CallToolResult:
        sent.append(call.arguments)
        return types.CallToolResult(content=[types.TextContent(text="nope")], is_error=True)

    results = [await stage(read_call({"q": "a"}), upstream) for _ in range(2)]
    assert [r.is_error for r in results] == [True, True]
    assert len(sent) == 2 and store.size(("shop", "lookup")) == 0


async def test_a_hit_is_decided_by_the_cache_and_the_lru_keeps_at_most_max_entries(clock: FakeClock) -> None:
    store = ResponseCache(clock=clock)
    stage = Cache(CacheRule(enabled=True, max_entries=2), store)

    async def upstream(call: ToolCall) -> types.CallToolResult:
        return ok_text(str((call.arguments or {})["q"]))

    for q in ("a", "b", "a", "c"):  # "a" used again, so "b" is the least recently used when "c" arrives
        await stage(read_call({"q": q}), upstream)
    assert store.size(("shop", "lookup")) == 2
    hit = read_call({"q": "a"})
    assert cache_of(await stage(hit, upstream)) is not None and hit.record.decided_by == "cache"
    missed = read_call({"q": "b"})
    assert cache_of(await stage(missed, upstream)) is None and missed.record.decided_by is None
