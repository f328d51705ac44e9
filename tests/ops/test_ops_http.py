"""Operations of ``resilient-mcp serve --http`` as a real process, after one scripted chaos run.

The proxy serves the chaos order service (stdio) with faults injected by a plan, plus a remote upstream that cannot
be reached, whose URL, headers and environment hold secrets. The script makes a known set of calls: three reads of
which the first is rate limited once (retried, recovered), a read that always gets HTTP 503 (retried once, as it may
have run, then an observation), a write refused by validation, a write with an explicit idempotency key sent twice
(one replay) and an export cut to the output cap. Traces go to a local OTLP/HTTP sink. Then ``/metrics`` is parsed
with the Prometheus text parser, ``/status`` is read with and without JavaScript (headless Chromium),
``resilient-mcp status`` prints the table, and logs, spans, metrics and the status page are scanned for the
configured secrets. Chromium's screenshot of the page is saved in ``$RESILIENT_MCP_ARTIFACTS`` (default
``.artifacts/``); with ``RESILIENT_MCP_UPDATE_DOCS=1`` also as ``docs/status-page.png``, the README's picture.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from prometheus_client.parser import text_string_to_metric_families

from resilient_mcp.faults import CATALOG
from tests.helpers import (
    LOCAL_HTTP,
    REPO,
    child_env,
    free_port,
    http_get_status,
    proxy_argv,
    running,
    stderr_tail,
    wait_until,
    write_yaml,
)
from tests.ops.sink import OtlpSink, otlp_sink

STARTUP_S = 60.0
CALL_S = 30.0
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SECRETS = {
    "LISTEN_TOKEN": "listen-token-7Hq2vX9pLm",
    "ORDERS_API_KEY": "env-secret-Zk81QwPn55",
    "BILLING_TOKEN": "header-secret-Rt4YuI8oP0",
    "BILLING_PASSWORD": "url-password-Gh6JkL2mN3",
    "BILLING_QUERY_KEY": "url-query-Vb5NmQ1wE7",
}
ARTIFACTS = Path(os.environ.get("RESILIENT_MCP_ARTIFACTS", REPO / ".artifacts"))
SCREENSHOT_DOC = REPO / "docs" / "status-page.png"


@dataclass
class Run:
    url: str
    token: str
    stderr: Path
    sink: OtlpSink
    results: dict[str, types.CallToolResult]
    config: Path


def _config(tmp: Path, port: int, sink: OtlpSink) -> Path:
    plan = {
        "rules": [
            {"match": {"tool": "get_stock", "nth_call": 1}, "fault": "rate_limit", "params": {"retry_after_ms": 20}},
            {"match": {"tool": "get_order"}, "fault": "C4", "params": {"status": 503}},
        ]
    }
    policy = {
        "defaults": {"retry": {"backoff_base_ms": 1, "backoff_cap_ms": 5}},
        "tools": {
            "orders__get_stock": {"effect": "read_only"},
            "orders__get_order": {"effect": "read_only"},
            "orders__export_orders": {"effect": "read_only", "output": {"max_text_bytes": 1000}},
            "orders__create_order": {"effect": "write_unsafe"},
        },
    }
    write_yaml(tmp / "policy.yaml", policy)
    config = {
        "upstreams": {
            "orders": {
                "command": sys.executable,
                "args": ["-m", "resilient_mcp.cli", "chaos-server"],
                "env": {"ORDERS_API_KEY": "${ORDERS_API_KEY}"},
            },
            "billing": {
                "url": "http://billing:${BILLING_PASSWORD}@127.0.0.1:9/mcp?key=${BILLING_QUERY_KEY}",
                "headers": {"Authorization": "Bearer ${BILLING_TOKEN}"},
                "connect_timeout_s": 2,
            },
        },
        "policies": ["policy.yaml"],
        "faults": plan,
        "state_dir": str(tmp / "state"),
        "listen": {"http": f"127.0.0.1:{port}", "auth_tokens": ["${LISTEN_TOKEN}"]},
        "logging": {"level": "info", "format": "json"},
        "tracing": {"enabled": True},
    }
    return write_yaml(tmp / "config.yaml", config)


async def _script(url: str, token: str) -> dict[str, types.CallToolResult]:
    headers = {"Authorization": f"Bearer {token}", "traceparent": f"00-{TRACE_ID}-00f067aa0ba902b7-01"}
    results: dict[str, types.CallToolResult] = {}
    with anyio.fail_after(CALL_S * 4):
        async with (
            httpx2.AsyncClient(headers=headers, timeout=CALL_S, trust_env=False) as http,
            Client(streamable_http_client(f"{url}/mcp", http_client=http), mode="legacy", cache=None) as client,
        ):
            names = {t.name.rpartition("__")[2]: t.name for t in (await client.list_tools()).tools}
            for i in range(3):
                results[f"stock{i}"] = await client.call_tool(names["get_stock"], {"sku": "apple"})
            results["order"] = await client.call_tool(names["get_order"], {"order_id": "o-1"})
            results["refused"] = await client.call_tool(names["create_order"], {"sku": "apple"})
            args = {"customer": "ann", "sku": "pear", "qty": 1, "client_ref": "r-1"}
            key: Any = {"idempotency-key": "order-r-1"}
            results["write"] = await client.call_tool(names["create_order"], args, meta=key)
            results["replay"] = await client.call_tool(names["create_order"], args, meta=key)
            results["export"] = await client.call_tool(names["export_orders"], {"rows": 500})
    return results


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    tmp = tmp_path_factory.mktemp("ops-http")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with otlp_sink() as sink:
        config = _config(tmp, port, sink)
        env = child_env(
            state_home=tmp / "xdg",
            OTEL_EXPORTER_OTLP_ENDPOINT=sink.url,
            OTEL_BSP_SCHEDULE_DELAY="50",
            **SECRETS,
        )
        stderr = tmp / "proxy.stderr"
        argv = proxy_argv("serve", "--config", str(config))
        with running(argv, stderr, env=env) as process:
            ready = lambda: http_get_status(f"{url}/healthz") is not None  # noqa: E731
            wait_until(ready, STARTUP_S, "the listener", process=process, stderr=stderr)
            results = anyio.run(_script, url, SECRETS["LISTEN_TOKEN"])
            yield Run(url, SECRETS["LISTEN_TOKEN"], stderr, sink, results, config)


def get(run: Run, path: str, token: str | None = "") -> tuple[int, str]:
    request = urllib.request.Request(f"{run.url}{path}")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token or run.token}")
    try:
        with LOCAL_HTTP.open(request, timeout=CALL_S) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(parsed: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return parsed.get((name, tuple(sorted(labels.items()))), 0.0)


def test_the_scripted_run_did_what_the_counts_below_assume(run: Run) -> None:
    r = run.results
    assert not any(r[f"stock{i}"].is_error for i in range(3))
    assert r["order"].is_error and r["refused"].is_error and not r["write"].is_error and not r["replay"].is_error
    assert (r["replay"].meta or {}).get("io.github.resilient-mcp/replay")
    assert "io.github.resilient-mcp/truncated" in (r["export"].meta or {})


def test_metrics_after_the_scripted_run_count_calls_retries_replays_refusals_caps_and_upstreams(run: Run) -> None:
    status, text = get(run, "/metrics")
    assert status == 200, text
    m = samples(text)
    calls = "resilient_mcp_tool_calls_total"
    ok = {"upstream": "orders", "outcome": "ok", "fault_type": "none"}
    assert value(m, calls, tool="orders__get_stock", **ok) == 3
    assert value(m, calls, tool="orders__create_order", **ok) == 2
    assert value(m, calls, tool="orders__export_orders", **ok) == 1
    failed = {"upstream": "orders", "tool": "orders__get_order", "outcome": "error", "fault_type": "C4_gateway_5xx"}
    assert value(m, calls, **failed) == 1
    refused = {"upstream": "orders", "tool": "orders__create_order", "outcome": "refused"}
    assert value(m, calls, fault_type="B1_missing_required_argument", **refused) == 1
    assert sum(v for (name, _), v in m.items() if name == calls) == 8
    assert value(m, "resilient_mcp_retries_total", upstream="orders", tool="orders__get_stock") == 1
    retried = value(m, "resilient_mcp_retries_total", upstream="orders", tool="orders__get_order")
    assert retried == 1, "a 503 may have run: 2 attempts in all"
    assert value(m, "resilient_mcp_replays_total", upstream="orders", tool="orders__create_order") == 1
    assert value(m, "resilient_mcp_output_caps_total", upstream="orders", tool="orders__export_orders") == 1
    stage = {"upstream": "orders", "tool": "orders__create_order", "stage": "validate"}
    assert value(m, "resilient_mcp_refusals_total", **stage) == 1
    latency = "resilient_mcp_tool_call_duration_seconds_count"
    assert value(m, latency, upstream="orders", tool="orders__get_stock") == 3
    attempts = "resilient_mcp_upstream_attempt_duration_seconds_count"
    assert value(m, attempts, upstream="orders", outcome="error", fault_type="C4_gateway_5xx") == 2
    assert value(m, attempts, upstream="orders", outcome="error", fault_type="D2_rate_limited") == 1
    assert value(m, attempts, upstream="orders", outcome="ok", fault_type="none") == 5  # 3 reads, a write, an export
    assert value(m, "resilient_mcp_upstream_up", upstream="orders") == 1
    assert value(m, "resilient_mcp_upstream_up", upstream="billing") == 0
    assert value(m, "resilient_mcp_upstream_restarts_total", upstream="orders") == 0
    assert value(m, "resilient_mcp_idempotency_records", status="in_flight") == 0
    assert value(m, "resilient_mcp_state_backend_errors_total") == 0
    assert ("resilient_mcp_breaker_state", (("tool", ""), ("upstream", "orders"))) in m


ENUM_VALUE = re.compile(r"[a-z][a-z0-9_]*")
"""The one style of enumerated label values: lowercase snake_case."""
NOT_ENUMERATIONS = frozenset({"upstream", "tool", "version", "python", "mcp", "le"})
"""Labels whose values are names or numbers (configured, host-visible, versions, bucket bounds)."""


def test_every_enumerated_label_value_of_the_scrape_is_snake_case_and_fault_types_are_the_catalogs(run: Run) -> None:
    """One vocabulary style across the scrape (outcome, stage, state, status, ...); ``fault_type`` is the catalog's
    identifier verbatim, as in observations, the audit log and the status page, and appears in no other label."""
    status, text = get(run, "/metrics")
    assert status == 200, text
    seen: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            for label, label_value in sample.labels.items():
                if label not in NOT_ENUMERATIONS:
                    seen.setdefault(label, set()).add(label_value)
    catalog = {fault.fault_type for fault in CATALOG}
    assert seen["fault_type"] <= catalog | {"none", "other"}
    assert {"C4_gateway_5xx", "D2_rate_limited", "B1_missing_required_argument"} <= seen["fault_type"]
    enumerations = {label: values for label, values in seen.items() if label != "fault_type"}
    assert {"outcome", "stage", "state", "status"} <= set(enumerations)
    off_style = {
        label: sorted(v for v in values if not ENUM_VALUE.fullmatch(v)) for label, values in enumerations.items()
    }
    assert not any(off_style.values()), off_style
    assert not any(values & catalog for values in enumerations.values()), "a fault type outside fault_type"
    # The status page speaks the same vocabulary.
    status, page = get(run, "/status.json")
    board = json.loads(page)
    failures = board["failures"]
    assert {f["outcome"] for f in failures} <= {"error", "refused", "abandoned"}
    assert {f["fault_type"] for f in failures} <= catalog
    words = {u[key] for u in board["upstreams"] for key in ("state", "breaker") if u.get(key)}
    words |= {t["effect"] for t in board["treatment"]}
    words |= {f[key] for f in failures for key in ("outcome", "category", "repair_action") if f.get(key)}
    words |= {category for t in board["tools"] for category in t["failures_by_category"]}
    assert {"ready", "closed", "read_only", "error", "refused"} <= words
    assert not [w for w in words if not ENUM_VALUE.fullmatch(w)], words


def test_metrics_and_the_status_page_need_the_listeners_token(run: Run) -> None:
    for path in ("/metrics", "/status", "/status.json"):
        assert get(run, path, token=None)[0] == 401
        assert get(run, path, token="wrong-token-123")[0] == 401


def test_a_foreign_host_header_is_refused_on_the_status_page(run: Run) -> None:
    request = urllib.request.Request(
        f"{run.url}/status", headers={"Host": "evil.example:80", "Authorization": f"Bearer {run.token}"}
    )
    with pytest.raises(urllib.error.HTTPError) as err:
        LOCAL_HTTP.open(request, timeout=CALL_S)
    assert err.value.code == 421


def test_the_status_page_without_javascript_shows_the_tables(run: Run) -> None:
    status, page = get(run, "/status")
    assert status == 200
    assert '<tr data-upstream="orders"><td>orders</td><td class="ok">ready</td>' in page
    assert '<tr data-upstream="billing"><td>billing</td>' in page
    assert '<tr data-tool="orders__get_stock">' in page and "C4_gateway_5xx" in page
    assert '<tr data-absorbed="replays"><th>writes answered from their idempotency record</th><td class="num">1</td>'
    assert "<script" in page and "https://" not in page and "http://" not in page, "no CDN: everything is local"
    status, script = get(run, "/status/static/status.js")
    assert status == 200 and "fetch(" in script


def status(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv = proxy_argv("status", *args)
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=CALL_S, check=False)


def test_the_status_command_prints_upstreams_tools_and_failures(run: Run) -> None:
    env = child_env(RESILIENT_MCP_TOKEN=run.token)
    done = status(["--url", run.url], env)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "orders" in out and "ready" in out and "billing" in out
    assert "orders__get_order" in out and "C4_gateway_5xx" in out and "transport: 1" in out
    assert any(line.split() == ["replays", "1"] for line in out.splitlines()), out
    by_config = status(["--config", str(run.config)], child_env(**SECRETS))
    assert by_config.returncode == 0, by_config.stderr
    assert by_config.stdout.splitlines()[2:] == out.splitlines()[2:] or "orders__get_order" in by_config.stdout
    refused = status(["--url", run.url], child_env())
    assert refused.returncode == 1 and "HTTP 401" in refused.stderr and "RESILIENT_MCP_TOKEN" in refused.stderr


def test_spans_reach_the_otlp_endpoint_in_the_trace_of_the_hosts_traceparent_header(run: Run) -> None:
    def exported() -> list[Any] | None:
        spans = [s for s in run.sink.spans() if any(a.key == "resilient_mcp.outcome" for a in s.attributes)]
        return spans if len(spans) >= 8 else None

    wait_until(exported, 30, "8 call spans exported", stderr=run.stderr)
    spans = exported() or []
    assert {s.trace_id.hex() for s in spans} == {TRACE_ID}
    names = {s.name for s in run.sink.spans()}
    assert {"resilient-mcp attempt 1", "resilient-mcp attempt 2", "resilient-mcp backoff"} <= names


def test_no_configured_secret_appears_in_logs_spans_metrics_or_the_status_page(run: Run) -> None:
    wait_until(lambda: run.sink.bodies or None, 30, "spans exported", stderr=run.stderr)
    places = {
        "logs": run.stderr.read_text(errors="replace"),
        "spans": b"".join(run.sink.bodies).decode("utf-8", errors="replace"),
        "metrics": get(run, "/metrics")[1],
        "status page": get(run, "/status")[1],
        "status.json": get(run, "/status.json")[1],
    }
    assert "upstream_start_failed" in places["logs"] and "billing" in places["status page"]
    billing = json.loads(places["status.json"])["upstreams"]
    assert any(up["name"] == "billing" and up["state"] != "ready" for up in billing)
    leaks = [(where, name) for where, text in places.items() for name, secret in SECRETS.items() if secret in text]
    assert leaks == [], stderr_tail(run.stderr)


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _chromium_missing() -> str | None:
    if not Path(CHROMIUM).exists():
        return "chromium is not installed (.ci/run installs Debian's chromium)"
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[dev]')"
    return None


@pytest.mark.skipif(_chromium_missing() is not None and not os.environ.get("CI"), reason=_chromium_missing() or "")
def test_the_status_page_in_headless_chromium_shows_upstreams_a_failures_observation_and_absorbed_counts(
    run: Run,
) -> None:
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
        try:
            page = browser.new_page(
                viewport={"width": 1280, "height": 900},
                extra_http_headers={"Authorization": f"Bearer {run.token}"},
            )
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"{run.url}/status", timeout=CALL_S * 1000)
            page.wait_for_selector("#live-state.ok", timeout=CALL_S * 1000)  # the script refreshed the page
            assert page.locator('tr[data-upstream="orders"] td').nth(1).inner_text() == "ready"
            assert page.locator('tr[data-upstream="billing"] td').nth(1).inner_text() != "ready"
            assert page.locator('tr[data-absorbed="replays"] td').inner_text() == "1"
            assert page.locator('tr[data-absorbed="retries"] td').inner_text() == "2"
            assert page.locator('tr[data-absorbed="refusals"] td').inner_text() == "1"
            failure = page.locator("details.failure", has_text="orders__get_order").first
            failure.locator("summary").click()
            observation = failure.locator("pre")
            observation.wait_for(state="visible", timeout=CALL_S * 1000)
            assert '"fault_type": "C4_gateway_5xx"' in observation.inner_text()
            assert '"repair_action"' in observation.inner_text()
            page.wait_for_timeout(2500)  # one more refresh: the opened observation stays open
            assert failure.locator("pre").is_visible()
            page.screenshot(path=str(ARTIFACTS / "status-page.png"), full_page=True)
            if os.environ.get("RESILIENT_MCP_UPDATE_DOCS"):
                page.screenshot(path=str(SCREENSHOT_DOC), full_page=True)
            assert errors == []
        finally:
            browser.close()
