"""The retry stage: classified retries of one tool call inside one overall deadline, and the per-upstream retry budget.

Rule R (``docs/fault-catalog.md`` §3, ``repeat.decide``) decides whether a failed attempt may be repeated (decided
once per attempt, where the terminal classified its fault, and read from the call record); this stage adds its own
limits::

    verdict_of(call, fault).repeat ∧ deadline left ∧ retry token available

Attempts in all: ``retry.max_attempts`` (3) for faults that provably did not execute, ``max_attempts_maybe_executed``
(2) once any attempt may have executed. Waits are full-jitter exponential (base 100 ms, cap 2 s); a ``Retry-After``
(``fault.retry_after_ms``) up to ``retry_after_cap_ms`` (10 s) is slept, a longer one (or one past the deadline) is
surfaced with ``details.retry_at`` instead. Each attempt gets ``call.attempt_timeout_s`` = min(attempt_s, time left),
which the terminal enforces (extended by upstream progress); the stage itself cuts the call at ``timeouts.total_s``.
A maybe-executed fault of a write that cannot be repeated safely is never retried and leaves as outcome unknown,
repair ``verify_state``. Every attempt is listed in ``call.record.attempts``. Cancellation is never a failure.
Faults are immutable: what this stage says of the failure that leaves it (``retry_stopped``, ``retry_at``, an
untrusted claim or an earlier attempt that may have run) is a fault derived from the last attempt's, in ``_surface``.

The loop is tenacity's ``AsyncRetrying``; its strategies are built once per stage and read the per-call state from
the ``_Run`` passed as the wrapped function's argument, so the stage keeps no per-call state on ``self``. The first
attempt runs before the loop is entered (the success path, by far the most common, skips tenacity's per-call setup);
when it fails, the loop starts with that fault as its first attempt's outcome, so every decision is the same.
"""

from __future__ import annotations

import random as _random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol

import anyio
import mcp_types as types
import structlog
from tenacity import RetryCallState
from tenacity.asyncio import AsyncRetrying
from tenacity.stop import stop_base
from tenacity.wait import wait_exponential

from ..call.chain import Attempt, CallNext, ToolCall, timing
from ..faults import AttemptTimeout, Fault, RepairAction, RetrySafety, SideEffectStatus
from ..policy import ToolRule
from ..verdict.repeat import verdict_of

log = structlog.get_logger(__name__)

Sleep = Callable[[float], Awaitable[None]]
Clock = Callable[[], float]


class SharedBudgets(Protocol):
    async def retry_tokens(self, upstream: str, delta: float, max_tokens: float) -> float: ...


class RetryBudgets:
    """Per-upstream retry token buckets (gRPC retry throttling): a failing upstream is not hammered with retries.

    Every bucket starts full at ``max_tokens``; a failed attempt that says something about the upstream's health costs
    one token, a success refunds ``token_ratio``; retries are allowed only while tokens > ``threshold``."""

    def __init__(self, max_tokens: float = 10.0, token_ratio: float = 0.1, threshold: float | None = None) -> None:
        self.max_tokens = max_tokens
        self.token_ratio = token_ratio
        self.threshold = max_tokens / 2 if threshold is None else threshold
        self._tokens: dict[str, float] = {}
        self.shared: SharedBudgets | None = None
        """One bucket per upstream for every replica (rules with ``breaker.shared``; ``state.redis``)."""

    def tokens(self, upstream: str) -> float:
        return self._tokens.get(upstream, self.max_tokens)

    def allow_retry(self, upstream: str) -> bool:
        return self.tokens(upstream) > self.threshold

    def on_failure(self, upstream: str) -> None:
        self._tokens[upstream] = max(0.0, self.tokens(upstream) - 1.0)

    def on_success(self, upstream: str) -> None:
        if upstream in self._tokens:
            self._tokens[upstream] = min(self.max_tokens, self._tokens[upstream] + self.token_ratio)

    async def share(self, upstream: str, delta: float) -> None:
        """Apply ``delta`` to the shared bucket too and adopt its level (a success with a full local bucket, the
        common case, costs nothing). An unreachable state leaves the local bucket as it is."""
        if self.shared is None or (delta > 0 and upstream not in self._tokens):
            return
        try:
            self._tokens[upstream] = await self.shared.retry_tokens(upstream, delta, self.max_tokens)
        except Exception as exc:
            log.debug("retry_budget_not_shared", upstream=upstream, error=str(exc))


@dataclass(slots=True)
class _Run:
    """Per-call state of one retried call, handed to tenacity as the wrapped function's argument."""

    call: ToolCall
    call_next: CallNext
    deadline: float
    scope: anyio.CancelScope
    maybe_executed: bool = False
    delay_ms: int | None = None
    cut_in_attempt: bool = False
    last_fault: Fault | None = None
    stopped: tuple[Fault, str] | None = None
    """Why the retries stopped at this fault (``details.retry_stopped`` of the fault that leaves)."""
    first_fault: Fault | None = None
    """The fault of the attempt made before the loop, which the loop's first attempt re-raises."""


class _FullJitter(wait_exponential):
    """tenacity's ``wait_random_exponential`` (AWS "full jitter": uniform in [0, min(cap, base·2ⁿ)]), seedable."""

    def __init__(self, base_s: float, cap_s: float, rng: _random.Random) -> None:
        super().__init__(multiplier=base_s, max=cap_s)
        self._rng = rng

    def __call__(self, retry_state: RetryCallState) -> float:
        return self._rng.uniform(0.0, super().__call__(retry_state))


class _StopAfterAttempts(stop_base):
    def __init__(self, not_executed: int, maybe_executed: int) -> None:
        self.not_executed, self.maybe_executed = not_executed, maybe_executed

    def limit(self, run: _Run) -> int:
        return self.maybe_executed if run.maybe_executed else self.not_executed

    def __call__(self, retry_state: RetryCallState) -> bool:
        stop = retry_state.attempt_number >= self.limit(_run_of(retry_state))
        return _note_stop(retry_state, "max_attempts") if stop else False


class _StopBeforeDeadline(stop_base):
    """tenacity's ``stop_before_delay`` against the call's own deadline and the stage's (injectable) clock."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def __call__(self, retry_state: RetryCallState) -> bool:
        stop = self.clock() + retry_state.upcoming_sleep >= _run_of(retry_state).deadline
        return _note_stop(retry_state, "deadline") if stop else False


def _run_of(retry_state: RetryCallState) -> _Run:
    run: _Run = retry_state.args[0]
    return run


def _fault_of(retry_state: RetryCallState) -> BaseException | None:
    return retry_state.outcome.exception() if retry_state.outcome is not None else None


def _note_stop(retry_state: RetryCallState, reason: str) -> bool:
    fault = _fault_of(retry_state)
    if isinstance(fault, Fault):
        _stop(_run_of(retry_state), fault, reason)
    return True


def _stop(run: _Run, fault: Fault, reason: str) -> None:
    """Note why the retries stopped at ``fault`` (the first reason given for it stands)."""
    if run.stopped is None or run.stopped[0] is not fault:
        run.stopped = (fault, reason)


class Retry:
    """Retries one tool call by rule R inside ``timeouts.total_s``; sits outside the breaker, so each attempt is seen
    (and can be refused) by it."""

    def __init__(
        self,
        rule: ToolRule,
        budgets: RetryBudgets,
        *,
        sleep: Sleep = anyio.sleep,
        clock: Clock = time.monotonic,
        random: _random.Random | None = None,
    ) -> None:
        self._tool_rule = rule
        self._rule = rule.retry
        self._timeouts = rule.timeouts
        self._budgets = budgets
        self._clock = clock
        self._attempts = _StopAfterAttempts(rule.retry.max_attempts, rule.retry.max_attempts_maybe_executed)
        self._jitter = _FullJitter(
            rule.retry.backoff_base_ms / 1000, rule.retry.backoff_cap_ms / 1000, random or _random.Random()
        )
        self._retrying = AsyncRetrying(
            sleep=sleep,
            stop=self._attempts | _StopBeforeDeadline(clock),
            wait=self._wait,
            retry=self._should_retry,
            before_sleep=self._before_sleep,
            reraise=True,
        )

    async def __call__(self, call: ToolCall, call_next: CallNext, /) -> types.CallToolResult:
        total_s = self._timeouts.total_s
        with (
            anyio.move_on_after(total_s) as scope,
            timing(call.envelope, scope),
        ):  # stands still while the host is asked
            run = _Run(call, call_next, deadline=self._clock() + total_s, scope=scope)
            try:
                try:
                    return await self._attempt(run)
                except Fault as first:
                    run.first_fault = first
                result: types.CallToolResult = await self._retrying.copy()(self._attempt, run)
                return result
            except Fault as failed:
                raise self._surface(failed, run) from failed.__cause__
        # the total deadline passed: during an attempt (a timeout of that attempt) or while waiting to retry
        if not run.cut_in_attempt and run.last_fault is not None:
            fault: Fault = run.last_fault
        else:
            fault = self._deadline_fault(total_s, sent=run.cut_in_attempt)
            self._classify(run, fault)
        raise self._surface(fault, run)

    # --- one attempt ----------------------------------------------------------------------------------------------

    async def _attempt(self, run: _Run) -> types.CallToolResult:
        if run.first_fault is not None:  # the loop's first attempt is the one already made
            fault, run.first_fault = run.first_fault, None
            raise fault
        n = len(run.call.record.attempts) + 1
        started = self._clock()
        remaining = run.deadline - started
        if remaining <= 0:  # a wait overshot the deadline: nothing more was sent
            raise run.last_fault or self._deadline_fault(self._timeouts.total_s, sent=False)
        attempt = replace(run.call, attempt_timeout_s=min(self._timeouts.attempt_s, remaining))
        try:
            result = await run.call_next(attempt)
        except Fault as fault:
            self._record(run, n, started, fault.fault_type)
            self._classify(run, fault)
            if self._tool_rule.breaker.shared and fault.counts_against_upstream and not fault.tool_level:
                await self._budgets.share(run.call.upstream, -1.0)
            raise
        except anyio.get_cancelled_exc_class():
            run.cut_in_attempt = run.scope.cancel_called  # our own overall deadline, not the host's cancellation
            if run.cut_in_attempt:
                self._record(run, n, started, AttemptTimeout.fault_type)
            else:
                self._record(run, n, started, None, "cancelled")
            raise
        except Exception:
            self._record(run, n, started, None, "internal_error")
            raise
        self._record(run, n, started, None, "ok")
        self._budgets.on_success(run.call.upstream)
        if self._tool_rule.breaker.shared:
            await self._budgets.share(run.call.upstream, self._budgets.token_ratio)
        return result

    def _record(self, run: _Run, n: int, started: float, fault_type: str | None, outcome: str | None = None) -> None:
        elapsed_ms = round((self._clock() - started) * 1000)
        outcome = outcome or fault_type or "ok"
        run.call.record.attempts.append(Attempt(n, outcome, elapsed_ms, fault_type, run.delay_ms))

    def _classify(self, run: _Run, fault: Fault) -> None:
        """Budget accounting for a failed attempt, and whether it may have executed (rule R's decision on it)."""
        run.last_fault = fault
        if fault.counts_against_upstream and not fault.tool_level:  # one tool that throws leaves its siblings' budget
            self._budgets.on_failure(run.call.upstream)
        if verdict_of(run.call, fault).safety is RetrySafety.MAYBE_EXECUTED:
            run.maybe_executed = True

    # --- tenacity strategies --------------------------------------------------------------------------------------

    def _should_retry(self, retry_state: RetryCallState) -> bool:
        fault = _fault_of(retry_state)
        if not isinstance(fault, Fault) or not self._rule.enabled:
            return False  # cancellation, bugs
        run = _run_of(retry_state)
        verdict = verdict_of(run.call, fault)
        if verdict.reason == "reread_once":  # a result that broke its promise: the model re-reads it, once
            return False
        if not verdict.repeat:  # caller mistakes, policy refusals, permanent faults, unsafe repeats
            if fault.is_transient and verdict.reason != "caller_must_change":
                _stop(run, fault, verdict.reason)
            return False
        reason = self._refusal(run, fault)
        if reason is not None:
            _stop(run, fault, reason)
            return False
        return True

    def _refusal(self, run: _Run, fault: Fault) -> str | None:
        """Why this stage's own limits (deadline, Retry-After, budget) stop a repeat rule R allows, or None."""
        now = self._clock()
        if now >= run.deadline:
            return "deadline"
        if fault.retry_after_ms is not None:
            if fault.retry_after_ms > self._rule.retry_after_cap_ms:
                return "retry_after_over_cap"
            if now + fault.retry_after_ms / 1000 >= run.deadline:
                return "retry_after_past_deadline"
        if not self._budgets.allow_retry(run.call.upstream):
            return "retry_budget"
        return None

    def _wait(self, retry_state: RetryCallState) -> float:
        """Full jitter, or the server's Retry-After when it is longer (``_should_retry`` already capped it)."""
        jitter = self._jitter(retry_state)
        fault = _fault_of(retry_state)
        after_ms = fault.retry_after_ms if isinstance(fault, Fault) else None
        return jitter if after_ms is None else max(jitter, after_ms / 1000)

    async def _before_sleep(self, retry_state: RetryCallState) -> None:
        run = _run_of(retry_state)
        delay = retry_state.upcoming_sleep
        run.delay_ms = round(delay * 1000)
        fault = _fault_of(retry_state)
        fault_type = fault.fault_type if isinstance(fault, Fault) else "error"
        n, limit = retry_state.attempt_number + 1, self._attempts.limit(run)
        log.info(
            "retry_scheduled",
            tool=run.call.name,
            upstream=run.call.upstream,
            attempt=n,
            of=limit,
            delay_ms=run.delay_ms,
            fault_type=fault_type,
        )
        if run.call.host is None:
            return
        message = f"retrying {run.call.name} in {run.delay_ms} ms (attempt {n} of {limit}): {fault_type}"
        try:
            await run.call.host.report_progress(float(n - 1), float(limit), message)
        except Exception as exc:  # a host that cannot take progress must not fail the call
            log.warning("retry_progress_failed", tool=run.call.name, error=repr(exc))

    # --- leaving ----------------------------------------------------------------------------------------------------

    def _deadline_fault(self, total_s: float, *, sent: bool = True) -> AttemptTimeout:
        timeout_ms = round(total_s * 1000)
        return AttemptTimeout.of(
            "deadline",
            timeout_ms=timeout_ms,
            details={"timeout_ms": timeout_ms, "deadline": "total"},
            retry_safety=RetrySafety.MAYBE_EXECUTED if sent else RetrySafety.NOT_SENT,
        )

    @staticmethod
    def _surface(fault: Fault, run: _Run) -> Fault:
        """The fault the call leaves with: the last attempt's, with what the retries found out about it."""
        changes: dict[str, Any] = {}
        facts: dict[str, Any] = {}
        verdict = verdict_of(run.call, fault)
        if verdict.safety is RetrySafety.MAYBE_EXECUTED:
            if verdict.reason == "untrusted_claim":  # the upstream says it did not run; a write is not retried on it
                if "upstream_claimed" not in fault.details:
                    facts["upstream_claimed"] = fault.retry_safety.value
                changes["retry_safety"] = RetrySafety.MAYBE_EXECUTED
            if not verdict.safe:  # the outcome is unknown: verify before anything else
                changes |= {
                    "side_effect_status": SideEffectStatus.UNKNOWN,
                    "repair_action": RepairAction.VERIFY_STATE,
                    "max_retry": 0,
                }
        if run.stopped is not None and run.stopped[0] is fault and "retry_stopped" not in fault.details:
            facts["retry_stopped"] = run.stopped[1]
        safety = changes.get("retry_safety", fault.retry_safety)
        if run.maybe_executed and safety in (RetrySafety.NOT_SENT, RetrySafety.REJECTED):
            # An earlier attempt may have run: the call as a whole did not provably do nothing, whatever the last
            # attempt says (idempotency, fallback and the model must not take it for "nothing was sent").
            changes |= {"retry_safety": RetrySafety.MAYBE_EXECUTED, "side_effect_status": SideEffectStatus.UNKNOWN}
            facts["earlier_attempt_maybe_executed"] = True
        if fault.retry_after_ms is not None and "retry_at" not in fault.details:
            at = datetime.fromtimestamp(time.time() + fault.retry_after_ms / 1000, UTC)
            facts["retry_at"] = at.isoformat(timespec="seconds")
        if not changes and not facts:
            return fault
        return fault.replace(details={**fault.details, **facts}, **changes)
