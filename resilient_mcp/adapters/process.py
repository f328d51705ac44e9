"""Private members of anyio's asyncio subprocess (anyio 4), reached here and nowhere else."""

from __future__ import annotations

import asyncio
from contextlib import suppress

import anyio.abc


def close_transport(process: anyio.abc.Process) -> None:
    """Close the asyncio subprocess transport under an anyio process whose pipes are closed: else asyncio warns at
    garbage collection while a surviving child of the process still holds a pipe. No-op on other backends."""
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    close = getattr(transport, "close", None)
    if callable(close):
        with suppress(PermissionError):
            close()


def stdin_writer(process: anyio.abc.Process) -> asyncio.StreamWriter | None:
    """The asyncio ``StreamWriter`` under an anyio process's stdin (``None`` on other backends): written to directly,
    a line costs no scheduling step (anyio's ``send`` ends with a checkpoint, one more turn of the event loop)."""
    writer = getattr(process.stdin, "_stream", None)
    return writer if isinstance(writer, asyncio.StreamWriter) else None
