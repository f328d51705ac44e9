"""The Redis state store against a real ``redis-server``: two stores on one Redis stand for two replicas."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from resilient_mcp.call.chain import ToolCall
from resilient_mcp.call.meta import REPLAY_META
from resilient_mcp.faults import EffectClass, StateUnavailableFault
from resilient_mcp.policy import IdempotencyRule, ToolRule
from resilient_mcp.policy.config import StateConfig, load_config
from resilient_mcp.policy.source import SourceError
from resilient_mcp.stages.idempotency import Idempotency, InFlight
from resilient_mcp.stages.observe import AuditEntry
from resilient_mcp.stages.retry import RetryBudgets
from resilient_mcp.state import Claim, StateError, StateLimits, StateUnavailable
from resilient_mcp.state.redis import RedisStateStore, read_audit
from tests.helpers import write_yaml
from tests.redis_server import RedisServer, needs_redis

pytestmark = [pytest.mark.anyio, needs_redis()]

WRITE = ToolRule(effect=EffectClass.WRITE_UNSAFE)


BOUND_S = 10.0
"""Redis's connect and command timeouts here: they only bound an outage (a stopped Redis refuses at once), so a healthy
command on a loaded machine never races them (they were 1 s)."""


def config(redis: RedisServer, **extra: Any) -> StateConfig:
    return StateConfig(backend="redis", url=redis.url, command_timeout_s=BOUND_S, connect_timeout_s=BOUND_S, **extra)


@pytest.fixture
async def replicas(redis: RedisServer) -> AsyncIterator[tuple[RedisStateStore, RedisStateStore]]:
    limits = StateLimits(flush_interval_s=0.05)
    one = await RedisStateStore.open(config(redis), limits=limits)
    two = await RedisStateStore.open(config(redis), limits=limits)
    try:
        yield one, two
    finally:
        await one.aclose()
        await two.aclose()


def call(args: dict[str, Any] | None = None, meta: dict[str, Any] | None = None, rule: ToolRule = WRITE) -> ToolCall:
    return ToolCall(
        name="shop__create_order",
        arguments={"item": "book"} if args is None else args,
        upstream="shop",
        upstream_tool="create_order",
        rule=rule,
        meta=meta,
    )


def entry(session: str, tool: str = "t") -> AuditEntry:
    return AuditEntry(
        ts=1.0,
        session=session,
        upstream="shop",
        tool=tool,
        argument_keys=("item",),
        arguments_hash="h",
        outcome="ok",
        fault_type=None,
        attempts=1,
        latency_ms=3,
        decided_by=None,
    )


async def test_concurrent_claims_of_one_key_from_two_replicas_grant_exactly_one(
    replicas: tuple[RedisStateStore, RedisStateStore],
) -> None:
    one, two = replicas
    got: list[object] = []

    async def claim(store: RedisStateStore) -> None:
        got.append(await store.begin("k", args_hash="a", tool="t", now=100.0, expires_at=10_000_000_000.0))

    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(claim, one if i % 2 else two)
    assert sum(1 for g in got if g is None) == 1
    held = [g for g in got if g is not None]
    assert len(held) == 19 and all(getattr(h, "status", None) == "in_flight" for h in held)


async def test_a_completed_record_on_one_replica_is_replayed_by_the_other_and_expires(
    replicas: tuple[RedisStateStore, RedisStateStore],
) -> None:
    one, two = replicas
    far = 10_000_000_000.0
    assert await one.begin("k", args_hash="a", tool="t", now=1.0, expires_at=far) is None
    result = types.CallToolResult(content=[types.TextContent(text="order 7")])
    await one.complete("k", result, expires_at=far)
    record = await two.begin("k", args_hash="a", tool="t", now=2.0, expires_at=far)
    assert record is not None and record.status == "completed" and record.result == result
    await two.mark_unknown("k", expires_at=far)
    got = await one.get("k", now=3.0)
    assert got is not None and got.status == "unknown" and got.result is None
    assert await one.get("k", now=far + 1) is None, "an expired record is not returned"
    assert await one.begin("k", args_hash="b", tool="t", now=far + 1, expires_at=far + 100) is None
    await one.release("k")
    assert await two.get("k", now=3.0) is None


async def test_replicas_share_one_secret_so_fingerprints_match_and_a_configured_secret_wins(
    redis: RedisServer, replicas: tuple[RedisStateStore, RedisStateStore]
) -> None:
    one, two = replicas
    assert one.call_fingerprint(call()) == two.call_fingerprint(call())
    assert one.call_fingerprint(call()) != one.call_fingerprint(call({"item": "pen"}))
    async with await RedisStateStore.open(config(redis, secret="s" * 40)) as own:
        assert own.call_fingerprint(call()) != one.call_fingerprint(call())


async def test_a_stored_output_is_read_in_pages_through_another_replica_by_its_owner_only(
    replicas: tuple[RedisStateStore, RedisStateStore],
) -> None:
    one, two = replicas
    parts = ["é" * 50_000, "x" * 100_000]  # 200 000 bytes, in chunks
    handle = await one.put_output("t", parts, '{"content": []}', owner="alice")
    assert handle is not None
    assert await two.read_output(handle, 0, 10, owner="mallory") is None
    assert await two.output_manifest(handle, owner="mallory") is None
    first = await two.read_output(handle, 0, 100_000, owner="alice")
    rest = await two.read_output(handle, 100_000, 200_000, owner="alice")
    assert first is not None and rest is not None
    assert first[1] == rest[1] == 200_000
    assert (first[0] + rest[0]).decode() == "".join(parts)
    assert await two.output_manifest(handle, owner="alice") == '{"content": []}'


async def test_the_audit_is_one_capped_stream_read_from_any_replica(
    redis: RedisServer, replicas: tuple[RedisStateStore, RedisStateStore]
) -> None:
    one, two = replicas
    for i in range(3):
        one.record(entry("s1", f"t{i}"))
    two.record(entry("s2"))
    await one.flush()
    await two.flush()
    rows = two.recent_audit(limit=10)
    assert [r["session"] for r in rows].count("s1") == 3 and rows[0]["session"] == "s2"
    assert [r["tool"] for r in read_audit(config(redis), limit=10, session="s1")] == ["t2", "t1", "t0"]
    assert rows[0]["argument_keys"] == ["item"] and rows[0]["fault_type"] is None


async def test_redis_down_refuses_claimed_writes_keeps_audit_queued_and_recovers_on_its_own(
    redis: RedisServer, replicas: tuple[RedisStateStore, RedisStateStore]
) -> None:
    one, _ = replicas
    ran: list[ToolCall] = []

    async def upstream(c: ToolCall) -> types.CallToolResult:
        ran.append(c)
        return types.CallToolResult(content=[types.TextContent(text="done")])

    stage = Idempotency(WRITE, one, InFlight())
    redis.stop()
    with pytest.raises(StateUnavailableFault) as refused:
        await stage(call(meta={"idempotency-key": "k1"}), upstream)
    assert refused.value.code == "STATE_UNAVAILABLE" and refused.value.repair_action.value == "backoff_retry"
    assert refused.value.retry_safety.value == "not_sent" and not ran and not one.available
    proceed = WRITE.model_copy(update={"idempotency": IdempotencyRule(on_state_unavailable="proceed")})
    result = await Idempotency(proceed, one, InFlight())(call(meta={"idempotency-key": "k2"}, rule=proceed), upstream)
    assert not result.is_error and len(ran) == 1, "proceed sends the write unprotected"
    one.record(entry("while-down"))  # an acknowledged call's audit entry, queued while Redis is down
    with pytest.raises(StateUnavailable):
        await one.flush()
    assert await one.put_output("t", ["x"], "{}", owner="a") is None, "a read's output is simply not stored"

    redis.start()  # same port: the store reconnects by itself
    with anyio.fail_after(30):
        await one.wait_available()
    await one.flush()
    rows = one.recent_audit(limit=5)
    assert rows[0]["session"] == "while-down" and rows[0]["state"] == "unavailable"
    again = await stage(call(meta={"idempotency-key": "k1"}), upstream)
    assert not again.is_error and len(ran) == 2
    replay = await stage(call(meta={"idempotency-key": "k1"}), upstream)
    assert REPLAY_META in (replay.meta or {}) and len(ran) == 2


async def test_an_unreachable_redis_at_startup_is_a_clear_error(tmp_path: Path) -> None:
    dead = RedisServer(tmp_path / "never-started")
    with pytest.raises(StateError, match="cannot reach Redis at redis://127"):
        await RedisStateStore.open(
            StateConfig(backend="redis", url=dead.url, connect_timeout_s=0.5, command_timeout_s=0.5)
        )


def test_the_state_section_is_strict_and_expands_variables(tmp_path: Path) -> None:
    path = write_yaml(
        tmp_path / "proxy.yaml",
        {"state": {"backend": "redis", "url": "rediss://${RUSER}:${RPASS}@cache:6380/1", "password": "${RPASS}"}},
    )
    cfg = load_config(path, environ={"RUSER": "app", "RPASS": "pw-1234"})
    assert cfg.state.url == "rediss://app:pw-1234@cache:6380/1" and cfg.state.password == "pw-1234"
    with pytest.raises(SourceError, match="RPASS is not set"):
        load_config(path, environ={"RUSER": "app"})
    for bad, message in (
        ({"backend": "redis"}, "needs state.url"),
        ({"backend": "redis", "url": "http://x"}, "use redis://"),
        ({"url": "redis://x"}, "backend: redis"),
        ({"backend": "redis", "url": "redis://x", "sentinels": []}, "sentinels"),
    ):
        write_yaml(path, {"state": bad})
        with pytest.raises(SourceError, match=message):
            load_config(path)


async def test_retry_budgets_spent_on_one_replica_are_spent_for_the_other(
    replicas: tuple[RedisStateStore, RedisStateStore],
) -> None:
    one, two = RetryBudgets(), RetryBudgets()
    one.shared, two.shared = replicas
    for _ in range(5):  # replica 1 sees the upstream fail: 10 -> 5 tokens, at the threshold
        one.on_failure("shop")
        await one.share("shop", -1.0)
    assert not one.allow_retry("shop")
    two.on_failure("shop")  # alone, replica 2 would still have 9 tokens and retry
    await two.share("shop", -1.0)
    assert two.tokens("shop") == 4.0 and not two.allow_retry("shop")
    two.on_success("shop")
    await two.share("shop", two.token_ratio)
    assert one.tokens("shop") == 5.0 and two.tokens("shop") == pytest.approx(4.1)


async def test_a_flushed_redis_refuses_the_claims_that_find_it_then_both_replicas_share_one_secret_again(
    replicas: tuple[RedisStateStore, RedisStateStore], redis: RedisServer
) -> None:
    """Issue 20, item 12, at the store: both claim scripts (explicit key, derived-key write) check the secret."""
    one, two = replicas
    probe = call({"x": 1})
    assert one.call_fingerprint(probe) == two.call_fingerprint(probe)
    await one.redis.flushall()
    await two.redis.set(two.prefix + "secret", "ab" * 32)  # a replica started after the wipe made its own
    claim = Claim(args_hash="h", tool="t", now=1.0, expires_at=10**10, marker_expires_at=10**10)
    with pytest.raises(StateUnavailable, match="reset"):
        await one.begin_write("own", "marker", claim)
    with pytest.raises(StateUnavailable, match="reset"):
        await two.begin("k", args_hash="h", tool="t", now=1.0, expires_at=10**10)  # two's own secret was replaced
    assert one.state == "reset" and await one.begin_write("own", "marker", claim) == (None, None)
    assert one.call_fingerprint(probe) == two.call_fingerprint(probe), "one secret for both again"
    assert await two.begin("k", args_hash="h", tool="t", now=1.0, expires_at=10**10) is None
