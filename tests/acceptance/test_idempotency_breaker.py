"""Acceptance of issue 4 for the circuit breaker (catalog C5) and idempotency, through the real path.

A real MCP client → the proxy (all stages) → an in-process upstream behind an in-memory link. The breaker's board
runs on a fake clock injected through ``Services``, so "open for 30 s" is crossed by moving the clock, never by
sleeping; the retry stage sleeps through a recorder. Idempotency runs on the proxy's real state store (SQLite in a
temporary directory where a test needs a restart).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from structlog.testing import capture_logs

from tests.fixtures.fault_links import (
    Shop,
    call,
    core,
    full_jitter,
    observation,
    rule,
    text_of,
)
from tests.fixtures.scripted import ScriptedUpstream, error_text, ok_text
from tests.helpers import await_until

pytestmark = pytest.mark.anyio

LIMIT_S = 30
REPLAY_META = "io.github.resilient-mcp/replay"


def internal_error(args: dict[str, Any]) -> types.CallToolResult:
    raise MCPError(types.INTERNAL_ERROR, "backend unavailable")


# --- the breaker ----------------------------------------------------------------------------------------------------


async def test_the_breaker_opens_after_the_configured_failures_fails_fast_and_closes_after_a_read_probe(
    shop: Shop,
) -> None:
    shop.up.tool("lookup", ScriptedUpstream.sequence(*[internal_error] * 4, lambda args: ok_text("found")))
    shop.up.tool("lookup_cached", lambda args: ok_text("cached"))
    breaker = {"failure_threshold": 4, "open_s": 30}
    tools = {
        "lookup": rule("read_only", breaker=breaker, fallback=["lookup_cached"]),
        "lookup_cached": rule("read_only"),
    }
    async with shop.run(tools) as h:
        first = await call(h, "lookup", {"q": "a"})  # two attempts (a read is retried once): 2 failures
        second = await call(h, "lookup", {"q": "a"})  # two more: the 4th failure opens the tool's circuit
        assert shop.up.count("lookup") == 4
        assert shop.circuits()["lookup"] == ("open", 4)
        refused = await call(h, "lookup", {"q": "z"})  # other arguments: not the loop guard's business
        assert shop.up.count("lookup") == 4, "fails fast while open: nothing sent"
        sibling = await call(h, "lookup_cached", {"q": "a"})
        shop.clock.now += 30.5
        probe = await call(h, "lookup", {"q": "b"})  # a read: it is the half-open probe
        after = await call(h, "lookup", {"q": "c"})
    for failed in (first, second):
        assert core(observation(failed))["attempts"] == ["D1_transient_execution_error"] * 2
    obs = observation(refused)
    assert core(obs) == {
        "fault_type": "C5_persistent_outage",
        "retry_safety": "not_sent",
        "side_effect_status": "none",
        "repair_action": "switch_tool",
        "max_retry": 0,
        "attempts": ["C5_persistent_outage"],
    }
    assert obs["retry_after_ms"] == 30_000
    assert {k: obs["details"][k] for k in ("circuit", "fallback", "consecutive_failures")} == {
        "circuit": "tool",
        "fallback": ["lookup_cached"],
        "consecutive_failures": 4,
    }
    assert text_of(sibling) == "cached", "one failing tool does not open its upstream's circuit"
    assert text_of(probe) == "found" and text_of(after) == "found"
    assert shop.up.count("lookup") == 6
    assert shop.circuits()["lookup"] == ("closed", 0)
    # one backoff slept in each failing call; tenacity also draws a wait for the last attempt before it stops
    assert shop.recorder.delays == full_jitter(0.1, 0.2, 0.1)[::2]


async def test_a_write_is_never_the_half_open_probe_it_waits_for_a_successful_listing_then_runs(shop: Shop) -> None:
    shop.up.tool("create_order", ScriptedUpstream.sequence(internal_error, internal_error, lambda a: ok_text("ok")))
    async with shop.run({"create_order": rule("write_unsafe", breaker={"failure_threshold": 2, "open_s": 30})}) as h:
        for ref in ("R1", "R2"):  # a maybe-executed write is not retried: one failure per call
            assert observation(await call(h, "create_order", {"ref": ref}))["repair_action"] == "verify_state"
        refused = await call(h, "create_order", {"ref": "R3"})
        shop.clock.now += 31
        with capture_logs() as logs:
            result = await call(h, "create_order", {"ref": "R4"})
    assert observation(refused)["fault_type"] == "C5_persistent_outage"
    assert observation(refused)["repair_action"] == "degrade"
    assert text_of(result) == "ok"
    assert [("create_order", {"ref": r}) for r in ("R1", "R2", "R4")] == shop.up.calls
    events = [e["event"] for e in logs if e["event"].startswith("breaker_")]
    assert events == ["breaker_half_open", "breaker_closed"], "closed by the listing probe before the write ran"
    assert shop.circuits()["create_order"] == ("closed", 0)


async def test_calls_with_invalid_arguments_never_open_the_breaker(shop: Shop) -> None:
    schema = {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}

    def create(args: dict[str, Any]) -> types.CallToolResult:
        if args["sku"].startswith("bad"):
            return error_text(f"unknown sku {args['sku']}", {"type": "invalid_argument", "field": "sku"})
        if args["sku"].startswith("worse"):
            raise MCPError(types.INVALID_PARAMS, f"sku {args['sku']} is not in the catalog")
        return ok_text("created")

    shop.up.tool("create_order", create, schema=schema)
    async with shop.run({"create_order": rule("write_unsafe", breaker={"failure_threshold": 2})}) as h:
        kinds = []
        for i in range(4):
            kinds.append(observation(await call(h, "create_order", {"qty": i}))["fault_type"])
            kinds.append(observation(await call(h, "create_order", {"sku": f"bad-{i}"}))["fault_type"])
            kinds.append(observation(await call(h, "create_order", {"sku": f"worse-{i}"}))["fault_type"])
        result = await call(h, "create_order", {"sku": "good"})
    assert kinds == ["B1_missing_required_argument", "B4_semantic_argument_rejection", "B2_schema_violation"] * 4
    assert text_of(result) == "created"
    assert shop.up.count("create_order") == 9, "the 4 missing-argument calls never left the proxy; the rest ran once"
    assert set(shop.circuits().values()) == {("closed", 0)}
    assert shop.recorder.delays == []


# --- idempotency ----------------------------------------------------------------------------------------------------


def replay_of(result: types.CallToolResult) -> dict[str, Any] | None:
    value = (result.meta or {}).get(REPLAY_META)
    return value if isinstance(value, dict) else None


async def test_the_same_write_sent_again_after_its_result_was_delivered_runs_again(shop: Shop) -> None:
    shop.up.tool("create_order", lambda args: ok_text("order created", id=1))
    async with shop.run({"create_order": rule("write_unsafe")}) as h:
        first = await call(h, "create_order", {"sku": "S", "qty": 2})
        second = await call(h, "create_order", {"sku": "S", "qty": 2})
    assert shop.up.count("create_order") == 2, "a repeat after a delivered success is the host's intent"
    assert replay_of(first) is None and replay_of(second) is None
    assert not first.is_error and not second.is_error


async def test_the_same_write_with_an_explicit_key_sent_twice_executes_once_and_the_second_gets_the_replay(
    shop: Shop,
) -> None:
    shop.up.tool("create_order", lambda args: ok_text("order 1 created", id=1))
    async with shop.run({"create_order": rule("write_unsafe")}) as h:
        meta = {"idempotency-key": "order-77"}
        first = await call(h, "create_order", {"sku": "S", "qty": 2}, meta)
        second = await call(h, "create_order", {"sku": "S", "qty": 2}, meta)
    assert shop.up.count("create_order") == 1
    assert replay_of(first) is None and not first.is_error
    replay = replay_of(second)
    assert replay is not None and set(replay) == {"key", "original_at"}
    assert second.content[0] == first.content[0] and second.structured_content == {"id": 1}
    assert "already ran; this is its result, replayed. The tool was not called again." in text_of(second)


async def test_the_same_write_sent_twice_at_once_executes_once_and_the_second_waits_for_the_replay(shop: Shop) -> None:
    release = anyio.Event()

    async def create(args: dict[str, Any]) -> types.CallToolResult:
        await release.wait()
        return ok_text("order 1 created")

    shop.up.tool("create_order", create)
    results: dict[str, types.CallToolResult] = {}
    async with shop.run({"create_order": rule("write_unsafe")}) as h:

        async def send(label: str) -> None:
            results[label] = await call(h, "create_order", {"sku": "S"})

        with anyio.fail_after(LIMIT_S):
            async with anyio.create_task_group() as tg:
                tg.start_soon(send, "first")
                await await_until(lambda: shop.up.count("create_order") == 1, 10, "the first call upstream")
                tg.start_soon(send, "second")
                await await_until(lambda: h.proxy.calls_in_flight("shop") == 2, 10, "the second call in the chain")
                assert shop.up.count("create_order") == 1, "the duplicate waits; it is not sent"
                release.set()
    assert shop.up.count("create_order") == 1
    assert replay_of(results["first"]) is None
    assert replay_of(results["second"]) is not None
    assert results["second"].content[0] == results["first"].content[0] == types.TextContent(text="order 1 created")


async def test_a_write_replayed_after_a_proxy_restart_is_not_executed_again(tmp_path: Path, shop: Shop) -> None:
    shop.up.tool("create_order", lambda args: ok_text("order 1 created"))
    key = cast(types.RequestParamsMeta, {"idempotency-key": "order-R1"})
    tools = {"create_order": rule("write_unsafe")}
    async with shop.run(tools, state_dir=str(tmp_path)) as h:
        first = await call(h, "create_order", {"sku": "S"}, meta=key)
    async with shop.run(tools, state_dir=str(tmp_path)) as h:  # a new proxy process on the same state
        second = await call(h, "create_order", {"sku": "S"}, meta=key)
    assert shop.up.count("create_order") == 1
    assert replay_of(first) is None
    replay = replay_of(second)
    assert replay is not None and replay["key"] == "order-R1"
    assert second.content[0] == first.content[0]
