"""The chaos MCP server: the order service of ``tools.py`` (or another domain's surface, ``domains/``: files, calendar,
tickets), faulted call by call as a ``FaultPlan`` says.

Every ``tools/call`` is counted by the plan's ``Planner``; the fault it picks is shown the way a real server would
show it (see ``responses.py`` for reported errors, ``mutations.py`` for altered results):

- JSON-RPC errors: ``-32602 Unknown tool`` for names not listed (A1, also after an A2 rename), -32022/-32601/-32021
  (A4), -32600 (B3), -32603 (D1 as jsonrpc); ``isError`` results with or without the typed hint (B*, D*, F1-F3);
- hangs (C3) that commit before, after (shielded from cancellation: a late commit) or never; slow success (D3);
- death mid-call (C2): the process exits (``os._exit``) before or after the commit; in-process, the connection is
  cut the same way (``transports.py``);
- malformed responses (E1): a result of the wrong shape (a server middleware returns it unvalidated), a log line on
  the stdio wire before the response, half a response line, a response with a wrong id;
- results that break the outputSchema (E2), are incomplete (E3), huge (E4), wrong (E5), carry injected instructions
  (F4); tools renamed after a call with or without ``list_changed`` (A2); schema drift (A3).

Arguments are validated against the (current) inputSchema, as servers built on the TS SDK do: an invalid call gets
an ``isError`` "Input validation error" result. Transport faults that need a network (C1, C4, HTTP 429/401/403) come
from ``shim.py``; C1/C5 at spawn from the plan's ``startup``.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import anyio
import jsonschema  # type: ignore[import-untyped]
import mcp_types as types
import structlog
from mcp.server import Server, ServerRequestContext
from mcp.server.lowlevel import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError

from ..faults.error_results import ERROR_META_KEY
from . import mutations as mut
from . import params as pm
from .clock import Clock, RealClock
from .domains import surface
from .ledger import Ledger
from .params import ErrorParams, HangParams, InjectionParams, MalformedParams
from .plan import Decision, FaultPlan, Planner
from .responses import realize_error, reported_as
from .tools import ToolError

log = structlog.get_logger(__name__)
Ctx = ServerRequestContext[Any, Any]

SERVER_SIDE_UNSUPPORTED = {
    "C1": "startup.fail_spawns or the shim",
    "C4": "the shim (resilient_mcp.chaos.shim)",
    "C5": "startup.fail_spawns: always or the shim",
}
_ERRORS = ("A1", "A4", "B1", "B2", "B3", "B4", "D1", "D2", "D4", "D5", "F1", "F2", "F3")


class Link(Protocol):
    """What a handler may do to the connection it serves: die, and write raw lines on the wire."""

    async def die(self, exit_code: int) -> None: ...

    async def pollute(self, line: str) -> bool:
        """Write ``line`` on the wire as is; False when this transport has no such wire (HTTP)."""
        ...


class _NoLink:
    async def die(self, exit_code: int) -> None:
        raise RuntimeError("this chaos server is not being served: nothing to kill")

    async def pollute(self, line: str) -> bool:
        return False


class _RawResult(Exception):
    def __init__(self, payload: dict[str, Any]) -> None:
        self.payload = payload


class _RawResults:
    """Server middleware: a handler raising ``_RawResult`` has its payload sent as the result, unvalidated."""

    async def __call__(self, ctx: Ctx, call_next: Any) -> Any:
        try:
            return await call_next(ctx)
        except _RawResult as raw:
            return raw.payload


def check_plan(plan: FaultPlan) -> list[str]:
    """Why the server cannot inject some rules of ``plan`` (empty: it can inject them all)."""
    problems = []
    for i, rule in enumerate(plan.rules):
        where = SERVER_SIDE_UNSUPPORTED.get(rule.fault[:2])
        if where is not None:
            problems.append(f"rules[{i}]: {rule.fault} is not injected by the server; use {where}")
        elif isinstance(p := rule.parsed, ErrorParams) and p.as_ == "http":
            problems.append(f"rules[{i}]: as: http needs HTTP; the shim or the proxy's chaos mode injects it")
    return problems


class ChaosServer:
    """One chaos server: its plan, ledger, clock and (mutable) tool list; ``server`` is the MCP server to run."""

    def __init__(
        self,
        plan: FaultPlan | None = None,
        *,
        ledger: Ledger | None = None,
        clock: Clock | None = None,
        name: str | None = None,
        domain: str = "orders",
    ) -> None:
        self.plan = plan or FaultPlan()
        problems = check_plan(self.plan)
        if problems:
            raise ValueError("; ".join(problems))
        self.surface = surface(domain)
        """The tools served: ``orders`` (default), ``files``, ``calendar`` or ``tickets``."""
        self.name = name or f"chaos-{domain}"
        self.planner = Planner(self.plan)
        self.ledger = ledger or Ledger()
        self.surface.prepare(self.ledger)
        self.clock = clock or RealClock()
        self.tools = self.surface.tools()
        self.renamed: dict[str, str] = {}
        """New tool name -> the tool it runs (A2 renames)."""
        self.link: Link = _NoLink()
        """The connection being served (set by ``transports.py``; in-process, the latest one)."""
        self.bus = InMemorySubscriptionBus()
        self.server: Server[Any] = Server(
            self.name,
            version="1.0",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=ListenHandler(self.bus),
        )
        self.server.middleware.append(_RawResults())

    def init_options(self) -> InitializationOptions:
        return self.server.create_initialization_options(NotificationOptions(tools_changed=True))

    def tool(self, name: str) -> types.Tool | None:
        return next((t for t in self.tools if t.name == name), None)

    async def _list_tools(self, ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self.tools)

    async def _tools_changed(self, ctx: Ctx, notify: bool) -> None:
        if notify:
            await ctx.session.send_tool_list_changed()
            await self.bus.publish(ToolsListChanged())

    # --- a call -----------------------------------------------------------------------------------------------------

    async def _call_tool(self, ctx: Ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        name, args = params.name, dict(params.arguments or {})
        decision = self.planner.decide(name, args)
        if decision is not None:
            log.info("chaos_fault", tool=name, fault=decision.fault, rule=decision.rule, call=decision.call)
            await self._before(ctx, decision, name)
        tool = self.tool(name)
        if tool is None:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {name}")
        problem = _invalid(tool, args)
        if problem is not None:
            if decision is not None and decision.fault[:2] == "A3" and getattr(decision.params, "as_", "") == "jsonrpc":
                raise MCPError(types.INVALID_PARAMS, f"Invalid arguments for tool {name}: {problem}")
            return types.CallToolResult(
                content=[types.TextContent(text=f"Input validation error: {problem}")], is_error=True
            )
        if decision is None or decision.fault[:2] == "A3":
            return self.run(name, args)
        return await self._inject(ctx, decision, name, args)

    async def _before(self, ctx: Ctx, decision: Decision, name: str) -> None:
        """Faults that change the tool list before the call is looked up (A3, F4 in a description)."""
        p = decision.params
        if isinstance(p, pm.DriftParams):
            self.tools = mut.drift(self.tools, name, p)
            await self._tools_changed(ctx, p.notify)
        elif isinstance(p, InjectionParams) and p.in_ == "description":
            self.tools = mut.inject_description(self.tools, name, p)
            await self._tools_changed(ctx, True)

    def run(self, name: str, args: dict[str, Any]) -> types.CallToolResult:
        """The tool's honest outcome (its effect happens here); business failures as typed ``isError`` results."""
        try:
            return self.surface.execute(self.renamed.get(name, name), args, self.ledger)
        except ToolError as exc:
            hint = {
                "type": exc.type,
                "retryable": exc.retryable,
                **({"field": exc.field} if exc.field else {}),
                **exc.extra,
            }
            return types.CallToolResult(
                content=[types.TextContent(text=exc.message)], is_error=True, _meta={ERROR_META_KEY: hint}
            )

    async def _inject(self, ctx: Ctx, d: Decision, name: str, args: dict[str, Any]) -> types.CallToolResult:
        kind, p = d.fault[:2], d.params
        if kind in _ERRORS:
            assert isinstance(p, ErrorParams)
            if reported_as(d.fault, p) == "jsonrpc" and kind == "A1":
                raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {name}")
            return realize_error(d.fault, p, name)
        if isinstance(p, pm.RenameParams):  # A2: this call works; the tool is gone afterwards
            result = self.run(name, args)
            self.tools = mut.rename(self.tools, name, p)
            if not p.remove:
                target = p.tool or name
                self.renamed[p.to or f"{target}_v2"] = self.renamed.get(target, target)
            await self._tools_changed(ctx, p.notify)
            return result
        if isinstance(p, pm.DieParams):
            if p.commit == "before":
                self.run(name, args)
            await self.link.die(p.exit_code)
            raise AssertionError("unreachable: the link died")  # pragma: no cover
        if isinstance(p, HangParams):
            return await self._hang(name, args, p)
        if isinstance(p, pm.SlowParams):
            await self.clock.sleep(p.delay_ms / 1000)
            return self.run(name, args)
        if isinstance(p, MalformedParams):
            return await self._malformed(ctx, name, args, p)
        return self._altered(name, args, p)

    def _altered(self, name: str, args: dict[str, Any], p: Any) -> types.CallToolResult:
        if isinstance(p, pm.CorruptionParams) and p.variant == "noop":
            return mut.noop_success()
        return mut.alter(self.run(name, args), p, self.tool(name))

    async def _hang(self, name: str, args: dict[str, Any], p: HangParams) -> types.CallToolResult:
        seconds = math.inf if p.hang_ms is None else p.hang_ms / 1000
        if p.commit == "after_hang":
            with anyio.CancelScope(shield=True):  # cancellation is best-effort: the work finishes anyway
                await self.clock.sleep(seconds)
                return self.run(name, args)
        result = self.run(name, args) if p.commit == "before_hang" else None
        await self.clock.sleep(seconds)
        if result is not None:
            return result
        hint = {"type": "deadline_exceeded", "retryable": False}
        return types.CallToolResult(
            content=[types.TextContent(text="The operation did not complete in time")],
            is_error=True,
            _meta={ERROR_META_KEY: hint},
        )

    async def _malformed(self, ctx: Ctx, name: str, args: dict[str, Any], p: MalformedParams) -> types.CallToolResult:
        result = self.run(name, args) if p.commit else types.CallToolResult(content=[])
        link = self.link
        if p.variant == "log_line":
            line = p.text or f"INFO {self.name}: handling {name} (a log line printed to stdout by mistake)"
            if await link.pollute(line):
                return result
        elif p.variant in ("truncated", "wrong_id"):
            rid = ctx.request_id if p.variant == "truncated" else f"chaos-{ctx.request_id}-other"
            body = result.model_dump(mode="json", by_alias=True, exclude_none=True)
            frame = types.JSONRPCResponse(jsonrpc="2.0", id=rid, result=body).model_dump_json(by_alias=True)
            if await link.pollute(frame[: len(frame) // 2] if p.variant == "truncated" else frame):
                await anyio.sleep_forever()  # the real response never comes; the caller's timeout ends this
        raise _RawResult({"content": "this should have been a list", "isError": "maybe"})


def _invalid(tool: types.Tool, args: dict[str, Any]) -> str | None:
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(tool.input_schema).iter_errors(args))
    if error is None:
        return None
    where = "/".join(map(str, error.absolute_path))
    return f"{where}: {error.message}" if where else error.message
