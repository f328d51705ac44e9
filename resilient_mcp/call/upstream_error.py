"""What a task needs to know from deep inside its call: whether the upstream answered with a JSON-RPC error.

A call that becomes a task reports ``failed`` (with the error) when the upstream answered the request with an error
instead of a tool result, and ``completed`` with ``result.isError`` when the tool ran and said it failed. Both reach
the chain as faults; the upstream client notes the first kind here (``note_upstream_error``) for the task that
watches the call (``ErrorSink``, carried by a context variable into the work the bridge runs).
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

import mcp_types as types


@dataclass(slots=True)
class ErrorSink:
    error: types.ErrorData | None = None


UPSTREAM_ERROR: ContextVar[ErrorSink | None] = ContextVar("resilient_mcp_task_upstream_error", default=None)


def note_upstream_error(error: types.ErrorData | None) -> None:
    """The upstream answered the current call's attempt with ``error`` (``None``: it answered with a result)."""
    sink = UPSTREAM_ERROR.get()
    if sink is not None:
        sink.error = error
