"""Several proxy replicas (``resilient-mcp serve --http`` processes on loopback ports) on one real ``redis-server``.

Each replica runs its own copy of ``tests/fixtures/ledger_server.py``, all on one ledger file: a line there is a
write that reached a server, whichever replica sent it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from resilient_mcp.call.meta import PAGE_META
from resilient_mcp.policy.config import StateConfig
from resilient_mcp.state.redis import read_audit
from tests.helpers import FIXTURES, free_port, http_get_status, proxy_argv, running, stderr_tail, wait_until, write_yaml
from tests.redis_server import RedisServer, needs_redis

pytestmark = [pytest.mark.anyio, needs_redis()]

LEDGER = FIXTURES / "ledger_server.py"
TOKENS = {"alice": "alice-token-0001", "bob": "bob-token-00000002"}


class Replica:
    def __init__(self, process: subprocess.Popen[bytes], port: int, stderr: Path) -> None:
        self.process, self.port, self.stderr = process, port, stderr
        self.url = f"http://127.0.0.1:{port}/mcp"

    def health(self) -> dict[str, Any]:
        return dict(httpx2.get(f"http://127.0.0.1:{self.port}/healthz", timeout=5).json())

    def call(self, name: str, arguments: dict[str, Any], *, key: str | None = None, who: str = "alice") -> Any:
        """One stateless ``tools/call``: the ``result``."""
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        if key is not None:
            params["_meta"] = {"idempotency-key": key}
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
        headers = {
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2025-11-25",
            "authorization": f"Bearer {TOKENS[who]}",
        }
        response = httpx2.post(self.url, json=body, headers=headers, timeout=60)
        assert response.status_code == 200, f"{response.status_code} {response.text}\n{stderr_tail(self.stderr)}"
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
            return json.loads(data[-1])["result"]
        return response.json()["result"]


def lines(ledger: Path) -> list[str]:
    return ledger.read_text(encoding="utf-8").splitlines() if ledger.exists() else []


def fault(result: dict[str, Any]) -> dict[str, Any]:
    assert result.get("isError"), result
    return dict(result["structuredContent"])


@contextmanager
def replicas(
    tmp: Path,
    redis: RedisServer,
    n: int,
    *,
    stateless: bool = True,
    policy: dict[str, Any] | None = None,
    faults_on_first: list[dict[str, Any]] | None = None,
    first: int = 1,
) -> Iterator[list[Replica]]:
    """``n`` replicas numbered from ``first`` (their config and stderr files are named by number)."""
    ledger = tmp / "ledger"
    policy_file = write_yaml(tmp / "policy.yaml", policy or {})
    out: list[Replica] = []
    with ExitStack() as stack:
        for i in range(first - 1, first - 1 + n):
            port = free_port()
            config: dict[str, Any] = {
                "upstreams": {"ledger": {"command": sys.executable, "args": [str(LEDGER), "--ledger", str(ledger)]}},
                "policies": [str(policy_file)],
                # bounds of an outage only (a stopped Redis refuses at once): no healthy command races them
                "state": {"backend": "redis", "url": redis.url, "command_timeout_s": 10, "connect_timeout_s": 10},
                "listen": {"http": f"127.0.0.1:{port}", "stateless": stateless, "auth_tokens": list(TOKENS.values())},
            }
            if i == first - 1 and faults_on_first:
                config["faults"] = {"rules": faults_on_first}
            path = write_yaml(tmp / f"replica{i + 1}.yaml", config)
            stderr = tmp / f"replica{i + 1}.stderr"
            process = stack.enter_context(running(proxy_argv("serve", "--config", str(path)), stderr))
            out.append(Replica(process, port, stderr))
        for r in out:
            wait_until(
                lambda r=r: http_get_status(f"http://127.0.0.1:{r.port}/healthz") == 200,  # type: ignore[misc]
                90,
                "replica listening",
                process=r.process,
                stderr=r.stderr,
            )
        yield out


async def test_an_explicit_key_write_on_replica_1_is_replayed_by_replica_2(tmp_path: Path, redis: RedisServer) -> None:
    with replicas(tmp_path, redis, 2) as (one, two):
        first = one.call("append", {"entry": "order-1"}, key="k-1")
        again = two.call("append", {"entry": "order-1"}, key="k-1")
        other = two.call("append", {"entry": "order-2"}, key="k-1")
    assert not first.get("isError") and not again.get("isError")
    assert "io.github.resilient-mcp/replay" in again["_meta"]
    assert fault(other)["fault_type"] == "B4_semantic_argument_rejection"
    assert lines(tmp_path / "ledger") == ["order-1"]


async def test_the_same_write_sent_concurrently_to_three_replicas_executes_once(
    tmp_path: Path, redis: RedisServer
) -> None:
    gate = tmp_path / "gate"
    with replicas(tmp_path, redis, 3) as three:
        results: list[Any] = []

        async def send(r: Replica) -> None:
            args = {"entry": "once", "gate": str(gate)}
            results.append(await anyio.to_thread.run_sync(lambda: r.call("append", args, key="order-once")))

        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                for r in three:
                    tg.start_soon(send, r)
                await anyio.to_thread.run_sync(
                    lambda: wait_until(lambda: lines(tmp_path / "ledger"), 60, "the first write reaching the server")
                )
                gate.touch()
    ran = [r for r in results if not r.get("isError") and "io.github.resilient-mcp/replay" not in r.get("_meta", {})]
    refused = [fault(r) for r in results if r.get("isError")]
    assert len(ran) == 1 and len(results) == 3, results
    assert all(f["repair_action"] == "verify_state" for f in refused), "a racing duplicate: outcome not known yet"
    assert lines(tmp_path / "ledger") == ["once"]


async def test_replica_1_killed_mid_write_leaves_replica_2_answering_verify_state(
    tmp_path: Path, redis: RedisServer
) -> None:
    gate = tmp_path / "gate"
    with replicas(tmp_path, redis, 2) as (one, two):
        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:

                def doomed() -> None:
                    with pytest.raises(httpx2.TransportError):
                        one.call("append", {"entry": "pay-7", "gate": str(gate)}, key="pay-7")

                tg.start_soon(anyio.to_thread.run_sync, doomed)
                await anyio.to_thread.run_sync(lambda: wait_until(lambda: lines(tmp_path / "ledger"), 60, "the write"))
                os.kill(one.process.pid, signal.SIGKILL)
        gate.touch()  # the orphaned ledger server answers and exits
        blind = two.call("append", {"entry": "pay-7", "gate": str(gate)}, key="pay-7")
    observed = fault(blind)
    assert observed["repair_action"] == "verify_state" and observed["fault_type"] == "D5_state_conflict"
    assert lines(tmp_path / "ledger") == ["pay-7"], "never a second execution"


async def test_a_stored_output_from_replica_1_is_read_in_pages_through_replica_2_by_its_owner_only(
    tmp_path: Path, redis: RedisServer
) -> None:
    (tmp_path / "ledger").write_text("".join(f"line {i:05d}\n" for i in range(2000)), encoding="utf-8")
    policy = {"tools": {"read_ledger": {"output": {"max_text_bytes": 1000}}}}
    with replicas(tmp_path, redis, 2, policy=policy) as (one, two):
        capped = one.call("read_ledger", {}, who="alice")
        handle = capped["_meta"]["io.github.resilient-mcp/truncated"]["handle"]
        pages, offset = [], 0
        while offset is not None:
            page = two.call("read_stored_output", {"handle": handle, "offset": offset, "length": 8000}, who="alice")
            assert not page.get("isError"), page
            pages.append(page["content"][0]["text"])
            offset = page["_meta"][PAGE_META]["next_offset"]
        stranger = two.call("read_stored_output", {"handle": handle}, who="bob")
    assert "".join(pages) == "\n".join(lines(tmp_path / "ledger")) and len(pages) > 1, "whole, in order"
    assert stranger.get("isError") and handle in json.dumps(stranger)


async def test_a_shared_breaker_opened_on_replica_1_fails_fast_on_replica_2(tmp_path: Path, redis: RedisServer) -> None:
    # No retry: the server marks ping read-only, and a retry would meet the breaker its first attempt opened.
    policy = {
        "defaults": {"breaker": {"failure_threshold": 1, "open_s": 60, "shared": True}, "retry": {"enabled": False}}
    }
    gateway = [{"match": {"tool": "ping"}, "fault": "5xx"}]
    with replicas(tmp_path, redis, 2, policy=policy, faults_on_first=gateway) as (one, two):
        assert fault(one.call("ping", {"n": 1}))["fault_type"] == "C4_gateway_5xx"
        refused = fault(two.call("ping", {"n": 2}))
    assert refused["fault_type"] == "C5_persistent_outage" and refused["retry_safety"] == "not_sent"
    assert 0 < refused["details"]["retry_in_ms"] <= 60_000


async def test_redis_stopped_mid_run_refuses_writes_serves_reads_then_recovers_without_losing_audit(
    tmp_path: Path, redis: RedisServer
) -> None:
    with replicas(tmp_path, redis, 1) as (one,):
        assert one.health()["state"] == "ok"
        redis.stop()
        down = fault(one.call("append", {"entry": "w1"}, key="w1"))
        read = one.call("ping", {"n": 5})
        assert one.health()["state"] == "unavailable"
        redis.start()
        wait_until(lambda: one.health()["state"] == "reset", 60, "reconnected, the wipe reported", stderr=one.stderr)
        after = one.call("append", {"entry": "w1"}, key="w1")
        wait_until(
            lambda: any(r["tool"] == "ping" for r in read_audit(StateConfig(backend="redis", url=redis.url))),
            60,
            "the queued audit written",
            stderr=one.stderr,
        )
        log = one.stderr.read_text()
    assert down["code"] == "STATE_UNAVAILABLE" and down["retry_safety"] == "not_sent"
    assert down["repair_action"] == "backoff_retry" and not read.get("isError")
    assert not after.get("isError") and lines(tmp_path / "ledger") == ["w1"]
    rows = read_audit(StateConfig(backend="redis", url=redis.url), limit=20)
    ping = next(r for r in rows if r["tool"] == "ping")
    assert ping["state"] == "unavailable" and ping["outcome"] == "ok"
    assert "state_unavailable" in log and "state_reconnected" in log
    with anyio.fail_after(60):
        printed = await anyio.run_process(
            proxy_argv("audit", "--config", str(tmp_path / "replica1.yaml"), "--limit", "20"), check=False
        )
    rows_printed = [json.loads(line) for line in printed.stdout.decode().splitlines()]
    assert any(r["tool"] == "ping" for r in rows_printed), printed.stderr.decode()


async def test_stateful_sessions_need_a_sticky_balancer_and_stateless_mode_does_not(
    tmp_path: Path, redis: RedisServer
) -> None:
    with replicas(tmp_path, redis, 2, stateless=False) as (one, two):
        headers = {"authorization": f"Bearer {TOKENS['alice']}"}
        issued: set[str] = set()

        async def remember(response: httpx2.Response) -> None:
            if "mcp-session-id" in response.headers:
                issued.add(response.headers["mcp-session-id"])

        with anyio.fail_after(120):
            hooks = {"response": [remember]}
            async with httpx2.AsyncClient(headers=headers, timeout=30, event_hooks=hooks) as http:
                transport = streamable_http_client(one.url, http_client=http, terminate_on_close=False)
                async with Client(transport, mode="legacy", cache=None) as client:
                    result = await client.call_tool("ping", {"n": 1})  # sticky: the whole session on replica 1
        assert not result.is_error and len(issued) == 1
        (sid,) = issued
        request = {"jsonrpc": "2.0", "id": 9, "method": "tools/list"}
        hdrs = {**headers, "accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}
        still = httpx2.post(one.url, json=request, headers={**hdrs, "mcp-session-id": sid}, timeout=30)
        moved = httpx2.post(two.url, json=request, headers={**hdrs, "mcp-session-id": sid}, timeout=30)
    assert still.status_code == 200, still.text
    assert moved.status_code in (400, 404), moved.text
