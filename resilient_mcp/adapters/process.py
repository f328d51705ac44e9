"""Private members of anyio's asyncio subprocess (anyio 4), reached here and nowhere else."""

from __future__ import annotations

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
