"""The response cache stage and its shared store: identical read_only calls within a TTL answered without the upstream.

Optional, off by default (``cache.enabled``), and compiled in only for read_only tools (the pipeline ignores it, with
a warning, on any other tool: a write must reach its upstream). It sits just inside the output stage, so what it
stores is already capped, and outside idempotency, retry and breaker: a hit sends nothing, and it is served even
while the tool's circuit is open.

The key is ``fingerprint(call)``: upstream, upstream tool and the canonical JSON of the arguments, so two calls are
the same exactly when the loop guard would say so. The cache is global across host sessions (a read answers the same
whoever asks). Only successful results (``isError`` false) are stored. A hit is a copy of the stored result marked
``_meta["io.github.resilient-mcp/cache"] = {"age_ms", "ttl_s"}``, and the call is recorded as ``decided_by="cache"``.

``ResponseCache`` is a bounded LRU per (upstream, tool), ``cache.max_entries`` each, with an injectable clock; it lives
in ``Services`` and survives policy reloads (a shorter TTL applies at once: age is checked on every lookup).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import mcp_types as types

from ..call.chain import CallNext, ToolCall, fingerprint
from ..call.meta import CACHE_META
from ..policy import CacheRule

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class _Entry:
    stored_at: float
    result: types.CallToolResult


class ResponseCache:
    """Cached results per (upstream, tool), each an LRU of at most the tool's ``max_entries``."""

    def __init__(self, *, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self._tools: dict[tuple[str, str], OrderedDict[str, _Entry]] = {}

    def get(self, tool: tuple[str, str], key: str, ttl_s: float) -> tuple[types.CallToolResult, float] | None:
        """The stored result and its age in seconds, or None when absent or older than ``ttl_s`` (then dropped)."""
        entries = self._tools.get(tool)
        entry = entries.get(key) if entries is not None else None
        if entries is None or entry is None:
            return None
        age = self._clock() - entry.stored_at
        if age >= ttl_s:
            del entries[key]
            return None
        entries.move_to_end(key)
        return entry.result, age

    def put(self, tool: tuple[str, str], key: str, result: types.CallToolResult, max_entries: int) -> None:
        entries = self._tools.setdefault(tool, OrderedDict())
        entries[key] = _Entry(self._clock(), result.model_copy(deep=True))
        entries.move_to_end(key)
        while len(entries) > max_entries:
            entries.popitem(last=False)

    def size(self, tool: tuple[str, str]) -> int:
        return len(self._tools.get(tool, ()))

    def clear(self) -> None:
        self._tools.clear()


class Cache:
    """Serve an identical read_only call from ``ResponseCache`` within ``cache.ttl_s``; store successes."""

    def __init__(self, rule: CacheRule, store: ResponseCache) -> None:
        self._rule = rule
        self._store = store

    async def __call__(self, call: ToolCall, call_next: CallNext, /) -> types.CallToolResult:
        tool = (call.upstream, call.upstream_tool)
        key = fingerprint(call)
        hit = self._store.get(tool, key, self._rule.ttl_s)
        if hit is not None:
            stored, age = hit
            call.record.decided_by = "cache"
            marked = stored.model_copy(deep=True)
            meta = dict(marked.meta or {})
            meta[CACHE_META] = {"age_ms": round(age * 1000), "ttl_s": self._rule.ttl_s}
            return marked.model_copy(update={"meta": meta})
        result = await call_next(call)
        if not result.is_error:
            self._store.put(tool, key, result, self._rule.max_entries)
        return result
