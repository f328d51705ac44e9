"""Rule R: may this failed call be repeated, and why. The one place every stage and the observation ask.

``docs/fault-catalog.md`` §3, rule R::

    repeat = helps and safe
    helps  = the fault is transient (an identical call can succeed), and it is not the caller's mistake, a policy
             refusal, a guard decision (the shared state being unreachable is not one: once it is back the
             identical write runs), an unknown tool or an error the rules did not recognise (``details.basis``
             ``unrecognised``: whatever says it is transient, the proxy does not know); a read_only tool's result
             that broke its outputSchema or the policy's result_invariants may be re-read once (the corruption may
             not come back)
    safe   = not_sent or rejected                                    (provably nothing ran)
             or maybe_executed and (read_only, write_idempotent, or the upstream honours the forwarded key)
             or executed_failed / n/a on a read_only tool        (a read changes nothing however often it runs)

What a failed call *claims* is trusted only as far as its source is: a typed upstream hint (``retryable: true``, a
typed ``unavailable``) or a chained resilient-mcp's observation can say "it did not run", but for a write on an
upstream without ``trust_annotations: true`` that claim is not believed: the call counts as ``maybe_executed``
(``safety`` below), so the proxy never re-sends such a write on an untrusted server's word.

The retry stage (proxy retries, plus deadline and budget checks of its own), the fallback stage (a write falls back
only when nothing ran), the loop guard (an identical failed call is let through only when it can help), the
idempotency stage (a record is released only when nothing ran) and the observation (``repair_action`` and
``max_retry``) all read the decision; none of them has its own copy of the rule.

**Decided once per fault.** ``verdict_of(call, fault)`` decides where a fault is classified (the terminal, for each
upstream attempt) and keeps the decision on the call record (``CallRecord.verdict``); every later reader of the same
call gets it from there. Faults are immutable (``Fault.replace``), so a decision stays true of its fault; a stage
that derives a fault without changing what rule R reads of it (``Fault.verdict_inputs``: adding details such as
``retry_stopped``) keeps the decision, and one that changes a verdict (the retry stage's "an earlier attempt may have
run") gets a new one, decided once.
"""

from __future__ import annotations

from ..call.chain import Decision, ToolCall, Verdict
from ..faults import (
    ArgumentFault,
    ConnectionLost,
    EffectClass,
    Fault,
    GuardFault,
    OutputSchemaViolation,
    PermissionFault,
    RetrySafety,
    SemanticCorruption,
    SideEffectStatus,
    StateUnavailableFault,
    UnknownTool,
)
from ..policy import ToolRule

__all__ = ["Decision", "decide", "decide_outcome_unknown", "verdict_of"]

_NEVER_REPEATED = (ArgumentFault, PermissionFault, GuardFault, UnknownTool)
_NOTHING_RAN = (RetrySafety.NOT_SENT, RetrySafety.REJECTED)
_NOTHING_DONE = (SideEffectStatus.NONE, SideEffectStatus.NOT_COMMITTED)


def _untrusted_claim(fault: Fault, rule: ToolRule) -> bool:
    return (
        fault.claimed_by_upstream
        and fault.retry_safety in _NOTHING_RAN
        and rule.effect.is_write
        and not rule.trusted_upstream
    )


def _safety_reason(safety: RetrySafety, rule: ToolRule) -> tuple[bool, str]:
    if safety in _NOTHING_RAN:
        return True, safety.value
    if rule.effect is EffectClass.READ_ONLY:
        return True, "read_only"
    if safety is RetrySafety.MAYBE_EXECUTED:
        if rule.effect is EffectClass.WRITE_IDEMPOTENT:
            return True, "write_idempotent"
        if rule.idempotency.forward_key_as is not None:
            return True, "key_forwarded"
        return False, "may_have_executed"
    return False, "executed"


def decide(fault: Fault, rule: ToolRule) -> Decision:
    """Rule R for ``fault`` on the tool with ``rule`` (see the module docstring)."""
    untrusted = _untrusted_claim(fault, rule)
    safety = RetrySafety.MAYBE_EXECUTED if untrusted else fault.retry_safety
    safe, reason = _safety_reason(safety, rule)
    nothing_done = safety in _NOTHING_RAN or (
        safety is RetrySafety.EXECUTED_FAILED and fault.side_effect_status in _NOTHING_DONE
    )
    max_repeats = fault.max_retry
    if isinstance(fault, _NEVER_REPEATED) and not isinstance(fault, StateUnavailableFault):
        helps, why_not = False, "caller_must_change"
    elif fault.details.get("basis") == "unrecognised":
        helps, why_not = False, "unrecognised"
    elif isinstance(fault, OutputSchemaViolation | SemanticCorruption) and rule.effect is EffectClass.READ_ONLY:
        helps, why_not, max_repeats = True, "", max(max_repeats, 1)
        reason = "reread_once"
    elif not fault.is_transient:
        helps, why_not = False, "not_transient"
    elif safety in (RetrySafety.EXECUTED_FAILED, RetrySafety.NOT_APPLICABLE):
        helps, why_not = False, "executed"
    else:
        helps, why_not = True, ""
    if not safe:
        max_repeats = 0
        if untrusted:
            reason = "untrusted_claim"
    elif not helps:
        reason = why_not
    return Decision(helps and safe, safe, helps, nothing_done, safety, reason, max_repeats)


def decide_outcome_unknown(rule: ToolRule) -> Decision:
    """Rule R for an identical re-issue of a call whose outcome is unknown (an idempotency record that may have
    executed): the verdict on a sent-then-lost call of this tool. Safe only where repeating cannot duplicate the
    effect: reads, idempotent writes, and writes whose forwarded key the upstream honours."""
    return decide(ConnectionLost("outcome unknown"), rule)


def verdict_of(call: ToolCall, fault: Fault) -> Decision:
    """Rule R for ``fault`` on ``call``'s tool: the decision held on the call record when it is about this fault (or
    one derived from it with the same ``verdict_inputs``), else decided now and held there."""
    held = call.record.verdict
    inputs = fault.verdict_inputs
    if held is not None and held.rule is call.rule and held.inputs == inputs:
        return held.decision
    decision = decide(fault, call.rule)
    call.record.verdict = Verdict(call.rule, inputs, decision)
    return decision
