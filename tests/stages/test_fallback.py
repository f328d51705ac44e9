"""The fallback stage through the real path: client → proxy (all stages) → scripted upstream.

The breaker's board runs on a fake clock and the retry stage sleeps through a recorder (``Services``), so nothing
here waits for real time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from resilient_mcp.call.meta import FALLBACK_META
from resilient_mcp.stages.breaker import BreakerBoard
from tests.fixtures.fault_links import SleepRecorder, observation, recording_pipeline, text_of
from tests.fixtures.scripted import ScriptedUpstream, ok_text
from tests.harness import Harness, proxied

pytestmark = pytest.mark.anyio

LIMIT_S = 30


def internal_error(args: dict[str, Any]) -> types.CallToolResult:
    raise MCPError(types.INTERNAL_ERROR, "backend unavailable")  # D1, transient, maybe executed


def rule(effect: str, **more: Any) -> dict[str, Any]:
    return {"effect": effect, "timeouts": {"attempt_s": 5, "total_s": 60}, **more}


@asynccontextmanager
async def shop(up: ScriptedUpstream, tools: dict[str, Any]) -> AsyncIterator[Harness]:
    pipeline = recording_pipeline(SleepRecorder(), board=BreakerBoard(clock=lambda: 1_000.0))
    async with proxied({"shop": up.server()}, {"tools": tools}, pipeline=pipeline) as h:
        yield h


async def call(h: Harness, name: str, args: dict[str, Any]) -> types.CallToolResult:
    with anyio.fail_after(LIMIT_S):
        return await h.client.call_tool(name, args)


def fallback_of(result: types.CallToolResult) -> Any:
    return (result.meta or {}).get(FALLBACK_META)


async def test_an_open_circuit_is_answered_by_one_call_of_the_read_only_fallback_and_the_result_says_so() -> None:
    up = ScriptedUpstream(name="shop")
    up.tool("lookup", internal_error)
    up.tool("lookup_cached", lambda args: ok_text(f"cached {args['q']}"))
    tools = {
        "lookup": rule(
            "read_only",
            retry={"enabled": False},
            breaker={"failure_threshold": 1},
            fallback=["lookup_cached"],
            fallback_call=True,
        ),
        "lookup_cached": rule("read_only"),
    }
    async with shop(up, tools) as h:
        await call(h, "lookup", {"q": "a"})  # fails once: the tool's circuit opens
        assert up.count("lookup") == 1
        before = up.count("lookup_cached")
        result = await call(h, "lookup", {"q": "b"})
    assert not result.is_error
    assert up.count("lookup") == 1, "the open circuit sent nothing to the failing tool"
    assert up.count("lookup_cached") == before + 1
    assert up.calls[-1] == ("lookup_cached", {"q": "b"}), "the fallback gets the same arguments"
    assert fallback_of(result) == {"from": "lookup", "to": "lookup_cached", "reason": "C5_persistent_outage"}
    assert text_of(result) == (
        "cached b\n[resilient-mcp: lookup failed (C5_persistent_outage); this is the result of its fallback "
        "lookup_cached]"
    )


async def test_a_transient_fault_that_outlasts_the_retries_is_answered_by_the_fallback() -> None:
    up = ScriptedUpstream(name="shop")
    up.tool("lookup", internal_error)
    up.tool("lookup_cached", lambda args: ok_text("cached"))
    tools = {
        "lookup": rule("read_only", fallback=["lookup_cached"], fallback_call=True),
        "lookup_cached": rule("read_only"),
    }
    async with shop(up, tools) as h:
        result = await call(h, "lookup", {"q": "a"})
    assert up.count("lookup") == 2, "a maybe-executed read is tried twice before the fallback"
    assert up.count("lookup_cached") == 1
    assert fallback_of(result) == {"from": "lookup", "to": "lookup_cached", "reason": "D1_transient_execution_error"}


async def test_without_fallback_call_the_fallbacks_are_only_named() -> None:
    up = ScriptedUpstream(name="shop")
    up.tool("lookup", internal_error)
    up.tool("lookup_cached", lambda args: ok_text("cached"))
    tools = {"lookup": rule("read_only", fallback=["lookup_cached"]), "lookup_cached": rule("read_only")}
    async with shop(up, tools) as h:
        result = await call(h, "lookup", {"q": "a"})
    assert observation(result)["fault_type"] == "D1_transient_execution_error"
    assert up.count("lookup_cached") == 0


async def test_a_fallback_that_is_not_read_only_is_skipped_unless_fallback_writes_allows_it() -> None:
    up = ScriptedUpstream(name="shop")
    up.tool("lookup", internal_error)
    up.tool("lookup_live", lambda args: ok_text("live"))
    base = rule("read_only", retry={"enabled": False}, fallback=["lookup_live"], fallback_call=True)
    writer = rule("write_idempotent")
    async with shop(up, {"lookup": base, "lookup_live": writer}) as h:
        refused = await call(h, "lookup", {"q": "a"})
    assert up.count("lookup_live") == 0
    obs = observation(refused)
    assert obs["fault_type"] == "D1_transient_execution_error"
    assert obs["details"]["fallback_tried"] == [{"tool": "lookup_live", "outcome": "not_read_only"}]

    async with shop(up, {"lookup": {**base, "fallback_writes": True}, "lookup_live": writer}) as h:
        allowed = await call(h, "lookup", {"q": "a"})
    assert up.count("lookup_live") == 1
    assert text_of(allowed).startswith("live")
    assert fallback_of(allowed)["to"] == "lookup_live"


async def test_an_argument_fault_never_falls_back() -> None:
    up = ScriptedUpstream(name="shop")
    schema = {"type": "object", "properties": {"q": {"type": "integer"}}, "required": ["q"]}
    up.tool("lookup", lambda args: ok_text("found"), schema=schema)
    up.tool("lookup_cached", lambda args: ok_text("cached"))
    tools = {
        "lookup": rule("read_only", fallback=["lookup_cached"], fallback_call=True),
        "lookup_cached": rule("read_only"),
    }
    async with shop(up, tools) as h:
        result = await call(h, "lookup", {"q": "not a number"})
    assert observation(result)["fault_type"] == "B2_schema_violation"
    assert up.calls == []


async def test_a_write_that_may_have_run_never_falls_back() -> None:
    up = ScriptedUpstream(name="shop")
    up.tool("create_order", internal_error)
    up.tool("queue_order", lambda args: ok_text("queued"))
    tools = {
        "create_order": rule("write_unsafe", fallback=["queue_order"], fallback_call=True, fallback_writes=True),
        "queue_order": rule("write_unsafe"),
    }
    async with shop(up, tools) as h:
        result = await call(h, "create_order", {"item": "x"})
    obs = observation(result)
    assert obs["fault_type"] == "D1_transient_execution_error"
    assert obs["side_effect_status"] == "unknown"
    assert "fallback_tried" not in obs["details"]
    assert up.count("create_order") == 1 and up.count("queue_order") == 0


async def test_when_every_fallback_fails_the_original_fault_is_returned_with_what_was_tried() -> None:
    up = ScriptedUpstream(name="shop")
    up.tool("lookup", internal_error)
    up.tool("lookup_mirror", internal_error)
    tools = {
        "lookup": rule(
            "read_only", retry={"enabled": False}, fallback=["nowhere", "lookup_mirror"], fallback_call=True
        ),
        "lookup_mirror": rule("read_only", retry={"enabled": False}),
    }
    async with shop(up, tools) as h:
        result = await call(h, "lookup", {"q": "a"})
    obs = observation(result)
    assert obs["fault_type"] == "D1_transient_execution_error"
    assert obs["details"]["fallback_tried"] == [
        {"tool": "nowhere", "outcome": "not_available"},
        {"tool": "lookup_mirror", "outcome": "D1_transient_execution_error"},
    ]
    assert up.count("lookup") == 1 and up.count("lookup_mirror") == 1


async def test_fallbacks_are_not_followed_in_a_cycle() -> None:
    up = ScriptedUpstream(name="shop")
    up.tool("a", internal_error)
    up.tool("b", internal_error)
    tools = {
        "a": rule("read_only", retry={"enabled": False}, fallback=["b"], fallback_call=True),
        "b": rule("read_only", retry={"enabled": False}, fallback=["a"], fallback_call=True),
    }
    async with shop(up, tools) as h:
        result = await call(h, "a", {})
    assert observation(result)["details"]["fallback_tried"] == [
        {"tool": "b", "outcome": "D1_transient_execution_error"}
    ]
    assert (up.count("a"), up.count("b")) == (1, 1)
