"""Operations in process: off by default with nothing on the hot path, isolated from the calls they observe, bounded
labels, the configuration's checks, and the stdio mode's loopback listener as a real process."""

from __future__ import annotations

import sys
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client.parser import text_string_to_metric_families
from pydantic import ValidationError

from resilient_mcp.app import pipeline_factory
from resilient_mcp.call.chain import ToolCall
from resilient_mcp.call.events import NULL, CallEnd, CallEvents
from resilient_mcp.ops import runtime
from resilient_mcp.ops.metrics import MetricsRecorder
from resilient_mcp.ops.runtime import Ops, OpsUnavailable
from resilient_mcp.ops.secrets import MASK, Scrubber, configured_secrets
from resilient_mcp.policy.config import ProxyConfig
from resilient_mcp.proxy.pipeline import Services
from tests.fixtures.scripted import ScriptedUpstream, ok_text
from tests.harness import proxied
from tests.helpers import LOCAL_HTTP, child_env, free_port, proxy_argv, wait_until, write_yaml
from tests.ops.support import call

pytestmark = pytest.mark.anyio


def config(**data: Any) -> ProxyConfig:
    return ProxyConfig.model_validate({"upstreams": {"shop": {"command": "in-memory"}}, **data})


def test_in_stdio_mode_without_a_metrics_port_operations_are_off_and_the_chain_gets_the_null_recorder() -> None:
    ops = Ops.from_config(config(), http=False, environ={})
    assert ops.events is NULL and not ops.enabled
    assert (ops.metrics, ops.status, ops.tracing) == (None, None, None)


def test_tracing_auto_follows_the_standard_otlp_endpoint_variable_and_true_without_the_sdk_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[str] = []

    def start() -> TracerProvider:
        started.append("on")
        return TracerProvider()

    monkeypatch.setattr("resilient_mcp.ops.telemetry.start_tracing", start)
    assert Ops.from_config(config(), http=False, environ={}).tracing is None
    ops = Ops.from_config(config(), http=False, environ={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert ops.tracing is not None and started == ["on"]
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}
    assert Ops.from_config(config(tracing={"enabled": False}), http=False, environ=endpoint).tracing is None
    monkeypatch.setattr("resilient_mcp.ops.telemetry.sdk_available", lambda: False)
    with pytest.raises(OpsUnavailable, match=r"pip install 'resilient-mcp\[otel\]'"):
        Ops.from_config(config(tracing={"enabled": True}), http=False, environ={})
    assert runtime.OTLP_ENDPOINT_VARS[0] == "OTEL_EXPORTER_OTLP_ENDPOINT"


def test_metrics_listen_must_be_a_loopback_address() -> None:
    with pytest.raises(ValidationError, match=r"metrics\.listen must be a loopback address"):
        config(metrics={"listen": "0.0.0.0:9464"})
    assert config(metrics={"listen": "127.0.0.1:9464"}).metrics.listen == "127.0.0.1:9464"


class Exploding(CallEvents):
    enabled = True

    def call_started(self, call: ToolCall) -> None:
        raise RuntimeError("recorder bug")

    def call_finished(self, call: ToolCall, end: CallEnd) -> None:
        raise RuntimeError("recorder bug")

    def attempt_started(self, call: ToolCall) -> None:
        raise RuntimeError("recorder bug")


async def test_a_failing_recorder_never_changes_a_calls_result() -> None:
    from resilient_mcp.call.events import combine
    from resilient_mcp.proxy.pipeline import Pipeline

    up = ScriptedUpstream(name="shop")
    up.tool("echo", lambda args: ok_text(f"echo {args['m']}", m=args["m"]))
    services = Services(events=combine([Exploding()]))
    tools = {"echo": {"effect": "read_only"}}
    async with proxied(
        {"shop": up.server()}, {"tools": tools}, pipeline=lambda router, policy: Pipeline(router, policy, services)
    ) as h:
        result = await call(h, "echo", {"m": "hi"})
    assert not result.is_error and result.structured_content == {"m": "hi"} and up.count("echo") == 1


def test_tool_labels_are_capped_and_later_names_count_as_other() -> None:
    metrics = MetricsRecorder(max_tools=2)
    assert [metrics.tool_label(n) for n in ("a", "b", "c", "a", "d")] == ["a", "b", "other", "a", "other"]


async def test_metrics_of_many_tool_names_stay_within_the_cap() -> None:
    up = ScriptedUpstream(name="shop")
    for i in range(5):
        up.tool(f"t{i}", lambda args: ok_text("ok"))
    tools = {f"t{i}": {"effect": "read_only"} for i in range(5)}
    ops = Ops(config(metrics={"max_tools": 2}), served=True)
    async with proxied({"shop": up.server()}, {"tools": tools}, pipeline=pipeline_factory(ops)) as h:
        for i in range(5):
            await call(h, f"t{i}", {})
        assert ops.metrics is not None
        text = ops.metrics.render().decode()
    tools_seen = {
        s.labels["tool"]
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "resilient_mcp_tool_calls_total"
    }
    assert tools_seen == {"t0", "t1", "other"}


def test_the_scrubber_masks_header_env_url_and_token_secrets() -> None:
    cfg = ProxyConfig.model_validate(
        {
            "upstreams": {
                "a": {"command": "x", "env": {"KEY": "env-value-123"}},
                "b": {
                    "url": "http://u:pw-secret-9@h/mcp?token=q-secret-8",
                    "headers": {"Authorization": "Bearer hdr-77"},
                },
            },
            "listen": {"auth_tokens": ["listener-token-1"]},
        }
    )
    found = configured_secrets(cfg)
    assert {"env-value-123", "pw-secret-9", "q-secret-8", "Bearer hdr-77", "hdr-77", "listener-token-1"} <= set(found)
    scrub = Scrubber(found)
    text = "GET http://u:pw-secret-9@h/mcp?token=q-secret-8 with hdr-77, env-value-123 and listener-token-1"
    assert scrub.text(text) == f"GET http://u:{MASK}@h/mcp?token={MASK} with {MASK}, {MASK} and {MASK}"
    assert scrub.data({"a": ["x hdr-77"], "n": 1}) == {"a": [f"x {MASK}"], "n": 1}


def test_stdio_mode_serves_metrics_and_the_status_page_on_the_configured_loopback_port(tmp_path: Path) -> None:
    port = free_port()
    up = [sys.executable, "-m", "resilient_mcp.cli", "chaos-server"]
    cfg = {
        "upstreams": {"orders": {"command": up[0], "args": up[1:]}},
        "state_dir": str(tmp_path / "state"),
        "metrics": {"listen": f"127.0.0.1:{port}"},
    }
    path = write_yaml(tmp_path / "config.yaml", cfg)
    argv = proxy_argv("serve", "--config", str(path))

    async def session() -> types.CallToolResult:
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=child_env(tmp_path))
        with (tmp_path / "proxy.stderr").open("w") as err:
            async with Client(stdio_client(params, errlog=err), mode="legacy", cache=None) as client:
                with anyio.fail_after(30):
                    result = await client.call_tool("get_stock", {"sku": "apple"})
                    up = lambda: _get(port, "/metrics") is not None  # noqa: E731
                    wait_until(up, 30, "the metrics port", stderr=tmp_path / "proxy.stderr")
                    metrics, status = _get(port, "/metrics"), _get(port, "/status.json")
                assert metrics is not None and status is not None
                calls = [
                    s
                    for f in text_string_to_metric_families(metrics)
                    for s in f.samples
                    if s.name == "resilient_mcp_tool_calls_total"
                ]
                assert [(s.labels["tool"], s.labels["outcome"], s.value) for s in calls] == [("get_stock", "ok", 1.0)]
                assert '"name": "orders"' in status or '"name":"orders"' in status
                return result

    result = anyio.run(session)
    assert not result.is_error


def _get(port: int, path: str) -> str | None:
    try:
        with LOCAL_HTTP.open(urllib.request.Request(f"http://127.0.0.1:{port}{path}"), timeout=5) as response:
            body: str = response.read().decode()
            return body
    except OSError:
        return None


async def _asgi_get(app: Any, path: str, headers: dict[str, str]) -> int:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "server": ("127.0.0.1", 8080),
        "client": ("127.0.0.1", 50000),
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    status: int = sent[0]["status"]
    return status


async def test_metrics_public_lets_only_metrics_through_without_the_listeners_token() -> None:
    from resilient_mcp.host.http import build_app
    from resilient_mcp.host.server import build_server

    token = "a-listener-token-1"
    up = ScriptedUpstream(name="shop")
    up.tool("echo", lambda args: ok_text("ok"))
    for public in (True, False):
        cfg = config(metrics={"public": public}, listen={"auth_tokens": [token]})
        ops = Ops(cfg, served=True)
        async with proxied({"shop": up.server()}, {}, pipeline=pipeline_factory(ops)) as h:
            app = build_app(h.proxy, build_server(h.proxy), "127.0.0.1", cfg.listen, ops)
            host = {"Host": "127.0.0.1:8080"}
            auth = {**host, "Authorization": f"Bearer {token}"}
            assert await _asgi_get(app, "/metrics", host) == (200 if public else 401)
            assert await _asgi_get(app, "/status", host) == 401
            assert await _asgi_get(app, "/status.json", host) == 401
            assert await _asgi_get(app, "/metrics", auth) == 200
            assert await _asgi_get(app, "/status", auth) == 200
            assert await _asgi_get(app, "/status", {**auth, "Host": "evil.example"}) == 421


async def test_a_call_the_host_gave_up_on_is_a_failure_in_metrics_status_and_audit() -> None:
    up = ScriptedUpstream(name="shop")
    reached = anyio.Event()

    async def hang(args: dict[str, Any]) -> types.CallToolResult:
        reached.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    up.tool("slow", hang)
    ops = Ops(config(), served=True)
    assert ops.status is not None
    finished, record = anyio.Event(), ops.status.call_finished

    def seen(call: ToolCall, end: CallEnd) -> None:  # the proxy's side of the call ended (the status page heard it)
        record(call, end)
        finished.set()

    ops.status.call_finished = seen  # type: ignore[method-assign]
    async with proxied(
        {"shop": up.server()}, {"tools": {"slow": {"effect": "read_only"}}}, pipeline=pipeline_factory(ops)
    ) as h:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:  # the host cancels its request (as a host timeout does)
                tg.start_soon(h.client.call_tool, "slow", {})
                await reached.wait()
                tg.cancel_scope.cancel()
            await finished.wait()
        assert ops.metrics is not None and ops.status is not None and ops.proxy is not None
        text = ops.metrics.render().decode()
        snap = ops.status.snapshot(ops.proxy)
        store = h.proxy.pipeline.services.store
        assert store is not None
        await store.flush()
        rows = store.recent_audit(limit=5)
    outcomes = {
        s.labels["outcome"]
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "resilient_mcp_tool_calls_total" and s.labels["tool"] == "slow"
    }
    assert outcomes == {"abandoned"}
    assert [(f["tool"], f["outcome"]) for f in snap["failures"]] == [("slow", "abandoned")]
    assert snap["tools"][0]["failures"] == 1
    assert [r["outcome"] for r in rows] == ["abandoned"]


async def test_breaker_state_is_labelled_with_the_host_visible_tool_name_like_every_other_metric() -> None:
    shop, other = ScriptedUpstream(name="shop"), ScriptedUpstream(name="other")
    shop.tool("flaky", lambda args: ok_text("ok"))
    other.tool("ping", lambda args: ok_text("pong"))
    data = {"upstreams": {"shop": {"command": "in-memory"}, "other": {"command": "in-memory"}}, "state_dir": ":memory:"}
    ops = Ops(ProxyConfig.model_validate(data), served=True)
    policy = {"defaults": {"retry": {"enabled": False}, "breaker": {"failure_threshold": 1}}}
    faults = {"rules": [{"match": {"tool": "flaky"}, "fault": "C4", "params": {"status": 502}}]}
    upstreams = {"shop": shop.server(), "other": other.server()}
    async with proxied(upstreams, policy, config={"faults": faults}, pipeline=pipeline_factory(ops)) as h:
        assert (await call(h, "shop__flaky", {})).is_error
        assert ops.metrics is not None
        text = ops.metrics.render().decode()
    breaker = {
        s.labels["tool"]: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "resilient_mcp_breaker_state"
    }
    calls = {
        s.labels["tool"]
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "resilient_mcp_tool_calls_total"
    }
    assert calls == {"shop__flaky"} and breaker.get("shop__flaky") == 2.0, breaker  # open, joinable with calls
    assert "flaky" not in breaker
