"""The host side: the MCP server the host talks to and its transports (stdio, streamable HTTP)."""
