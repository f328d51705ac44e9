"""The fallback stage: when a tool is down, call the alternative tool the policy names, and say so in the result.

Optional (``fallback_call: true`` with a non-empty ``fallback`` list). It sits right after access, outside output,
idempotency, retry and breaker, so it sees what is left once the retries gave up or the breaker refused. It acts on:

- ``PersistentOutage`` (the circuit is open, or the upstream is not running);
- a transient fault that outlasted the retries, except on a write that may have run (only ``not_sent`` and
  ``rejected`` faults of a write fall back: the original write must provably not have executed).

It never acts on argument, permission, guard or selection faults (the model's or the policy's business), nor on
cancellation. Each ``fallback`` name is looked up in the current routing (the ``resolve`` callable; hidden tools are
not there), skipped unless it is read_only or ``fallback_writes`` allows writes, and called with the same arguments
through its own compiled chain below observe/guard (``CompiledTool.inner``): its own validation, approval, caps,
retries and breaker apply. The first success is returned with a note the model reads and
``_meta["io.github.resilient-mcp/fallback"] = {from, to, reason}``. When none is eligible or all fail, the original
fault is raised with ``details.fallback_tried`` (each name with what happened). A fallback's own fallbacks are
never followed (no chains of fallbacks, no cycles).
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import replace
from typing import Any, Protocol

import mcp_types as types
import structlog

from ..call.chain import CallNext, CallRecord, Decision, Entry, ToolCall
from ..call.meta import FALLBACK_META
from ..faults import (
    ArgumentFault,
    EffectClass,
    Fault,
    GuardFault,
    PermissionFault,
    PersistentOutage,
    RetrySafety,
    SelectionFault,
)
from ..policy import ToolRule
from ..verdict.repeat import decide, verdict_of

log = structlog.get_logger(__name__)


_NEVER = (ArgumentFault, PermissionFault, GuardFault, SelectionFault)
_WRITE_SAFE = (RetrySafety.NOT_SENT, RetrySafety.REJECTED)
_in_fallback: ContextVar[bool] = ContextVar("resilient_mcp_in_fallback", default=False)


class FallbackTarget(Protocol):
    """What the stage needs of a compiled tool (``routing.CompiledTool``)."""

    @property
    def rule(self) -> ToolRule: ...

    @property
    def inner(self) -> CallNext: ...

    @property
    def entry(self) -> Entry: ...


Resolve = Callable[[str], FallbackTarget | None]


def falls_back(fault: Fault, rule: ToolRule, verdict: Decision | None = None) -> bool:
    """Whether ``fault`` on a tool with ``rule`` may be answered by a fallback tool (a write: only when rule R says
    the original provably did not run, an untrusted upstream's word not being enough). ``verdict``: rule R's decision
    on it, when it was already taken."""
    if isinstance(fault, _NEVER):
        return False
    if not (isinstance(fault, PersistentOutage) or fault.is_transient):
        return False
    return not rule.effect.is_write or (verdict or decide(fault, rule)).safety in _WRITE_SAFE


class Fallback:
    """Answer an outage or exhausted retries with the first eligible ``fallback`` tool's result, marked."""

    def __init__(self, rule: ToolRule, resolve: Resolve) -> None:
        self._rule = rule
        self._names = list(rule.fallback)
        self._writes = rule.fallback_writes
        self._resolve = resolve

    async def __call__(self, call: ToolCall, call_next: CallNext, /) -> types.CallToolResult:
        if _in_fallback.get():  # this call is itself a fallback: no fallbacks of fallbacks
            return await call_next(call)
        try:
            return await call_next(call)
        except Fault as fault:
            if not falls_back(fault, self._rule, verdict_of(call, fault)):
                raise
            original = fault
        tried: list[dict[str, Any]] = []
        for name in self._names:
            result = await self._try(call, name, original, tried)
            if result is not None:
                return result
        raise original.with_details(fallback_tried=tried)

    async def _try(
        self, call: ToolCall, name: str, fault: Fault, tried: list[dict[str, Any]]
    ) -> types.CallToolResult | None:
        target = self._resolve(name) if name != call.name else None
        if target is None:
            tried.append({"tool": name, "outcome": "not_available"})
            return None
        if target.rule.effect is not EffectClass.READ_ONLY and not self._writes:
            tried.append({"tool": name, "outcome": "not_read_only"})
            return None
        entry = target.entry
        sub = replace(
            call,
            name=name,
            upstream=entry.upstream,
            upstream_tool=entry.name,
            rule=target.rule,
            tool=entry.tool,
            record=CallRecord(),
            attempt_timeout_s=None,
        )
        token = _in_fallback.set(True)
        try:
            result = await target.inner(sub)
        except Fault as failed:
            tried.append({"tool": name, "outcome": failed.fault_type})
            return None
        except Exception:
            log.exception("fallback_failed", tool=call.name, fallback=name)
            tried.append({"tool": name, "outcome": "internal_error"})
            return None
        finally:
            _in_fallback.reset(token)
        if result.is_error:
            tried.append({"tool": name, "outcome": "is_error"})
            return None
        log.info("fallback_used", tool=call.name, fallback=name, reason=fault.fault_type)
        call.record.decided_by = "fallback"
        call.record.notes.extend(sub.record.notes)
        return _marked(result, call.name, name, fault.fault_type)


def _marked(result: types.CallToolResult, tool: str, fallback: str, reason: str) -> types.CallToolResult:
    text = f"[resilient-mcp: {tool} failed ({reason}); this is the result of its fallback {fallback}]"
    meta = dict(result.meta or {})
    meta[FALLBACK_META] = {"from": tool, "to": fallback, "reason": reason}
    return result.model_copy(update={"content": [*result.content, types.TextContent(text=text)], "meta": meta})
