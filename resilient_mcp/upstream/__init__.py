"""The proxy's client side: one supervised connection per upstream MCP server, and the only code that speaks the
SDK's client side.

What callers import is here; the package, from the bottom up:

- ``errors``: the one exception seam of the boundary (``upstream_faults``: what a tool call's attempt raises becomes
  a ``Fault`` with ``sent`` known), and the HTTP-status side channel it reads;
- ``catalog``: what an upstream offers, read page by page, and its coalesced re-lists;
- ``stdio``, ``http_cap``, ``startup``: the transports' own guards (linear-time stdio reader, byte caps on HTTP) and
  why a server did not start;
- ``connection``: supervision, restart with backoff, transport choice, the 2026-07-28 twin (``Connection``);
- ``calls``: tool calls, other requests and input rounds over a live connection (``Upstream``, the class callers
  hold).
"""

from ..call.chain import HOST_CAPABILITIES, host_capability_names
from .calls import MAX_INPUT_ROUNDS, ProgressFn, Upstream
from .catalog import UpstreamCatalog
from .connection import CLIENT_INFO, Connection, NoHost, State, TransportFactory, UpstreamHooks

__all__ = [
    "CLIENT_INFO",
    "HOST_CAPABILITIES",
    "MAX_INPUT_ROUNDS",
    "Connection",
    "NoHost",
    "ProgressFn",
    "State",
    "TransportFactory",
    "Upstream",
    "UpstreamCatalog",
    "UpstreamHooks",
    "host_capability_names",
]
