"""Chaos mode in the proxy: planned faults between the proxy and a real upstream, seen as the real ones would be.

Unit tests drive ``FaultInjector`` with a hand-written upstream; an in-process proxy shows the chain absorbing or
reporting injected faults; and ``resilient-mcp wrap --faults PLAN -- mcp-server-time`` as a subprocess shows the
whole thing against a real third-party server.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from resilient_mcp.chaos.clock import FakeClock
from resilient_mcp.chaos.inject import FaultInjector, check_proxy_plan
from resilient_mcp.chaos.plan import FaultPlan
from resilient_mcp.chaos.server import ChaosServer
from resilient_mcp.faults import Fault, RetrySafety
from resilient_mcp.faults.classify import classify_result
from resilient_mcp.faults.error_results import FAULT_META_KEY
from resilient_mcp.upstream import UpstreamCatalog
from tests.harness import proxied
from tests.helpers import MCP_SERVER_TIME, child_env, proxy_argv, run_cli, server_time_missing

pytestmark = pytest.mark.anyio

_TIME_MISSING = server_time_missing()


class FakeUpstream:
    """Stands in for ``Upstream``: answers every call, and records calls and restart requests."""

    def __init__(self) -> None:
        self.name = "up"
        self.calls: list[str] = []
        self.restarts = 0
        self.catalog = UpstreamCatalog()

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None, meta: Any = None, **kw: Any
    ) -> types.CallToolResult:
        self.calls.append(name)
        return types.CallToolResult(content=[types.TextContent(text=f"{name} done")], structured_content={"n": 1})

    def request_restart(self) -> None:
        self.restarts += 1


def _injector(*rules: dict[str, Any]) -> tuple[FaultInjector, FakeUpstream, FakeClock]:
    clock = FakeClock()
    return FaultInjector(FaultPlan.model_validate({"rules": list(rules)}), clock=clock), FakeUpstream(), clock


async def _fault_of(injector: FaultInjector, up: FakeUpstream, timeout_s: float = 20.0) -> Fault:
    with pytest.raises(Fault) as err:
        await injector.call(up, "create_order", {}, timeout_s=timeout_s)  # type: ignore[arg-type]
    return err.value


async def test_a_planned_timeout_waits_out_the_attempt_timeout_and_may_have_executed_the_call() -> None:
    injector, up, clock = _injector({"match": {"nth_call": 1}, "fault": "timeout", "params": {"commit": "before_hang"}})
    fault = await _fault_of(injector, up, timeout_s=20.0)
    assert fault.fault_type == "C3_attempt_timeout" and fault.retry_safety is RetrySafety.MAYBE_EXECUTED
    assert up.calls == ["create_order"] and clock.now() == 20.0  # forwarded, then 20 s on the fake clock
    assert not (await injector.call(up, "create_order", {}, timeout_s=20.0)).is_error  # type: ignore[arg-type]


async def test_a_hang_shorter_than_the_attempt_timeout_is_only_slow() -> None:
    injector, up, clock = _injector({"fault": "slow", "params": {"delay_ms": 1500}})
    result = await injector.call(up, "get", {}, timeout_s=20.0)  # type: ignore[arg-type]
    assert not result.is_error and clock.slept == [1.5] and up.calls == ["get"]


async def test_a_crash_restarts_the_upstream_and_reads_as_a_lost_connection() -> None:
    injector, up, _ = _injector({"fault": "crash", "params": {"commit": "before"}})
    fault = await _fault_of(injector, up)
    assert fault.fault_type == "C2_connection_lost_after_send" and up.restarts == 1 and up.calls == ["create_order"]


async def test_a_connect_failure_is_not_sent() -> None:
    injector, up, _ = _injector({"fault": "C1"})
    fault = await _fault_of(injector, up)
    assert fault.retry_safety is RetrySafety.NOT_SENT and up.calls == []


async def test_http_faults_carry_status_and_retry_after() -> None:
    injector, up, _ = _injector(
        {"match": {"nth_call": 1}, "fault": "5xx", "params": {"status": 503, "retry_after_s": 2}},
        {"match": {"nth_call": 2}, "fault": "rate_limit", "params": {"as": "http"}},
        {"match": {"nth_call": 3}, "fault": "5xx", "params": {"status": 504, "forward": True}},
    )
    unavailable, limited, gateway = [await _fault_of(injector, up) for _ in range(3)]
    assert unavailable.fault_type == "C4_gateway_5xx" and unavailable.retry_after_ms == 2000
    assert unavailable.retry_safety is RetrySafety.REJECTED  # a 503 with Retry-After was refused, not run
    assert limited.fault_type == "D2_rate_limited" and limited.retry_after_ms == 1000
    assert gateway.retry_safety is RetrySafety.MAYBE_EXECUTED and up.calls == ["create_order"]


async def test_reported_errors_come_back_as_results_the_terminal_classifies() -> None:
    injector, up, _ = _injector({"fault": "rate_limit", "params": {"retry_after_ms": 700}})
    result = await injector.call(up, "get", {}, timeout_s=5.0)  # type: ignore[arg-type]
    fault = classify_result(result, tool=None)
    assert fault is not None and fault.fault_type == "D2_rate_limited" and fault.retry_after_ms == 700
    assert up.calls == []


async def test_malformed_and_altered_results() -> None:
    injector, up, _ = _injector(
        {"match": {"nth_call": 1}, "fault": "malformed"},
        {"match": {"nth_call": 2}, "fault": "oversized", "params": {"size_bytes": 1000}},
        {"match": {"nth_call": 3}, "fault": "E3"},
    )
    malformed = await _fault_of(injector, up)
    oversized = await injector.call(up, "get", {})  # type: ignore[arg-type]
    empty = await injector.call(up, "get", {})  # type: ignore[arg-type]
    assert malformed.fault_type == "E1_malformed_response"
    assert len(oversized.content[0].text.encode()) == 1000 and empty.content == []


def test_faults_that_need_the_server_are_refused_in_proxy_chaos_mode() -> None:
    plan = FaultPlan.model_validate(
        {"rules": [{"fault": "A2"}, {"fault": "C3", "params": {"commit": "after_hang", "hang_ms": 5}}]}
    )
    problems = check_proxy_plan(plan)
    assert len(problems) == 2 and "chaos server" in problems[0]


# --- through the proxy, in process -------------------------------------------------------------------------------

_READ_ONLY = {
    "defaults": {"retry": {"backoff_base_ms": 1, "backoff_cap_ms": 5}},
    "tools": {"get_stock": {"effect": "read_only"}},
}


async def test_the_proxy_retries_an_injected_rate_limit_on_a_read_and_reports_a_timeout_on_a_write() -> None:
    chaos = ChaosServer()
    faults = {
        "rules": [
            {"match": {"tool": "get_stock", "nth_call": 1}, "fault": "rate_limit", "params": {"retry_after_ms": 20}},
            {"match": {"tool": "create_order", "nth_call": 1}, "fault": "timeout", "params": {"commit": "before_hang"}},
        ]
    }
    # The injected hang waits out the attempt timeout on a fake clock, after the write was forwarded and committed:
    # the write reaches the upstream whatever the machine's speed (a real 0.3 s timeout raced it). The real timeout
    # of 30 s is only a bound.
    injector = FaultInjector(FaultPlan.model_validate(faults), clock=FakeClock())
    policy = {**_READ_ONLY, "tools": {**_READ_ONLY["tools"], "create_order": {"timeouts": {"attempt_s": 30}}}}
    with anyio.fail_after(60):
        async with proxied({"orders": chaos.server}, policy, calls=injector.bind) as h:
            stock = await h.client.call_tool("get_stock", {"sku": "apple"})
            order = await h.client.call_tool(
                "create_order", {"customer": "a", "sku": "apple", "qty": 1, "client_ref": "R1"}
            )
    assert not stock.is_error
    assert [a["outcome"] for a in stock.meta["io.github.resilient-mcp/attempts"]] == ["D2_rate_limited", "ok"]
    observation = order.meta[FAULT_META_KEY]
    assert order.is_error and observation["fault_type"] == "C3_attempt_timeout"
    assert observation["repair_action"] == "verify_state" and len(observation["attempts"]) == 1
    assert injector.clock.now() == 30  # the hang lasted the whole attempt timeout (virtual)
    assert chaos.ledger.commits_for("create_order", "R1") == 1  # it ran once, and was not re-issued


# --- resilient-mcp wrap --faults PLAN -- mcp-server-time, as real processes ------------------------------------


def _wrap(folder: Path, plan: dict[str, Any], policy: dict[str, Any]) -> Client:
    """A client of ``wrap --faults PLAN --policy POLICY -- mcp-server-time``, its files (and stderr) in ``folder``."""
    folder.mkdir(exist_ok=True)
    (folder / "plan.json").write_text(json.dumps(plan))
    (folder / "policy.json").write_text(json.dumps(policy))
    argv = proxy_argv(
        "wrap",
        "--faults",
        str(folder / "plan.json"),
        "--policy",
        str(folder / "policy.json"),
        "--state-dir",
        str(folder / "state"),
        "--",
        str(MCP_SERVER_TIME),
        "--local-timezone",
        "UTC",
    )
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=child_env())
    return Client(stdio_client(params, errlog=(folder / "proxy.stderr").open("w")), mode="legacy", cache=None)


@pytest.mark.peers
@pytest.mark.skipif(_TIME_MISSING is not None, reason=_TIME_MISSING or "")
async def test_wrap_with_a_fault_plan_injects_a_timeout_and_a_rate_limit_in_front_of_mcp_server_time(
    tmp_path: Path,
) -> None:
    # Two proxies: the injected timeout needs a short attempt timeout (the hang lasts it, in real time), and the calls
    # the real server answers must not run under it (a loaded machine could make an answer late: a race with the
    # premise). The first proxy forwards nothing under its 1 s; the second keeps the default attempt timeout.
    timeout_plan = {"rules": [{"match": {"tool": "get_current_time", "nth_call": 1}, "fault": "timeout"}]}
    # get_current_time is a write here (the policy's effect wins over the server's readOnlyHint): not retried
    timeout_policy = {"defaults": {"effect": "write_unsafe", "timeouts": {"attempt_s": 1}}}
    plan = {
        "rules": [
            {
                "match": {"tool": "get_current_time", "nth_call": 1},
                "fault": "rate_limit",
                "params": {"as": "http", "retry_after_ms": 1000},
            },
            {
                "match": {"tool": "convert_time", "nth_call": [1, 2, 3]},
                "fault": "rate_limit",
                "params": {"retry_after_ms": 200},
            },
        ]
    }
    # convert_time is a read: its typed rate limits are retried (an untrusted upstream's "did not run" would not get a
    # write retried, rule R); an HTTP 429 says the write did not run: it is retried after its Retry-After
    policy = {"defaults": {"effect": "write_unsafe"}, "tools": {"convert_time": {"effect": "read_only"}}}
    convert = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}
    with anyio.fail_after(60):
        async with _wrap(tmp_path / "timeout", timeout_plan, timeout_policy) as client:
            started = time.monotonic()
            timed_out = await client.call_tool("get_current_time", {"timezone": "UTC"})
            timeout_s = time.monotonic() - started  # a lower bound: the injected hang lasts the attempt timeout
        async with _wrap(tmp_path / "rate", plan, policy) as client:
            started = time.monotonic()
            absorbed = await client.call_tool("get_current_time", {"timezone": "UTC"})
            absorbed_s = time.monotonic() - started  # a lower bound: the Retry-After is slept
            clean = await client.call_tool("get_current_time", {"timezone": "UTC"})
            exhausted = await client.call_tool("convert_time", convert)
    observation = timed_out.meta[FAULT_META_KEY]
    assert timed_out.is_error and observation["fault_type"] == "C3_attempt_timeout" and timeout_s >= 1.0
    assert observation["repair_action"] == "verify_state"  # a write: not retried, verify
    attempts = absorbed.meta["io.github.resilient-mcp/attempts"]
    assert not absorbed.is_error and [a["outcome"] for a in attempts] == ["D2_rate_limited", "ok"]
    assert attempts[1]["delay_before_ms"] >= 1000 and absorbed_s >= 1.0  # Retry-After honoured
    assert not clean.is_error and json.loads(clean.content[0].text)["timezone"] == "UTC"
    assert exhausted.is_error and exhausted.meta[FAULT_META_KEY]["fault_type"] == "D2_rate_limited"
    assert len(exhausted.meta[FAULT_META_KEY]["attempts"]) == 3
    for run in ("timeout", "rate"):
        assert "chaos_fault_injected" in (tmp_path / run / "proxy.stderr").read_text()


def test_wrap_refuses_a_bad_fault_plan_naming_file_and_line(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("rules:\n  - fault: rename_tool\n")
    done = run_cli("wrap", "--faults", str(plan), "--", sys.executable, "-c", "pass")
    assert done.returncode == 2, done.stderr
    assert "rules[0]: A2_stale_tool_list" in done.stderr and "chaos server" in done.stderr
