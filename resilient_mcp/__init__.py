"""resilient-mcp: an MCP server that wraps MCP servers and makes their tool calls safe to fail."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("resilient-mcp")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+local"

__all__ = ["__version__"]
