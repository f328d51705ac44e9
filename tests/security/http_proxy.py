"""A real ``resilient-mcp serve --http`` on 127.0.0.1 for the security tests, and a raw JSON-RPC client for it.

The raw client speaks streamable HTTP by hand (POST, JSON or SSE answers, ``Mcp-Session-Id``), so tests can send
what a real client never would: another token's session id, a batch, a body of 200,000 keys.
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import json
import resource
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.helpers import (
    REPO,
    child_env,
    free_port,
    http_get_status,
    probe_argv,
    proxy_argv,
    stop_process,
    wait_until,
    write_yaml,
)

STARTUP_S = 60.0
CALL_S = 60.0
PROTOCOL = "2025-11-25"


@dataclass
class RunningProxy:
    host: str
    port: int
    process: subprocess.Popen[bytes]
    stderr: Path

    @property
    def base(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stderr_lines(self) -> list[str]:
        return self.stderr.read_text(errors="replace").splitlines()


@contextlib.contextmanager
def http_proxy(
    tmp_path: Path,
    listen: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    open_files: int | None = None,
) -> Iterator[RunningProxy]:
    """``resilient-mcp serve --http`` in front of the probe server, ready (``/healthz`` 200), stopped on exit.

    ``open_files`` lowers the proxy's soft open-descriptor limit (as on a default Linux box: 1024)."""
    port = free_port()
    config: dict[str, Any] = {"upstreams": {"probe": {"command": sys.executable, "args": probe_argv()[1:]}}}
    if listen:
        config["listen"] = listen
    path = write_yaml(tmp_path / f"config-{port}.yaml", config)
    stderr = tmp_path / f"proxy-{port}.stderr"

    def limit() -> None:
        if open_files is not None:
            hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, hard))

    argv = proxy_argv("serve", "--config", str(path), "--http", f"127.0.0.1:{port}")
    with stderr.open("wb") as err:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=child_env(tmp_path / "state", **(env or {})),
            cwd=REPO,
            preexec_fn=limit,
        )
    try:
        running = RunningProxy("127.0.0.1", port, process, stderr)
        wait_until(
            lambda: http_get_status(f"{running.base}/healthz") == 200,
            STARTUP_S,
            "the proxy's /healthz to answer 200",
            process=process,
            stderr=stderr,
        )
        yield running
    finally:
        stop_process(process)


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    text: str

    def message(self) -> dict[str, Any]:
        """The JSON-RPC message of the reply (a JSON body, or the last ``data:`` line of an SSE body)."""
        if self.headers.get("content-type", "").startswith("text/event-stream"):
            data = [line[5:].strip() for line in self.text.splitlines() if line.startswith("data:")]
            data = [d for d in data if d]
            return dict(json.loads(data[-1]))
        return dict(json.loads(self.text))


@dataclass
class RawSession:
    """One MCP session over raw HTTP: ``token`` (or none) and the session id the proxy gave it."""

    proxy: RunningProxy
    token: str | None = None
    session_id: str | None = None
    ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def headers(self, session_id: str | None = None) -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Host": f"127.0.0.1:{self.proxy.port}",
        }
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        sid = session_id or self.session_id
        if sid is not None:
            headers["Mcp-Session-Id"] = sid
            headers["Mcp-Protocol-Version"] = PROTOCOL
        return headers

    def send(self, method: str, body: bytes | None = None, session_id: str | None = None) -> Reply:
        conn = http.client.HTTPConnection(self.proxy.host, self.proxy.port, timeout=CALL_S)
        try:
            conn.request(method, "/mcp", body=body, headers=self.headers(session_id))
            response = conn.getresponse()
            text = response.read().decode(errors="replace")
            return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, text)
        finally:
            conn.close()

    def post(self, message: dict[str, Any], session_id: str | None = None) -> Reply:
        return self.send("POST", json.dumps(message).encode(), session_id)

    def request(self, method: str, params: dict[str, Any], session_id: str | None = None) -> Reply:
        return self.post({"jsonrpc": "2.0", "id": next(self.ids), "method": method, "params": params}, session_id)

    def initialize(self) -> RawSession:
        reply = self.request(
            "initialize",
            {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "security-tests", "version": "0"}},
        )
        assert reply.status == 200, (reply.status, reply.text[:500])
        self.session_id = reply.headers.get("mcp-session-id")
        notified = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert notified.status in (200, 202), (notified.status, notified.text[:500])
        return self

    def call_tool(self, name: str, arguments: dict[str, Any], session_id: str | None = None) -> Reply:
        return self.request("tools/call", {"name": name, "arguments": arguments}, session_id)
