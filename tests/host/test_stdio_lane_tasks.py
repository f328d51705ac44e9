"""The stdio transport's raw-lane calls (``host/stdio._Lines``): each in a task of the reader's own, ended with the
input as the SDK's in-flight requests are, and a lane that raises is logged without taking the transport down."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any, cast

import anyio
import pytest

from resilient_mcp.host import toolcall
from resilient_mcp.host.stdio import _Lines
from resilient_mcp.host.toolcall import RawToolCalls

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

    async def run(
        self, message: dict[str, Any], send: Callable[[bytes], Awaitable[None]], scope: anyio.CancelScope
    ) -> None:
        rid = message["id"]
        if rid == 1:
            raise RuntimeError("the lane's own bug")
        with scope:
            self.started.set()
            await anyio.sleep_forever()
        if scope.cancelled_caught:
            with anyio.CancelScope(shield=True):
                await anyio.lowlevel.checkpoint()  # a shielded write of "Connection closed" still runs
                self.outcomes[rid] = "closed"


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


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["input_ended", "host_cancelled"])
async def test_a_lane_call_ended_by_the_transports_scope_is_answered_connection_closed_one_the_host_cancelled_not(
    monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """``RawToolCalls.run`` enters the transport's scope as the call's own: cancelled by the transport (the input
    ended), the host reads "Connection closed"; cancelled by the host, nothing (as the SDK's dispatcher)."""
    entered = anyio.Event()

    async def waits(*_: Any) -> dict[str, Any]:
        entered.set()
        await anyio.sleep_forever()
        raise AssertionError

    monkeypatch.setattr(toolcall, "tool_call_answer", waits)
    lane = RawToolCalls()
    lane._proxy = cast(Any, object())
    lane._session = cast(Any, SimpleNamespace(protocol_version="2025-06-18"))
    sent: list[dict[str, Any]] = []

    async def send(data: bytes) -> None:
        sent.append(json.loads(data))

    scope = anyio.CancelScope()
    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "echo"}}
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lane.run, message, send, scope)
            await entered.wait()
            if how == "input_ended":
                scope.cancel()
            else:
                lane.cancelled({"method": "notifications/cancelled", "params": {"requestId": 7}})
    closed = {"jsonrpc": "2.0", "id": 7, "error": {"code": -32000, "message": "Connection closed"}}
    assert sent == ([closed] if how == "input_ended" else [])
