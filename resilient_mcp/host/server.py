"""The MCP server the host talks to: lists the aggregated catalog, routes every request to its upstream.

Built on the SDK's low-level ``Server``, which does not validate tool arguments (the chain does) and passes results
through. Tool calls go through the compiled chain (``toolcall``: the handler, its fast path and the raw lanes all land
in ``run_tool_call``); resources, prompts, completion, logging and subscriptions are
forwarded with this hop's envelope removed (``_hop``), errors included. For a 2026-07-28 host, tools/call, prompts/get
and resources/read run through ``bridge.py``, which turns what a handshake-era upstream asks into InputRequiredResult
rounds. Capabilities mirror what the upstreams offered at startup.
"""

from __future__ import annotations

import warnings
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

import mcp_types as types
import structlog
from mcp.server import Server
from mcp.server.lowlevel import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import ListenHandler
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .. import __version__
from ..proxy.catalog import MAX_URI_CHARS
from ..proxy.proxy import Ctx, Proxy, output_owner, session_key
from ..tasks.host import TaskEndpoints
from ..tasks.host import principal as task_principal
from ..tasks.manager import Patience, opted_in, required_error
from .toolcall import ToolCallFastPath, hop_meta, host_envelope, run_tool_call

log = structlog.get_logger(__name__)

_P = TypeVar("_P", bound=types.RequestParams)


class ConnectionAdopter(Protocol):
    """What the server tells a lane beside it (the stdio host's raw tools/call lane, ``toolcall``) of a connection
    whose handshake completed: a seam, so this module never imports the lane that builds on it."""

    def adopt(self, ctx: Ctx) -> None: ...


_HOP_FIELDS = frozenset({"input_responses", "request_state"})


def _hop(params: _P) -> _P:
    """``params`` as the proxy sends them upstream: the host's envelope (2026-07-28 ``io.modelcontextprotocol/*``
    keys, progress token) and the host's multi-round-trip fields belong to the host's hop, never the upstream's."""
    meta = hop_meta(params.meta)
    update: dict[str, Any] = {"meta": meta} if meta != params.meta else {}
    update |= {name: None for name in _HOP_FIELDS if getattr(params, name, None) is not None}
    return params.model_copy(update=update) if update else params


_R = TypeVar("_R")


async def _maybe_bridged(
    proxy: Proxy,
    ctx: Ctx,
    params: types.InputResponseRequestParams,
    work: Callable[[], Awaitable[_R]],
    target: str,
    patience: Patience | None = None,
) -> _R | types.InputRequiredResult:
    """``work()`` for a handshake-era host; for a 2026-07-28 host, through its bridge: what the upstream asks the old
    way (sampling, elicitation, roots) comes back as an InputRequiredResult, answered on the host's retry.
    ``patience``: the call becomes a durable task when it runs that long (``task_patience``)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return await work()
    result: _R | types.InputRequiredResult = await proxy.bridges.run(
        ctx,
        params.request_state,
        params.input_responses,
        work,
        origin=f"{session_key(ctx)}|{ctx.method}|{target}",
        patience=patience,
    )
    return result


def task_patience(proxy: Proxy, ctx: Ctx, name: str) -> Patience | None:
    """When a 2026-07-28 host's tools/call becomes a durable task (``resilient_mcp.tasks``); -32021 for a host that did
    not declare the extension calling a tool the policy serves only as a task."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS or not proxy.policy.tasks.enabled:
        return None
    compiled = proxy.routing.chains.get(name)
    if compiled is None:
        return None
    rule = compiled.rule.task
    if not opted_in(ctx.session.client_capabilities, ctx.meta):
        if rule.required:
            raise required_error(name)
        return None
    return proxy.tasks.patience(rule, task_principal(ctx), name)


def _not_found(kind: str, name: str) -> MCPError:
    return MCPError(types.INVALID_PARAMS, f"Unknown {kind}: {name}", {"name": name})


class HostServer:
    """The low-level server for one proxy: one method per request the host may send. Only the handlers some upstream
    supports are registered (``handlers``). ``raw``: the stdio host's raw tools/call lane, told the connection when
    the host has initialized it."""

    def __init__(self, proxy: Proxy, raw: ConnectionAdopter | None = None) -> None:
        self.proxy = proxy
        self.raw = raw

    async def list_tools(self, ctx: Ctx, params: types.PaginatedRequestParams) -> types.ListToolsResult:
        self.proxy.seen(ctx)
        await self.proxy.follow_host(ctx)
        return types.ListToolsResult(tools=self.proxy.routing.visible_tools)

    async def call_tool(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
        async def work() -> types.CallToolResult:
            return await run_tool_call(self.proxy, ctx, params.name, params.arguments, params.meta)

        patience = task_patience(self.proxy, ctx, params.name)
        return await _maybe_bridged(self.proxy, ctx, params, work, params.name, patience)

    async def list_resources(self, ctx: Ctx, params: types.PaginatedRequestParams) -> types.ListResourcesResult:
        self.proxy.seen(ctx)
        cat = self.proxy.routing.catalog
        return types.ListResourcesResult(resources=[r for _, r in cat.resources.values()])

    async def list_templates(self, ctx: Ctx, params: types.PaginatedRequestParams) -> types.ListResourceTemplatesResult:
        self.proxy.seen(ctx)
        own = self.proxy.pipeline.proxy_resource_templates()
        templates = [t for _, t in self.proxy.routing.catalog.templates] + own
        return types.ListResourceTemplatesResult(resource_templates=templates)

    def _owner(self, uri: str) -> str:
        if len(uri) > MAX_URI_CHARS:
            raise MCPError(
                types.INVALID_PARAMS,
                f"Resource URI is {len(uri):,} characters; the proxy reads URIs of at most {MAX_URI_CHARS:,}: "
                "name a shorter URI",
                {"uri_chars": len(uri), "max_uri_chars": MAX_URI_CHARS},
            )
        upstream = self.proxy.routing.catalog.upstream_for_uri(uri)
        if upstream is None:
            if len(self.proxy.upstreams) == 1:
                return next(iter(self.proxy.upstreams))
            raise MCPError(types.INVALID_PARAMS, f"Resource not found: {uri}", {"uri": uri})
        return upstream

    async def read_resource(
        self, ctx: Ctx, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        self.proxy.seen(ctx)
        uri = str(params.uri)
        local = await self.proxy.pipeline.read_proxy_resource(uri, output_owner(ctx.request, session_key(ctx)))
        if local is not None:
            return local
        up = self.proxy.upstreams[self._owner(uri)]

        async def work() -> types.ReadResourceResult:
            host = host_envelope(ctx)
            async with self.proxy.in_flight(up.name, ctx, host):
                request = types.ReadResourceRequest(params=_hop(params))
                return await up.request(request, types.ReadResourceResult, host)

        return await _maybe_bridged(self.proxy, ctx, params, work, uri)

    async def subscribe(self, ctx: Ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
        self.proxy.seen(ctx)
        uri = str(params.uri)
        await self.proxy.subscribe(uri, session_key(ctx), self.proxy.upstreams[self._owner(uri)])
        return types.EmptyResult()

    async def unsubscribe(self, ctx: Ctx, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        self.proxy.seen(ctx)
        uri = str(params.uri)
        await self.proxy.unsubscribe(uri, session_key(ctx), self.proxy.upstreams[self._owner(uri)])
        return types.EmptyResult()

    async def list_prompts(self, ctx: Ctx, params: types.PaginatedRequestParams) -> types.ListPromptsResult:
        self.proxy.seen(ctx)
        return types.ListPromptsResult(prompts=self.proxy.routing.catalog.prompt_list())

    async def get_prompt(
        self, ctx: Ctx, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        self.proxy.seen(ctx)
        entry = self.proxy.routing.catalog.prompts.get(params.name)
        if entry is None:
            raise _not_found("prompt", params.name)
        up = self.proxy.upstreams[entry.upstream]
        forwarded = _hop(params).model_copy(update={"name": entry.name})

        async def work() -> types.GetPromptResult:
            host = host_envelope(ctx)
            async with self.proxy.in_flight(up.name, ctx, host):
                return await up.request(types.GetPromptRequest(params=forwarded), types.GetPromptResult, host)

        return await _maybe_bridged(self.proxy, ctx, params, work, params.name)

    async def complete(self, ctx: Ctx, params: types.CompleteRequestParams) -> types.CompleteResult:
        self.proxy.seen(ctx)
        ref = params.ref
        if isinstance(ref, types.PromptReference):
            entry = self.proxy.routing.catalog.prompts.get(ref.name)
            if entry is None:
                raise _not_found("prompt", ref.name)
            upstream, forwarded = (
                entry.upstream,
                params.model_copy(update={"ref": ref.model_copy(update={"name": entry.name})}),
            )
        else:
            upstream, forwarded = self._owner(ref.uri), params
        up = self.proxy.upstreams[upstream]
        if not up.supports("completions"):
            return types.CompleteResult(completion=types.Completion(values=[]))
        return await up.request(types.CompleteRequest(params=_hop(forwarded)), types.CompleteResult)

    async def set_level(self, ctx: Ctx, params: types.SetLevelRequestParams) -> types.EmptyResult:
        self.proxy.seen(ctx)
        for up in self.proxy.upstreams.values():
            try:
                await up.set_log_level(params.level)
            except Exception as exc:
                log.warning("set_level_failed", upstream=up.name, error=str(exc))
        return types.EmptyResult()

    async def on_initialized(self, ctx: Ctx, params: Any) -> None:
        self.proxy.seen(ctx)
        if self.raw is not None:
            self.raw.adopt(ctx)
        await self.proxy.follow_host(ctx)

    def _any_supports(self, capability: str) -> bool:
        return any(up.supports(capability) for up in self.proxy.upstreams.values()) or not any(
            up.state == "ready" for up in self.proxy.upstreams.values()
        )

    def _input_schema(self, name: str) -> dict[str, Any] | None:
        compiled = self.proxy.routing.chains.get(name)
        return compiled.entry.tool.input_schema if compiled is not None and compiled.entry.tool else None

    def build(self, *, instructions: str | None = None) -> Server[Any]:
        """The SDK server with this object's handlers, the tools/call fast path and the initialized hook."""
        handlers: dict[str, Any] = {"on_list_tools": self.list_tools, "on_call_tool": self.call_tool}
        if self._any_supports("resources") or self.proxy.pipeline.has_proxy_resources():
            handlers |= {
                "on_list_resources": self.list_resources,
                "on_list_resource_templates": self.list_templates,
                "on_read_resource": self.read_resource,
            }
            if any(_subscribable(up.catalog.capabilities) for up in self.proxy.upstreams.values()):
                handlers |= {"on_subscribe_resource": self.subscribe, "on_unsubscribe_resource": self.unsubscribe}
        if self._any_supports("prompts"):
            handlers |= {"on_list_prompts": self.list_prompts, "on_get_prompt": self.get_prompt}
        if self._any_supports("completions"):
            handlers["on_completion"] = self.complete
        if self._any_supports("logging"):
            handlers["on_set_logging_level"] = self.set_level

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            server: Server[Any] = Server(
                "resilient-mcp",
                version=__version__,
                title=_title(self.proxy),
                instructions=instructions,
                get_tool_input_schema=self._input_schema,
                on_subscriptions_listen=ListenHandler(self.proxy.bus),
                **handlers,
            )
        if self.proxy.policy.tasks.enabled:
            TaskEndpoints(self.proxy.tasks).register(server)
        server.middleware.append(ToolCallFastPath(self.proxy))
        server.add_notification_handler("notifications/initialized", types.NotificationParams, self.on_initialized)
        return server


def build_server(proxy: Proxy, *, instructions: str | None = None, raw: ConnectionAdopter | None = None) -> Server[Any]:
    """The low-level server for ``proxy`` (``HostServer(proxy, raw).build()``)."""
    return HostServer(proxy, raw).build(instructions=instructions)


def _subscribable(caps: types.ServerCapabilities | None) -> bool:
    return caps is not None and caps.resources is not None and bool(caps.resources.subscribe)


def _title(proxy: Proxy) -> str:
    names = [
        (up.catalog.server_info.title or up.catalog.server_info.name) if up.catalog.server_info else name
        for name, up in proxy.upstreams.items()
    ]
    return "resilient-mcp: " + (", ".join(names) if names else "no upstreams")


def init_options(server: Server[Any]) -> InitializationOptions:
    return server.create_initialization_options(
        NotificationOptions(tools_changed=True, resources_changed=True, prompts_changed=True)
    )
