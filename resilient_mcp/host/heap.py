"""The garbage collector of a listening proxy: its start-up heap frozen, its young generation collected less often.

Python's collector is generational: a full (gen 2) collection walks every tracked object, and after start-up the
proxy holds about 130,000 of them (the SDK's, pydantic's, uvicorn's and starlette's modules, the compiled chain and
its schemas), none of them garbage. Measured under a 50-session streamable HTTP load (``benchmarks/README.md``,
"HTTP tail"), such a collection took ~130 ms of CPU a few times per 2,000 calls and stalled every session meanwhile:
the p99 latency was those pauses. Each call also leaves cyclic garbage (anyio cancel scopes, tasks, tracebacks)
that only a collection frees, so with the default young threshold (700) a gen 0 pass ran every ~5 calls, and the
objects of the calls in flight at that moment survived it and were promoted, filling the old generations.

``settled_heap`` is entered once the proxy has started (upstreams connected, the server built, before it takes
requests): a collection, then ``gc.freeze()`` (what survived start-up moves to the permanent generation, never
walked again), and a young threshold of ``YOUNG_THRESHOLD`` (collections 10x rarer; each one walks at most that many
young objects, a few ms). ``RESILIENT_MCP_GC_TUNING=off`` leaves the collector as Python sets it.

The HTTP listener collects every generation first (``full``): nobody waits for it yet. The stdio proxy enters it
with the host's ``initialize`` already read and waiting for its answer, where a full collection of start-up's heap
cost 40-160 ms; it collects the young generations only (~1 ms), and what start-up left as cyclic garbage in the old
generation (after the imports: none) is frozen with the rest instead of freed.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Iterator

import structlog

log = structlog.get_logger(__name__)

GC_SWITCH = "RESILIENT_MCP_GC_TUNING"
YOUNG_THRESHOLD = 10_000
"""Allocations (net of deallocations) of tracked objects between young collections (Python's default: 700)."""


@contextlib.contextmanager
def settled_heap(*, full: bool = True) -> Iterator[bool]:
    """While in it: what start-up left frozen and the young generation collected less often (``False``: turned
    off). ``full``: collect every generation before freezing (else the young ones only). On exit the heap is
    unfrozen and the thresholds restored (a process that serves again starts over)."""
    if os.environ.get(GC_SWITCH, "").lower() == "off":
        yield False
        return
    before = gc.get_threshold()
    gc.collect() if full else gc.collect(1)
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *before[1:])
    log.debug("heap_settled", frozen=gc.get_freeze_count(), young_threshold=YOUNG_THRESHOLD)
    try:
        yield True
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
