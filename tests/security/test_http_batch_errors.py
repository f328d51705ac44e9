"""Issue 10.8 (batches): a JSON-RPC batch array gets one short error, not the SDK's whole pydantic error text.

MCP has had no batches since 2025-06-18; the SDK answered an array with ``Validation error: N validation errors for
...`` and every union member's complaint (kilobytes, and the internals of its models). Now: 400 with one -32600
error that says what to do instead.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import http_proxy
from tests.security.http_proxy import RawSession

CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}}


def test_a_batch_array_gets_a_short_invalid_request_error_and_the_session_goes_on(tmp_path: Path) -> None:
    with http_proxy(tmp_path) as proxy:
        session = RawSession(proxy).initialize()
        for batch in ([CALL, {**CALL, "id": 3}], [CALL], []):
            reply = session.send("POST", b"  \n" + json.dumps(batch).encode())
            assert reply.status == 400, (reply.status, reply.text[:500])
            assert len(reply.text) < 300, reply.text[:1000]
            error = reply.message()["error"]
            assert error["code"] == -32600
            assert "batch" in error["message"] and "one message per request" in error["message"]
            assert "validation error" not in reply.text.lower() and "pydantic" not in reply.text
        assert "x" in session.call_tool("echo", {"text": "x"}).message()["result"]["content"][0]["text"]
