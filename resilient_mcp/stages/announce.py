"""The announce stage, just inside observe: the first capped result makes the proxy list ``read_stored_output``.

It only signals (``announce``, the pipeline's ``announce_outputs``): the proxy's tool list is rebuilt and the hosts
are told ``tools/list_changed`` after the call, never inside it.
"""

from __future__ import annotations

from collections.abc import Callable

import mcp_types as types

from ..call.chain import CallNext, ToolCall
from ..call.meta import TRUNCATED_META
from ..faults import OversizedResult


class Announce:
    """The announce stage, just inside observe: a capped result (the first one counts) calls ``announce``, which
    makes the proxy advertise ``read_stored_output`` (a scheduled rebuild; nothing is rebuilt during the call)."""

    def __init__(self, announce: Callable[[], None]) -> None:
        self._announce = announce

    async def __call__(self, call: ToolCall, call_next: CallNext, /) -> types.CallToolResult:
        try:
            result = await call_next(call)
        except OversizedResult:
            self._announce()
            raise
        if TRUNCATED_META in (result.meta or {}):
            self._announce()
        return result
