"""Issue 20 (hardening, round two), the Redis items, against a real ``redis-server`` and real replicas
(``resilient-mcp serve --http`` on loopback ports, two bearer tokens; ``tests/state/test_replicas.py`` starts them).

- 11: a write refused ``STATE_UNAVAILABLE`` during a Redis outage runs once Redis is back, in the same session (the
  loop guard answered it "already failed ... will fail the same way", then ``abort``);
- 12: a Redis wiped (restart without persistence, ``FLUSHALL``) loses the shared HMAC secret: every replica checks it
  on reconnect, refuses writes while it differs, recreates it consistently, and reports the wipe (``state: reset``);
- 14: explicit idempotency keys are scoped to the principal: token B sending A's key never gets A's result.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
import redis as redis_client
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.helpers import wait_until
from tests.redis_server import RedisServer, needs_redis
from tests.state.test_replicas import TOKENS, Replica, fault, lines, replicas

pytestmark = [pytest.mark.anyio, needs_redis()]


async def _session_calls(replica: Replica, steps: list[Any]) -> list[types.CallToolResult]:
    """One stateful MCP session (legacy era, alice's token) on ``replica``: each step is either a ``(tool, args,
    key)`` call, whose result is collected, or a callable run (in a thread) between calls."""
    results: list[types.CallToolResult] = []
    headers = {"authorization": f"Bearer {TOKENS['alice']}"}
    with anyio.fail_after(180):
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            transport = streamable_http_client(replica.url, http_client=http)
            async with Client(transport, mode="legacy", cache=None) as client:
                for step in steps:
                    if callable(step):
                        await anyio.to_thread.run_sync(step)
                        continue
                    name, arguments, key = step
                    results.append(await client.call_tool(name, arguments, meta={"idempotency-key": key}))
    return results


async def test_a_write_refused_while_redis_was_down_runs_once_redis_is_back_in_the_same_session(
    tmp_path: Path, redis: RedisServer
) -> None:
    write = ("append", {"entry": "w1"}, "w1")
    with replicas(tmp_path, redis, 1, stateless=False) as (one,):

        def back() -> None:
            redis.start()
            wait_until(lambda: one.health()["state"] != "unavailable", 60, "reconnected", stderr=one.stderr)

        down, after = await _session_calls(one, [redis.stop, write, back, write])
    refused = down.structured_content or {}
    assert refused["code"] == "STATE_UNAVAILABLE" and refused["repair_action"] == "backoff_retry"
    assert refused["max_retry"] > 0, "the observation says repeating helps"
    assert not after.is_error, after.structured_content
    assert lines(tmp_path / "ledger") == ["w1"], "run once, after Redis came back"


async def test_an_explicit_key_is_scoped_to_the_token_that_sent_it(tmp_path: Path, redis: RedisServer) -> None:
    with replicas(tmp_path, redis, 2) as (one, two):
        alice = one.call("append", {"entry": "alice-pays"}, key="order-42", who="alice")
        bob_same = two.call("append", {"entry": "alice-pays"}, key="order-42", who="bob")
        bob_other = one.call("append", {"entry": "bob-pays"}, key="order-42", who="bob")
        alice_again = two.call("append", {"entry": "alice-pays"}, key="order-42", who="alice")
    assert not alice.get("isError") and not bob_same.get("isError"), bob_same
    assert "io.github.resilient-mcp/replay" not in bob_same.get("_meta", {}), "bob was told alice's write was his"
    # bob's own key now holds bob's arguments: other arguments are bob's own mismatch, nothing about alice
    assert fault(bob_other)["fault_type"] == "B4_semantic_argument_rejection"
    assert "io.github.resilient-mcp/replay" in alice_again["_meta"], "alice's own retry is still deduplicated"
    assert lines(tmp_path / "ledger") == ["alice-pays", "alice-pays"], "one write each: alice's and bob's"


async def test_a_redis_flush_is_found_reported_and_replicas_agree_on_the_secret_again(
    tmp_path: Path, redis: RedisServer
) -> None:
    def flush() -> None:
        client = redis_client.Redis.from_url(redis.url)
        try:
            client.flushall()
        finally:
            client.close()

    def call_until_sent(r: Replica, key: str) -> dict[str, Any]:
        """A write that is refused STATE_UNAVAILABLE (the wipe just found) is repeated once, as rule R allows."""
        result = r.call("append", {"entry": key}, key=key)
        if result.get("isError") and fault(result)["code"] == "STATE_UNAVAILABLE":
            result = r.call("append", {"entry": key}, key=key)
        return dict(result)

    with replicas(tmp_path, redis, 1) as (one,):
        assert not one.call("append", {"entry": "before"}, key="before").get("isError")
        flush()
        with replicas(tmp_path, redis, 1, first=2) as (two,):  # a replica started after the wipe makes a secret
            first = call_until_sent(two, "after")
            again = call_until_sent(one, "after")  # the other replica, same key and arguments
            wait_until(lambda: one.health()["state"] == "reset", 60, "the wipe reported", stderr=one.stderr)
            log = one.stderr.read_text()
    assert not first.get("isError"), first
    assert not again.get("isError") and "io.github.resilient-mcp/replay" in again["_meta"], again
    assert lines(tmp_path / "ledger") == ["before", "after"]
    assert "state_reset" in log
