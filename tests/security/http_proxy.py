"""A raw JSON-RPC client for a real ``resilient-mcp serve --http`` on 127.0.0.1 (``tests.helpers.http_proxy``).

The raw client speaks streamable HTTP by hand (POST, JSON or SSE answers, ``Mcp-Session-Id``), so tests can send
what a real client never would: another token's session id, a batch, a body of 200,000 keys.
"""

from __future__ import annotations

import http.client
import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.helpers import RunningProxy

CALL_S = 60.0
PROTOCOL = "2025-11-25"


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
