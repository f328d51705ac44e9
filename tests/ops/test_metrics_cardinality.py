"""Operations stay readable under a confused model: 1,000 invented tool names, then every real tool, through
``resilient-mcp serve --http`` as a real process; ``/metrics`` and ``/status.json`` are scraped over HTTP.

Invented names share one label value and one status row (``(unknown)``), so none of them takes a real tool's label;
the exposition has ``build_info`` and ``process_*`` and no ``_created`` series.
"""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import LOCAL_HTTP, child_env, free_port, http_get_status, proxy_argv, running, wait_until, write_yaml

INVENTED = 1000
TOKEN = "cardinality-token-1234"


async def _calls(url: str) -> list[str]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with anyio.fail_after(600):
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60, trust_env=False) as http,
            Client(streamable_http_client(f"{url}/mcp", http_client=http), mode="legacy", cache=None) as client,
        ):
            real = [t.name for t in (await client.list_tools()).tools]
            for i in range(INVENTED):
                with pytest.raises(MCPError):  # the spec's -32602 for an unknown tool
                    await client.call_tool(f"orders__invented_tool_{i}", {})
            for name in real:  # each real tool once: refused by validation or answered, a series either way
                await client.call_tool(name, {})
    return real


def _get(url: str, path: str) -> str:
    request = urllib.request.Request(f"{url}{path}", headers={"Authorization": f"Bearer {TOKEN}"})
    with LOCAL_HTTP.open(request, timeout=30) as response:
        body: bytes = response.read()
        return body.decode()


def test_a_thousand_invented_tool_names_share_one_label_and_every_real_tools_series_stays(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    config = write_yaml(
        tmp_path / "config.yaml",
        {
            "upstreams": {"orders": {"command": sys.executable, "args": ["-m", "resilient_mcp.cli", "chaos-server"]}},
            "state_dir": str(tmp_path / "state"),
            "listen": {"http": f"127.0.0.1:{port}", "auth_tokens": [TOKEN]},
            "logging": {"level": "warning"},
        },
    )
    stderr = tmp_path / "proxy.stderr"
    with running(proxy_argv("serve", "--config", str(config)), stderr, env=child_env(state_home=tmp_path)) as proc:
        wait_until(
            lambda: http_get_status(f"{url}/healthz") is not None, 60, "the listener", process=proc, stderr=stderr
        )
        real = anyio.run(_calls, url)
        metrics = _get(url, "/metrics")
        status = json.loads(_get(url, "/status.json"))
    calls: dict[str, float] = {}
    names: set[str] = set()
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            names.add(sample.name)
            if sample.name == "resilient_mcp_tool_calls_total":
                tool = sample.labels["tool"]
                calls[tool] = calls.get(tool, 0.0) + sample.value
    assert len(real) == 9 and set(real) <= set(calls), "every real tool keeps its own series"
    assert calls["(unknown)"] == INVENTED and set(calls) == {*real, "(unknown)"}
    assert "resilient_mcp_build_info" in names and "process_resident_memory_bytes" in names
    assert not [n for n in names if n.endswith("_created")]
    rows = {row["tool"]: row for row in status["tools"]}
    assert set(rows) == {*real, "(unknown)"} and rows["(unknown)"]["calls"] == INVENTED
