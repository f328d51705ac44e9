"""The fault vocabulary of the proxy: one exception tree for everything that can go wrong with a tool call.

Inside the chain every failure is one of these exceptions; the observe stage turns it into the observation the model
reads (see ``observations.py``). Only ``upstream.py`` and ``classify.py`` know the SDK's exceptions and error codes;
everything above them speaks faults. The tree follows the lifecycle of a call (``docs/fault-catalog.md`` §4)::

    Fault
    ├── SelectionFault (A)       UnknownTool A1 · StaleToolList A2 · SchemaDrift A3 · ProtocolMismatch A4
    ├── ArgumentFault (B)        MissingRequiredArgument B1 · SchemaViolation B2 · MalformedArguments B3
    │                            · SemanticArgumentRejection B4
    ├── TransportFault (C)       ConnectFailure C1 · ConnectionLost C2 · AttemptTimeout C3 · GatewayError C4
    │                            · PersistentOutage C5
    ├── ExecutionFault (D)       TransientExecutionError D1 · RateLimited D2 · SlowSuccess D3
    │                            · PermanentExecutionError D4 · StateConflict D5
    ├── ResultFault (E)          MalformedResponse E1 · OutputSchemaViolation E2 · IncompleteResult E3
    │                            · OversizedResult E4 · SemanticCorruption E5
    ├── PermissionFault (F)      Unauthenticated F1 · PermissionDenied F2 · QuotaExhausted F3 · PromptInjection F4
    └── GuardFault (guard)       BudgetExhausted · LoopDetected   (cross-cutting guards, not catalog fault types)

Each class carries the catalog's defaults (transience, retry-safety class, side-effect status, repair action, useful
agent retries); an instance may override them where the evidence says more (a typed upstream error that declares
itself retryable, a 503 that guarantees nothing ran). ``message`` is written by the proxy and is safe to show the
model; ``upstream_message`` is the upstream's own text and is always presented as untrusted data.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar


class FaultCategory(StrEnum):
    SELECTION = "A"
    ARGUMENTS = "B"
    TRANSPORT = "C"
    EXECUTION = "D"
    RESULT = "E"
    PERMISSION = "F"
    GUARD = "guard"


class RetrySafety(StrEnum):
    """Where the failed attempt stopped (``docs/fault-catalog.md`` §3): decides whether repeating it can duplicate a
    side effect."""

    NOT_SENT = "not_sent"  # S0: never left the proxy
    REJECTED = "rejected"  # S1: the upstream said it did not execute
    MAYBE_EXECUTED = "maybe_executed"  # S2: sent, outcome unknown
    EXECUTED_FAILED = "executed_failed"  # S3: ran and failed for good
    NOT_APPLICABLE = "n/a"  # result-level findings on a call that completed


class SideEffectStatus(StrEnum):
    NONE = "none"
    UNKNOWN = "unknown"
    COMMITTED = "committed"
    NOT_COMMITTED = "not_committed"


class RepairAction(StrEnum):
    FIX_PARAMETER = "fix_parameter"
    SWITCH_TOOL = "switch_tool"
    BACKOFF_RETRY = "backoff_retry"
    VERIFY_STATE = "verify_state"
    DEGRADE = "degrade"
    ASK_USER = "ask_user"
    ABORT = "abort"
    REFRESH_TOOLS = "refresh_tools"


class EffectClass(StrEnum):
    """What calling a tool does to the world (``docs/fault-catalog.md`` §2). Unknown tools are ``write_unsafe``."""

    READ_ONLY = "read_only"
    WRITE_IDEMPOTENT = "write_idempotent"
    WRITE_UNSAFE = "write_unsafe"
    DESTRUCTIVE = "destructive"

    @property
    def is_write(self) -> bool:
        return self is not EffectClass.READ_ONLY

    @property
    def repeatable(self) -> bool:
        """Whether repeating a maybe-executed call is harmless (rule R, ``docs/fault-catalog.md`` §3)."""
        return self in (EffectClass.READ_ONLY, EffectClass.WRITE_IDEMPOTENT)


class Fault(Exception):
    """Base of every fault. Subclasses set the class attributes; instances add what was observed."""

    code: ClassVar[str] = "FAULT"
    fault_type: ClassVar[str] = "unclassified"
    category: ClassVar[FaultCategory]
    default_transient: ClassVar[bool] = False
    default_retry_safety: ClassVar[RetrySafety] = RetrySafety.MAYBE_EXECUTED
    default_side_effect: ClassVar[SideEffectStatus] = SideEffectStatus.UNKNOWN
    default_repair: ClassVar[RepairAction] = RepairAction.ABORT
    default_max_retry: ClassVar[int] = 0
    counts_against_upstream: ClassVar[bool] = False
    """Whether this fault says something about the upstream's health (breakers, retry budgets). Argument mistakes,
    policy refusals and guard decisions never do."""

    def __init__(
        self,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        upstream_message: str | None = None,
        suggestion: str | None = None,
        transient: bool | None = None,
        retry_safety: RetrySafety | None = None,
        side_effect_status: SideEffectStatus | None = None,
        repair_action: RepairAction | None = None,
        max_retry: int | None = None,
        retry_after_ms: int | None = None,
        upstream_code: int | str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = dict(details or {})
        self.upstream_message = upstream_message
        self.suggestion = suggestion
        self.is_transient = self.default_transient if transient is None else transient
        self.retry_safety = retry_safety or self.default_retry_safety
        self.side_effect_status = side_effect_status or self.default_side_effect
        self.repair_action = repair_action or self.default_repair
        self.max_retry = self.default_max_retry if max_retry is None else max_retry
        self.retry_after_ms = retry_after_ms
        self.upstream_code = upstream_code
        self.upstream_result: Any = None
        """The upstream's own ``CallToolResult`` when read from an ``isError`` result (shown raw at L0)."""
        self.claimed_by_upstream = False
        """The retry safety rests on the upstream's word (a typed hint, a chained proxy's observation), not on what
        the proxy saw: believed for writes only on upstreams with ``trust_annotations`` (``repeat.decide``)."""
        self.tool_level = False
        """The fault says something about this tool's health only (the tool threw), not about its upstream's: it
        counts toward the tool's circuit, never the upstream's."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, retry_safety={self.retry_safety.value})"


# --- A: discovery and selection -------------------------------------------------------------------------------------


class SelectionFault(Fault):
    category = FaultCategory.SELECTION
    default_retry_safety = RetrySafety.NOT_SENT
    default_side_effect = SideEffectStatus.NONE


class UnknownTool(SelectionFault):
    code = "UNKNOWN_TOOL"
    fault_type = "A1_unknown_tool"
    default_repair = RepairAction.SWITCH_TOOL


class StaleToolList(SelectionFault):
    code = "TOOL_LIST_CHANGED"
    fault_type = "A2_stale_tool_list"
    default_transient = True
    default_retry_safety = RetrySafety.REJECTED
    default_repair = RepairAction.REFRESH_TOOLS


class SchemaDrift(SelectionFault):
    code = "SCHEMA_CHANGED"
    fault_type = "A3_schema_drift"
    default_retry_safety = RetrySafety.REJECTED
    default_repair = RepairAction.FIX_PARAMETER


class ProtocolMismatch(SelectionFault):
    code = "PROTOCOL_MISMATCH"
    fault_type = "A4_protocol_or_capability_mismatch"
    default_retry_safety = RetrySafety.REJECTED
    default_repair = RepairAction.DEGRADE


# --- B: arguments ---------------------------------------------------------------------------------------------------


class ArgumentFault(Fault):
    category = FaultCategory.ARGUMENTS
    default_retry_safety = RetrySafety.NOT_SENT
    default_side_effect = SideEffectStatus.NONE
    default_repair = RepairAction.FIX_PARAMETER
    # max_retry counts IDENTICAL calls that may still help: none, for arguments that were wrong.


class MissingRequiredArgument(ArgumentFault):
    code = "MISSING_ARGUMENT"
    fault_type = "B1_missing_required_argument"


class SchemaViolation(ArgumentFault):
    code = "INVALID_ARGUMENT"
    fault_type = "B2_schema_violation"


class MalformedArguments(ArgumentFault):
    code = "MALFORMED_ARGUMENTS"
    fault_type = "B3_malformed_arguments_payload"


class SemanticArgumentRejection(ArgumentFault):
    code = "ARGUMENT_REJECTED"
    fault_type = "B4_semantic_argument_rejection"
    default_retry_safety = RetrySafety.EXECUTED_FAILED
    default_side_effect = SideEffectStatus.NOT_COMMITTED


# --- C: sending and transport ---------------------------------------------------------------------------------------


class TransportFault(Fault):
    category = FaultCategory.TRANSPORT
    default_transient = True
    counts_against_upstream = True
    default_repair = RepairAction.BACKOFF_RETRY
    default_max_retry = 1


class ConnectFailure(TransportFault):
    code = "UPSTREAM_UNREACHABLE"
    fault_type = "C1_connect_failure"
    default_retry_safety = RetrySafety.NOT_SENT
    default_side_effect = SideEffectStatus.NONE
    default_max_retry = 2


class ConnectionLost(TransportFault):
    code = "CONNECTION_LOST"
    fault_type = "C2_connection_lost_after_send"


class AttemptTimeout(TransportFault):
    code = "TIMEOUT"
    fault_type = "C3_attempt_timeout"


class GatewayError(TransportFault):
    code = "UPSTREAM_ERROR"
    fault_type = "C4_gateway_5xx"


class PersistentOutage(TransportFault):
    code = "UPSTREAM_UNAVAILABLE"
    fault_type = "C5_persistent_outage"
    default_transient = False
    default_retry_safety = RetrySafety.NOT_SENT
    default_side_effect = SideEffectStatus.NONE
    default_repair = RepairAction.DEGRADE
    default_max_retry = 0
    counts_against_upstream = False  # it is the breaker's own verdict, or a process that is not running


# --- D: execution ---------------------------------------------------------------------------------------------------


class ExecutionFault(Fault):
    category = FaultCategory.EXECUTION


class TransientExecutionError(ExecutionFault):
    code = "TRANSIENT_ERROR"
    fault_type = "D1_transient_execution_error"
    default_transient = True
    default_repair = RepairAction.BACKOFF_RETRY
    default_max_retry = 2
    counts_against_upstream = True


class RateLimited(ExecutionFault):
    code = "RATE_LIMITED"
    fault_type = "D2_rate_limited"
    default_transient = True
    default_retry_safety = RetrySafety.REJECTED
    default_side_effect = SideEffectStatus.NONE
    default_repair = RepairAction.BACKOFF_RETRY
    default_max_retry = 1


class SlowSuccess(ExecutionFault):
    """Not raised: a call that succeeded slowly. Exists so the catalog's D3 has a name in logs and reports."""

    code = "SLOW"
    fault_type = "D3_slow_success"
    default_retry_safety = RetrySafety.NOT_APPLICABLE
    default_side_effect = SideEffectStatus.COMMITTED


class PermanentExecutionError(ExecutionFault):
    code = "TOOL_ERROR"
    fault_type = "D4_permanent_execution_error"
    default_retry_safety = RetrySafety.EXECUTED_FAILED
    default_side_effect = SideEffectStatus.UNKNOWN
    default_repair = RepairAction.SWITCH_TOOL


class StateConflict(ExecutionFault):
    code = "CONFLICT"
    fault_type = "D5_state_conflict"
    default_retry_safety = RetrySafety.EXECUTED_FAILED
    default_side_effect = SideEffectStatus.NOT_COMMITTED
    default_repair = RepairAction.VERIFY_STATE


# --- E: results -----------------------------------------------------------------------------------------------------


class ResultFault(Fault):
    category = FaultCategory.RESULT
    default_retry_safety = RetrySafety.MAYBE_EXECUTED


class MalformedResponse(ResultFault):
    code = "MALFORMED_RESPONSE"
    fault_type = "E1_malformed_response"
    default_transient = True  # retried where repeating is safe (reads, idempotent writes): rule R
    default_repair = RepairAction.VERIFY_STATE
    default_max_retry = 1
    counts_against_upstream = True


class OutputSchemaViolation(ResultFault):
    code = "OUTPUT_SCHEMA_VIOLATION"
    fault_type = "E2_output_schema_violation"
    default_retry_safety = RetrySafety.EXECUTED_FAILED
    default_side_effect = SideEffectStatus.COMMITTED
    default_repair = RepairAction.DEGRADE


class IncompleteResult(ResultFault):
    code = "INCOMPLETE_RESULT"
    fault_type = "E3_incomplete_result"
    default_transient = True  # "maybe": a read is retried once (catalog E3)
    default_repair = RepairAction.BACKOFF_RETRY
    default_max_retry = 1


class OversizedResult(ResultFault):
    code = "OUTPUT_TRUNCATED"
    fault_type = "E4_oversized_result"
    default_retry_safety = RetrySafety.NOT_APPLICABLE
    default_side_effect = SideEffectStatus.COMMITTED
    default_repair = RepairAction.FIX_PARAMETER


class SemanticCorruption(ResultFault):
    code = "SUSPECT_RESULT"
    fault_type = "E5_semantic_corruption_or_silent_noop"
    default_retry_safety = RetrySafety.NOT_APPLICABLE
    default_repair = RepairAction.VERIFY_STATE


# --- F: permission, quota and trust ---------------------------------------------------------------------------------


class PermissionFault(Fault):
    category = FaultCategory.PERMISSION
    default_retry_safety = RetrySafety.REJECTED
    default_side_effect = SideEffectStatus.NONE
    default_repair = RepairAction.ASK_USER


class Unauthenticated(PermissionFault):
    code = "UNAUTHENTICATED"
    fault_type = "F1_unauthenticated"


class PermissionDenied(PermissionFault):
    code = "PERMISSION_DENIED"
    fault_type = "F2_permission_denied_or_approval_required"


class QuotaExhausted(PermissionFault):
    code = "QUOTA_EXHAUSTED"
    fault_type = "F3_quota_exhausted"
    default_repair = RepairAction.DEGRADE


class PromptInjection(PermissionFault):
    code = "UNTRUSTED_INSTRUCTIONS"
    fault_type = "F4_prompt_injection_in_output"
    default_retry_safety = RetrySafety.NOT_APPLICABLE
    default_side_effect = SideEffectStatus.COMMITTED
    default_repair = RepairAction.ABORT


# --- guards (cross-cutting, not catalog types) ----------------------------------------------------------------------


class GuardFault(Fault):
    category = FaultCategory.GUARD
    default_retry_safety = RetrySafety.NOT_SENT
    default_side_effect = SideEffectStatus.NONE
    default_repair = RepairAction.ABORT


class BudgetExhausted(GuardFault):
    code = "BUDGET_EXHAUSTED"
    fault_type = "budget_exhausted"


class LoopDetected(GuardFault):
    code = "REPEATED_FAILURE"
    fault_type = "loop_detected"


class StateUnavailableFault(GuardFault):
    """The shared state (Redis) could not be reached, so a write that needs an idempotency claim was not sent."""

    code = "STATE_UNAVAILABLE"
    fault_type = "state_unavailable"
    default_transient = True
    default_repair = RepairAction.BACKOFF_RETRY
    default_max_retry = 3


#: Every catalog fault type, in catalog order (27). Used by tests, reports and the benchmark.
CATALOG: tuple[type[Fault], ...] = (
    UnknownTool,
    StaleToolList,
    SchemaDrift,
    ProtocolMismatch,
    MissingRequiredArgument,
    SchemaViolation,
    MalformedArguments,
    SemanticArgumentRejection,
    ConnectFailure,
    ConnectionLost,
    AttemptTimeout,
    GatewayError,
    PersistentOutage,
    TransientExecutionError,
    RateLimited,
    SlowSuccess,
    PermanentExecutionError,
    StateConflict,
    MalformedResponse,
    OutputSchemaViolation,
    IncompleteResult,
    OversizedResult,
    SemanticCorruption,
    Unauthenticated,
    PermissionDenied,
    QuotaExhausted,
    PromptInjection,
)

_NAMED: tuple[type[Fault], ...] = (*CATALOG, BudgetExhausted, LoopDetected, StateUnavailableFault)
BY_TYPE: dict[str, type[Fault]] = {c.fault_type: c for c in _NAMED}
