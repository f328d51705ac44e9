"""Compiles the chain of one tool from policy, in the fixed order where safety lives.

    observe → guard → validate → [access] → [fallback] → provenance → output → [cache] → [idempotency]
    → [retry] → [breaker] → terminal

(``[...]``: only when the tool's policy asks for it.) The output stage also announces: the first capped result makes
the proxy list its ``read_stored_output`` tool (``announce_outputs``: a rebuild and a ``tools/list_changed``,
scheduled, never run inside the call).

Retry is never outside access; idempotency is outside retry so every attempt shares one key; retry is outside the
breaker so each attempt is counted and an open breaker ends the retries; observe is outermost so every exception
becomes one observation. The order is code, not configuration. Expensive work (validators, policy resolution) is
done here, once per tool and policy version, never per call. The optional stages: fallback (``fallback_call``) is
outside everything that can give up on the upstream, so it sees an open circuit or exhausted retries; cache
(``cache.enabled``, read_only tools only) is inside output, so it stores capped results, and outside idempotency, retry
and breaker, so a hit sends nothing. State shared by all chains (failure counts, session
budgets, retry tokens, breakers, the state store) lives in ``Services`` and survives recompilation.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from random import Random
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
import structlog
from mcp.shared.exceptions import MCPError

from ..call.chain import Entry, HostLink, Stage, ToolCall, compose
from ..call.events import NULL, CallEvents
from ..diagnosis.engine import Diagnoser, DiagnosisState
from ..diagnosis.providers import Provider
from ..faults import EffectClass, Fault, ProtocolMismatch, UnknownTool
from ..faults.classify import classify_result
from ..policy import Policy, ToolRule
from ..stages.access import Access, denied_fault
from ..stages.breaker import Breaker, BreakerBoard
from ..stages.cache import Cache, ResponseCache
from ..stages.fallback import Fallback
from ..stages.guard import Guard, SessionGuards
from ..stages.idempotency import Idempotency, InFlight, replays_writes, upstream_identity
from ..stages.observe import AuditSink, FailureStats, Observe
from ..stages.output import OutputCap, Provenance, SessionTaint
from ..stages.result_errors import success_shaped_failure
from ..stages.retry import Retry, RetryBudgets
from ..stages.validate import Validate, suggest_tools
from ..state.sqlite import StateStore
from ..state.stored_outputs import (
    OUTPUT_URI_PREFIX,
    READ_STORED_OUTPUT_TOOL,
    STORED_OUTPUT_TEMPLATE,
    StoredOutputMissing,
    StoredOutputs,
)
from ..tasks.manager import READ_TASK_RESULT_TOOL, TaskManager
from ..verdict.repeat import verdict_of
from . import drift
from .routing import CompiledTool

if TYPE_CHECKING:
    from ..policy.config import StateConfig
    from ..state.redis import RedisStateStore
    from .routing import Router, Routing

log = structlog.get_logger(__name__)


@dataclass
class Services:
    """Shared state of every chain; outlives policy reloads."""

    stats: FailureStats = field(default_factory=FailureStats)
    guards: SessionGuards = field(default_factory=SessionGuards)
    budgets: RetryBudgets = field(default_factory=RetryBudgets)
    board: BreakerBoard = field(default_factory=BreakerBoard)
    in_flight: InFlight = field(default_factory=InFlight)
    taint: SessionTaint = field(default_factory=SessionTaint)
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep
    """How the retry stage waits between attempts (tests inject a recorder)."""
    random: Random | None = None
    """Jitter source of the retry stage (tests inject a seeded one)."""
    store: StateStore | RedisStateStore | None = None
    """The state (idempotency records, stored outputs, audit); opened by ``Pipeline.open``."""
    cache: ResponseCache = field(default_factory=ResponseCache)
    """Cached results of read_only tools with ``cache.enabled`` (tests inject one with a fake clock)."""
    events: CallEvents = NULL
    """The ops recorders (traces, metrics, status page; ``resilient_mcp.ops``): NULL when operations are off."""
    diagnosis: DiagnosisState = field(default_factory=DiagnosisState)
    """Verdict cache, per-minute budget and recent calls of the diagnose step (survive policy reloads)."""
    diagnosis_provider: Provider | None = None
    """Replaces the policy's diagnosis provider (tests and the corpus benchmark inject a scripted model)."""
    treatment: list[dict[str, str]] = field(default_factory=list)
    """How each served tool is treated and why (``treatment``), set when the routing is built (the status page)."""
    public_names: dict[tuple[str, str], str] = field(default_factory=dict)
    """(upstream, the upstream's tool name) -> the host-visible name, set when the routing is built (metrics)."""
    tasks: TaskManager = field(default_factory=TaskManager)
    """Durable tasks for 2026-07-28 hosts that declare the extension (``resilient_mcp.tasks``)."""

    @property
    def audit(self) -> AuditSink | None:
        return self.store


class Pipeline:
    def __init__(self, router: Router, policy: Policy, services: Services | None = None) -> None:
        self.router = router
        """The proxy as the chain sees it: routing in force, upstreams, the "tools changed" signal."""
        self.policy = policy
        self.services = services or Services()
        self.services.board.set_probe(self._probe)
        self._outputs: StoredOutputs | None = None
        self.outputs_announced = False
        self._cache_warned: set[str] = set()
        """Tools whose ``cache.enabled`` was ignored (not read_only) and already logged."""
        """``read_stored_output`` is advertised from the first capped result on (tools/list stays the upstreams'
        own until then); calling it works either way."""
        self._compile_shared()

    def set_policy(self, policy: Policy) -> None:
        self.policy = policy
        self._compile_shared()

    async def open(self, state_dir: str, state: StateConfig | None = None) -> None:
        """Open the state store (before the first chain is compiled: stages hold it)."""
        if state is not None and state.backend == "redis":
            from ..state.redis import RedisStateStore  # redis-py is an optional extra

            self.services.store = await RedisStateStore.open(state)
            self.services.board.shared = self.services.budgets.shared = self.services.store
        else:
            self.services.store = await StateStore.open(state_dir)
        self._outputs = StoredOutputs(self.services.store)
        self._compile_shared()

    async def aclose(self) -> None:
        if self.services.store is not None:
            await self.services.store.aclose()
            self.services.store = None

    def _compile_shared(self) -> None:
        obs = self.policy.observations
        self._observe = Observe(
            level_for=obs,
            stats=self.services.stats,
            audit=self.services.audit,
            session_context=self._session_context,
            arguments_hash=self.services.store.arguments_hash if self.services.store is not None else None,
            events=self.services.events,
            diagnose=self._diagnoser(),
        )
        self._guard = Guard(self.policy.session, self.services.guards)

    def _diagnoser(self) -> Diagnoser | None:
        rule = self.policy.diagnosis
        if not rule.enabled:
            return None
        return Diagnoser(rule, self.services.diagnosis, self.services.diagnosis_provider, self._upstream_identity)

    def _upstream_identity(self, name: str) -> str:
        up = self.router.upstream(name)
        return upstream_identity(up.config if up is not None else None)

    # --- compiled chains --------------------------------------------------------------------------------------------

    def compile(self, entry: Entry) -> CompiledTool:
        assert entry.tool is not None
        rule = self.policy.resolve(entry.upstream, entry.name, entry.public_name, entry.tool.annotations)
        stages: list[Stage] = [Validate(entry.tool.input_schema, rule.validation, tool_name=entry.public_name)]
        if rule.require_approval:
            stages.append(Access(rule))
        if rule.fallback_call and rule.fallback:
            stages.append(Fallback(rule, self._fallback_target))
        stages.append(Provenance(rule.effect, self.services.taint))
        store = self.services.store
        read_only = rule.effect is EffectClass.READ_ONLY
        invariants = rule.result_invariants
        stages.append(
            OutputCap(
                rule.output,
                entry.tool.output_schema,
                store,
                invariants=invariants,
                read_only=read_only,
                announce=self.announce_outputs,
            )
        )
        if self._caches(rule, entry):
            stages.append(Cache(rule.cache, self.services.cache))
        if store is not None and replays_writes(rule, entry.tool):
            up = self.router.upstream(entry.upstream)
            identity = upstream_identity(up.config if up is not None else None)
            stages.append(
                Idempotency(rule, store, self.services.in_flight, identity=identity, guards=self.services.guards)
            )
        if rule.retry.enabled:
            sleep = self.services.events.wrap_sleep(self.services.sleep)
            stages.append(Retry(rule, self.services.budgets, sleep=sleep, random=self.services.random))
        if rule.breaker.enabled:
            stages.append(Breaker(rule, self.services.board))
        inner = compose(stages, self._terminal)
        chain = compose([self._observe, self._guard], inner)
        effect_from = self.policy.effect_source(entry.upstream, rule, entry.tool.annotations)
        return CompiledTool(rule=rule, chain=chain, entry=entry, inner=inner, effect_from=effect_from)

    def _fallback_target(self, name: str) -> CompiledTool | None:
        """A fallback tool by host-visible name, in the routing current when the fallback is needed."""
        return self.router.routing.chains.get(name)

    def _caches(self, rule: ToolRule, entry: Entry) -> bool:
        if not rule.cache.enabled:
            return False
        if rule.effect is EffectClass.READ_ONLY:
            return True
        if entry.public_name not in self._cache_warned:
            self._cache_warned.add(entry.public_name)
            log.warning(
                "cache_ignored",
                tool=entry.public_name,
                effect=rule.effect.value,
                hint="the response cache applies to read_only tools only",
            )
        return False

    async def _terminal(self, call: ToolCall) -> types.CallToolResult:
        try:
            return await self._send(call)
        except Fault as fault:  # a stale tool list or a changed schema is checked once (drift.py, A2/A3)
            return await drift.recover(self.router, self.policy, call, fault, self._send)

    async def _send(self, call: ToolCall) -> types.CallToolResult:
        events = self.services.events
        if events is NULL:
            return await self._attempt(call)
        call.record.sent += 1
        events.attempt_started(call)
        try:
            result = await self._attempt(call)
        except BaseException as exc:
            events.attempt_finished(call, exc)
            raise
        events.attempt_finished(call, None)
        return result

    async def _attempt(self, call: ToolCall) -> types.CallToolResult:
        host = call.host
        timeouts = call.rule.timeouts
        call_tool = self.router.senders[call.upstream]
        try:
            result = await call_tool(
                call.upstream_tool,
                call.arguments,
                call.meta,
                timeout_s=call.attempt_timeout_s or timeouts.attempt_s,
                on_progress=host.report_progress if host is not None else None,
                progress_extends=timeouts.progress_extends,
                host=call.envelope,
            )
            if result.is_error:
                fault = classify_result(result, tool=call.tool)
            elif call.rule.result_errors:  # a failure the server answered as a success
                fault = success_shaped_failure(result, call.rule.result_errors, tool=call.tool)
            else:
                return result  # a success: nothing to classify
        except Fault as exc:
            fault = exc
        if fault is not None:
            fault = _blame_host(call, fault)
            verdict_of(call, fault)  # rule R, decided once per attempt: every later reader takes it from the record
            raise fault
        return result

    async def _probe(self, upstream: str) -> None:
        """The breaker's half-open probe: a listing, never a write."""
        up = self.router.upstream(upstream)
        assert up is not None
        session = await up.wait_ready(5.0)
        await session.send_request(types.ListToolsRequest(), types.ListToolsResult)

    def _session_context(self, call: ToolCall) -> dict[str, Any]:
        context = self._guard.snapshot(call.session_id)
        if call.rule.fallback:
            context["alternatives"] = list(call.rule.fallback)
        return context

    # --- calls to names the routing has no chain for ---------------------------------------------------------------

    async def call_unlisted(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        routing: Routing,
        *,
        session: str,
        call_id: str,
        host: HostLink | None,
        owner: str = "",
    ) -> types.CallToolResult:
        """Hidden, unavailable or unknown tools: still observed, guarded and audited, never forwarded."""
        proxy_tool = self._proxy_tool_handlers().get(name)
        entry = routing.catalog.tools.get(name)
        upstream = entry.upstream if entry else (routing.catalog.upstream_for_name(name) or "")
        rule = self.policy.resolve(upstream, entry.name if entry else name, name)
        call = ToolCall(
            name=name,
            arguments=arguments,
            upstream=upstream,
            upstream_tool=entry.name if entry else name,
            rule=rule.model_copy(update={"effect": EffectClass.READ_ONLY}) if proxy_tool else rule,
            tool=entry.tool if entry else None,
            session_id=session,
            owner=owner,
            call_id=call_id,
            host=host,
            known=entry is not None or proxy_tool is not None,
        )

        async def refuse(call: ToolCall) -> types.CallToolResult:
            if proxy_tool is not None:
                return await proxy_tool(call)
            if entry is not None:
                raise denied_fault(name)
            up = self.router.upstream(upstream)
            if up is not None and up.state != "ready":
                await up.wait_ready(0)  # raises the upstream-unavailable fault
            raise _unknown(name, [t.name for t in routing.visible_tools])

        return await compose([self._observe, self._guard], refuse)(call)

    # --- the proxy's own tools and resources: pages of capped outputs ---------------------------------------------

    def _proxy_tool_handlers(self) -> dict[str, Callable[[ToolCall], Awaitable[types.CallToolResult]]]:
        tasks = self.services.tasks

        async def read_task_result(call: ToolCall) -> types.CallToolResult:
            return await tasks.call_read_task_result(call.arguments, call.owner)

        handlers: dict[str, Callable[[ToolCall], Awaitable[types.CallToolResult]]] = {
            READ_TASK_RESULT_TOOL.name: read_task_result
        }
        outputs = self._outputs
        if outputs is None:
            return handlers

        async def read_stored_output(call: ToolCall) -> types.CallToolResult:
            return await outputs.call_read_stored_output(call.arguments, call.owner)

        return {READ_STORED_OUTPUT_TOOL.name: read_stored_output, **handlers}

    def proxy_tools(self) -> list[types.Tool]:
        tools = [READ_STORED_OUTPUT_TOOL] if self._outputs is not None and self.outputs_announced else []
        return tools + ([READ_TASK_RESULT_TOOL] if self.services.tasks.handed_off else [])

    def announce_outputs(self) -> None:
        if not self.outputs_announced:
            self.outputs_announced = True
            self.router.tools_changed()

    def proxy_resource_templates(self) -> list[types.ResourceTemplate]:
        return [STORED_OUTPUT_TEMPLATE] if self._outputs is not None else []

    def has_proxy_resources(self) -> bool:
        return self._outputs is not None

    async def read_proxy_resource(self, uri: str, owner: str = "") -> types.ReadResourceResult | None:
        """A resource of the proxy's own (a stored output of ``owner``), or None for an upstream's URI."""
        if self._outputs is None or not uri.startswith(OUTPUT_URI_PREFIX):
            return None
        try:
            return await self._outputs.read_stored_output_resource(uri, owner)
        except StoredOutputMissing as exc:
            raise MCPError(types.INVALID_PARAMS, f"Resource not found: {uri} ({exc})", {"uri": uri}) from None


MAX_NAME_SHOWN = 256
"""An unknown tool name is echoed (message, observation) cut to this many characters: no real name is longer."""


def _blame_host(call: ToolCall, fault: Fault) -> Fault:
    """A call that failed after the proxy refused the upstream a host capability (sampling, elicitation, roots)
    failed because of the host, not the upstream: say so (A4, the host's missing capability)."""
    refused = getattr(call.host, "refused_capabilities", None)
    missing = sorted(refused()) if callable(refused) else []
    if not missing:
        return fault
    blamed = ProtocolMismatch.of(
        "host_undeclared",
        capabilities=", ".join(missing),
        details={"variant": "d", "missing_capability": {name: {} for name in missing}, "side": "host"},
        upstream_message=fault.upstream_message or fault.message,
        retry_safety=fault.retry_safety,
        side_effect_status=fault.side_effect_status,
        upstream_result=fault.upstream_result,
    )
    return blamed


def _unknown(name: str, known: list[str]) -> Fault:
    long = len(name) > MAX_NAME_SHOWN
    shown = f"{name[:MAX_NAME_SHOWN]}…[{len(name) - MAX_NAME_SHOWN} more chars]" if long else name
    return UnknownTool.of(
        "no_such_tool",
        name=shown,
        details={"requested_name": shown, "candidates": [] if long else suggest_tools(name, known)},
    )
