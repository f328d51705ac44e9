"""Episodes on virtual time: what an episode does never depends on how fast the machine runs it.

The episodes' timeouts are real ``anyio`` timeouts: the proxy's per-attempt timeout (0.25 s on a target that hangs),
the direct host's read timeout, the episode's limit. On the wall clock a busy machine makes an ordinary call miss a
0.25 s timeout and the episode changes. Here every episode runs on trio with ``trio.testing.MockClock`` and
``autojump_threshold=0``: time stands still while any task can run and jumps to the next deadline only when every
task waits. A hang (a server that never answers) then meets its timeout at once, and a call that answers always
answers first, however slow the computer.

The jump is exact only when nothing runs outside the event loop: the proxy's state store does its SQLite work in a
thread, and while the loop waits for that thread it would look idle and jump. ``InlineWorker`` runs those jobs in the
loop's own thread instead (the benchmark's store is ``:memory:``: each job is a few microseconds).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import anyio
from trio.testing import MockClock

from resilient_mcp.state import sqlite as state_sqlite

T = TypeVar("T")


class InlineWorker:
    """``state_sqlite.Worker`` without the thread: each job runs when asked, then the store's maintenance."""

    def __init__(self, idle: Callable[[], None], tick_s: float) -> None:
        self._idle = idle

    async def call(self, fn: Callable[[], T]) -> T:
        try:
            return fn()
        finally:
            self._idle()

    def submit(self, fn: Callable[[], object]) -> None:
        fn()
        self._idle()

    def wake(self) -> None:
        self._idle()

    async def stop(self) -> None:
        return None


@contextmanager
def inline_state_worker() -> Iterator[None]:
    """State stores opened meanwhile (in this process) run their SQLite jobs in the event loop's thread."""
    original = state_sqlite.Worker
    state_sqlite.Worker = InlineWorker  # type: ignore[misc,assignment]
    try:
        yield
    finally:
        state_sqlite.Worker = original  # type: ignore[misc]


def run_virtual(fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """``anyio.run(fn, *args)`` on trio's virtual clock, with the state store's jobs in the loop's thread."""
    with inline_state_worker():
        return anyio.run(fn, *args, backend="trio", backend_options={"clock": MockClock(autojump_threshold=0)})
