"""The interception chain: the value a tool call is, the seam every stage shares, and how stages are composed.

A stage is ``async (call, call_next) -> CallToolResult``. It observes, refuses (raises a ``Fault``), rewrites
(``call_next(replace(call, ...))``) or answers without calling next. Stages are configured in ``__init__`` and keep no
per-call state on ``self``: per-call facts live on ``call.record``, shared state (budgets, breakers, stores) is an
explicit object handed to the stage. The order of stages is fixed in ``pipeline.py``; it is where safety lives.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import mcp_types as types

from ..faults import RetrySafety

if TYPE_CHECKING:
    from ..policy import ToolRule


@dataclass(frozen=True, slots=True)
class Entry:
    """One tool or prompt: where it lives and what it is called there."""

    public_name: str
    upstream: str
    name: str
    tool: types.Tool | None = None
    prompt: types.Prompt | None = None


@dataclass(slots=True)
class Attempt:
    """One upstream attempt, as the observation lists it."""

    n: int
    outcome: str  # "ok" | "timeout" | "connection_lost" | ... | the fault type of the failure
    elapsed_ms: int
    fault_type: str | None = None
    delay_before_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    """Rule R's answer for one fault on one tool (``verdict/repeat.py`` decides it)."""

    repeat: bool
    """An identical call may be sent again (by the proxy's retry, or by the agent): ``helps and safe``."""
    safe: bool
    """Sending it again cannot duplicate a side effect."""
    helps: bool
    """An identical call can succeed where this one failed."""
    nothing_done: bool
    """The failed call provably changed nothing (a write may fall back, its idempotency record may be released)."""
    safety: RetrySafety
    """The retry-safety class the proxy acts on: the fault's own, or ``maybe_executed`` when an untrusted upstream
    claimed a write did not run."""
    reason: str
    """Why, as a stable token: ``not_sent``, ``rejected``, ``read_only``, ``write_idempotent``, ``key_forwarded``,
    ``may_have_executed``, ``executed``, ``not_transient``, ``unrecognised``, ``caller_must_change``,
    ``untrusted_claim``, ``reread_once``."""
    max_repeats: int
    """Identical repeats that can still help (the observation's ``max_retry``)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """Rule R's decision on a classified fault of this call, held on its record (``CallRecord.verdict``)."""

    rule: ToolRule
    """The rule it was decided under (the same decision holds only under the same rule object)."""
    inputs: tuple[object, ...]
    """The fault's ``verdict_inputs``: a fault derived from it without changing them has the same decision."""
    decision: Decision


@dataclass(slots=True)
class CallRecord:
    """Mutable per-call facts that stages share: attempts made, notes the model must see, who decided."""

    started: float = field(default_factory=time.monotonic)
    attempts: list[Attempt] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """Things the proxy did to the call that the model must be told (rule 9: no silent rewrite)."""
    decided_by: str | None = None
    """Name of the stage that answered or refused, for the audit trail."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Facts a stage adds to the observation's ``details`` (e.g. an idempotency key)."""
    canonical_args: tuple[object, str] | None = None
    """``(arguments, their canonical JSON)``, computed once per call by ``fingerprint`` for every stage that hashes
    them (guard, idempotency, audit); valid while ``call.arguments`` is that same object."""
    on_delivered: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    """Run once the result is handed to the host's connection (not when the host cancelled first): the idempotency
    stage forgets a write the host has seen, so an identical call later runs (``server.run_tool_call`` calls them)."""

    outcome: str | None = None
    """ok | error | refused, set by the observe stage when the call ends (read by the ops recorders)."""
    fault_type: str | None = None
    ops: Any = None
    """Opaque per-call slot of the ops recorders (``resilient_mcp.ops``); None when operations are off."""
    sent: int = 0
    """Upstream attempts the terminal made, counted only while operations are on (``attempts`` lists them only when
    the retry stage runs)."""
    verdict: Verdict | None = None
    """Rule R's decision on the latest fault of this call, taken once where the fault was classified (the terminal,
    for an attempt) and read by every later stage, the observation and the audit (``verdict.repeat.verdict_of``)."""

    def elapsed_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)


class HostLink(Protocol):
    """What a stage may ask of the host that made the call (the downstream client)."""

    @property
    def supports_elicitation(self) -> bool: ...

    async def report_progress(self, progress: float, total: float | None, message: str | None) -> None: ...

    async def elicit(self, message: str, requested_schema: dict[str, Any]) -> types.ElicitResult: ...


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One ``tools/call`` as it travels the chain."""

    name: str
    """The name the host called (possibly prefixed)."""
    arguments: dict[str, Any] | None
    upstream: str
    """The configured name of the upstream that serves the tool ("" when the tool is unknown)."""
    upstream_tool: str
    """The tool's name on its upstream."""
    rule: ToolRule
    tool: types.Tool | None = None
    """The catalog entry; None when the host called a name the catalog does not have."""
    meta: dict[str, Any] | None = None
    """The request's ``_meta`` from the host, forwarded upstream (progressToken excluded: the proxy owns it)."""
    session_id: str = "-"
    owner: str = ""
    """Who may read what this call stores (``proxy.output_owner``): its host session and HTTP principal."""
    call_id: str = "-"
    record: CallRecord = field(default_factory=CallRecord)
    host: HostLink | None = None
    attempt_timeout_s: float | None = None
    """Per-attempt timeout the terminal applies; set by the retry stage from policy."""
    known: bool = True
    """False for a name no upstream offers and the proxy does not serve (a model's invention): metrics and the status
    page count all of those under one label, so they never push a real tool's series out."""


CallNext = Callable[[ToolCall], Awaitable[types.CallToolResult]]


class Stage(Protocol):
    async def __call__(self, call: ToolCall, call_next: CallNext, /) -> types.CallToolResult: ...


def compose(stages: Sequence[Stage], terminal: CallNext) -> CallNext:
    """Fold ``stages`` (outermost first) around ``terminal`` into one callable. Done once per compiled chain."""
    handler = terminal
    for stage in reversed(stages):
        handler = _bind(stage, handler)
    return handler


def _bind(stage: Stage, call_next: CallNext) -> CallNext:
    async def run(call: ToolCall) -> types.CallToolResult:
        return await stage(call, call_next)

    run.__qualname__ = f"{type(stage).__name__}.bound"
    return run
