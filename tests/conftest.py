"""pytest configuration shared by every test module."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def inline_state_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """State stores opened by the test run their SQLite jobs in the event loop's thread (for ``virtual_time``)."""
    from benchmarks.agentbench.virtualtime import InlineWorker
    from resilient_mcp import state_sqlite

    monkeypatch.setattr(state_sqlite, "Worker", InlineWorker)
