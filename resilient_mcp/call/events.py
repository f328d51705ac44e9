"""The events the chain reports to the ops recorders, and the no-op default.

Recorders see a call when it starts and ends (observe stage), each upstream attempt (the terminal) and each wait
between attempts (the retry stage's sleep), plus upstream state changes (supervision). They must not raise, block or
change anything: a recorder's failure is logged and swallowed, never a call's failure.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import mcp_types as types
import structlog

from ..faults import FaultCategory
from .chain import ToolCall
from .meta import CACHE_META, FALLBACK_META, REPLAY_META, TRUNCATED_META

log = structlog.get_logger(__name__)

Sleep = Callable[[float], Awaitable[None]]


class UpstreamState(Protocol):
    """What a recorder reads of an upstream whose state changed (``upstream.Upstream`` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def state(self) -> str: ...


CATEGORY_NAMES = {category.value: category.name.lower() for category in FaultCategory}
"""Readable names of the catalog's categories ("B" -> "arguments"), as labels and on the status page."""


@dataclass(frozen=True, slots=True)
class CallEnd:
    """How a call ended, as every recorder reads it (computed once per call, only when some recorder is on)."""

    outcome: str
    """ok | error | refused | abandoned (the host cancelled, disconnected or gave up before the answer)"""
    fault_type: str | None
    category: str | None
    repair_action: str | None
    decided_by: str | None
    attempts: int
    latency_s: float
    replay: bool
    cache_hit: bool
    capped: bool
    fallback: bool
    observation: dict[str, Any] | None
    """The structured observation the host got for a failure (None on success)."""

    @property
    def retries(self) -> int:
        return max(0, self.attempts - 1)

    @property
    def refused_by(self) -> str | None:
        return (self.decided_by or "policy") if self.outcome == "refused" else None


def call_end(call: ToolCall, result: types.CallToolResult | None, error: BaseException | None) -> CallEnd:
    record = call.record
    meta = (result.meta if result is not None else None) or {}
    observation = result.structured_content if result is not None and result.is_error else None
    if not isinstance(observation, dict) or "fault_type" not in observation:
        observation = None
    outcome = record.outcome or ("abandoned" if error is not None else "ok")
    fault_type = record.fault_type
    category = observation.get("fault_category") if observation else None
    if fault_type and not category:
        category = fault_type[:1]
    category = CATEGORY_NAMES.get(str(category), category) if category else None
    repair = observation.get("repair_action") if observation else None
    return CallEnd(
        outcome=outcome,
        fault_type=fault_type,
        category=str(category) if category else None,
        repair_action=str(repair) if repair else None,
        decided_by=record.decided_by,
        attempts=max(len(record.attempts), record.sent),
        latency_s=time.monotonic() - record.started,
        replay=REPLAY_META in meta,
        cache_hit=CACHE_META in meta,
        capped=TRUNCATED_META in meta or fault_type == "E4_oversized_result",
        fallback=FALLBACK_META in meta,
        observation=observation,
    )


class CallEvents:
    """The interface, and the no-op default (``NULL``): subclasses override what they record."""

    enabled = False

    def call_started(self, call: ToolCall) -> None:
        """Before the chain runs (observe stage). A recorder may keep per-call state in ``call.record.ops``."""

    def call_finished(self, call: ToolCall, end: CallEnd) -> None:
        """After the chain returned (or raised: cancellation, the unknown-tool JSON-RPC error)."""

    def attempt_started(self, call: ToolCall) -> None:
        """Before one upstream attempt is sent (the terminal)."""

    def attempt_finished(self, call: ToolCall, error: BaseException | None) -> None:
        """After the attempt returned a result (``error`` None) or failed."""

    def wrap_sleep(self, sleep: Sleep) -> Sleep:
        """The retry stage's wait between attempts, observed (default: unchanged)."""
        return sleep

    def upstream_state(self, upstream: UpstreamState) -> None:
        """An upstream's state changed (supervision)."""


NULL = CallEvents()


class Fanout(CallEvents):
    """Several recorders as one; each is isolated from the others' failures."""

    enabled = True

    def __init__(self, recorders: Sequence[CallEvents]) -> None:
        self.recorders = tuple(recorders)

    def call_started(self, call: ToolCall) -> None:
        for r in self.recorders:
            try:
                r.call_started(call)
            except Exception:
                log.exception("ops_recorder_failed", hook="call_started", recorder=type(r).__name__)

    def call_finished(self, call: ToolCall, end: CallEnd) -> None:
        for r in self.recorders:
            try:
                r.call_finished(call, end)
            except Exception:
                log.exception("ops_recorder_failed", hook="call_finished", recorder=type(r).__name__)

    def attempt_started(self, call: ToolCall) -> None:
        for r in self.recorders:
            try:
                r.attempt_started(call)
            except Exception:
                log.exception("ops_recorder_failed", hook="attempt_started", recorder=type(r).__name__)

    def attempt_finished(self, call: ToolCall, error: BaseException | None) -> None:
        for r in self.recorders:
            try:
                r.attempt_finished(call, error)
            except Exception:
                log.exception("ops_recorder_failed", hook="attempt_finished", recorder=type(r).__name__)

    def wrap_sleep(self, sleep: Sleep) -> Sleep:
        for r in self.recorders:
            sleep = r.wrap_sleep(sleep)
        return sleep

    def upstream_state(self, upstream: UpstreamState) -> None:
        for r in self.recorders:
            try:
                r.upstream_state(upstream)
            except Exception:
                log.exception("ops_recorder_failed", hook="upstream_state", recorder=type(r).__name__)


def combine(recorders: Sequence[CallEvents]) -> CallEvents:
    active = [r for r in recorders if r is not NULL]
    return Fanout(active) if active else NULL
