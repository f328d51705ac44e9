"""The few places the proxy reaches into a library's private members, each behind one function here.

``sdk``: the MCP SDK's client session (the per-request envelope stamp, ``auto`` negotiation) and server session (the
host connection).
``process``: anyio's asyncio process (its subprocess transport). Written against mcp 2.3 and anyio 4;
``tests/adapters/test_adapters.py`` pins those versions and the members, so an upgrade fails there, not in
production.
Imports nothing of the package.
"""
