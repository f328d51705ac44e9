"""The stdio transport's raw-lane calls (``host/stdio._Lines``): each in a task of the reader's own, ended with the
input as the SDK's in-flight requests are, and a lane that raises is logged without taking the transport down."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from resilient_mcp.host.stdio import _Lines

_CALL = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo"}}\n'


class _Lane:
    """A raw lane: call 1 raises, call 2 waits until cancelled (then answers as ``RawToolCalls`` does)."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.outcomes: dict[int, str] = {}

    def accepts(self, message: Any) -> bool:
        return True

    def cancelled(self, message: Any) -> None:
        return None

    async def run(self, message: dict[str, Any], send: Callable[[bytes], Awaitable[None]]) -> None:
        rid = message["id"]
        if rid == 1:
            raise RuntimeError("the lane's own bug")
        try:
            self.started.set()
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await anyio.lowlevel.checkpoint()  # a shielded write of "Connection closed" still runs
                self.outcomes[rid] = "closed"
            raise


class _Wire:
    async def send_line(self, data: bytes) -> None:
        return None


@pytest.mark.anyio
async def test_lane_calls_end_with_the_input_and_a_raising_lane_is_only_logged() -> None:
    lane = _Lane()
    to_session, from_lines = anyio.create_memory_object_stream[Any](1)
    chunks = [_CALL % 1, _CALL % 2]

    async def receive() -> bytes:
        if chunks:
            return chunks.pop(0)
        await lane.started.wait()  # call 2 is running when the input ends
        raise anyio.EndOfStream

    with anyio.fail_after(10):
        async with from_lines:
            await _Lines(_Wire(), to_session, lane).read_all(receive)  # type: ignore[arg-type]
    assert lane.outcomes == {2: "closed"}  # waited for: its end ran before read_all returned
