"""Clocks for the chaos server: real time for subprocess runs, virtual time for in-process runs.

A fault plan's durations (a hang of 60 s, a slow success of 900 ms) go through a ``Clock``. ``RealClock`` sleeps on
anyio's clock, as a real server would. ``FakeClock`` advances a virtual time instantly, so an in-process scenario
with long simulated latencies runs in milliseconds and reports the latency it simulated. A sleep of ``math.inf`` (a
hang with no end) blocks on either clock until the caller cancels it: that is the only way an in-process hang can
meet a real per-attempt timeout of the proxy.
"""

from __future__ import annotations

import math
from typing import Protocol

import anyio


class Clock(Protocol):
    def now(self) -> float:
        """Seconds on this clock (monotonic)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` on this clock; ``math.inf`` waits until cancelled."""
        ...


class RealClock:
    """anyio's clock: sleeps take real time."""

    def now(self) -> float:
        return anyio.current_time()

    async def sleep(self, seconds: float) -> None:
        if math.isinf(seconds):
            await anyio.sleep_forever()
        await anyio.sleep(max(0.0, seconds))


class FakeClock:
    """Virtual time: ``sleep`` advances ``now()`` at once (yielding to other tasks once), so runs are fast and exact."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self.slept: list[float] = []
        """Every finite sleep, in order: what a test asserts the server simulated."""

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += max(0.0, seconds)

    async def sleep(self, seconds: float) -> None:
        if math.isinf(seconds):
            await anyio.sleep_forever()
        self.slept.append(seconds)
        self.advance(seconds)
        await anyio.lowlevel.checkpoint()
