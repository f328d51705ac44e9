"""FastMCP's proxy in front of the raw upstream, over stdio: the comparison point of ``latency.py``.

Runs in its own venv (``benchmarks/.venv-fastmcp``, made by ``latency.py`` on first use), since FastMCP is no
dependency of resilient-mcp. ``create_proxy`` with a stdio transport, FastMCP's defaults otherwise.

    benchmarks/.venv-fastmcp/bin/python benchmarks/fastmcp_proxy.py [ARGS FOR raw_upstream.py]
"""

from __future__ import annotations

import sys
from pathlib import Path

from fastmcp.client.transports import StdioTransport
from fastmcp.server import create_proxy

RAW = str(Path(__file__).with_name("raw_upstream.py"))

if __name__ == "__main__":
    proxy = create_proxy(StdioTransport(command=sys.executable, args=[RAW, *sys.argv[1:]]), name="fastmcp-proxy")
    proxy.run("stdio", show_banner=False)
