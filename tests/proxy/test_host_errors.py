"""The host side's one exception seam (``resilient_mcp/proxy/host_errors.py``): what it maps, and what passes."""

from __future__ import annotations

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from structlog.testing import capture_logs

from resilient_mcp.proxy.host_errors import host_errors, relay_error

pytestmark = pytest.mark.anyio


def test_a_host_gone_while_notified_is_logged_and_skipped() -> None:
    with capture_logs() as logs, host_errors("notify_failed", what="tools"):
        raise anyio.BrokenResourceError("the host's stream is closed")
    assert logs == [
        {"event": "notify_failed", "error": "the host's stream is closed", "what": "tools", "log_level": "debug"}
    ]


async def test_cancellation_passes_the_seam() -> None:
    with anyio.CancelScope() as scope:
        with host_errors("notify_failed"):
            scope.cancel()
            await anyio.sleep(1)
        raise AssertionError("cancelled")
    assert scope.cancelled_caught


def test_a_base_exception_passes_the_seam() -> None:
    with pytest.raises(KeyboardInterrupt), host_errors("notify_failed"):
        raise KeyboardInterrupt


def test_a_relayed_request_the_host_refused_answers_with_the_hosts_own_error() -> None:
    error = types.ErrorData(code=-32601, message="Method not found", data={"method": "sampling/createMessage"})
    assert relay_error(MCPError(error.code, error.message, error.data), "sampling/createMessage") == error


def test_a_relay_that_broke_is_an_internal_error_naming_the_relay() -> None:
    with capture_logs() as logs:
        answer = relay_error(anyio.ClosedResourceError(), "elicitation/create")
    assert answer.code == types.INTERNAL_ERROR and answer.message.startswith("resilient-mcp: relay failed")
    assert logs[0]["event"] == "server_request_relay_failed" and logs[0]["method"] == "elicitation/create"
