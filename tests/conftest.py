"""pytest configuration shared by every test module."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from resilient_mcp.state.sqlite import StateStore
    from tests.fixtures.fault_links import Shop
    from tests.redis_server import RedisServer


@pytest.fixture(autouse=True, scope="session")
def _state_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Resilient-mcp's default state directory (``XDG_STATE_HOME``) for the whole run is a temporary one of this
    process (one per pytest-xdist worker): a proxy a test starts without a state directory of its own never writes
    into the developer's home, nor shares records with a test running at the same time in another worker."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state-home")))
        yield


@pytest.fixture(autouse=True)
def _structlog_config() -> Iterator[None]:
    """Whatever a test configures structlog with (a command's ``main`` binds its logger to the ``sys.stderr`` of the
    moment, which is pytest's capture of that test) is undone after it: otherwise the next test in the worker logs
    into a closed capture file and its handlers fail with "I/O operation on closed file"."""
    import structlog

    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


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
    """A clock that moves only when the test moves it: ``clock.now += 30``, or ``await clock.sleep(s)``.

    Callable like ``time.time``/``time.monotonic`` (whichever the code under test is given: only differences between
    readings matter to it). ``sleep`` is an injectable sleep that returns at once, moves the clock on by its delay
    and keeps every delay in ``slept``."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def store(clock: FakeClock) -> AsyncIterator[StateStore]:
    """An in-memory state store on the test's ``clock``."""
    from resilient_mcp.state.sqlite import StateStore

    async with await StateStore.open(":memory:", clock=clock) as s:
        yield s


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A real ``redis-server`` on a loopback port (``tests/redis_server.py``; mark the module ``needs_redis()``)."""
    from tests.redis_server import redis_server

    with redis_server(tmp_path / "redis") as server:
        yield server
