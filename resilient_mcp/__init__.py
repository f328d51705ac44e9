"""resilient-mcp: an MCP server that wraps MCP servers and makes their tool calls safe to fail."""

import sys
from importlib.metadata import PackageNotFoundError, version

import structlog

try:
    __version__ = version("resilient-mcp")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+local"

if not structlog.is_configured():
    # stdout is the JSON-RPC wire in stdio mode: even before the CLI configures logging, nothing goes there.
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=sys.stderr))

__all__ = ["__version__"]
