"""Classification of ``isError`` tool results: typed hints first, conservative text heuristics second.

Sources, in order of trust:

1. a chained resilient-mcp's own observation in ``_meta["io.github.resilient-mcp/fault"]``: read back as that fault;
2. the typed-error convention ``_meta["io.github.resilient-mcp/error"] = {type, retryable, retry_after_ms, field}``
   (``docs/fault-catalog.md`` §3-§4). ``type`` is a catalog fault type (``"D2_rate_limited"``), its suffix
   (``"rate_limited"``), a fault code (``"RATE_LIMITED"``) or a gRPC-style alias (``"unavailable"``, ``"aborted"``,
   ``"not_found"``, ...). ``retryable: true`` makes a fault that can be transient transient and ``rejected`` (the
   server said it did not execute); ``retryable: false`` makes any fault non-transient and, where the class would
   say "maybe executed", ``executed_failed``. Faults the catalog never retries (argument, conflict, permission, ...)
   stay non-transient whatever the server says. A transient "did not run" read from a hint or a chained observation
   is marked ``claimed_by_upstream``: rule R (``repeat.decide``) believes it for a write only when the upstream has
   ``trust_annotations: true``;
3. text heuristics over the result's text, for servers that follow no convention.

**The rule for untyped errors** (``docs/fault-catalog.md`` §3, and D4 in §4): an untyped error is never both transient
and safe to repeat for a write. Texts that look transient (rate limit, timeout, unavailable) give a transient fault that
is ``maybe_executed``, so rule R retries it only on read-only or idempotent tools. Texts that name a refusal
(authentication, permission, quota, invalid argument, conflict, unknown tool, not found) give their class,
non-transient, never retried; read from a generic word only, a refusal is ``executed_failed``, not ``rejected`` (a
word never proves that nothing ran). A tool's own time limit ("command timed out after 5 s") is D4, non-transient,
``maybe_executed``. Anything else is ``PermanentExecutionError``, non-transient and ``maybe_executed`` with an
unknown side effect: not retried, and the observation tells a write's caller to verify state.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import mcp_types as types

from ..text import canonical_json
from . import (
    BY_TYPE,
    AttemptTimeout,
    ConnectFailure,
    ConnectionLost,
    Fault,
    GatewayError,
    IncompleteResult,
    MalformedResponse,
    MissingRequiredArgument,
    PermanentExecutionError,
    PermissionDenied,
    ProtocolMismatch,
    QuotaExhausted,
    RateLimited,
    RepairAction,
    RetrySafety,
    SchemaViolation,
    SemanticArgumentRejection,
    SideEffectStatus,
    StaleToolList,
    StateConflict,
    TransientExecutionError,
    Unauthenticated,
    vocab,
)
from .stderr_words import stderr_reading, wordless
from .vocab import Basis

ERROR_META_KEY = "io.github.resilient-mcp/error"
FAULT_META_KEY = "io.github.resilient-mcp/fault"
QUOTA_RETRY_AFTER_MS = 3_600_000
"""A rate limit asking to wait this long or longer is a quota (F3), not a rate limit (D2)."""

_CAN_BE_TRANSIENT: tuple[type[Fault], ...] = (
    StaleToolList,
    ProtocolMismatch,
    ConnectFailure,
    ConnectionLost,
    AttemptTimeout,
    GatewayError,
    TransientExecutionError,
    RateLimited,
    MalformedResponse,
    IncompleteResult,
)

_EXTRA_ALIASES: dict[str, type[Fault]] = {
    "rate_limit": RateLimited,
    "too_many_requests": RateLimited,
    "throttled": RateLimited,
    "conflict": StateConflict,
    "aborted": StateConflict,
    "already_exists": StateConflict,
    "failed_precondition": StateConflict,
    "unauthenticated": Unauthenticated,
    "unauthorized": Unauthenticated,
    "quota": QuotaExhausted,
    "resource_exhausted": QuotaExhausted,
    "permission": PermissionDenied,
    "permission_denied": PermissionDenied,
    "forbidden": PermissionDenied,
    "approval_required": PermissionDenied,
    "invalid_argument": SemanticArgumentRejection,
    "out_of_range": SemanticArgumentRejection,
    "transient": TransientExecutionError,
    "unavailable": TransientExecutionError,
    "internal": TransientExecutionError,
    "deadline_exceeded": AttemptTimeout,
    "not_found": PermanentExecutionError,
    "permanent": PermanentExecutionError,
    "unimplemented": PermanentExecutionError,
}


def _aliases() -> dict[str, type[Fault]]:
    table: dict[str, type[Fault]] = {}
    for fault_type, cls in BY_TYPE.items():
        table[cls.code.lower()] = cls
        table[fault_type.lower()] = cls
        table[fault_type.split("_", 1)[1].lower() if fault_type[:1].isupper() else fault_type] = cls
    return table | _EXTRA_ALIASES


ALIASES: dict[str, type[Fault]] = _aliases()
"""Typed-error ``type`` (lower case) -> fault class."""

_DID_NOT_RUN = frozenset(
    {"unavailable", "transient", "transient_error", "transient_execution_error", "d1_transient_execution_error"}
)
"""Typed errors that say, by their type alone, that the call did not run (retryable as ``rejected``)."""


def answered_by_tool(fault: Fault) -> bool:
    """Whether the tool itself ran and answered with this failure (an ``isError`` result of its own, e.g. "not
    found"), rather than the call failing on the way (a timeout, a lost connection) or a chained proxy reporting
    its own observation. Such an answer is what the server says about its state: for a read, it verifies as well
    as a success does; for a write, its outcome is known, not unknown."""
    answered = fault.upstream_result
    return isinstance(answered, types.CallToolResult) and FAULT_META_KEY not in (answered.meta or {})


def result_text(result: types.CallToolResult) -> str:
    """The text blocks of ``result`` joined by newlines."""
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def classify_result(result: types.CallToolResult, *, tool: types.Tool | None) -> Fault | None:
    """The fault an ``isError`` result means; ``None`` for a successful result. Never raises."""
    if not result.is_error:
        return None
    text = result_text(result)
    meta = result.meta or {}
    fault = None
    if isinstance(meta.get(FAULT_META_KEY), Mapping):
        fault = fault_from_observation(meta[FAULT_META_KEY], upstream_message=text)
    if fault is None and isinstance(meta.get(ERROR_META_KEY), Mapping):
        fault = _from_hint(meta[ERROR_META_KEY])
    if isinstance(fault, SemanticArgumentRejection) and not isinstance(meta.get(FAULT_META_KEY), Mapping):
        fault = _narrowed(fault, text)
    if fault is not None:
        fault = fault.with_details(keep=True, basis=Basis.TYPED_HINT.value)
    elif wordless(text):
        return _from_stderr(result, text, tool)
    else:
        fault = classify_text(text, tool)
        if isinstance(meta.get(ERROR_META_KEY), Mapping):
            fault = fault.with_details(error_type=_scalar(meta[ERROR_META_KEY].get("type")))
    return answered(fault, result, text)


def _from_stderr(result: types.CallToolResult, text: str, tool: types.Tool | None) -> Fault:
    """A result whose text says only that the tool failed, read from the exception line the server wrote on stderr
    during the call (``stderr_words``): quoted, and said to come from there. Without one, unrecognised as any
    wordless text, with the reason none was attributed (another call in flight, nothing written)."""
    words, why = stderr_reading(result.meta)
    if words is None:
        fault = classify_text(text, tool)
        return answered(fault.with_details(stderr=why) if why else fault, result, text)
    fault = classify_text(words, tool).with_details(words_from="stderr", stderr_words=words)
    quoted = f"{text}\n[the server's stderr during this call] {words}" if text.strip() else f"[stderr] {words}"
    return answered(fault, result, quoted)


def answered(fault: Fault, result: types.CallToolResult, text: str) -> Fault:
    """``fault`` as the upstream's answer ``result`` (whose text is ``text``): it got the call, so a fault that says
    "not sent" says "rejected"."""
    refused = fault.retry_safety is RetrySafety.NOT_SENT  # the upstream got the call and refused it
    return fault.replace(
        upstream_result=result,
        upstream_message=text,
        retry_safety=RetrySafety.REJECTED if refused else fault.retry_safety,
    )


_TOKEN = re.compile(r"^[\w.\[\]/:+-]{1,64}$")


def _plain_token(value: Any, *, datetime_ok: bool) -> bool:
    """A field name, scope or timestamp an upstream sent: safe to quote in the proxy's own suggestion only if it is
    one short token (no spaces, no sentences that could carry instructions)."""
    if not isinstance(value, str) or not _TOKEN.match(value):
        return False
    if datetime_ok:
        try:
            datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return False
    return True


def _scalar(value: Any) -> Any:
    if isinstance(value, str):
        return value[:200]
    return value if value is None or isinstance(value, bool | int | float) else str(value)[:200]


def _narrowed(fault: SemanticArgumentRejection, text: str) -> Fault:
    """A typed "invalid argument" whose text is a validator's (JSON Schema, zod, pydantic) names the narrower type:
    a missing argument (B1) or a schema violation (B2), refused before the tool ran. Otherwise the hint stands."""
    reading = vocab.read(text)
    if reading is None or reading.rule.family != "validation":
        return fault
    cls = reading.rule.fault
    if cls not in (MissingRequiredArgument, SchemaViolation):
        return fault
    return cls.of(
        "reported" if cls.has_template("reported") else "tool_error",
        details={**fault.details, "narrowed_by": "validation"},
        transient=False,
        retry_safety=RetrySafety.REJECTED,
        side_effect_status=SideEffectStatus.NONE,
        upstream_code=fault.upstream_code,
    )


def _rate_or_quota(retry_after_ms: int | None) -> type[Fault]:
    return QuotaExhausted if retry_after_ms is not None and retry_after_ms >= QUOTA_RETRY_AFTER_MS else RateLimited


def _from_hint(hint: Mapping[str, Any]) -> Fault | None:
    kind = hint.get("type")
    if not isinstance(kind, str) or (cls := ALIASES.get(kind.lower())) is None:
        return None
    after = hint.get("retry_after_ms")
    after = int(after) if isinstance(after, int | float) and not isinstance(after, bool) and after >= 0 else None
    if cls is RateLimited:
        cls = _rate_or_quota(after)
    retryable = hint.get("retryable") if isinstance(hint.get("retryable"), bool) else None
    kw: dict[str, Any] = {"retry_after_ms": after, "upstream_code": kind}
    if retryable is True and cls in _CAN_BE_TRANSIENT:
        kw |= {"transient": True, "retry_safety": RetrySafety.REJECTED, "side_effect_status": SideEffectStatus.NONE}
    elif retryable is False:
        unknown = (RetrySafety.MAYBE_EXECUTED, RetrySafety.NOT_APPLICABLE)
        kw |= {"transient": False, "max_retry": 0}
        if cls.default_retry_safety in unknown:
            kw["retry_safety"] = RetrySafety.EXECUTED_FAILED
    elif kind.lower() in _DID_NOT_RUN:  # typed "unavailable": gRPC UNAVAILABLE, did not run (catalog D1)
        kw |= {"retry_safety": RetrySafety.REJECTED, "side_effect_status": SideEffectStatus.NONE}
    if cls not in _CAN_BE_TRANSIENT:
        kw["transient"] = False
    details: dict[str, Any] = {"error_type": kind}
    if retryable is not None:
        details["upstream_retryable"] = retryable
    if _plain_token(hint.get("field"), datetime_ok=False):
        details["field"] = hint["field"]
    extra = {str(k)[:64]: _scalar(v) for k, v in hint.items() if k not in ("type", "retryable", "retry_after_ms")}
    if "field" in details:
        extra.pop("field", None)
    for lifted in ("reset_at", "scope"):  # quoted by the suggestions ("quota resets at ..."): checked first
        if lifted in extra and _plain_token(extra[lifted], datetime_ok=lifted == "reset_at"):
            details[lifted] = extra.pop(lifted)
    if extra:
        details["upstream_error"] = extra
    if cls.has_template("reported"):
        fault = cls.of("reported", details=details, **kw)
    else:
        fault = cls.of("tool_error_typed", fault_type=cls.fault_type, details=details, **kw)
    return fault.replace(claimed_by_upstream=_claims_not_run(fault))


def _claims_not_run(fault: Fault) -> bool:
    """A transient fault the upstream's typed words call not executed: retryable on its word alone."""
    return fault.is_transient and fault.retry_safety in (RetrySafety.NOT_SENT, RetrySafety.REJECTED)


def _argument_names(tool: types.Tool | None) -> frozenset[str]:
    properties = tool.input_schema.get("properties") if tool is not None else None
    return frozenset(str(k) for k in properties) if isinstance(properties, Mapping) else frozenset()


def classify_text(text: str, tool: types.Tool | None = None) -> Fault:
    """The fault an upstream's error text means, read in the vocabularies of ``vocab.py``; when nothing is recognised,
    an unrecognised ``PermanentExecutionError``: never transient, ``maybe_executed``, its basis said so."""
    details: dict[str, Any] = {"classified_by": "text"}
    reading = vocab.read(text, _argument_names(tool))
    if reading is None:
        details["basis"] = Basis.UNRECOGNISED.value
        return PermanentExecutionError.of("unmatched", details=details, retry_safety=RetrySafety.MAYBE_EXECUTED)
    rule = reading.rule
    details |= {"basis": rule.basis.value, "vocabulary": rule.family, "recognised": rule.key}
    # A known wording is read with confidence; a generic keyword is a guess.
    details["text_match"] = "keyword" if rule.family == "keyword" else "wording"
    cls = _rate_or_quota(reading.retry_after_ms) if rule.fault is RateLimited else rule.fault
    if cls in (SemanticArgumentRejection, SchemaViolation, MissingRequiredArgument) and rule.family == "validation":
        details["schema_drift_candidate"] = True
        if tool is not None:
            digest = hashlib.sha256(canonical_json(tool.input_schema).encode()).hexdigest()
            details["input_schema_hash"] = digest
    said = "reported" if cls.has_template("reported") else "tool_error"
    if rule.transient and cls is not QuotaExhausted:
        # An untyped error never proves that the call did not run: transient, but maybe executed (rule R retries
        # it only where repeating is harmless).
        return cls.of(
            said,
            details=details,
            transient=True,
            retry_safety=RetrySafety.MAYBE_EXECUTED,
            side_effect_status=SideEffectStatus.UNKNOWN,
            retry_after_ms=reading.retry_after_ms,
        )
    # A refusal the upstream made before running (auth, permission, quota) changed nothing. A generic word is a
    # guess, and may name a step of a call that otherwise ran ("wrote x; chmod: permission denied"): it keeps its
    # class but never claims that nothing ran (the tool answered a failure: executed_failed, effect unknown).
    refusal = cls.default_retry_safety in (RetrySafety.REJECTED, RetrySafety.NOT_SENT)
    guess = rule.family == "keyword"
    effect = SideEffectStatus.NONE if refusal and not guess else SideEffectStatus.UNKNOWN
    if rule.cut:  # the tool cut it off at its own limit: what ran before is unknown
        return cls.of(
            said,
            details=details,
            transient=False,
            retry_safety=RetrySafety.MAYBE_EXECUTED,
            side_effect_status=SideEffectStatus.UNKNOWN,
            repair_action=rule.repair,
        )
    return cls.of(
        said,
        details=details,
        transient=False,
        retry_safety=RetrySafety.EXECUTED_FAILED if refusal and guess else None,
        side_effect_status=effect,
        repair_action=rule.repair,
        retry_after_ms=reading.retry_after_ms,
    )


def _enum(enum: Any, value: Any) -> Any:
    try:
        return enum(value)
    except ValueError:
        return None


def fault_from_observation(obs: Mapping[str, Any], *, upstream_message: str | None = None) -> Fault | None:
    """A chained resilient-mcp's observation read back as the fault it describes; ``None`` if it is not one."""
    cls = BY_TYPE.get(str(obs.get("fault_type")))
    if cls is None:
        return None
    after = obs.get("retry_after_ms")
    max_retry = obs.get("max_retry")
    details = obs.get("details")
    fault = cls.of(
        "chained",
        fault_type=cls.fault_type,
        # The upstream's details are its own words: kept apart, never read into the proxy's suggestion.
        details={
            "chained": True,
            "upstream_details": dict(details) if isinstance(details, Mapping) else {},
            "basis": Basis.TYPED_HINT.value,
        },
        upstream_message=upstream_message,
        transient=obs["is_transient"] if isinstance(obs.get("is_transient"), bool) else None,
        retry_safety=_enum(RetrySafety, obs.get("retry_safety")),
        side_effect_status=_enum(SideEffectStatus, obs.get("side_effect_status")),
        repair_action=_enum(RepairAction, obs.get("repair_action")),
        max_retry=max_retry if isinstance(max_retry, int) and not isinstance(max_retry, bool) else None,
        retry_after_ms=after if isinstance(after, int) and not isinstance(after, bool) else None,
        upstream_code=cls.code,
    )
    return fault.replace(claimed_by_upstream=_claims_not_run(fault))
