"""Issue 20, item 6: the status page across tenants, and without credentials.

Before: ``/status``, ``/status.json`` and ``?part=live`` read with token B showed the last failures of token A's calls
with their observations (argument values quoted in the error text); with ``metrics.listen`` in stdio mode the same page
answered any local user without a credential. Now each token sees only its own failures, and ``metrics.listen``
needs ``metrics.token`` or shows no failure's observation.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

from tests.helpers import (
    LOCAL_HTTP,
    JsonRpcPipe,
    free_port,
    http_get_status,
    http_proxy,
    probe_argv,
    proxy_argv,
    running,
    wait_until,
    write_yaml,
)
from tests.security.http_proxy import RawSession

ALICE, BOB = "alice-token-0001", "bob-token-00000002"
PIN = "PIN-4242-SECRET"
PAGES = ("/status.json", "/status", "/status?part=live")


def _get(base: str, path: str, token: str | None) -> tuple[int, str]:
    request = urllib.request.Request(base + path, headers={"Host": base.removeprefix("http://")})
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with LOCAL_HTTP.open(request, timeout=30) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_a_token_sees_its_own_failures_on_the_status_page_and_never_another_tokens(tmp_path: Path) -> None:
    with http_proxy(tmp_path, listen={"auth_tokens": [ALICE, BOB]}) as proxy:
        alice = RawSession(proxy, token=ALICE).initialize()
        failed = alice.call_tool("echo", {"text": [PIN]})  # a schema violation that quotes the value
        assert PIN in failed.text and '"isError": true' in failed.text.replace('"isError":true', '"isError": true')
        seen = {
            who: {path: _get(proxy.base, path, token) for path in PAGES} for who, token in (("a", ALICE), ("b", BOB))
        }
    for path in PAGES:
        status_a, body_a = seen["a"][path]
        status_b, body_b = seen["b"][path]
        assert status_a == 200 and status_b == 200, (path, status_a, status_b)
        assert PIN in body_a, f"{path}: alice's own failure, with its observation"
        assert PIN not in body_b, f"{path}: bob sees alice's argument value"
    assert json.loads(seen["b"]["/status.json"][1])["failures"] == []
    tools = json.loads(seen["b"]["/status.json"][1])["tools"]
    assert any(t["tool"] == "echo" and t["failures"] == 1 for t in tools), "counts stay global: no values in them"


def _stdio_proxy_with_metrics_listen(tmp: Path, token: str | None) -> tuple[list[str], str]:
    port = free_port()
    metrics: dict[str, object] = {"listen": f"127.0.0.1:{port}"}
    if token is not None:
        metrics["token"] = token
    config = {"upstreams": {"probe": {"command": sys.executable, "args": probe_argv()[1:]}}, "metrics": metrics}
    path = write_yaml(tmp / f"stdio-{port}.yaml", config)
    return proxy_argv("serve", "--config", str(path)), f"http://127.0.0.1:{port}"


def _fail_one_call_over_stdio(tmp: Path, token: str | None) -> dict[str, tuple[int, str]]:
    argv, base = _stdio_proxy_with_metrics_listen(tmp, token)
    stderr = tmp / f"stdio-{token is not None}.stderr"
    with running(argv, stderr, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as process:
        pipe = JsonRpcPipe(process, stderr)
        pipe.initialize()
        reply = pipe.request("tools/call", {"name": "echo", "arguments": {"text": [PIN]}})
        assert PIN in json.dumps(reply)
        wait_until(lambda: http_get_status(f"{base}/metrics") is not None, 60, "metrics.listen", process=process)
        pages = {f"anonymous {p}": _get(base, p, None) for p in PAGES}
        if token is not None:
            pages.update({f"token {p}": _get(base, p, token) for p in PAGES})
    return pages


def test_metrics_listen_without_a_token_serves_no_failure_values_to_a_local_user(tmp_path: Path) -> None:
    pages = _fail_one_call_over_stdio(tmp_path, None)
    for path in PAGES:
        status, body = pages[f"anonymous {path}"]
        assert status == 200 and PIN not in body, path
    failures = json.loads(pages["anonymous /status.json"][1])["failures"]
    assert len(failures) == 1 and failures[0]["observation"] is None and failures[0]["tool"] == "echo"


def test_metrics_listen_with_metrics_token_needs_it_and_then_shows_the_values(tmp_path: Path) -> None:
    pages = _fail_one_call_over_stdio(tmp_path, "ops-token-9kQ2")
    for path in PAGES:
        assert pages[f"anonymous {path}"][0] == 401, path
        status, body = pages[f"token {path}"]
        assert status == 200 and PIN in body, path
