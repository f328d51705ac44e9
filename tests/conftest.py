"""pytest configuration shared by every test module."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from resilient_mcp.state import StateStore
    from tests.fixtures.fault_links import Shop


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def inline_state_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """State stores opened by the test run their SQLite jobs in the event loop's thread (for ``virtual_time``)."""
    from benchmarks.agentbench.virtualtime import InlineWorker
    from resilient_mcp.state import sqlite as state_sqlite

    monkeypatch.setattr(state_sqlite, "Worker", InlineWorker)


@pytest.fixture
def shop() -> Shop:
    """A scripted upstream "shop" behind a breakable link, and the proxy in front of it (``async with shop.run()``)."""
    from tests.fixtures.fault_links import Shop

    return Shop()


class FakeClock:
    """A wall clock that moves only when a test sets ``now``."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def store(clock: FakeClock) -> AsyncIterator[StateStore]:
    """An in-memory state store on the test's ``clock``."""
    from resilient_mcp.state import StateStore

    async with await StateStore.open(":memory:", clock=clock) as s:
        yield s
