"""Observe stage, outermost: log context, failure counts, the observation the model reads, one audit record per call.

Per call it binds ``session``, ``upstream``, ``tool`` and ``call_id`` into structlog's contextvars (every log line of
the inner stages carries them), then calls next and:

- on success: resets the consecutive-failure counts (``FailureStats``, below) and returns the result untouched;
- on a ``Fault`` (or an ``isError`` result nobody classified): counts the failure and returns the observation
  (``observations.build_observation``); an ``UnknownTool`` is raised as the JSON-RPC ``-32602`` error unless the
  policy says ``unknown_tool_as_result``;
- on any other exception (a bug in the proxy): logs it with its traceback and returns an ``INTERNAL_ERROR``
  observation that carries no exception text;
- on cancellation (the host cancelled the request, disconnected, or gave up on it): the call is recorded as
  ``abandoned`` (audit row, metrics, status page: a call the host never got an answer to is a failure the operator
  must see) and the cancellation is re-raised untouched; no observation is built (nobody is there to read it) and
  the failure counts that steer the model are left alone.

Every completed call writes one ``AuditEntry`` to the ``AuditSink`` (if any) and one ``tool_call`` log event with the
same fields: at debug level for successes, info for failures, so the hot path renders nothing by default.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, fields
from itertools import islice
from typing import Any, Literal, Protocol

import anyio
import mcp_types as types
import structlog
from structlog.contextvars import bind_contextvars, reset_contextvars

from ..call.chain import CallNext, ToolCall, call_arguments_hash, fingerprint
from ..call.events import NULL, CallEvents, call_end
from ..diagnosis.engine import Diagnoser
from ..faults import ConnectFailure, Fault, GatewayError, RepairAction, RetrySafety, UnknownTool
from ..faults.classify import FAULT_META_KEY, classify_result
from ..policy import ObservationLevel, ObservationRule
from ..verdict.observations import Consecutive, Observed, build_observation, unknown_tool_error

log = structlog.get_logger(__name__)

Outcome = Literal["ok", "error", "refused", "abandoned"]


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One tool call in the audit trail. Arguments are never stored: only their keys and a hash."""

    ts: float
    """Wall-clock end of the call, seconds since the epoch."""
    session: str
    upstream: str
    tool: str
    argument_keys: tuple[str, ...]
    arguments_hash: str
    """HMAC-SHA-256 of the canonical JSON of the arguments, keyed with the state directory's secret."""
    outcome: Outcome
    """ok | error | refused (the proxy decided not to send it: validation, policy, guard, open breaker)."""
    fault_type: str | None
    attempts: int
    latency_ms: int
    decided_by: str | None

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


AUDIT_MAX_CHARS = 256
"""Longest tool, session, upstream or argument-key name an audit entry keeps (longer ones are cut, with a note)."""
AUDIT_MAX_KEYS = 100
"""Most argument keys an audit entry keeps; the rest are counted in a last item ``…+N more keys``."""


def _clip(text: str, limit: int = AUDIT_MAX_CHARS) -> str:
    return text if len(text) <= limit else f"{text[:limit]}…[{len(text) - limit} more chars]"


def audit_keys(args: dict[str, Any]) -> tuple[str, ...]:
    """The argument keys an audit entry keeps: sorted, at most ``AUDIT_MAX_KEYS`` (the first the host sent), each
    cut to ``AUDIT_MAX_CHARS``; 10^6 keys must not make a 10 MB row."""
    keys = sorted(_clip(str(k)) for k in islice(args, AUDIT_MAX_KEYS))
    if len(args) > AUDIT_MAX_KEYS:
        keys.append(f"…+{len(args) - AUDIT_MAX_KEYS} more keys")
    return tuple(keys)


_PROCESS_KEY = secrets.token_bytes(32)
"""Hash key when no state store gives the installation's own (tests, a store that failed to open)."""


class AuditSink(Protocol):
    """Where audit entries go. ``record`` must not block (queue the write); it is called on the event loop."""

    def record(self, entry: AuditEntry) -> None: ...


class ProxyInternalError(GatewayError):
    """A bug in resilient-mcp surfaced as an observation (C4-like: the call may have executed)."""

    code = "INTERNAL_ERROR"
    templates = {
        "internal": "resilient-mcp internal error.",
        "tell_user": "This is a fault in the proxy, not in your call: tell the user and do not repeat the call "
        "unchanged. If the call changes state, check whether it took effect before re-issuing it.",
    }


NOTES_META_KEY = "io.github.resilient-mcp/notes"
ATTEMPTS_META_KEY = "io.github.resilient-mcp/attempts"


def _annotated(result: types.CallToolResult, call: ToolCall) -> types.CallToolResult:
    """A success the proxy changed or retried says so: notes as text the model reads, attempts in ``_meta``.

    Nothing is added to a plain first-attempt success, so a clean call passes through untouched."""
    notes = call.record.notes
    attempts = call.record.attempts
    if not notes and len(attempts) <= 1:
        return result
    meta = dict(result.meta or {})
    content = list(result.content)
    if notes:
        meta[NOTES_META_KEY] = list(notes)
        content.extend(types.TextContent(text=f"[resilient-mcp: {note}]") for note in notes)
    if len(attempts) > 1:
        meta[ATTEMPTS_META_KEY] = [
            {"n": a.n, "outcome": a.outcome, "elapsed_ms": a.elapsed_ms, "delay_before_ms": a.delay_before_ms}
            for a in attempts
        ]
    return result.model_copy(update={"content": content, "meta": meta})


def _internal_error() -> Fault:
    return ProxyInternalError.of(
        "internal",
        suggest="tell_user",
        transient=False,
        repair_action=RepairAction.DEGRADE,
        details={"internal_error": True},
    )


def _refused(fault: Fault) -> bool:
    return fault.retry_safety is RetrySafety.NOT_SENT and not isinstance(fault, ConnectFailure)


def _group_fault(exc: Exception) -> Fault | None:
    """The fault inside an exception group of exactly one leaf (a task group re-raising an inner fault)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        inner = exc.exceptions[0]
        if isinstance(inner, Fault):
            return inner
        if not isinstance(inner, Exception):
            return None
        exc = inner
    return None


class FailureStats:
    """Consecutive failures per call fingerprint (per session), per tool and per upstream; reset by a success.

    ``this_server`` counts only faults that say something about the upstream's health (the observe stage passes
    ``Fault.counts_against_upstream``): the model's own argument mistakes or a proxy refusal do not make a server
    look down. Fingerprint entries are kept for the ``max_calls`` most recently failing calls.
    """

    def __init__(self, max_calls: int = 10_000) -> None:
        self._max_calls = max_calls
        self._calls: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._tools: OrderedDict[tuple[str, str], int] = OrderedDict()
        """Bounded like ``_calls``: a host can send any number of distinct (unknown) tool names."""
        self._servers: dict[str, int] = {}

    @staticmethod
    def _keys(call: ToolCall) -> tuple[tuple[str, str], tuple[str, str]]:
        return (call.session_id, fingerprint(call)), (call.upstream, call.upstream_tool or call.name)

    def record_failure(self, call: ToolCall, *, upstream_health: bool) -> Consecutive:
        """Count one failed call; ``upstream_health``: the fault says the upstream is unwell (counts for the server).

        Returns the counts including this failure."""
        call_key, tool_key = self._keys(call)
        n_call = self._calls.pop(call_key, 0) + 1
        self._calls[call_key] = n_call
        while len(self._calls) > self._max_calls:
            self._calls.popitem(last=False)
        n_tool = self._tools.pop(tool_key, 0) + 1
        self._tools[tool_key] = n_tool
        while len(self._tools) > self._max_calls:
            self._tools.popitem(last=False)
        n_server = self._servers.get(call.upstream, 0)
        if upstream_health:
            n_server = self._servers[call.upstream] = n_server + 1
        return Consecutive(n_call, n_tool, n_server)

    def record_success(self, call: ToolCall) -> None:
        """Reset the counts of this call, its tool and its upstream (cheap when nothing failed)."""
        if self._calls:
            self._calls.pop((call.session_id, fingerprint(call)), None)
        if self._tools:
            self._tools.pop((call.upstream, call.upstream_tool or call.name), None)
        if self._servers:
            self._servers.pop(call.upstream, None)

    def current(self, call: ToolCall) -> Consecutive:
        """The counts for ``call`` without recording anything."""
        call_key, tool_key = self._keys(call)
        return Consecutive(
            self._calls.get(call_key, 0), self._tools.get(tool_key, 0), self._servers.get(call.upstream, 0)
        )


class Observe:
    """The outermost stage; see the module docstring."""

    def __init__(
        self,
        *,
        level_for: Callable[[], ObservationLevel] | ObservationRule,
        stats: FailureStats,
        audit: AuditSink | None = None,
        upstream_message_chars: int | None = None,
        session_context: Callable[[ToolCall], dict[str, Any]] | None = None,
        unknown_tool_as_result: bool | None = None,
        wall_clock: Callable[[], float] = time.time,
        arguments_hash: Callable[[ToolCall], str] | None = None,
        events: CallEvents = NULL,
        diagnose: Diagnoser | None = None,
    ) -> None:
        if isinstance(level_for, ObservationRule):
            rule = level_for
            self._level: Callable[[], ObservationLevel] = lambda: rule.level
            chars, as_result = rule.upstream_message_chars, rule.unknown_tool_as_result
        else:
            self._level, chars, as_result = level_for, 500, False
        self._chars = chars if upstream_message_chars is None else upstream_message_chars
        self._unknown_as_result = as_result if unknown_tool_as_result is None else unknown_tool_as_result
        self._stats = stats
        self._audit = audit
        self._session_context = session_context
        self._wall = wall_clock
        self._hash = arguments_hash or (lambda call: call_arguments_hash(call, _PROCESS_KEY))
        self._events = events
        """Where the ops recorders hear of the call (traces, metrics, status page); NULL when they are off."""
        self._diagnose = diagnose

    async def __call__(self, call: ToolCall, call_next: CallNext, /) -> types.CallToolResult:
        tokens = bind_contextvars(session=call.session_id, upstream=call.upstream, tool=call.name, call_id=call.call_id)
        events = self._events
        try:
            if events is NULL:
                return await self._run(call, call_next)
            events.call_started(call)
            try:
                result = await self._run(call, call_next)
            except BaseException as exc:  # cancellation, or the unknown-tool JSON-RPC error
                events.call_finished(call, call_end(call, None, exc))
                raise
            events.call_finished(call, call_end(call, result, None))
            return result
        finally:
            reset_contextvars(**tokens)

    async def _run(self, call: ToolCall, call_next: CallNext) -> types.CallToolResult:
        try:
            result = await call_next(call)
        except anyio.get_cancelled_exc_class():
            self._finish(call, "abandoned", None)
            raise
        except Fault as fault:
            return self._failed(call, await self._diagnosed(call, fault))
        except Exception as exc:
            inner = _group_fault(exc)
            if inner is None:
                log.exception("proxy_internal_error", error_type=type(exc).__name__)
                inner = _internal_error()
            return self._failed(call, inner)
        if result.is_error:
            return await self._error_result(call, result)
        self._stats.record_success(call)
        self._finish(call, "ok", None)
        return _annotated(result, call)

    async def _diagnosed(self, call: ToolCall, fault: Fault) -> Fault:
        """The fault, sharpened by a model's diagnosis when the policy enables it and the rules left it untyped."""
        if self._diagnose is None:
            return fault
        return await self._diagnose(call, fault)

    async def _error_result(self, call: ToolCall, result: types.CallToolResult) -> types.CallToolResult:
        """An ``isError`` result that reached the top: already an observation, or an upstream error to classify."""
        described = (result.meta or {}).get(FAULT_META_KEY)
        if isinstance(described, dict):
            self._stats.record_failure(call, upstream_health=False)
            self._finish(call, "error", str(described.get("fault_type")))
            return result
        fault = classify_result(result, tool=call.tool)
        assert fault is not None  # is_error results always classify
        return self._failed(call, await self._diagnosed(call, fault))

    def _failed(self, call: ToolCall, fault: Fault) -> types.CallToolResult:
        consecutive = self._stats.record_failure(call, upstream_health=fault.counts_against_upstream)
        self._finish(call, "refused" if _refused(fault) else "error", fault.fault_type)
        level = self._level()
        repeat = fault.details.get("repeat_count")
        repeat = repeat if isinstance(repeat, int) and not isinstance(repeat, bool) and repeat > 0 else None
        if isinstance(fault, UnknownTool) and not self._unknown_as_result:
            raise unknown_tool_error(Observed(fault, call, level, consecutive, repeat, None, self._chars))
        try:
            context = self._context(call) if level is ObservationLevel.L3 else None
            return build_observation(Observed(fault, call, level, consecutive, repeat, context, self._chars))
        except Exception:
            log.exception("observation_failed", fault_type=fault.fault_type)
            text = f"{fault.code}: the call failed ({fault.fault_type}); resilient-mcp could not describe it further."
            return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)

    def _context(self, call: ToolCall) -> dict[str, Any] | None:
        if self._session_context is None:
            return None
        try:
            return self._session_context(call)
        except Exception:
            log.exception("session_context_failed")
            return None

    def _finish(self, call: ToolCall, outcome: Outcome, fault_type: str | None) -> None:
        call.record.outcome, call.record.fault_type = outcome, fault_type
        if self._diagnose is not None:
            self._diagnose.note(call, outcome, fault_type)
        level = logging.DEBUG if outcome == "ok" else logging.INFO
        logged = log.is_enabled_for(level)
        if self._audit is None and not logged:
            return
        args = call.arguments if isinstance(call.arguments, dict) else {}
        entry = AuditEntry(
            ts=self._wall(),
            session=_clip(call.session_id),
            upstream=_clip(call.upstream),
            tool=_clip(call.name),
            argument_keys=audit_keys(args),
            arguments_hash=self._hash(call),
            outcome=outcome,
            fault_type=fault_type,
            attempts=len(call.record.attempts),
            latency_ms=call.record.elapsed_ms(),
            decided_by=call.record.decided_by,
        )
        if self._audit is not None:
            try:
                self._audit.record(entry)
            except Exception:
                log.exception("audit_record_failed")
        if logged:
            fields = entry.as_dict()
            (log.debug if outcome == "ok" else log.info)("tool_call", **fields)
