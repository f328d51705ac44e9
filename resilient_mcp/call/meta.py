"""The ``_meta`` keys the proxy writes on results, errors and tools (one namespace, ``io.github.resilient-mcp/``)."""

from __future__ import annotations

TRUNCATED_META = "io.github.resilient-mcp/truncated"
FALLBACK_META = "io.github.resilient-mcp/fallback"
REPLAY_META = "io.github.resilient-mcp/replay"
CACHE_META = "io.github.resilient-mcp/cache"
UNTRUSTED_META = "io.github.resilient-mcp/untrusted"
PAGE_META = "io.github.resilient-mcp/page"
ATTEMPT_META = "io.github.resilient-mcp/attempt"
OVERSIZED_META = "io.github.resilient-mcp/oversized"
"""Key in ``error.data`` of the stand-in error response for an oversized message."""
HOST_META = "io.github.resilient-mcp/host"
"""Private key of a request to a 2026-07-28 upstream: the host's declared capabilities and log level, read and
removed where the SDK stamps its envelope (``adapters.sdk.after_envelope_stamp``); never sent."""
