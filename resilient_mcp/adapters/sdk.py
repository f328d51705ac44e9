"""Private members of the MCP SDK (mcp 2.3), read or wrapped here and nowhere else."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp import ClientSession

SDK_SERIES = "2.3."
"""The mcp releases these adapters were written against (``tests/adapters/test_adapters.py`` checks it)."""


def after_envelope_stamp(
    session: ClientSession, after: Callable[[dict[str, Any], Any], None], private_key: str
) -> None:
    """Call ``after(data, private)`` on every outgoing request once the SDK has stamped its envelope on it (``_meta``
    with the session's capabilities and log level). ``private``: the value the caller put under ``private_key`` in
    the request's ``_meta`` (``None`` when absent), removed here so it is never sent. The SDK replaces its stamp when
    the session connects: call this after ``initialize``/``discover``."""
    inner = session._stamp

    def stamp(data: dict[str, Any], opts: Any) -> None:
        params = data.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        private = meta.pop(private_key, None) if isinstance(meta, dict) else None
        inner(data, opts)
        after(data, private)

    session._stamp = stamp


def host_connection(session: object) -> object:
    """The SDK's ``Connection`` a server-side request came on (one per host connection), else ``session`` itself."""
    connection: object = getattr(session, "_connection", None) or session
    return connection
