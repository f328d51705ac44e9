"""Guard stage: per-session budgets and the loop guard (``docs/fault-catalog.md`` §4, guards).

``SessionGuards`` is the shared state, one ``SessionState`` per host session (LRU-bounded): calls made, calls that
succeeded and failed, a bounded, most-recent-last map of failed call fingerprints, and when the session last made a
call that can verify a write (``verified_since``, read by the idempotency stage). A host session is one host
connection (``proxy.session_key``), so nothing here crosses connections or processes. ``Guard`` is built per tool
from the ``SessionRule`` and that shared state, and per call:

1. refuses with ``BudgetExhausted`` once the session spent its tool-call or failure budget (both opt-in: no limit
   unless the policy sets ``session.max_tool_calls`` / ``max_failures``);
2. answers an identical call (same upstream, tool and canonical arguments) that already failed for a reason that
   repeating cannot fix with a copy of that fault, without calling next: ``details.repeat_count`` says how often the
   call was repeated, ``details.short_circuited`` is true, and from ``loop_threshold`` identical failures on the
   repair action is ``abort``. Faults rule R says an identical call can fix (``repeat.decide``) are let through:
   transient faults (once their ``retry_after`` elapsed, if they had one), a read_only tool's output-schema
   violation once (one re-read), and once a fault the rules did not recognise (``basis: unrecognised``: the proxy
   cannot claim a repeat fails the same way, so one identical repeat is the model's call, and its safety is the
   idempotency stage's); so are faults that time or a person can change: an open breaker with no reopen
   time, an approval the user declined or cancelled (asking again is the user's decision), and a write blocked
   until its outcome is verified (the idempotency stage lifts that block itself once the session has verified);
3. counts the outcome: a success forgets the fingerprint, a failure is recorded. Cancellation is not a failure.
   Identical writes the idempotency stage held unsent (an earlier one's outcome is unknown) count toward the loop
   while the session repeats them blindly; once it has verified, they are taken off the count: they never ran, so
   the re-issue after verifying is not the third attempt of a write the upstream saw once.
   A success, or an error the tool itself answered ("not found": the server's word on its state), also records
   that the session verified: by tool name, and by upstream when the call was read-only
   (class read_only by policy or trusted annotations, or an upstream's own ``readOnlyHint``: a hint may lift a
   block, it never makes the proxy retry anything).

Identical *successful* calls are never refused or counted as a loop, however often and fast they repeat: the
same write twice is the host's intent (write v1, v2, v1 again; commit twice). Budgets, opt-in, are the bound for a
runaway agent.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types

from ..call.chain import CallNext, Decision, ToolCall, Verdict, fingerprint
from ..faults import (
    BudgetExhausted,
    EffectClass,
    Fault,
    PermissionDenied,
    PersistentOutage,
    RepairAction,
    RetrySafety,
    SideEffectStatus,
)
from ..faults.error_results import answered_by_tool
from ..policy import SessionRule
from ..verdict.observations import capped_content
from ..verdict.repeat import decide, verdict_of

Fingerprint = str
"""``fingerprint.fingerprint(call)``: identical calls (upstream, tool, canonical arguments) have equal ones."""
RECENT_FAILURES_SHOWN = 5
_PERSON_DECIDES = frozenset({"declined", "cancelled", "unavailable"})


@dataclass(slots=True)
class FailureRecord:
    fault: Fault
    """The last fault this identical call ended with."""
    verdict: Verdict
    """Rule R's decision on it, as the failed call held it (re-decided only under another policy's rule)."""
    count: int
    """Identical calls that failed, the short-circuited ones included."""
    last_failed_at: float
    retry_after_ms: int | None
    tool: str
    """The host-visible tool name, for observations."""
    held: int = 0
    """Of ``count``: identical writes the idempotency stage held unsent while an earlier one's outcome was unknown."""
    failed_wall: float = 0.0
    """Wall-clock time of the last failure (compared with the session's verifying calls)."""


@dataclass(slots=True)
class SessionState:
    calls: int = 0
    calls_ok: int = 0
    calls_failed: int = 0
    failures: OrderedDict[Fingerprint, FailureRecord] = field(default_factory=OrderedDict)
    verified: dict[str, float] = field(default_factory=dict)
    """``tool:<host-visible name>`` / ``upstream:<name>`` -> wall-clock time of the last successful call that can
    tell whether a write took effect (any call by tool name; read-only calls for their whole upstream)."""


class SessionGuards:
    """Per-session guard state shared by every tool's ``Guard``: at most ``max_sessions`` sessions (least recently
    used evicted) and ``max_fingerprints`` failed fingerprints per session (oldest evicted)."""

    def __init__(self, max_sessions: int = 1000, max_fingerprints: int = 100) -> None:
        self.max_sessions = max_sessions
        self.max_fingerprints = max_fingerprints
        self._sessions: OrderedDict[str, SessionState] = OrderedDict()

    def session(self, session_id: str) -> SessionState:
        state = self._sessions.get(session_id)
        if state is None:
            state = self._sessions[session_id] = SessionState()
            while len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)
        else:
            self._sessions.move_to_end(session_id)
        return state

    def peek(self, session_id: str) -> SessionState | None:
        return self._sessions.get(session_id)

    def verified_since(self, session_id: str, upstream: str, tool: str | None, since: float) -> str | None:
        """What this session called after ``since`` (wall clock) that verifies a write on ``upstream``: the tool
        ``tool`` (a write's ``verify_with``) or any read-only call of that upstream; None when nothing did."""
        state = self._sessions.get(session_id)
        if state is None:
            return None
        if tool is not None and state.verified.get(f"tool:{tool}", 0.0) > since:
            return tool
        if state.verified.get(f"upstream:{upstream}", 0.0) > since:
            return f"a read-only call of {upstream!r}"
        return None

    def forget(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def remember(self, state: SessionState, key: Fingerprint, record: FailureRecord) -> None:
        state.failures[key] = record
        state.failures.move_to_end(key)
        while len(state.failures) > self.max_fingerprints:
            state.failures.popitem(last=False)


class Guard:
    """Budgets and loop guard for one tool; see the module docstring."""

    def __init__(
        self,
        rule: SessionRule,
        guards: SessionGuards,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._rule = rule
        self._guards = guards
        self._clock = clock
        self._wall = wall

    async def __call__(self, call: ToolCall, call_next: CallNext, /) -> types.CallToolResult:
        state = self._guards.session(call.session_id)
        self._check_budgets(call, state)
        # The fingerprint only matters where this session has failed calls to match: a session that has none (the
        # common case) neither hashes the arguments nor looks them up, before the call or after its success.
        key = fingerprint(call) if state.failures else None
        record = state.failures.get(key) if key is not None else None
        state.calls += 1
        if record is not None and key is not None and self._blocks(record, call):
            state.calls_failed += 1
            raise self._short_circuit(call, state, key, record)
        try:
            result = await call_next(call)
        except Fault as failed:
            state.calls_failed += 1
            fault = self._record_failure(call, state, key or fingerprint(call), failed)
            if answered_by_tool(fault):  # a read the server answered, "not found" included, shows the state
                self._record_verification(call, state)
            if fault is failed:
                raise
            raise fault from failed.__cause__
        except Exception:
            state.calls_failed += 1
            raise
        if result.is_error:
            state.calls_failed += 1
        else:
            state.calls_ok += 1
            if state.failures:  # (an identical call may have failed meanwhile)
                state.failures.pop(key or fingerprint(call), None)
            self._record_verification(call, state)
        return result

    def _record_verification(self, call: ToolCall, state: SessionState) -> None:
        now = self._wall()
        state.verified[f"tool:{call.name}"] = now
        if call.upstream and _reads_only(call):
            state.verified[f"upstream:{call.upstream}"] = now

    def _check_budgets(self, call: ToolCall, state: SessionState) -> None:
        calls_limit, failures_limit = self._rule.max_tool_calls, self._rule.max_failures
        if calls_limit is not None and state.calls >= calls_limit:
            raise self._exhausted(call, state, "tool_calls", calls_limit, state.calls)
        if failures_limit is not None and state.calls_failed >= failures_limit:
            raise self._exhausted(call, state, "failures", failures_limit, state.calls_failed)

    def _exhausted(self, call: ToolCall, state: SessionState, budget: str, limit: int, used: int) -> BudgetExhausted:
        call.record.decided_by = "guard"
        if budget == "failures":
            made = BudgetExhausted.text("made_failed", calls=state.calls, ok=state.calls_ok, failed=state.calls_failed)
        else:
            made = BudgetExhausted.text("made", calls=state.calls, ok=state.calls_ok)
        close = BudgetExhausted.text("close_with_summary" if state.calls_ok else "close_with_blocker")
        return BudgetExhausted.of(
            "failures" if budget == "failures" else "tool_calls",
            suggest="spent",
            limit=limit,
            tool=call.name,
            made=made,
            close=close,
            details={
                "budget": budget,
                "limit": limit,
                "used": used,
                "calls_ok": state.calls_ok,
                "calls_failed": state.calls_failed,
            },
        )

    def _blocks(self, record: FailureRecord, call: ToolCall) -> bool:
        if record.retry_after_ms is not None:
            return (self._clock() - record.last_failed_at) * 1000 < record.retry_after_ms
        fault, held = record.fault, record.verdict
        # rule R: can an identical call help (its safety is idempotency's)
        verdict = held.decision if held.rule is call.rule else decide(fault, call.rule)
        if verdict.reason == "reread_once":
            return record.count > verdict.max_repeats
        if fault.details.get("basis") == "unrecognised":
            return record.count > 1  # the proxy cannot say a repeat fails the same way: one is the model's call
        if verdict.helps or isinstance(fault, PersistentOutage):
            return False
        if fault.repair_action is RepairAction.VERIFY_STATE or fault.details.get("conflict") == "outcome_unknown":
            return False  # the idempotency stage decides, and lifts it once the session verified (even after abort)
        return not (isinstance(fault, PermissionDenied) and fault.details.get("approval") in _PERSON_DECIDES)

    def _short_circuit(self, call: ToolCall, state: SessionState, key: Fingerprint, record: FailureRecord) -> Fault:
        call.record.decided_by = "guard"
        record.count += 1
        state.failures.move_to_end(key)
        fault = record.fault
        retry_after_ms = fault.retry_after_ms
        if record.retry_after_ms is not None:
            elapsed_ms = int((self._clock() - record.last_failed_at) * 1000)
            retry_after_ms = max(record.retry_after_ms - elapsed_ms, 1)
            wait = f" Wait at least {retry_after_ms} ms before trying it again."
        else:
            wait = " Repeating it unchanged will fail the same way."
        clone = fault.replace(
            details={**fault.details, "repeat_count": record.count - 1, "short_circuited": True},
            retry_safety=RetrySafety.NOT_SENT,
            side_effect_status=SideEffectStatus.NONE,
            max_retry=0,
            retry_after_ms=retry_after_ms,
            suggestion=f"This identical call already failed ({fault.fault_type}) and was not sent again.{wait} "
            + (fault.suggestion or "Change the arguments or take a different approach."),
        )
        return self._escalate(clone, record.count, verdict_of(call, clone))

    def _record_failure(self, call: ToolCall, state: SessionState, key: Fingerprint, fault: Fault) -> Fault:
        """Remember this failure of an identical call; the fault as it leaves (its repeat count, escalated)."""
        previous = state.failures.get(key)
        count = previous.count + 1 if previous is not None else 1
        held = previous.held if previous is not None else 0
        if previous is not None and held and self._verified_after(call, previous):
            count, held = count - held, 0  # verified since: the held calls never ran, they were not repeats
        if _held_unsent(call, fault):
            held += 1
        verdict = verdict_of(call, fault)
        if previous is not None:
            fault = self._escalate(fault.with_details(keep=True, repeat_count=count - 1), count, verdict)
        decided = Verdict(call.rule, fault.verdict_inputs, verdict)
        now = self._clock()
        record = FailureRecord(_kept(fault), decided, count, now, fault.retry_after_ms, call.name, held, self._wall())
        self._guards.remember(state, key, record)
        return fault

    def _verified_after(self, call: ToolCall, previous: FailureRecord) -> bool:
        verify = call.rule.verify_with.tool if call.rule.verify_with is not None else None
        return self._guards.verified_since(call.session_id, call.upstream, verify, previous.failed_wall) is not None

    def _escalate(self, fault: Fault, count: int, verdict: Decision) -> Fault:
        """``fault`` (whose rule R decision is ``verdict``), told to stop once the loop threshold is reached."""
        if verdict.reason == "reread_once":  # the re-read rule R allows is not a loop
            count -= verdict.max_repeats
        if count < self._rule.loop_threshold:
            return fault
        return fault.replace(
            repair_action=RepairAction.ABORT,
            suggestion=f"This identical call has now failed {count} times: stop repeating it. Take a different "
            "approach, or tell the user what is blocking you.",
        )

    def snapshot(self, session_id: str) -> dict[str, Any]:
        """Session context for L3 observations: remaining budgets and the most recent failed calls."""
        state = self._guards.peek(session_id) or SessionState()
        recent = list(state.failures.values())[-RECENT_FAILURES_SHOWN:]
        return {
            "tool_calls": _budget(self._rule.max_tool_calls, state.calls),
            "failures": _budget(self._rule.max_failures, state.calls_failed),
            "calls_ok": state.calls_ok,
            "recent_failures": [
                {"tool": r.tool, "fault_type": r.fault.fault_type, "repeat_count": r.count - 1}
                for r in reversed(recent)
            ],
        }


def _held_unsent(call: ToolCall, fault: Fault) -> bool:
    """The idempotency stage held this write unsent: an identical one's outcome is unknown."""
    return call.record.decided_by == "idempotency" and fault.details.get("conflict") == "outcome_unknown"


def _reads_only(call: ToolCall) -> bool:
    """Whether a successful call of this tool can verify a write: read_only by policy or trusted annotations, or by
    the upstream's own readOnlyHint (trusted or not: a hint may only lift a block here, never enable a retry)."""
    if call.rule.effect is EffectClass.READ_ONLY:
        return True
    annotations = call.tool.annotations if call.tool is not None else None
    return annotations is not None and bool(annotations.read_only_hint)


def _budget(limit: int | None, used: int) -> dict[str, int | None]:
    return {"limit": limit, "used": used, "remaining": None if limit is None else max(limit - used, 0)}


KEPT_RESULT_BYTES = 8192
"""How much of an upstream's error text a remembered failure keeps (sessions and fingerprints are bounded; this
bounds each record)."""


def _kept(fault: Fault) -> Fault:
    """The fault as remembered for the loop guard: the upstream's error content capped, not the whole result."""
    result = fault.upstream_result
    if not isinstance(result, types.CallToolResult):
        return fault
    message = fault.upstream_message
    return fault.replace(
        upstream_result=result.model_copy(update={"content": capped_content(list(result.content), KEPT_RESULT_BYTES)}),
        upstream_message=message[:KEPT_RESULT_BYTES] if message is not None else None,
    )
