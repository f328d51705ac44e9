"""The interception chain: the value a tool call is, its identity, the seam every stage shares, and how stages are
composed.

A stage is ``async (call, call_next) -> CallToolResult``. It observes, refuses (raises a ``Fault``), rewrites
(``call_next(replace(call, ...))``) or answers without calling next. Stages are configured in ``__init__`` and keep no
per-call state on ``self``: per-call facts live on ``call.record``, shared state (budgets, breakers, stores) is an
explicit object handed to the stage. The order of stages is fixed in ``pipeline.py``; it is where safety lives.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import mcp_types as types

from ..faults import RetrySafety
from ..text import canonical_json

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
    """``(arguments, their canonical JSON)``, computed once per call by ``call_arguments_json`` (below) for every
    stage that hashes them (guard, idempotency, audit); valid while ``call.arguments`` is that same object."""
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


HOST_CAPABILITIES = ("sampling", "elicitation", "roots")
"""The client capabilities the proxy can only serve by asking a host: declared upstream when the host has them."""


def host_capability_names(caps: types.ClientCapabilities | None) -> frozenset[str]:
    """Which of ``HOST_CAPABILITIES`` a host declared (``None``: nothing known, so nothing declared)."""
    if caps is None:
        return frozenset()
    return frozenset(name for name in HOST_CAPABILITIES if getattr(caps, name, None) is not None)


class Timers:
    """The cancel scopes timing one host request; paused while an upstream waits for that host."""

    def __init__(self) -> None:
        self._scopes: dict[anyio.CancelScope, float] = {}
        """Each scope and, while paused, the deadline it had."""
        self._paused = 0
        self._paused_at = 0.0

    @contextmanager
    def timing(self, scope: anyio.CancelScope) -> Iterator[anyio.CancelScope]:
        """Register ``scope`` (a timeout of this request) for as long as the block runs."""
        self._scopes[scope] = scope.deadline
        if self._paused:
            scope.deadline = math.inf
        try:
            yield scope
        finally:
            self._scopes.pop(scope, None)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Stop every registered timeout while the block runs; each resumes with the time it had left."""
        if self._paused == 0:
            self._paused_at = anyio.current_time()
            for scope in self._scopes:
                self._scopes[scope] = scope.deadline
                scope.deadline = math.inf
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1
            if self._paused == 0:
                waited = anyio.current_time() - self._paused_at
                for scope, deadline in self._scopes.items():
                    scope.deadline = deadline + waited


@dataclass(frozen=True, slots=True)
class HostEnvelope:
    """One host request (tools/call, prompts/get, resources/read), as the upstream side sees it; handed down
    explicitly (``ToolCall.host.envelope``, ``Upstream.request(host=)``), never ambient.

    It says three things the upstream side needs: what to tell a 2026-07-28 upstream in this request's ``_meta``
    envelope (the host's own capabilities and log level, not the proxy's), so the upstream asks only what this host
    can answer; whom an upstream's question (sampling, elicitation, roots) belongs to; and the request's timers
    (``Timers``): time the upstream spends waiting for the *host* to answer is not upstream time, so attempt and
    total timeouts stop while it waits and resume afterwards. A human taking minutes over an elicitation is never an
    upstream timeout (whose outcome would be unknown and block the identical call afterwards)."""

    ctx: Any
    """The SDK's request context of the host's request."""
    capabilities: frozenset[str]
    """Which of sampling, elicitation, roots the host declared."""
    log_level: str | None = None
    """The 2026-07-28 host's per-request log level (``None``: it asked for no log messages)."""
    modern: bool = False
    """The host speaks 2026-07-28 (else: the handshake era, where log messages flow unless ``logging/setLevel``
    says otherwise)."""
    timers: Timers = field(default_factory=Timers)


@contextmanager
def timing(host: HostEnvelope | None, scope: anyio.CancelScope) -> Iterator[anyio.CancelScope]:
    """Register ``scope`` with the timers of ``host``'s request (a no-op without one)."""
    if host is None:
        yield scope
    else:
        with host.timers.timing(scope):
            yield scope


class HostLink(Protocol):
    """What a stage may ask of the host that made the call (the downstream client), and its request's envelope: the
    one channel by which the upstream side learns of the host (``None``: no host request, e.g. a test)."""

    @property
    def envelope(self) -> HostEnvelope | None: ...

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

    @property
    def envelope(self) -> HostEnvelope | None:
        """The host request this call serves, as the upstream side may know it (``host.envelope``)."""
        return self.host.envelope if self.host is not None else None


# --- the call's identity: its fingerprint -----------------------------------------------------------------------------
#
# The fingerprint of a call is ``(upstream, tool, canonical JSON of the arguments)`` hashed with SHA-256
# (``docs/fault-catalog.md`` §4, guards): two calls are "identical" exactly when their fingerprints are equal. Canonical
# JSON sorts keys, uses compact separators and keeps non-ASCII text as is, so the same arguments always give the same
# bytes whatever order the host sent them in. Computed from the call and memoised on its record (``canonical_args``).


def call_arguments_json(call: ToolCall) -> str:
    """The canonical JSON of ``call.arguments`` (``None`` as ``{}``), computed once per call and arguments object."""
    memo = call.record.canonical_args
    args = call.arguments
    if memo is not None and memo[0] is args:
        return memo[1]
    text = canonical_json(args or {})
    call.record.canonical_args = (args, text)
    return text


def call_arguments_hash(call: ToolCall, key: bytes) -> str:
    """HMAC-SHA-256 (hex), keyed with ``key``, of the canonical JSON of ``call.arguments`` (``None`` like ``{}``).

    Keyed, because an unkeyed hash of small arguments is reversed by guessing (``{"pin": "4821"}`` in 17 ms): the
    audit keeps this, with the state directory's per-installation secret (``StateStore.arguments_hash``)."""
    return hmac.new(key, call_arguments_json(call).encode(), hashlib.sha256).hexdigest()


def _identity_json(call: ToolCall) -> bytes:
    """The canonical JSON of ``[upstream, upstream tool, arguments]``: what makes two calls identical."""
    head = canonical_json([call.upstream, call.upstream_tool or call.name])  # '["up","tool"]'
    return f"{head[:-1]},{call_arguments_json(call)}]".encode()


def fingerprint(call: ToolCall) -> str:
    """SHA-256 (hex) of ``[upstream, upstream tool, arguments]``; equal for identical calls, whatever the key order.

    For in-memory maps only: what is written to disk uses ``keyed_fingerprint``."""
    return hashlib.sha256(_identity_json(call)).hexdigest()


def keyed_fingerprint(call: ToolCall, key: bytes) -> str:
    """HMAC-SHA-256 (hex), keyed with ``key``, of what ``fingerprint`` hashes: equal for identical calls, and not
    reversible by guessing small arguments without the per-installation secret (idempotency records keep it)."""
    return hmac.new(key, _identity_json(call), hashlib.sha256).hexdigest()


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
    # A plain function returning the stage's coroutine: no coroutine frame of its own, which every resumption of
    # the call (each upstream read, each state round trip) would otherwise pass through once per stage.
    def run(call: ToolCall) -> Awaitable[types.CallToolResult]:
        return stage(call, call_next)

    run.__qualname__ = f"{type(stage).__name__}.bound"
    return run
