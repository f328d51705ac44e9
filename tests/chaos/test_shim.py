"""The loopback fault shim between the proxy's real HTTP upstream path and ``resilient-mcp chaos-server --http``.

The chaos server runs as a subprocess on 127.0.0.1; the shim and the proxy run in the test's event loop; the proxy
connects to the shim's URL exactly as it would to any streamable HTTP server. The ledger file tells what the
server actually executed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from resilient_mcp.chaos.ledger import read_ledger
from resilient_mcp.chaos.plan import FaultPlan
from resilient_mcp.chaos.shim import FaultShim, check_shim_plan
from resilient_mcp.faults.error_results import FAULT_META_KEY
from resilient_mcp.host.server import build_server
from resilient_mcp.policy import Policy, PolicyFile
from resilient_mcp.policy.config import ProxyConfig
from resilient_mcp.proxy.pipeline import Pipeline
from resilient_mcp.proxy.proxy import Proxy
from tests.helpers import STARTUP_S, await_until, free_port, http_get_status, proxy_argv, running, wait_until

pytestmark = pytest.mark.anyio

ORDER = {"customer": "alice", "sku": "apple", "qty": 1, "client_ref": "R1"}
POLICY = {  # the default attempt timeout: every fault here is an answer (a status, a reset, a refusal), never a wait,
    # and a real server's answers must not race a short one on a loaded machine (it was 3 s)
    "defaults": {"retry": {"backoff_base_ms": 10, "backoff_cap_ms": 50}},
    "tools": {"get_*": {"effect": "read_only"}},
}
ATTEMPTS = "io.github.resilient-mcp/attempts"


@pytest.fixture
def chaos_http(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """``resilient-mcp chaos-server --http`` on a free loopback port: yields (HOST:PORT, ledger file)."""
    port = free_port()
    ledger = tmp_path / "ledger.json"
    argv = proxy_argv("chaos-server", "--http", f"127.0.0.1:{port}", "--ledger", str(ledger))
    stderr = tmp_path / "chaos.stderr"
    with running(argv, stderr) as process:
        wait_until(
            lambda: http_get_status(f"http://127.0.0.1:{port}/mcp"),
            STARTUP_S,
            "chaos server up",
            process=process,
            stderr=stderr,
        )
        yield f"127.0.0.1:{port}", ledger


@asynccontextmanager
async def shim_and_proxy(target: str, *rules: dict[str, Any]) -> AsyncIterator[tuple[FaultShim, Client]]:
    shim = FaultShim(target, FaultPlan.model_validate({"rules": list(rules)}))
    async with shim.running():
        config = ProxyConfig.model_validate({"upstreams": {"orders": {"url": shim.url()}}, "state_dir": ":memory:"})
        proxy = Proxy(config, Policy(PolicyFile.model_validate(POLICY)), Pipeline)
        async with proxy.running(startup_timeout_s=15), Client(build_server(proxy), mode="legacy", cache=None) as c:
            yield shim, c


def _outcomes(result: types.CallToolResult) -> list[str]:
    meta = result.meta or {}
    attempts = meta[ATTEMPTS] if ATTEMPTS in meta else meta[FAULT_META_KEY]["attempts"]
    return [a["outcome"] for a in attempts]


async def test_calls_pass_through_the_shim_and_only_tool_calls_are_counted(chaos_http: tuple[str, Path]) -> None:
    target, _ = chaos_http
    with anyio.fail_after(30):
        shim = FaultShim(target)
        async with shim.running(), Client(streamable_http_client(shim.url()), mode="legacy", cache=None) as client:
            assert len((await client.list_tools()).tools) == 9
            result = await client.call_tool("get_stock", {"sku": "pear"})
    assert result.structured_content == {"sku": "pear", "quantity": 25, "updated_at": "2026-11-30T12:00:00Z"}
    assert shim.planner.counts == {"get_stock": 1} and shim.connections >= 3


async def test_the_proxy_retries_a_read_after_a_503_from_the_shim(chaos_http: tuple[str, Path]) -> None:
    rule = {"match": {"tool": "get_stock", "nth_call": 1}, "fault": "5xx", "params": {"status": 503}}
    with anyio.fail_after(60):
        async with shim_and_proxy(chaos_http[0], rule) as (shim, client):
            result = await client.call_tool("get_stock", {"sku": "apple"})
    assert not result.is_error and _outcomes(result) == ["C4_gateway_5xx", "ok"]
    assert shim.planner.counts["get_stock"] == 2


async def test_a_write_refused_with_429_is_reported_and_never_executed(chaos_http: tuple[str, Path]) -> None:
    target, ledger = chaos_http
    rule = {"match": {"tool": "create_order"}, "fault": "rate_limit", "params": {"retry_after_ms": 30_000}}
    with anyio.fail_after(60):
        async with shim_and_proxy(target, rule) as (_, client):
            result = await client.call_tool("create_order", ORDER)
    assert result.is_error and result.meta[FAULT_META_KEY]["fault_category"] in ("C", "D")
    assert read_ledger(ledger).total_commits == 0


async def test_a_reset_after_the_server_ran_a_write_does_not_duplicate_it(chaos_http: tuple[str, Path]) -> None:
    target, ledger = chaos_http
    rule = {"match": {"tool": "create_order", "nth_call": 1}, "fault": "die", "params": {"commit": "before"}}
    with anyio.fail_after(60):
        async with shim_and_proxy(target, rule) as (_, client):
            lost = await client.call_tool("create_order", ORDER)
            assert lost.is_error and lost.meta[FAULT_META_KEY]["side_effect_status"] == "unknown"
            assert lost.meta[FAULT_META_KEY]["repair_action"] == "verify_state"
            # the reset reaches the proxy as soon as the request is forwarded: the commit may land a moment later
            await await_until(lambda: read_ledger(ledger).commits_for("create_order", "R1") == 1, 10, "the commit")
            check = await client.call_tool("get_order", {"client_ref": "R1"})  # what the model is told to do
    assert not check.is_error and len(check.structured_content["orders"]) == 1
    assert read_ledger(ledger).commits_for("create_order", "R1") == 1


async def test_a_closed_port_is_a_connect_failure_until_it_opens_again(chaos_http: tuple[str, Path]) -> None:
    with anyio.fail_after(60):
        async with shim_and_proxy(chaos_http[0]) as (shim, client):
            assert not (await client.call_tool("get_stock", {"sku": "apple"})).is_error
            await shim.refuse()
            refused = await client.call_tool("get_stock", {"sku": "apple"})
            await shim.accept()
            recovered = await client.call_tool("get_stock", {"sku": "apple"})
            while recovered.is_error:  # until the upstream reconnected (with backoff): bounded by fail_after alone
                await anyio.sleep(0.2)
                recovered = await client.call_tool("get_stock", {"sku": "apple"})
    assert refused.is_error and refused.meta[FAULT_META_KEY]["fault_category"] == "C"


def test_faults_the_shim_cannot_inject_are_refused() -> None:
    plan = FaultPlan.model_validate({"rules": [{"fault": "E2"}, {"fault": "C4"}]})
    assert check_shim_plan(plan) == [
        "rules[0]: E2_output_schema_violation is not a transport fault; the chaos server or the proxy's chaos mode "
        "injects it"
    ]
    with pytest.raises(ValueError, match="loopback"):
        FaultShim("127.0.0.1:1", host="0.0.0.0")
