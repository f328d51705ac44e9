"""CPU cost of a function as this thread measures it, for ratios against a baseline measured in the same run."""

from __future__ import annotations

import time
from collections.abc import Callable


def cpu_cost(work: Callable[[], object], *, stop_above: float = float("inf"), repeat: int = 200) -> float:
    """The least thread CPU time of ``repeat`` calls over seven rounds (the least is the one least disturbed by the
    machine's other work); a round that alone costs more than ``stop_above`` ends the measurement (a backtracking
    matcher takes minutes: the test fails at once instead)."""
    best = float("inf")
    for _ in range(7):
        start = time.thread_time()
        for _ in range(repeat):
            work()
            if time.thread_time() - start > stop_above:
                return time.thread_time() - start
        best = min(best, time.thread_time() - start)
    return best
