"""The streamable HTTP listener of ``resilient-mcp serve --http``, run as a real process on 127.0.0.1.

A real MCP client lists and calls tools through it; raw requests check DNS-rebinding protection (a foreign Host or
Origin is refused) and static bearer tokens read from the environment. Binding a non-loopback address without
tokens is checked only through ``resilient-mcp check`` (no test ever binds 0.0.0.0).
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.helpers import (
    LOCAL_HTTP,
    STARTUP_S,
    child_env,
    http_proxy,
    probe_argv,
    run_cli,
    write_yaml,
)

pytestmark = pytest.mark.anyio

CALL_S = 30.0
PROBE_TOOLS = {"echo", "slow", "pid", "counter_add", "crash"}

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "resilient-mcp-tests", "version": "0"},
    },
}


StartProxy = Callable[..., str]


@pytest.fixture
def start_proxy(tmp_path: Path) -> Iterator[StartProxy]:
    """Start ``resilient-mcp serve --http 127.0.0.1:PORT`` in front of the probe (``helpers.http_proxy``: ready when
    it returns); returns the base URL. Every proxy started is stopped at teardown."""
    with ExitStack() as stack:

        def start(listen: dict[str, Any] | None = None, env: dict[str, str] | None = None) -> str:
            return stack.enter_context(http_proxy(tmp_path, listen, env)).base

        yield start


def _post(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> tuple[int, str]:
    """POST a JSON-RPC message as an MCP client would; returns (status, body text)."""
    all_headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    all_headers.update(headers or {})
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=all_headers, method="POST")
    try:
        with LOCAL_HTTP.open(request, timeout=CALL_S) as response:
            status: int = response.status
            return status, response.read(65536).decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


async def test_an_mcp_client_lists_and_calls_tools_through_the_http_listener(start_proxy: StartProxy) -> None:
    base = start_proxy()
    reported: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reported.append((progress, total))

    with anyio.fail_after(CALL_S):
        async with Client(f"{base}/mcp", mode="legacy", cache=None) as client:
            assert {t.name for t in (await client.list_tools()).tools} == PROBE_TOOLS
            result = await client.call_tool("echo", {"text": "over http"})
            assert not result.is_error
            assert [c.text for c in result.content if c.type == "text"] == ["over http"]
            slow = await client.call_tool("slow", {"seconds": 0.2, "steps": 2}, progress_callback=on_progress)
            assert not slow.is_error
    assert reported == [(1, 2), (2, 2)]


@pytest.mark.parametrize(
    ("header", "value"), [("Host", "evil.example.com"), ("Origin", "http://evil.example.com")], ids=["host", "origin"]
)
def test_a_request_from_a_foreign_host_or_origin_is_refused(start_proxy: StartProxy, header: str, value: str) -> None:
    base = start_proxy()
    status, body = _post(f"{base}/mcp", INITIALIZE, {header: value})
    assert 400 <= status < 500, (status, body)
    ok_status, ok_body = _post(f"{base}/mcp", INITIALIZE)
    assert ok_status == 200, (ok_status, ok_body)


async def test_with_auth_tokens_a_request_needs_a_token_from_the_environment(start_proxy: StartProxy) -> None:
    token = secrets.token_urlsafe(16)
    base = start_proxy(listen={"auth_tokens": ["${TEST_TOKEN}"]}, env={"TEST_TOKEN": token})
    url = f"{base}/mcp"

    assert _post(url, INITIALIZE)[0] == 401
    assert _post(url, INITIALIZE, {"Authorization": f"Bearer {token}x"})[0] == 401
    assert _post(url, INITIALIZE, {"Authorization": "Bearer ${TEST_TOKEN}"})[0] == 401
    status, body = _post(url, INITIALIZE, {"Authorization": f"Bearer {token}"})
    assert status == 200, (status, body)
    assert '"result"' in body

    with anyio.fail_after(CALL_S):
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=CALL_S, trust_env=False) as http,
            Client(streamable_http_client(url, http_client=http), mode="legacy", cache=None) as client,
        ):
            result = await client.call_tool("echo", {"text": "authorized"})
            assert [c.text for c in result.content if c.type == "text"] == ["authorized"]


def _check(config: dict[str, Any], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    path = write_yaml(tmp_path / "listen.yaml", config)
    return run_cli("check", "--config", str(path), env=child_env(tmp_path / "state"), timeout=STARTUP_S)


def test_listening_on_all_interfaces_without_tokens_is_a_config_error_naming_auth_tokens(tmp_path: Path) -> None:
    upstreams = {"probe": {"command": sys.executable, "args": probe_argv()[1:]}}
    refused = _check({"upstreams": upstreams, "listen": {"http": "0.0.0.0:8765"}}, tmp_path)
    assert refused.returncode == 2, refused
    assert "listen.auth_tokens" in refused.stderr
    assert "0.0.0.0" in refused.stderr
    assert str(tmp_path / "listen.yaml") in refused.stderr

    accepted = _check(
        {
            "upstreams": upstreams,
            "listen": {"http": "0.0.0.0:8765", "auth_tokens": ["a-static-test-token-of-some-length"]},
        },
        tmp_path,
    )
    assert accepted.returncode == 0, accepted
