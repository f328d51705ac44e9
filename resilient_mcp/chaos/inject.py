"""Chaos mode in the proxy: faults injected between the proxy's chain and a real upstream, as a fault plan says.

``FaultInjector.bind(upstream)`` has the shape of ``Upstream.call_tool``: it is a call layer (``proxy/routing.py``) that
decorates how the pipeline's terminal reaches an upstream, as a mock transport sits behind an HTTP client's transport
seam. ``calls_for(config)`` builds it when the config has a ``faults:`` section (or ``wrap --faults PLAN``); the proxy
is given it where it is built (``app.py``). Nothing else of the product knows about chaos mode.

Every fault is shown to the chain the way the real one would arrive from ``upstream/errors.py``: through ``classify``
from the same exception or HTTP status the SDK would raise, or as the ``isError`` result a server would send (which
the terminal classifies as usual).
So the user's own agent sees what the proxy does with a real timeout, crash, rate limit or 5xx of their own server.

======================  =========================================================================================
fault                   in proxy chaos mode
======================  =========================================================================================
C1, C5                  not sent: the connect failure ``upstream/errors.py`` raises for a refused connection
C2                      the upstream process is killed and restarted (``request_restart``), after the call was
                        forwarded (``commit: before``) or before; the chain sees the connection lost mid-call
C3                      waits ``hang_ms`` (default: the attempt timeout) then times out like a real attempt;
                        ``commit: before_hang`` forwards the call first (it executes; its answer is lost)
C4                      HTTP 5xx with an optional Retry-After, after forwarding (``forward: true``) or not
D3                      waits ``delay_ms`` then forwards; past the attempt timeout it is a C3
E1                      invalid_result: the SDK's parse failure; truncated / wrong_id: the answer never comes
E2 E3 E4 E5 F4          the real result, altered (``mutations.py``)
A1 A4 B* D1 D2 D4 D5    the reported error, as an isError result, a JSON-RPC error or (``as: http``) an HTTP
F1 F2 F3                status (429 with Retry-After, 401, 403, ...)
======================  =========================================================================================

A2, A3, C3 ``commit: after_hang`` and F4 ``in: description`` change or outlive the upstream itself; the chaos server
injects those.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
import pydantic
import structlog
from mcp.shared.exceptions import MCPError

from ..faults import AttemptTimeout
from ..faults.classify import classify_exception, classify_http_status
from ..faults.error_results import ERROR_META_KEY
from ..policy.source import SourceError, load_document
from . import mutations as mut
from . import params as pm
from .clock import Clock, RealClock
from .plan import Decision, FaultPlan, Planner, load_plan, parse_plan
from .responses import error_exception, error_result, http_error, reported_as

if TYPE_CHECKING:
    from ..policy.config import ProxyConfig
    from ..proxy.routing import CallLayer
    from ..upstream import Upstream

log = structlog.get_logger(__name__)

CallTool = Callable[..., Awaitable[types.CallToolResult]]
_ERRORS = ("A1", "A4", "B1", "B2", "B3", "B4", "D1", "D2", "D4", "D5", "F1", "F2", "F3")


def check_proxy_plan(plan: FaultPlan) -> list[str]:
    """Why the proxy cannot inject some rules of ``plan`` (empty: it can inject them all)."""
    problems = []
    for i, rule in enumerate(plan.rules):
        p = rule.parsed
        if rule.fault[:2] in ("A2", "A3"):
            problems.append(f"rules[{i}]: {rule.fault} changes the upstream's tool list; the chaos server injects it")
        elif isinstance(p, pm.HangParams) and p.commit == "after_hang":
            problems.append(
                f"rules[{i}]: commit: after_hang needs the server to outlive the call; use the chaos server"
            )
        elif isinstance(p, pm.InjectionParams) and p.in_ == "description":
            problems.append(f"rules[{i}]: F4 in: description changes the upstream's tool list; use the chaos server")
    return problems


class FaultInjector:
    """Applies one fault plan to every upstream call of a proxy. Deterministic per plan and call sequence."""

    def __init__(self, plan: FaultPlan, *, clock: Clock | None = None, source: str = "fault plan") -> None:
        problems = check_proxy_plan(plan)
        if problems:
            raise SourceError(source, [f"{source}: {p}" for p in problems])
        self.planner = Planner(plan)
        self.clock = clock or RealClock()

    def bind(self, upstream: Upstream) -> CallTool:
        """``upstream.call_tool`` with this plan's faults."""
        return partial(self.call, upstream)

    async def call(
        self,
        upstream: Upstream,
        name: str,
        arguments: dict[str, Any] | None,
        meta: dict[str, Any] | None = None,
        **kw: Any,
    ) -> types.CallToolResult:
        decision = self.planner.decide(name, arguments, upstream=upstream.name)
        forward = partial(upstream.call_tool, name, arguments, meta, **kw)
        if decision is None:
            return await forward()
        log.warning(
            "chaos_fault_injected",
            upstream=upstream.name,
            tool=name,
            fault=decision.fault,
            rule=decision.rule,
            call=decision.call,
        )
        limit = _attempt_limit(kw.get("timeout_s"), kw.get("deadline", math.inf))
        return await self._inject(decision, upstream, name, forward, limit)

    async def _inject(
        self, d: Decision, upstream: Upstream, name: str, forward: CallTool, limit: float
    ) -> types.CallToolResult:
        kind, p = d.fault[:2], d.params
        if isinstance(p, pm.ErrorParams):
            return _reported(d.fault, p, name)
        if kind in ("C1", "C5"):
            raise classify_exception(ConnectionRefusedError(111, "Connection refused (injected)"), sent=False)
        if isinstance(p, pm.DieParams):
            if p.commit == "before":
                await _quietly(forward)
            upstream.request_restart()
            raise classify_exception(MCPError(types.CONNECTION_CLOSED, "Connection closed (injected)"), sent=True)
        if isinstance(p, pm.HangParams):
            return await self._hang(p, forward, limit)
        if isinstance(p, pm.GatewayParams):
            if p.forward:
                await _quietly(forward)
            headers = {"Retry-After": f"{p.retry_after_s:g}"} if p.retry_after_s is not None else {}
            raise classify_http_status(p.status, headers, message=f"HTTP {p.status} (injected)")
        if isinstance(p, pm.SlowParams):
            if p.delay_ms / 1000 >= limit:
                return await self._hang(pm.HangParams(hang_ms=p.delay_ms), forward, limit)
            await self.clock.sleep(p.delay_ms / 1000)
            return await forward()
        if isinstance(p, pm.MalformedParams):
            return await self._malformed(p, forward, limit)
        if isinstance(p, pm.CorruptionParams) and p.variant == "noop":
            return mut.noop_success()
        return _altered(p, await forward(), _tool(upstream, name))

    async def _hang(self, p: pm.HangParams, forward: CallTool, limit: float) -> types.CallToolResult:
        started = self.clock.now()
        result = await forward() if p.commit == "before_hang" else None
        hang = limit if p.hang_ms is None else p.hang_ms / 1000
        left = limit - (self.clock.now() - started)
        await self.clock.sleep(max(0.0, min(hang, left)))
        if hang >= left:
            waited = self.clock.now() - started
            raise AttemptTimeout.of(
                "injected_hang",
                elapsed_s=waited,
                details={"timeout_ms": int(waited * 1000), "injected": True},
            )
        if result is not None:
            return result
        hint = {"type": "deadline_exceeded", "retryable": False}
        return types.CallToolResult(
            content=[types.TextContent(text="The operation did not complete in time")],
            is_error=True,
            _meta={ERROR_META_KEY: hint},
        )

    async def _malformed(self, p: pm.MalformedParams, forward: CallTool, limit: float) -> types.CallToolResult:
        if p.variant == "log_line":  # the SDK client logs the stray line and reads the real answer
            return await forward()
        if p.variant in ("truncated", "wrong_id"):  # the answer never arrives intact: the attempt times out
            return await self._hang(pm.HangParams(commit="before_hang" if p.commit else "never"), forward, limit)
        if p.commit:
            await forward()
        try:
            types.CallToolResult.model_validate({"content": "this should have been a list", "isError": "maybe"})
        except pydantic.ValidationError as exc:
            raise classify_exception(exc, sent=True) from None
        raise AssertionError("unreachable")  # pragma: no cover


def _attempt_limit(timeout_s: float | None, deadline: float) -> float:
    left = deadline - anyio.current_time()
    return min(timeout_s if timeout_s else math.inf, left)


def _reported(fault: str, p: pm.ErrorParams, name: str) -> types.CallToolResult:
    how = reported_as(fault, p)
    if how == "jsonrpc":
        raise classify_exception(error_exception(fault, p, name), sent=True)
    if how == "http":
        status, headers, body = http_error(fault, p, name)
        raise classify_http_status(status, headers, message=body)
    return error_result(fault, p, name)


def _tool(upstream: Upstream, name: str) -> types.Tool | None:
    return next((t for t in upstream.catalog.tools if t.name == name), None)


def _altered(p: Any, result: types.CallToolResult, tool: types.Tool | None) -> types.CallToolResult:
    return mut.alter(result, p, tool)


async def _quietly(forward: CallTool) -> None:
    """Forward a call whose answer the injected fault replaces (its failure, too, is hidden behind the fault)."""
    try:
        await forward()
    except Exception as exc:
        log.debug("chaos_forward_failed", error=str(exc))


def injector_for(config: ProxyConfig) -> FaultInjector | None:
    """The injector a proxy config asks for (``faults:``), or None. Raises ``SourceError`` for a bad plan, naming the
    file and line (the plan file's, or the config file's for inline ``rules``)."""
    faults = config.faults
    if faults is None:
        return None
    if faults.plan is not None:
        path = config.resolve_path(faults.plan)
        plan, source = load_plan(path), str(path)
    else:
        rules = {"rules": list(faults.rules or [])}
        if config.source is not None:
            plan = parse_plan(load_document(config.source), data=rules, prefix=("faults",))
        else:
            try:
                plan = FaultPlan.model_validate(rules)
            except pydantic.ValidationError as exc:
                raise SourceError("faults", [f"faults: {exc}"]) from None
        source = "faults"
    if faults.seed is not None:
        plan = plan.model_copy(update={"seed": faults.seed})
    return FaultInjector(plan, source=source)


def calls_for(config: ProxyConfig) -> CallLayer | None:
    """The call layer of chaos mode for ``config`` (``Proxy(..., calls=...)``), or None when it asks for no faults."""
    injector = injector_for(config)
    return injector.bind if injector is not None else None
