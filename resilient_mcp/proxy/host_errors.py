"""The host side's one exception seam: what sending to a host raises becomes a log line or an answer, here only.

After httpx's ``map_httpcore_exceptions``, as ``upstream/errors.py`` and ``state/errors.py`` are for their
boundaries. What the proxy sends a host on its own or on an upstream's behalf goes through it:

    a notification (list changed, an upstream's log message,     ``host_errors(event)``: a host that went away or
    a resource update)                                          broke its connection is logged (debug) and skipped;
                                                                 the other hosts and the upstream are not concerned
    a request relayed for an upstream (sampling, elicitation,   ``relay_error(exc, method)``: the host's own
    roots)                                                       JSON-RPC error as it answered it, else an internal
                                                                 error naming the relay, for the upstream to read

Cancellation and other ``BaseException``s always pass: a host gone is not a reason to swallow a shutdown.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import mcp_types as types
import structlog
from mcp.shared.exceptions import MCPError

log = structlog.get_logger(__name__)


@contextmanager
def host_errors(event: str, **fields: Any) -> Iterator[None]:
    """Send to one host: an ``Exception`` it raises is logged as ``event`` (debug, with ``fields``), never raised."""
    try:
        yield
    except Exception as exc:
        log.debug(event, error=str(exc), **fields)


def relay_error(exc: Exception, method: str) -> types.ErrorData:
    """What the upstream is answered when relaying its ``method`` request to the host raised ``exc``."""
    if isinstance(exc, MCPError):
        return exc.error
    log.warning("server_request_relay_failed", method=method, error=str(exc))
    return types.ErrorData(code=types.INTERNAL_ERROR, message=f"resilient-mcp: relay failed: {exc}")
