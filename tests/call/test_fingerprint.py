"""Call identity (``resilient_mcp/call/fingerprint.py``): fingerprints and the consecutive-failure counters."""

from __future__ import annotations

from typing import Any

from resilient_mcp.call.chain import ToolCall
from resilient_mcp.call.fingerprint import Consecutive, FailureStats, fingerprint, keyed_fingerprint
from resilient_mcp.faults import EffectClass
from resilient_mcp.policy import ToolRule


def make_call(arguments: dict[str, Any] | None = None, *, upstream: str = "shop", session: str = "s1") -> ToolCall:
    return ToolCall(
        name="create_order",
        arguments={"sku": "A", "qty": 2} if arguments is None else arguments,
        upstream=upstream,
        upstream_tool="create_order",
        rule=ToolRule(effect=EffectClass.WRITE_UNSAFE),
        session_id=session,
    )


def test_fingerprint_ignores_key_order_and_separates_upstreams() -> None:
    a = make_call({"a": 1, "b": "é"})
    b = make_call({"b": "é", "a": 1})
    other = make_call({"a": 1, "b": "é"}, upstream="other")
    assert fingerprint(a) == fingerprint(b) != fingerprint(other)


def test_the_keyed_fingerprint_depends_on_the_key() -> None:
    call = make_call()
    assert keyed_fingerprint(call, b"k1") == keyed_fingerprint(make_call(), b"k1") != keyed_fingerprint(call, b"k2")
    assert keyed_fingerprint(call, b"k1") != fingerprint(call)


def test_failures_count_per_call_tool_and_server_and_a_success_resets_them() -> None:
    stats = FailureStats()
    call = make_call()
    assert stats.record_failure(call, upstream_health=True) == Consecutive(1, 1, 1)
    assert stats.record_failure(make_call({"sku": "B"}), upstream_health=False) == Consecutive(1, 2, 1)
    assert stats.current(call) == Consecutive(1, 2, 1)
    stats.record_success(call)
    assert stats.current(call) == Consecutive(0, 0, 0)


def test_the_call_counters_keep_only_the_most_recently_failing_calls() -> None:
    stats = FailureStats(max_calls=2)
    calls = [make_call({"n": n}) for n in range(3)]
    for call in calls:
        stats.record_failure(call, upstream_health=False)
    assert [stats.current(c).this_call for c in calls] == [0, 1, 1]
