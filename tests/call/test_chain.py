"""The call record (``resilient_mcp/call/chain.py``): its identity (fingerprints)."""

from __future__ import annotations

from typing import Any

from resilient_mcp.call.chain import ToolCall, fingerprint, keyed_fingerprint
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
