"""The diagnose step: when to ask a model, and what its verdict may change.

Asked only for failures the rules recognised nothing in (``details.basis == "unrecognised"``: an error text or a
JSON-RPC error message with no typed hint, no standard code, no known wording), and for an unexpected exception.
Never for typed hints, standard codes, wordings, HTTP statuses, transport faults the proxy detected itself, or a
chained resilient-mcp's observation.

The model is asked for a closed answer (``verdict.ANSWER_SCHEMA``: a kind of cause, the argument to change, whether
it is sure); the engine maps the kind to the catalog and words the advice itself. An answer of ``unclear``, one the
model is not sure of, and a kind in ``ABSTAINED_KINDS`` (kinds that measured no better than "unrecognised" on the
corpus) are abstentions: the rules' observation stands, with ``details.diagnosis.status: abstained``.

Clamps (the verdict may sharpen, never loosen): it may set the fault type, transient, repair action and suggestion
(marked model-written in ``details.diagnosis``). Retry safety, side-effect status and an upstream's untrusted
claim stay the rules'; max_retry is at most what rule R (``repeat.decide``) allows for the model's type on the
rules' safety facts and never above the rules' own max_retry, and the diagnosed fault keeps the rules' basis
(``unrecognised``: rule R never repeats on a model's word); the repair planning then runs as for any fault, so a
maybe-executed write becomes ``verify_state`` whatever the model said. The retry stage has already run when the
diagnosis is made: a verdict never causes a proxy retry and never says that a call did not run; it only informs
the model.

Cost bounds: verdicts are cached by error signature (principal, upstream, tool and normalised error text: one
tenant's model-written suggestion is never served to another), bounded in size and age; model
calls are limited per minute over all sessions; each call has a timeout. Any failure (timeout, budget, provider
error, an answer that is not one valid JSON object) returns the rules' fault, with the reason in
``details.diagnosis``, in the audit trail's ``decided_by`` (``diagnosis:fallback:<reason>``) and in the
``diagnosis`` log event.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import structlog

from ..call.chain import ToolCall
from ..faults import (
    BY_TYPE,
    EffectClass,
    Fault,
    FaultCategory,
    GatewayError,
    RepairAction,
    RetrySafety,
)
from ..faults.error_results import answered_by_tool
from ..faults.vocab import Basis
from ..policy.diagnosis_settings import DiagnosisRule
from ..state.stored_outputs import owner_principal
from ..verdict.observations import plan_repair
from ..verdict.repeat import decide
from .prompt import build_messages, error_text
from .providers import OpenAICompatible, Provider, ProviderUnavailable, Sampling
from .verdict import Verdict, parse_verdict

ABSTAINED_KINDS: frozenset[str] = frozenset(
    {"missing_resource", "service_unavailable", "not_permitted", "bad_credentials", "server_broken"}
)
"""Closed-answer kinds the engine does not apply (an abstention), decided on the corpus only
(``benchmarks/errors/REPORT-live-holdouts.md``): a kind is used only where its sure answers beat the rules' own
"unrecognised" there. With the local 1.5B model only ``bad_argument_value`` (+14 fault types of 18) and
``state_conflict`` (+2 of 2) did; the others were never answered sure, so nothing shows they are better, and
``service_unavailable`` would be the one to call a permanent fault transient."""

log = structlog.get_logger(__name__)

CACHE_ENTRIES = 512
RECENT_CALLS = 5
RECENT_SESSIONS = 256
_VOLATILE = re.compile(r"\b[0-9a-f]{8}-[0-9a-f-]{27}\b|\b0x[0-9a-f]+\b|\d{4,}")
"""UUIDs, hex ids, ports, timestamps, pids: what differs between two occurrences of one error. Short numbers
(an HTTP status, an exit code) stay: they change the meaning."""


def signature(tool: str, text: str, scope: str = "") -> str:
    """The cache key of an error: whose call it was (``scope``), the tool and its error text with volatile ids and
    spacing normalised."""
    norm = _VOLATILE.sub("#", " ".join(text.lower().split()))[:1000]
    return hashlib.sha256(f"{scope}\0{tool}\0{norm}".encode()).hexdigest()[:32]


def cache_scope(call: ToolCall, identity: str) -> str:
    """Who may be answered from one cached verdict: one principal, on one upstream (its name and ``identity``).
    A verdict holds a model-written suggestion: tenant A's is never shown to tenant B, whose model was not asked."""
    return f"{owner_principal(call.owner)}\0{call.upstream}\0{identity}"


def untyped(fault: Fault) -> bool:
    """True when the rules recognised nothing in this failure (``details.basis == "unrecognised"``: no typed hint,
    no standard code, no wording), or it is an unexpected exception: what diagnosis is for. Whatever the rules did
    recognise, a standard's code or a wording, is theirs to answer."""
    details = fault.details
    if details.get("chained") or not fault.upstream_message:
        return False
    if details.get("basis") == Basis.UNRECOGNISED.value:
        return True
    return type(fault) is GatewayError and "exception_type" in details  # an unexpected exception


@dataclass
class DiagnosisState:
    """What outlives a policy reload: the verdict cache, the per-minute window, recent calls, counters."""

    clock: Callable[[], float] = time.monotonic
    cache: OrderedDict[str, tuple[float, Verdict]] = field(default_factory=OrderedDict)
    window: deque[float] = field(default_factory=deque)
    recent: OrderedDict[str, deque[str]] = field(default_factory=OrderedDict)
    stats: Counter[str] = field(default_factory=Counter)

    def cached(self, key: str) -> Verdict | None:
        hit = self.cache.get(key)
        if hit is None:
            return None
        if hit[0] <= self.clock():
            del self.cache[key]
            return None
        self.cache.move_to_end(key)
        return hit[1]

    def store(self, key: str, verdict: Verdict, ttl_s: float) -> None:
        if ttl_s <= 0:
            return
        self.cache[key] = (self.clock() + ttl_s, verdict)
        self.cache.move_to_end(key)
        while len(self.cache) > CACHE_ENTRIES:
            self.cache.popitem(last=False)

    def spend(self, per_minute: int) -> bool:
        """Take one model call from the per-minute budget; False when it is used up."""
        now = self.clock()
        while self.window and self.window[0] <= now - 60.0:
            self.window.popleft()
        if len(self.window) >= per_minute:
            return False
        self.window.append(now)
        return True

    def note_call(self, session: str, line: str) -> None:
        calls = self.recent.get(session)
        if calls is None:
            calls = self.recent[session] = deque(maxlen=RECENT_CALLS)
            while len(self.recent) > RECENT_SESSIONS:
                self.recent.popitem(last=False)
        self.recent.move_to_end(session)
        calls.append(line)

    def recent_calls(self, session: str) -> list[str]:
        return list(self.recent.get(session, ()))


def provider_for(rule: DiagnosisRule) -> Provider:
    if rule.provider == "openai":
        assert rule.url is not None and rule.model is not None  # the settings validator guarantees both
        return OpenAICompatible(rule.url, rule.model, rule.api_key_env, timeout_s=rule.timeout_s)
    return Sampling(rule.model)


def rule_r_max(fault: Fault, call: ToolCall) -> int:
    """The identical repeats rule R (``repeat.decide``) allows for ``fault`` on this tool: 0 unless repeating helps
    and is safe on the rules' safety facts."""
    verdict = decide(fault, call.rule)
    return verdict.max_repeats if verdict.repeat else 0


_NOT_RUN = (
    "did not run",
    "didn't run",
    "did not execute",
    "didn't execute",
    "was not executed",
    "wasn't executed",
    "not been executed",
    "has not run",
    "hasn't run",
    "never ran",
    "never executed",
    "never reached",
    "not reach the tool",
    "was not applied",
    "nothing was written",
    "nothing was changed",
    "no changes were made",
    "safe to retry",
    "safe to repeat",
)
"""Claims that the call had no effect: a model may not make them about a call the proxy knows may have run."""
_REPEAT = ("retry", "try again", "call it again", "run it again", "send it again", "resend", "re-send", "rerun")
"""Advice to send the call again: a model may not give it when the clamped verdict allows no repeat."""
_NEGATIONS = ("not ", "n't ", "never ", "no ", "avoid ", "without ", "before you ", "instead of ")


def _unnegated(text: str, phrase: str) -> bool:
    """Whether ``phrase`` occurs in ``text`` once at least without a negation just before it (``do not retry``)."""
    start = text.find(phrase)
    while start >= 0:
        before = text[max(0, start - 12) : start]
        if not any(before.endswith(n) or n in before for n in _NEGATIONS):
            return True
        start = text.find(phrase, start + len(phrase))
    return False


def contradiction(suggestion: str, fault: Fault) -> str | None:
    """Why a model's ``suggestion`` contradicts the clamped ``fault`` (it says the call did not run when it may have;
    it says to send it again when no repeat is allowed), or None. Plain substring checks on one line of text."""
    text = " ".join(suggestion.lower().replace("\u2019", "'").split())
    if fault.retry_safety not in (RetrySafety.NOT_SENT, RetrySafety.REJECTED) and any(p in text for p in _NOT_RUN):
        return "says_not_run"
    no_repeat = fault.max_retry == 0 and fault.repair_action is not RepairAction.BACKOFF_RETRY
    if no_repeat and any(_unnegated(text, p) for p in _REPEAT):
        return "says_retry"
    return None


def state_conflict(rules: Fault, verdict: Verdict, call: ToolCall) -> bool:
    """The verdict's fault type says the call never reached the tool (``not_sent``: unknown tool, invalid arguments,
    no connection) while the proxy knows it was sent: the type contradicts what the proxy saw. One exception: where
    the server itself answered (an error result, or a JSON-RPC error), it may have refused the tool's name or
    arguments (categories A and B: rejected, not run), and for a read or an idempotent write nothing rides on whether
    it ran (the clamps keep the rules' retry safety anyway). For any other write the refusal stands: a model's word
    is not enough to say that a write that may have run did not."""
    cls = BY_TYPE[verdict.fault_type]
    if cls.default_retry_safety is not RetrySafety.NOT_SENT or rules.retry_safety is RetrySafety.NOT_SENT:
        return False
    answered = answered_by_tool(rules) or "upstream_code" in rules.details  # its result, or a JSON-RPC error answer
    refused_by_the_tool = answered and cls.category in (FaultCategory.SELECTION, FaultCategory.ARGUMENTS)
    return not (refused_by_the_tool and call.rule.effect in (EffectClass.READ_ONLY, EffectClass.WRITE_IDEMPOTENT))


def abstention(verdict: Verdict) -> str | None:
    """Why the engine does not apply ``verdict`` (the model could not tell, was not sure, or named a kind that
    measured no better than "unrecognised"), or None."""
    if verdict.kind is None:
        return None
    if verdict.abstains:
        return "unclear" if verdict.kind == "unclear" else "not_sure"
    return f"kind:{verdict.kind}" if verdict.kind in ABSTAINED_KINDS else None


def _argument_name(verdict: Verdict, call: ToolCall) -> str | None:
    """The argument the closed answer names, if the call or the tool's input schema has one of that name."""
    name = verdict.argument
    if not name:
        return None
    tool = call.tool
    props = tool.input_schema.get("properties") if tool is not None and isinstance(tool.input_schema, dict) else None
    known = set(call.arguments or {}) | (set(props) if isinstance(props, dict) else set())
    return name if name in known else None


def advice_of(verdict: Verdict, call: ToolCall) -> str:
    """The advice the observation quotes: the model's suggestion (a full verdict), or the engine's wording of the
    closed answer's kind with the argument it named (only an argument the tool has)."""
    if verdict.kind is None:
        return verdict.suggestion
    name = _argument_name(verdict, call)
    return verdict.suggestion.format(argument=f"'{name}'" if name else "the argument the error names")


def apply_verdict(rules: Fault, verdict: Verdict, call: ToolCall, meta: dict[str, Any]) -> Fault:
    """The rules' fault sharpened by ``verdict`` under the clamps (see the module docstring)."""
    cls = BY_TYPE[verdict.fault_type]
    _, rules_max, _ = plan_repair(rules, call)
    proposed = verdict.max_retry if verdict.max_retry is not None else cls.default_max_retry
    said = {"kind": verdict.kind, "argument": _argument_name(verdict, call)} if verdict.kind is not None else {}
    details = {
        **rules.details,
        "diagnosis": {
            **meta,
            "status": "applied",
            "rules_fault_type": rules.fault_type,
            "suggestion_by": "model",
            **said,
        },
    }
    new = cls.of(
        "diagnosed",
        suggest="diagnosed_advice",
        fault_type=cls.fault_type,
        advice=advice_of(verdict, call).replace("«", '"').replace("»", '"'),  # the model cannot close the quote
        details=details,
        upstream_message=rules.upstream_message,
        upstream_code=rules.upstream_code,
        transient=verdict.is_transient,
        retry_safety=rules.retry_safety,
        side_effect_status=rules.side_effect_status,
        repair_action=verdict.repair_action,
        retry_after_ms=rules.retry_after_ms,
        claimed_by_upstream=rules.claimed_by_upstream,  # an untrusted upstream's claim stays untrusted
        upstream_result=rules.upstream_result,
    )
    bound = min(rule_r_max(new, call), rules_max)  # rule R on the model's type, and never above the rules' own
    new = new.replace(max_retry=min(proposed, bound))
    if (why := contradiction(verdict.suggestion, new)) is not None:  # the rules' advice instead of the model's
        dropped = {**new.details["diagnosis"], "suggestion_by": "rules", "suggestion_dropped": why}
        new = new.replace(suggestion=rules.suggestion, details={**new.details, "diagnosis": dropped})
    return new


def _audit(call: ToolCall, what: str) -> None:
    """The audit trail's ``decided_by`` of an upstream failure (no stage decided it) names the diagnosis outcome."""
    if call.record.decided_by is None:
        call.record.decided_by = what


class Diagnoser:
    """Configured per policy; state (cache, budget) shared across reloads."""

    def __init__(
        self,
        rule: DiagnosisRule,
        state: DiagnosisState,
        provider: Provider | None = None,
        identity: Callable[[str], str] | None = None,
    ) -> None:
        self.rule = rule
        self.state = state
        self.provider = provider or provider_for(rule)
        self.identity = identity or (lambda upstream: "")
        """An upstream's identity by its configured name (``idempotency.upstream_identity``): part of the cache key."""

    def note(self, call: ToolCall, outcome: str, fault_type: str | None) -> None:
        """Remember a finished call for the prompts of later diagnoses in the same session."""
        args = ",".join(sorted((call.arguments or {}).keys()))
        self.state.note_call(call.session_id, f"{call.name}({args}) -> {fault_type or outcome}")

    def wanted(self, fault: Fault) -> bool:
        return self.rule.enabled and untyped(fault)

    async def __call__(self, call: ToolCall, fault: Fault) -> Fault:
        if not self.wanted(fault):
            return fault
        st, rule = self.state, self.rule
        key = signature(call.name, error_text(fault), cache_scope(call, self.identity(call.upstream)))
        meta: dict[str, Any] = {"provider": self.provider.name, "signature": key}
        if (hit := st.cached(key)) is not None:
            if (why := abstention(hit)) is not None:
                return self._abstained(call, fault, meta | {"cached": True}, why)
            if state_conflict(fault, hit, call):
                return self._fallback(call, fault, meta, "contradicts_state", hit.fault_type)
            st.stats["cache_hits"] += 1
            _audit(call, "diagnosis:cached")
            return apply_verdict(fault, hit, call, meta | {"cached": True})
        if not st.spend(rule.max_per_minute):
            return self._fallback(call, fault, meta, "budget")
        system, user = build_messages(
            call, fault, st.recent_calls(call.session_id), send_values=rule.send_argument_values
        )
        started = st.clock()
        st.stats["calls"] += 1
        try:
            with anyio.fail_after(rule.timeout_s):  # the answer is read inside the deadline too (linear, capped)
                answer = await self.provider.ask(system, user, call.host)
                verdict = parse_verdict(answer.text)
        except TimeoutError:
            return self._fallback(call, fault, meta, "timeout")
        except ProviderUnavailable as exc:
            return self._fallback(call, fault, meta, "unavailable", str(exc))
        except Exception as exc:  # a provider's failure must never fail the call
            return self._fallback(call, fault, meta, "error", type(exc).__name__)
        elapsed_ms = int((st.clock() - started) * 1000)
        st.stats["latency_ms"] += elapsed_ms
        st.stats["tokens_in"] += answer.tokens_in or 0
        st.stats["tokens_out"] += answer.tokens_out or 0
        if verdict is None:
            return self._fallback(call, fault, meta, "invalid_answer")
        if (why := abstention(verdict)) is not None:
            st.store(key, verdict, rule.cache_ttl_s)
            return self._abstained(call, fault, meta | {"cached": False, "latency_ms": elapsed_ms}, why)
        if state_conflict(fault, verdict, call):
            return self._fallback(call, fault, meta, "contradicts_state", verdict.fault_type)
        st.store(key, verdict, rule.cache_ttl_s)
        st.stats["applied"] += 1
        log.info("diagnosis", outcome="applied", rules=fault.fault_type, model=verdict.fault_type, ms=elapsed_ms)
        _audit(call, "diagnosis:applied")
        return apply_verdict(fault, verdict, call, meta | {"cached": False, "latency_ms": elapsed_ms})

    def _abstained(self, call: ToolCall, fault: Fault, meta: dict[str, Any], why: str) -> Fault:
        """The model could not tell (or its kind is not trusted): the rules' "unrecognised" observation stands."""
        self.state.stats["abstained"] += 1
        _audit(call, "diagnosis:abstained")
        log.info("diagnosis", outcome="abstained", reason=why, rules=fault.fault_type)
        return fault.with_details(diagnosis={**meta, "status": "abstained", "reason": why})

    def _fallback(
        self, call: ToolCall, fault: Fault, meta: dict[str, Any], reason: str, why: str | None = None
    ) -> Fault:
        self.state.stats[f"fallback_{reason}"] += 1
        _audit(call, f"diagnosis:fallback:{reason}")
        log.info("diagnosis", outcome="fallback", reason=reason, detail=why, rules=fault.fault_type)
        return fault.with_details(diagnosis={**meta, "status": "fallback", "reason": reason})
