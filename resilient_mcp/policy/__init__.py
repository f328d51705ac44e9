"""Policy: the admin's word on every tool, as strict models, merged defaults < upstream < tool.

A policy file (``policies/*.yaml``, JSON accepted) has this shape::

    version: 1
    defaults: {effect: write_unsafe, timeouts: {attempt_s: 50}, ...}      # a ToolRule
    session: {max_tool_calls: 1000, max_failures: 100, loop_threshold: 3}
    observations: {level: L2, unknown_tool_as_result: false}
    deny: ["*delete*"]                                                     # host-visible names, globs
    upstreams:
      fs:
        trust_annotations: true
        allow: ["read_*", "list_*"]
        defaults: {...}                                                    # a ToolRule for all its tools
        tools: {"write_*": {effect: write_unsafe, require_approval: true}} # glob -> ToolRule
    tools: {"fs__move_file": {effect: destructive}}                        # host-visible names, globs

Every layer is a ``ToolRule``; merging takes, field by field, what a later layer *set* (``model_fields_set``), so an
upstream that sets only ``timeouts.attempt_s`` keeps every other default. ``resolve`` is pure and runs when the chain
is compiled, never per call.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from enum import StrEnum
from typing import Annotated, Any, Literal, TypeVar

import mcp_types as types
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped]
from jsonschema.validators import validator_for  # type: ignore[import-untyped]
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr

from ..faults import BY_TYPE, EffectClass
from .diagnosis_settings import DiagnosisRule

B = TypeVar("B", bound=BaseModel)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


# --- one model per chain stage --------------------------------------------------------------------------------------


class ValidationRule(Strict):
    enabled: bool = True
    """Check arguments against the tool's inputSchema before sending; invalid calls are never forwarded."""
    max_argument_bytes: int = Field(1_000_000, ge=1)
    """Largest accepted size of the arguments, as compact JSON in UTF-8."""
    coerce: bool = False
    """Apply safe coercions ("5" -> 5 for an integer field, "true" -> true); each one is reported to the model."""


class TimeoutRule(Strict):
    attempt_s: float = Field(50.0, gt=0, le=86_400)
    """Timeout of one upstream attempt, in seconds; a timed-out attempt is cancelled upstream."""
    total_s: float = Field(50.0, gt=0, le=86_400)
    """Deadline of the whole call across attempts and backoff, in seconds. The default stays under the 60 s after
    which common hosts give up on a request (the TypeScript SDK's default), so the host gets the proxy's observation
    of a hung upstream, never its own timeout; raise it for hosts that wait longer."""
    progress_extends: bool = True
    """A progress notification from the upstream restarts the attempt timeout (never past total_s)."""


class RetryRule(Strict):
    enabled: bool = True
    """false: never retry this tool in the proxy."""
    max_attempts: int = Field(3, ge=1, le=10)
    """Attempts in all for faults that provably did not execute (not_sent, rejected)."""
    max_attempts_maybe_executed: int = Field(2, ge=1, le=10)
    """Attempts in all for maybe-executed faults, on tools where repeating is safe."""
    backoff_base_ms: int = Field(100, ge=0, le=60_000)
    """Base of the full-jitter exponential backoff: attempt n waits random(0, min(cap, base * 2^n))."""
    backoff_cap_ms: int = Field(2_000, ge=0, le=600_000)
    """Longest backoff between two attempts."""
    retry_after_cap_ms: int = Field(10_000, ge=0, le=3_600_000)
    """Longest server-requested wait (Retry-After) the proxy sleeps; a longer one is reported instead."""


class BreakerRule(Strict):
    enabled: bool = True
    """false: no circuit breaking for this tool (its failures still count for its upstream)."""
    failure_threshold: int = Field(5, ge=1, le=1000)
    """Consecutive transport/timeout/5xx-class failures that open the circuit."""
    open_s: float = Field(30.0, gt=0, le=86_400)
    """How long the circuit stays open before one half-open probe."""
    shared: bool = False
    """With the redis state backend: a circuit opened on one replica fails fast on every replica until it would
    half-open (each replica then probes for itself), and the upstream's retry budget is one bucket for all."""


class IdempotencyRule(Strict):
    enabled: bool | None = None
    """None: on for write_unsafe and destructive tools, off otherwise."""
    window_s: float = Field(60.0, gt=0, le=7 * 86_400)
    """How long a completed write is replayed for an identical call. With a key derived from the arguments only a
    result the host never received (it cancelled, timed out or disconnected first) is replayed, to the same host
    session; one it received is not: an identical call runs again. Explicit keys (``_meta`` idempotency-key,
    ``key_argument``) replay every completed write for any session."""
    unknown_outcome_s: float = Field(86_400.0, gt=0, le=30 * 86_400)
    """How long a write whose outcome is unknown (timeout, lost connection, proxy stopped mid-call) blocks an
    identical call with a key derived from the arguments, unless the session verified first (``verify_with``, or
    any read-only call of the same upstream). Survives restarts of the proxy."""
    key_argument: str | None = None
    """An argument whose value is the idempotency key (e.g. client_ref), instead of a hash of all arguments."""
    forward_key_as: str | None = None
    """The upstream honours idempotency keys: forward the key in this ``_meta`` field; maybe-executed writes may then
    be retried. With ``listen.auth_tokens`` the key goes prefixed with the caller's principal (``token-N.``)."""
    on_in_flight: Literal["wait", "conflict"] = "wait"
    """An identical write while the first is running: wait and share its result, or refuse with a conflict."""
    on_state_unavailable: Literal["refuse", "proceed"] = "refuse"
    """The shared state (redis backend) cannot be reached: refuse the write with a STATE_UNAVAILABLE observation
    (not sent, backoff_retry), or send it without duplicate protection."""


class OutputRule(Strict):
    max_text_bytes: int = Field(100_000, ge=256)
    """Largest text of a result passed to the host; the rest is stored and readable in pages."""
    max_items: int = Field(100, ge=1)
    """Most content items of one result passed to the host."""
    max_binary_bytes: int = Field(5_000_000, ge=0)
    """Largest total of base64 image/audio/blob data of one result passed to the host."""
    validate_output_schema: bool = True
    """Check structuredContent against the tool's outputSchema; a mismatch becomes an observation."""


class CacheRule(Strict):
    enabled: bool = False
    """Answer an identical call (same upstream, tool and arguments) of a read_only tool from a cache, marked, within
    ttl_s; shared by all host sessions. Ignored (with a warning) on a tool that is not read_only."""
    ttl_s: float = Field(30.0, gt=0, le=86_400)
    """How long a successful result is served from the cache, in seconds."""
    max_entries: int = Field(1000, ge=1, le=1_000_000)
    """Most cached results kept for this tool; the least recently used go first."""


class TaskRule(Strict):
    mode: Literal["auto", "always", "never"] = "auto"
    """For a 2026-07-28 host that declared the tasks extension (io.modelcontextprotocol/tasks): auto answers with a
    task once the call has run after_s; always answers with a task at once; never keeps the call synchronous."""
    after_s: float = Field(10.0, gt=0, le=86_400)
    """How long a call runs before an opted-in host gets a task for it instead of the result (mode auto)."""
    required: bool = False
    """The tool is only served as a task: a 2026-07-28 host without the extension gets -32021 (missing required
    client capability) instead of a call it cannot wait for."""
    handoff_s: float = Field(50.0, gt=0, le=86_400)
    """A host that cannot poll (handshake era) waits this long at most: then it gets an observation that the call is
    still running, with a handle to read the result with read_task_result, while the call goes on. Only for a tool
    whose timeouts.total_s is longer (by default it is not: 50 s, under the 60 s common hosts wait)."""


class TasksPolicy(Strict):
    enabled: bool = True
    """Serve the tasks extension (io.modelcontextprotocol/tasks) to 2026-07-28 hosts that declare it."""
    ttl_s: float = Field(3600.0, gt=0, le=30 * 86_400)
    """How long a task's record (status, then result) is kept after its creation, in seconds."""
    poll_interval_ms: int = Field(1000, ge=50, le=600_000)
    """How often a host is told to poll tasks/get, in milliseconds."""
    max_per_principal: int = Field(100, ge=1, le=100_000)
    """Most task records kept per principal; the oldest finished ones go first (running ones are never dropped)."""
    lease_s: float = Field(30.0, gt=0, le=3600)
    """A running task's record is renewed this often by the proxy running it; a record not renewed for this long
    (its proxy stopped) reads as finished with an unknown outcome."""


JsonType = Literal["string", "number", "integer", "boolean", "array", "object", "null"]


def _check_path(path: str) -> str:
    if not path or any(not part for part in path.split(".")) or path.strip() != path:
        raise ValueError(
            f"field path {path!r} must be dot-separated names or array indexes with no empty part (e.g. order.id)"
        )
    return path


def _check_pattern(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"pattern {pattern!r} is not a valid regular expression: {exc}") from None
    return pattern


def _check_json_schema(schema: dict[str, Any]) -> dict[str, Any]:
    try:
        validator_for(schema, default=Draft202012Validator).check_schema(schema)
    except SchemaError as exc:
        raise ValueError(f"json_schema is not a valid JSON Schema: {exc.message}") from None
    return schema


FieldPath = Annotated[str, AfterValidator(_check_path)]
"""A field of a tool's result data: dot-separated object keys and array indexes (``orders.0.qty``)."""


class FieldCheck(Strict):
    """Predicates on one field of a tool's result data; each one that is set must hold."""

    required: bool = True
    """The field must be present; false: the other checks apply only when it is."""
    non_empty: bool = False
    """Not null, "", [] or {}."""
    type: JsonType | None = None
    """The field's JSON type: string, number, integer, boolean, array, object or null."""
    min_items: int | None = Field(None, ge=0)
    """An array, object or string of at least this many items (characters)."""
    max_items: int | None = Field(None, ge=0)
    """An array, object or string of at most this many items (characters)."""
    minimum: float | None = None
    """A number of at least this value."""
    maximum: float | None = None
    """A number of at most this value."""
    pattern: Annotated[str, AfterValidator(_check_pattern)] | None = None
    """A string this regular expression matches (anywhere; anchor it with ^...$ for the whole string)."""


class ResultInvariants(Strict):
    """What a successful result of this tool must look like. A result that breaks it is a suspect result (E5): the
    model gets an observation instead of the data. The data is the result's structuredContent, else its text content
    parsed as JSON."""

    non_empty: bool = False
    """The result carries data: content that is not empty, and data that is not null, "", [] or {}."""
    required: list[FieldPath] = Field(default_factory=list)
    """Fields that must be present (dotted paths, e.g. order.id or orders.0.qty)."""
    fields: dict[FieldPath, FieldCheck] = Field(default_factory=dict)
    """Dotted field path -> predicates (non_empty, type, min_items, max_items, minimum, maximum, pattern)."""
    json_schema: Annotated[dict[str, Any], AfterValidator(_check_json_schema)] | None = None
    """A JSON Schema the data must match (its own $schema dialect, default 2020-12); checked when the policy loads."""

    @property
    def needs_data(self) -> bool:
        """Whether a check reads fields, so a result with no JSON data breaks it."""
        return bool(self.required or self.fields or self.json_schema is not None)


def _check_result_path(path: str) -> str:
    parts = path.split(".")
    if parts[0] != "$" or any(not part or part.strip() != part for part in parts[1:]):
        raise ValueError(
            f"json_path {path!r} must be $ followed by dot-separated names or array indexes with no empty part "
            "(e.g. $.result or $.error.code)"
        )
    return path


def _check_fault_type(name: str) -> str:
    if not name[:1].isupper() or name not in BY_TYPE:
        known = ", ".join(sorted(t for t in BY_TYPE if t[:1].isupper()))
        raise ValueError(f"fault_type {name!r} is not a catalog fault type; use one of: {known}")
    return name


ResultPath = Annotated[str, AfterValidator(_check_result_path)]
FaultTypeName = Annotated[str, AfterValidator(_check_fault_type)]


class ResultError(Strict):
    """One sign that a successful result is a failure the server did not flag (``isError`` false). Exactly one of
    ``prefix``, ``contains`` or ``json_path`` (with ``equals``). Matched as plain text, never as a regular
    expression."""

    prefix: str | None = Field(None, min_length=1, max_length=1000)
    """The result's text starts with this (after leading white space), e.g. "Database error: "."""
    contains: str | None = Field(None, min_length=1, max_length=1000)
    """The result's text contains this anywhere (the first 64 KiB of it are read)."""
    json_path: ResultPath | None = None
    """A field of the result's data (structuredContent, else the text parsed as JSON): $ then dotted names or
    indexes, e.g. $.result; the result is a failure when that field equals `equals`."""
    equals: str | int | float | bool | None = None
    """The value json_path must have for the result to be a failure (with json_path only)."""
    ignore_case: bool = False
    """Compare prefix / contains / a string `equals` without regard to case."""
    fault_type: FaultTypeName | None = None
    """The catalog fault type to report (e.g. D5_state_conflict); unset: the classifier reads the result's text, as
    it reads an isError result."""

    def model_post_init(self, context: Any, /) -> None:
        chosen = [name for name in ("prefix", "contains", "json_path") if getattr(self, name) is not None]
        if len(chosen) != 1:
            raise ValueError(
                f"a result_errors entry needs exactly one of prefix, contains or json_path (got {chosen or 'none'})"
            )
        if ("equals" in self.model_fields_set) != (self.json_path is not None):
            raise ValueError("equals goes with json_path (and json_path needs equals): set both or neither")


class VerifyWith(Strict):
    tool: str
    """A read-only tool (host-visible name) that tells whether a write took effect."""
    args: dict[str, Any] = Field(default_factory=dict)
    """Arguments; a string "{name}" is replaced by the call's argument of that name."""


class ToolRule(Strict):
    """Everything the chain needs to know about one tool. Also the shape of every layer of a policy file."""

    effect: EffectClass = EffectClass.WRITE_UNSAFE
    """read_only | write_idempotent | write_unsafe | destructive. Unnamed, unannotated tools are write_unsafe."""
    require_approval: bool = False
    """Ask the human (MCP elicitation) before each call; refused with ask_user when the host cannot ask."""
    verify_with: VerifyWith | None = None
    """A read-only tool the model is told to call to check whether a write whose outcome is unknown took effect."""
    fallback: list[str] = Field(default_factory=list)
    """Alternative tools (host-visible names), named in observations when this one is failing."""
    fallback_call: bool = False
    """Call the first available `fallback` tool automatically when this one's circuit is open or its transient faults
    outlast the retries (same arguments: the fallback must accept them; its own validation applies); off: the
    fallbacks are only named in the observation."""
    fallback_writes: bool = False
    """Allow calling a fallback that is not read_only."""
    validation: ValidationRule = ValidationRule()
    """Argument checks before anything is sent (see `validation`)."""
    timeouts: TimeoutRule = TimeoutRule()
    """Per-attempt timeout and overall deadline (see `timeouts`)."""
    retry: RetryRule = RetryRule()
    """Classified retry of transient faults (see `retry`)."""
    breaker: BreakerRule = BreakerRule()
    """Circuit breaking per upstream and per tool (see `breaker`)."""
    idempotency: IdempotencyRule = IdempotencyRule()
    """Duplicate suppression and replay for writes (see `idempotency`)."""
    output: OutputRule = OutputRule()
    """Output size caps and outputSchema checks (see `output`)."""
    cache: CacheRule = CacheRule()
    """Response cache for read_only tools, off by default (see `cache`)."""
    task: TaskRule = TaskRule()
    """When a call becomes a durable task for a host that opted in (see docs/tasks.md)."""
    result_errors: list[ResultError] = Field(default_factory=list)
    """Signs that a successful result is a failure the server did not flag (a database error answered as text, a
    {"result": "error"}): a result matching one of them is reported as a classified fault instead of as data. Empty
    (the default): a success is never reinterpreted."""
    result_invariants: ResultInvariants | None = None
    """What a successful result must look like (see `result_invariants`); a result that breaks it is reported as a
    suspect result (E5) instead of being passed on as data. None: no checks beyond the outputSchema."""

    _trusted_upstream: bool = PrivateAttr(default=False)

    @property
    def trusted_upstream(self) -> bool:
        """Resolved, not configured: the tool's upstream has ``trust_annotations: true``, so its typed hints that a
        write did not run are believed (rule R, ``repeat.decide``)."""
        return self._trusted_upstream

    @property
    def idempotency_on(self) -> bool:
        if self.idempotency.enabled is not None:
            return self.idempotency.enabled
        return self.effect in (EffectClass.WRITE_UNSAFE, EffectClass.DESTRUCTIVE)


# --- file-level sections --------------------------------------------------------------------------------------------


class ObservationLevel(StrEnum):
    L0 = "L0"  # raw upstream error only
    L1 = "L1"  # + classification
    L2 = "L2"  # + repair action, retries, attempts, suggestion
    L3 = "L3"  # + session context


class SessionRule(Strict):
    max_tool_calls: int | None = Field(None, ge=1)
    """Tool calls one host session (one host connection) may make; null (the default): no limit. Opt-in, for
    agents that should stop after a bound; a long-lived host (a desktop app) would fail every call once spent."""
    max_failures: int | None = Field(None, ge=1)
    """Failed tool calls one host session may make; null (the default): no limit. Opt-in, like max_tool_calls."""
    loop_threshold: int = Field(3, ge=2, le=100)
    """Identical failures after which the repair action becomes abort (the loop guard; always on). Identical
    successful calls are never refused."""


class ObservationRule(Strict):
    level: ObservationLevel = ObservationLevel.L2
    """How much an error observation tells the model: L0 raw upstream error, L1 + classification, L2 + repair action,
    retries, attempts and suggestion, L3 + session context (budgets, recent failures, alternatives)."""
    unknown_tool_as_result: bool = False
    """Answer an unknown tool with an isError result instead of the spec's JSON-RPC -32602 (for hosts that hide
    protocol errors from the model)."""
    upstream_message_chars: int = Field(500, ge=0, le=100_000)
    """How much of the upstream's own error text an observation quotes (marked untrusted)."""


def _check_glob(pattern: str) -> str:
    if not pattern or pattern.strip() != pattern:
        raise ValueError(f"glob pattern {pattern!r} must be non-empty with no surrounding spaces")
    if pattern.count("[") != pattern.count("]"):
        raise ValueError(f"glob pattern {pattern!r} has an unbalanced '['")
    try:
        re.compile(fnmatch.translate(pattern))
    except re.error as exc:
        raise ValueError(f"glob pattern {pattern!r} is invalid: {exc}") from None
    return pattern


Glob = Annotated[str, AfterValidator(_check_glob)]
"""A tool-name glob, checked where it is written (errors point at the item, not at its list)."""


class UpstreamPolicy(Strict):
    trust_annotations: bool | None = None
    """true: use the upstream's MCP tool annotations (readOnlyHint, destructiveHint, idempotentHint) as effect
    classes, and believe its typed claims that a failed write did not run. false: use none of them. Unset (the
    default): a local stdio server's ``readOnlyHint: true`` makes that tool read_only (retried on transient faults);
    every other hint, and every hint of a remote ``url:`` server, is not used."""
    allow: list[Glob] | None = None
    """Only tools matching one of these globs (upstream names) are offered; None offers all."""
    deny: list[Glob] = Field(default_factory=list)
    """Tools matching these globs (upstream names) are hidden and refused."""
    defaults: ToolRule = ToolRule()
    """A tool rule for every tool of this upstream."""
    tools: dict[Glob, ToolRule] = Field(default_factory=dict)
    """Glob on the upstream's tool name -> rule; later, more specific entries win field by field."""


class PolicyFile(Strict):
    version: Literal[1] = 1
    """Format version of the policy file."""
    defaults: ToolRule = ToolRule()
    """The tool rule every tool starts from."""
    session: SessionRule = SessionRule()
    """Per-host-session budgets and the loop guard."""
    observations: ObservationRule = ObservationRule()
    """What failed calls tell the model."""
    diagnosis: DiagnosisRule = DiagnosisRule()
    """Model diagnosis of failures the rules leave untyped (off by default)."""
    tasks: TasksPolicy = TasksPolicy()
    """Durable tasks (io.modelcontextprotocol/tasks) served by the proxy: retention and polling (see docs/tasks.md)."""
    deny: list[Glob] = Field(default_factory=list)
    """Host-visible tool names (globs) hidden and refused on every upstream."""
    upstreams: dict[str, UpstreamPolicy] = Field(default_factory=dict)
    """Per-upstream policy, by the upstream's configured name."""
    tools: dict[Glob, ToolRule] = Field(default_factory=dict)
    """Glob on the host-visible tool name -> rule; applied after upstream rules."""


# --- merging and resolution -----------------------------------------------------------------------------------------


def merge(base: B, over: B) -> B:
    """``over`` on top of ``base``: fields ``over`` set win; nested models merge recursively; lists replace."""
    updates: dict[str, Any] = {}
    for name in over.model_fields_set:
        new, old = getattr(over, name), getattr(base, name)
        if isinstance(new, BaseModel) and isinstance(old, BaseModel) and type(new) is type(old):
            updates[name] = merge(old, new)
        else:
            updates[name] = new
    if not updates:
        return base
    merged = base.model_copy(update=updates)
    # keep "what was set" accurate so a merged layer can itself be merged again
    object.__setattr__(merged, "__pydantic_fields_set__", base.model_fields_set | set(updates))
    return merged


def merge_files(files: list[PolicyFile]) -> PolicyFile:
    """Several policy files, later ones on top: the same field-by-field merge; dicts of rules merge per key."""
    out = PolicyFile()
    for f in files:
        out = _merge_policy(out, f)
    return out


def _merge_policy(base: PolicyFile, over: PolicyFile) -> PolicyFile:
    merged = merge(base, over)
    upstreams = dict(base.upstreams)
    for name, up in over.upstreams.items():
        upstreams[name] = _merge_upstream(upstreams[name], up) if name in upstreams else up
    tools = dict(base.tools)
    for pat, rule in over.tools.items():
        tools[pat] = merge(tools[pat], rule) if pat in tools else rule
    return merged.model_copy(update={"upstreams": upstreams, "tools": tools, "deny": [*base.deny, *over.deny]})


def _merge_upstream(base: UpstreamPolicy, over: UpstreamPolicy) -> UpstreamPolicy:
    merged = merge(base, over)
    tools = dict(base.tools)
    for pat, rule in over.tools.items():
        tools[pat] = merge(tools[pat], rule) if pat in tools else rule
    return merged.model_copy(update={"tools": tools, "deny": [*base.deny, *over.deny]})


def effect_from_annotations(annotations: types.ToolAnnotations | None) -> EffectClass | None:
    """MCP annotations as an effect class, with the spec's pessimistic defaults for missing hints."""
    if annotations is None:
        return None
    if annotations.read_only_hint:
        return EffectClass.READ_ONLY
    destructive = annotations.destructive_hint if annotations.destructive_hint is not None else True
    if destructive:
        return EffectClass.DESTRUCTIVE
    if annotations.idempotent_hint:
        return EffectClass.WRITE_IDEMPOTENT
    return EffectClass.WRITE_UNSAFE


def _read_only_hint(annotations: types.ToolAnnotations | None) -> EffectClass | None:
    """A server's ``readOnlyHint: true`` alone (the default trust in a local stdio server)."""
    if annotations is not None and annotations.read_only_hint:
        return EffectClass.READ_ONLY
    return None


def matches(name: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


class Policy:
    """The merged policy of all files, with resolution of one tool's rule and visibility."""

    def __init__(self, file: PolicyFile | None = None, sources: list[str] | None = None) -> None:
        self.file = file or PolicyFile()
        self.sources = sources or []
        # The file's sections, read on every call (``tasks`` by the host's tools/call): plain attributes.
        self.session: SessionRule = self.file.session
        self.observations: ObservationRule = self.file.observations
        self.tasks: TasksPolicy = self.file.tasks
        self.diagnosis: DiagnosisRule = self.file.diagnosis
        self.local_upstreams: frozenset[str] = frozenset()
        """Upstreams the user configured as a local stdio command: their ``readOnlyHint`` is used unless the policy
        says ``trust_annotations: false`` (``annotation_trust``)."""

    def mark_local(self, names: Iterable[str]) -> Policy:
        """Record which upstreams are local stdio servers (the proxy's config says); returns self."""
        self.local_upstreams = frozenset(names)
        return self

    def annotation_trust(self, upstream: str) -> Literal["all", "read_only", "none"]:
        """Which of ``upstream``'s annotations are used: all (``trust_annotations: true``), only ``readOnlyHint``
        (the default for a local stdio server), or none (``false``, and the default for a remote server)."""
        trust = self.upstream(upstream).trust_annotations
        if trust is None:
            return "read_only" if upstream in self.local_upstreams else "none"
        return "all" if trust else "none"

    def upstream(self, upstream: str) -> UpstreamPolicy:
        return self.file.upstreams.get(upstream) or UpstreamPolicy()

    def is_visible(self, upstream: str, tool: str, public_name: str) -> bool:
        """False when the policy hides the tool (denied, or not on an allow list)."""
        up = self.upstream(upstream)
        if matches(public_name, self.file.deny) or matches(tool, up.deny):
            return False
        return up.allow is None or matches(tool, up.allow)

    def resolve(
        self, upstream: str, tool: str, public_name: str, annotations: types.ToolAnnotations | None = None
    ) -> ToolRule:
        """The rule for one tool: defaults < upstream defaults < upstream tool globs < top-level tool globs.

        Among globs of one section, entries later in the file win. The effect class comes from the annotations
        only when the upstream is trusted and no layer set ``effect``."""
        up = self.upstream(upstream)
        rule = merge(self.file.defaults, up.defaults)
        for pattern, layer in up.tools.items():
            if fnmatch.fnmatchcase(tool, pattern):
                rule = merge(rule, layer)
        for pattern, layer in self.file.tools.items():
            if fnmatch.fnmatchcase(public_name, pattern):
                rule = merge(rule, layer)
        trust = self.annotation_trust(upstream)
        if "effect" not in rule.model_fields_set and trust != "none":
            hinted = effect_from_annotations(annotations) if trust == "all" else _read_only_hint(annotations)
            if hinted is not None:
                fields_set = rule.model_fields_set
                rule = rule.model_copy(update={"effect": hinted})
                object.__setattr__(rule, "__pydantic_fields_set__", set(fields_set))  # a hint is not the policy's word
        if trust == "all":
            rule = rule.model_copy()
            rule._trusted_upstream = True
        return rule

    def effect_source(self, upstream: str, rule: ToolRule, annotations: types.ToolAnnotations | None) -> str:
        """Where ``rule.effect`` came from, in words (``check --connect``, ``explain``)."""
        if "effect" in rule.model_fields_set:
            return "policy"
        trust = self.annotation_trust(upstream)
        if trust == "all":
            if effect_from_annotations(annotations) is not None:
                return "annotations (trust_annotations: true)"
            return "default (trust_annotations: true, but the tool has no annotations)"
        if trust == "read_only":
            if _read_only_hint(annotations) is not None:
                return "readOnlyHint of a local stdio server (trust_annotations: false turns this off)"
            return "default (no policy entry, no readOnlyHint; a local server's other hints are not used)"
        if self.upstream(upstream).trust_annotations is False:
            return "default (no policy entry; trust_annotations: false)"
        return "default (no policy entry; a remote server's annotations are not trusted)"
