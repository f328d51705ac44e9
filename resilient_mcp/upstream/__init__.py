"""One supervised client connection per upstream MCP server: the only module that speaks the SDK's client side.

``Upstream.run`` is the owner task: it opens the transport (stdio | streamable HTTP | SSE) and the ``ClientSession``,
performs the handshake, lists every page of the upstream's catalog, and then waits until the connection dies or a
restart is asked for; it then closes both *in the same task that opened them* (anyio cancel scopes demand it) and
starts again with exponential backoff. A stdio process that exits is noticed at once, not on the next call, by
watching the end of its read stream.

Calls go through ``call_tool`` with ``send_request`` (never ``ClientSession.call_tool``, which validates output and
lists tools behind our back). Every SDK or transport exception is mapped here, via ``classify``, to a ``Fault``.
Upstream notifications and server→client requests are handed to ``UpstreamHooks`` (implemented by the server).
"""

from __future__ import annotations

import json
import math
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar, cast
from urllib.parse import urlsplit

import anyio
import httpx2
import mcp_types as types
import structlog
from mcp import ClientSession, StdioServerParameters
from mcp.client._probe import negotiate_auto
from mcp.client.session import ClientRequestContext
from mcp.client.sse import sse_client
from mcp.client.stdio import get_default_environment, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ToolsListChanged,
    listen,
)
from mcp.shared.exceptions import MCPError
from mcp_types import CLIENT_CAPABILITIES_META_KEY, LOG_LEVEL_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, TypeAdapter

from .. import __version__
from ..adapters.sdk import after_envelope_stamp
from ..call.hostcontext import CURRENT_HOST, timing
from ..call.meta import ATTEMPT_META, OVERSIZED_META
from ..call.upstream_error import note_upstream_error
from ..faults import (
    AttemptTimeout,
    ConnectFailure,
    Fault,
    OversizedResult,
    PersistentOutage,
    ProtocolMismatch,
    RetrySafety,
    SideEffectStatus,
)
from ..faults.classify import classify_exception, classify_http_status
from ..policy.config import RemoteUpstream, StdioUpstream, stdio_environment
from .http_cap import SDK_SSE_EVENT_LIMIT, CappedTransport, capped_client_factory
from .startup import STOP_AFTER, StartFailure, StderrTail, classify_start_failure
from .stdio import stdio_upstream

log = structlog.get_logger(__name__)

R = TypeVar("R", bound=BaseModel)
ProgressFn = Callable[[float, float | None, str | None], Awaitable[None]]
TransportFactory = Callable[[], AbstractAsyncContextManager[Any]]
"""Opens a connection and yields ``(read, write)``: how tests put an in-process server behind an upstream."""
State = Literal["starting", "ready", "down", "failed", "stopped"]

CLIENT_INFO = types.Implementation(name="resilient-mcp", version=__version__)

HOST_CAPABILITIES = ("sampling", "elicitation", "roots")
"""The client capabilities the proxy can only serve by asking a host: declared upstream when the host has them."""


MAX_INPUT_ROUNDS = 16
"""How many input-required rounds (2026-07-28) one request to a modern upstream may take before it is given up."""

_WITH_INPUT: dict[type[BaseModel], TypeAdapter[Any]] = {
    types.CallToolResult: TypeAdapter(types.CallToolResult | types.InputRequiredResult),
    types.GetPromptResult: TypeAdapter(types.GetPromptResult | types.InputRequiredResult),
    types.ReadResourceResult: TypeAdapter(types.ReadResourceResult | types.InputRequiredResult),
}
"""Results a 2026-07-28 upstream may answer with an ``InputRequiredResult`` instead (SEP-2322)."""


def host_capability_names(caps: types.ClientCapabilities | None) -> frozenset[str]:
    """Which of ``HOST_CAPABILITIES`` a host declared (``None``: nothing known, so nothing declared)."""
    if caps is None:
        return frozenset()
    return frozenset(name for name in HOST_CAPABILITIES if getattr(caps, name, None) is not None)


@dataclass(slots=True)
class UpstreamCatalog:
    """What one upstream offers, all pages read."""

    tools: list[types.Tool] = field(default_factory=list)
    resources: list[types.Resource] = field(default_factory=list)
    resource_templates: list[types.ResourceTemplate] = field(default_factory=list)
    prompts: list[types.Prompt] = field(default_factory=list)
    capabilities: types.ServerCapabilities | None = None
    server_info: types.Implementation | None = None
    instructions: str | None = None
    protocol_version: str | None = None
    unlisted: dict[str, str] = field(default_factory=dict)
    """List methods the upstream declared and failed to answer at connect time (method -> code and message): served
    as empty lists."""


class UpstreamHooks(Protocol):
    """What an upstream hands to the proxy's server side."""

    async def catalog_changed(self, upstream: Upstream) -> None: ...

    async def upstream_log(self, upstream: Upstream, params: types.LoggingMessageNotificationParams) -> None: ...

    async def resource_updated(self, upstream: Upstream, uri: str) -> None: ...

    async def server_request(
        self, upstream: Upstream, request: types.ServerRequest, key: str | None = None
    ) -> BaseModel | types.ErrorData:
        """Relay a sampling / elicitation / roots request to the host whose call caused it. ``key`` is the name a
        2026-07-28 upstream gave the request in its ``InputRequiredResult`` (kept toward a 2026-07-28 host)."""
        ...


class _WatchedRead:
    """Delegates to a transport's read stream and reports its end: how a dead stdio process is noticed at once."""

    def __init__(self, inner: Any, on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end = on_end

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _WatchedRead:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._inner.__anext__()
        except StopAsyncIteration:
            self._on_end()
            raise

    async def __aenter__(self) -> _WatchedRead:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        result: bool | None = await self._inner.__aexit__(*exc)
        return result

    def __getattr__(self, name: str) -> Any:  # last_context and friends
        return getattr(self._inner, name)


class Upstream:
    """A supervised connection to one upstream server."""

    def __init__(
        self,
        name: str,
        config: StdioUpstream | RemoteUpstream,
        hooks: UpstreamHooks,
        *,
        backoff_initial_s: float = 0.25,
        backoff_max_s: float = 30.0,
        transport: TransportFactory | None = None,
        twin_of: Upstream | None = None,
    ) -> None:
        self.name = name
        self._transport_override = transport
        self.config = config
        self.hooks = hooks
        self.catalog = UpstreamCatalog()
        self.state: State = "starting"
        self.last_error: str | None = None
        self.start_failures = 0
        self.restarts = 0
        """Times a ready connection ended (the process exited, the session was lost, a restart was asked for)."""
        self.on_state: Callable[[Upstream], None] | None = None
        """Told of every state change (the ops recorders: status page, metrics); must not block or raise."""
        self._session: ClientSession | None = None
        self._changed = anyio.Event()
        self._restart = anyio.Event()
        self._ended = anyio.Event()
        self._backoff_initial_s = backoff_initial_s
        self._backoff_max_s = backoff_max_s
        self._log_level: types.LoggingLevel | None = None
        self._subscriptions: set[str] = set()
        self.refused_tools: list[str] = []
        """Why tools this upstream lists are not routed to it (another upstream's prefix), from the last catalog
        build; shown on the status page."""
        self._relisting: set[str] = set()
        """The kinds (tools, resources, prompts) being re-listed now after a ``list_changed``."""
        self._relist_pending: set[str] = set()
        """The kinds with a ``list_changed`` received during their re-list: one more re-list follows it."""
        self._http_statuses = _HttpStatuses()
        self.twin_of = twin_of
        """Set on the 2026-07-28 connection an ``auto`` upstream opens for 2026-07-28 hosts: the upstream it serves."""
        self._twin: Upstream | None = None
        self._twins: anyio.abc.TaskGroup | None = None
        self.modern = False
        """This connection speaks 2026-07-28: a twin's, or the one connection of a single 2026-07-28 host
        (``host_speaks_2026``) to a server that speaks that era."""
        self.host_speaks_2026 = False
        """Single stdio host whose opening request was in the 2026-07-28 era (set before ``run``): with ``protocol:
        auto`` this connection is negotiated as that host would connect directly (``server/discover`` first, then
        ``initialize`` for a server that does not answer it), so the host meets the server in its own era over one
        process, never a second one."""
        self.handshake_only = False
        """A twin found that the server does not speak 2026-07-28: the handshake connection serves every host."""
        self.start_failure: StartFailure | None = None
        # Once it has served, a restart that ends without words is a crash to retry, not a configuration to fix.
        self._served_before = False
        """Why the last start failed (``None`` once connected): classified, with the server's words."""
        self.given_up = False
        """Not restarted any more: its starts failed permanently ``STOP_AFTER`` times in a row."""
        self._connecting = True
        self._tail = StderrTail() if isinstance(config, StdioUpstream) else None
        self.declared: frozenset[str] = frozenset(HOST_CAPABILITIES)
        """The host capabilities declared to this upstream: all of them while several hosts may be served (each
        request is then checked against the calling host), exactly the host's own with a single stdio host."""

    # --- supervision ------------------------------------------------------------------------------------------------

    def _set_state(self, state: State, error: str | None = None) -> None:
        self.state = state
        if error is not None:
            self.last_error = error
        self._changed.set()
        self._changed = anyio.Event()
        if self.on_state is not None:
            try:
                self.on_state(self)
            except Exception:
                log.exception("upstream_state_hook_failed", upstream=self.name)

    async def run(self) -> None:
        """The owner task (of this connection and, for ``protocol: auto``, of its 2026-07-28 twin). Runs until
        cancelled; never raises for an upstream's failure."""
        async with anyio.create_task_group() as twins:
            self._twins = twins
            try:
                await self._supervise()
            finally:
                twins.cancel_scope.cancel()

    async def _supervise(self) -> None:
        backoff = self._backoff_initial_s
        log.info("upstream_starting", upstream=self.name, transport=self._describe(), era=self._era())
        permanent_in_row = 0
        try:
            while True:
                try:
                    await self._connect_and_serve()
                    backoff = self._backoff_initial_s
                    permanent_in_row = 0
                    if self.handshake_only:
                        log.info("upstream_speaks_handshake_era_only", upstream=self.name)
                        return
                except Exception as exc:
                    if not self._connecting:  # the connection was up: not a start-up failure
                        self._set_state("down", _reason(exc))
                        log.warning("upstream_connection_failed", upstream=self.name, error=_reason(exc))
                    else:
                        failure = self.start_failure = classify_start_failure(
                            exc, self._tail, served_before=self._served_before
                        )
                        first = self.state == "starting" or self.start_failures == 0
                        self.start_failures += 1
                        permanent_in_row = permanent_in_row + 1 if failure.permanent else 0
                        reason = failure.summary()
                        given_up = permanent_in_row >= STOP_AFTER
                        # A permanent failure is reported at once (the host's first answer says it), then
                        # retried a few times with backoff, then the upstream is left stopped (and says why).
                        failed = failure.permanent or self.start_failures >= 2
                        self._set_state("failed" if failed else "down", reason)
                        log.warning(
                            "upstream_start_failed" if first else "upstream_connect_failed",
                            upstream=self.name,
                            error=reason,
                            fault=failure.fault_type,
                            permanent=failure.permanent,
                            retry_in_s=None if given_up else round(backoff, 2),
                            failures=self.start_failures,
                        )
                        if given_up:
                            self.given_up = True
                            self.last_error = f"not restarted after {permanent_in_row} failed starts: {reason}"
                            log.error(
                                "upstream_not_restarted",
                                upstream=self.name,
                                fault=failure.fault_type,
                                error=reason,
                                hint="fix the server's configuration (credentials, arguments, paths), then restart "
                                "the proxy; `resilient-mcp check --connect` shows the same",
                            )
                            return
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, self._backoff_max_s)
        finally:
            self._session = None
            self._set_state("stopped")

    async def _connect_and_serve(self) -> None:
        self._ended = anyio.Event()
        self._restart = anyio.Event()
        self._connecting = True
        if self._tail is not None:
            self._tail.clear()
        if self.start_failure is None or not self.start_failure.permanent:
            self._set_state("starting")  # (after a permanent failure it stays "failed": calls are answered at once)
        async with AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(self._transport())
            watched = _WatchedRead(read, self._ended.set)
            session = await stack.enter_async_context(
                ClientSession(
                    watched,
                    write,
                    # A capability is declared by handing the SDK its callback: only those the hosts can serve.
                    sampling_callback=self._on_sampling if "sampling" in self.declared else None,
                    elicitation_callback=self._on_elicitation if "elicitation" in self.declared else None,
                    list_roots_callback=self._on_list_roots if "roots" in self.declared else None,
                    logging_callback=self._on_log,
                    message_handler=self._on_message,
                    client_info=CLIENT_INFO,
                )
            )
            self.modern = False
            with anyio.fail_after(self.config.connect_timeout_s):
                if self.twin_of is None and not self._follows_2026_host():
                    await session.initialize()
                else:
                    # The twin, or a single 2026-07-28 host's one connection: server/discover first; a server that
                    # answers it (2026-07-28) is spoken to in that era. Anything else (-32601 from TypeScript
                    # servers, a handshake-only answer) falls back to initialize: then a twin is not needed (the
                    # handshake-era connection serves every host), and a single host's connection stays up in
                    # the handshake era, the host's requests bridged.
                    await negotiate_auto(session)
                    if session.protocol_version in MODERN_PROTOCOL_VERSIONS:
                        self.modern = True
                        _stamp_host_envelope(session)
                    elif self.twin_of is not None:
                        self.handshake_only = True
                        return
                if self.twin_of is None:
                    self.catalog = await self._list_all(session)
                    await self._restore_session_state(session)
                else:  # the catalog, list changes, subscriptions and log level are the handshake connection's
                    self.catalog = UpstreamCatalog(
                        capabilities=session.server_capabilities,
                        server_info=session.server_info,
                        protocol_version=session.protocol_version,
                    )
            self._session = session
            self._served_before = True
            self.start_failures = 0
            self.start_failure = None
            self._connecting = False
            self._set_state("ready")
            info = self.catalog.server_info
            log.info(
                "upstream_ready",
                upstream=self.name,
                tools=len(self.catalog.tools),
                server=info.name if info else None,
                protocol=session.protocol_version,
                era=self._era(),
            )
            if self.twin_of is None:
                await self.hooks.catalog_changed(self)
            async with anyio.create_task_group() as tg:

                async def until(ev: anyio.Event) -> None:
                    await ev.wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(until, self._ended)
                tg.start_soon(until, self._restart)
                if self.modern and self.twin_of is None:
                    tg.start_soon(self._listen, session)
            self._session = None
            self.restarts += 1
            died = self._ended.is_set()
            self._set_state("down", "the upstream process exited" if died else "restart requested")
            log.warning("upstream_died" if died else "upstream_restarting", upstream=self.name)

    @property
    def twin(self) -> Upstream | None:
        """``protocol: auto``: the 2026-07-28 connection opened for 2026-07-28 hosts (``for_host``), or ``None`` while
        no such host has asked (handshake-era hosts never open it)."""
        return self._twin

    def _follows_2026_host(self) -> bool:
        return self.host_speaks_2026 and self.config.protocol == "auto"

    def _era(self) -> str:
        if self.twin_of is not None:
            return "2026-07-28, for 2026-07-28 hosts"
        if self._follows_2026_host():
            return "the host's (2026-07-28 when the server speaks it), one connection"
        return "handshake" + (", 2026-07-28 hosts get their own connection" if self.config.protocol == "auto" else "")

    async def for_host(self) -> Upstream:
        """The connection that serves the current host request (``CURRENT_HOST``) in the host's own era.

        ``protocol: auto``: a 2026-07-28 host is served over a second connection in that era (opened at its first
        request, waited for up to ``connect_timeout_s``), when the server speaks it; everything else, and every
        host when the server does not, is served over the handshake-era connection. Each host thus meets the
        server as it would directly: a tool that asks the handshake way (a request mid-call) works for a
        handshake-era host, one that answers ``InputRequiredResult`` reaches a 2026-07-28 host with its own keys."""
        host = CURRENT_HOST.get()
        if host is None or not host.modern or self.twin_of is not None or self.config.protocol != "auto":
            return self
        if self.modern or self._follows_2026_host():  # this connection is already in the host's era, or is its one
            return self
        twin = self._twin
        if twin is None:
            if self._twins is None:
                return self
            twin = self._twin = Upstream(
                self.name,
                self.config,
                self.hooks,
                backoff_initial_s=self._backoff_initial_s,
                backoff_max_s=self._backoff_max_s,
                transport=self._transport_override,
                twin_of=self,
            )
            self._twins.start_soon(twin.run, name=f"upstream:{self.name}:2026-07-28")
        if twin.state != "ready":
            with anyio.move_on_after(self.config.connect_timeout_s):
                while twin.state not in ("ready", "failed", "stopped"):
                    await twin._changed.wait()
        return twin if twin.state == "ready" and twin.modern else self

    @asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[Any, Any]]:
        cfg = self.config
        if self._transport_override is not None:
            async with self._transport_override() as streams:
                yield streams[0], streams[1]
        elif isinstance(cfg, StdioUpstream):
            if sys.platform == "win32":  # Job Objects: the SDK's transport
                params = StdioServerParameters(
                    command=cfg.command, args=list(cfg.args), env=stdio_environment(cfg), cwd=cfg.cwd
                )
                async with stdio_client(params, errlog=sys.stderr) as streams:
                    yield streams
            else:  # linear-time reader, size guard, process-group teardown (stdio_upstream)
                env = get_default_environment() | stdio_environment(cfg)
                async with stdio_upstream(
                    cfg.command, list(cfg.args), env, cfg.cwd, max_message_bytes=cfg.max_message_bytes, tail=self._tail
                ) as streams:
                    yield streams
        elif cfg.transport == "sse":  # the SDK's 1 MiB event limit is fixed there: events are capped below it
            limit = min(cfg.max_message_bytes, SDK_SSE_EVENT_LIMIT)
            factory = capped_client_factory(limit, self.name)
            async with sse_client(cfg.url, headers=dict(cfg.headers) or None, httpx_client_factory=factory) as streams:
                yield streams
        else:
            timeout = httpx2.Timeout(cfg.connect_timeout_s, read=None)
            hooks = {"response": [self._http_statuses.observe]}
            capped = CappedTransport(cfg.max_message_bytes, self.name)  # bodies and events: max_message_bytes
            async with (
                httpx2.AsyncClient(
                    headers=dict(cfg.headers), timeout=timeout, event_hooks=hooks, transport=capped
                ) as http,
                streamable_http_client(cfg.url, http_client=http, max_sse_event_size=None) as streams,
            ):
                yield streams[0], streams[1]

    def _describe(self) -> str:
        cfg = self.config
        if isinstance(cfg, StdioUpstream):
            return f"stdio: {cfg.command}"
        parts = urlsplit(cfg.url)  # no user-info or query in logs: they may hold credentials
        return f"{cfg.transport}: {parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}{parts.path}"

    async def _list_all(self, session: ClientSession) -> UpstreamCatalog:
        caps = session.server_capabilities or types.ServerCapabilities()
        cat = UpstreamCatalog(
            capabilities=caps,
            server_info=session.server_info,
            instructions=session.instructions,
            protocol_version=session.protocol_version,
        )
        lists: list[tuple[str, Any, Any, str]] = []
        if caps.tools is not None:
            lists.append(("tools", types.ListToolsRequest, types.ListToolsResult, "tools"))
        if caps.resources is not None:
            lists.append(("resources", types.ListResourcesRequest, types.ListResourcesResult, "resources"))
            lists.append(
                (
                    "resource_templates",
                    types.ListResourceTemplatesRequest,
                    types.ListResourceTemplatesResult,
                    "resource_templates",
                )
            )
        if caps.prompts is not None:
            lists.append(("prompts", types.ListPromptsRequest, types.ListPromptsResult, "prompts"))
        for field_name, request_type, result_type, attr in lists:
            try:
                items = await _pages(session, request_type, result_type, attr)
            except MCPError as exc:
                # A capability declared but not implemented (-32601), or a list that fails while the rest works,
                # costs that list only: the tools stay usable, as they are for a client that never asks for it. The
                # tools' own list is the reason to connect: only "not implemented" is tolerated there.
                if field_name == "tools" and exc.code != types.METHOD_NOT_FOUND:
                    raise
                method = request_type.model_fields["method"].default
                cat.unlisted[method] = f"{exc.code}: {_cut(exc.message, 200)}"
                log.warning(
                    "upstream_list_failed",
                    upstream=self.name,
                    method=method,
                    code=exc.code,
                    error=_cut(exc.message, 200),
                    hint="served without it; the other lists and the tools are unaffected",
                )
                continue
            setattr(cat, field_name, items)
        return cat

    async def _restore_session_state(self, session: ClientSession) -> None:
        """After a restart, re-apply what hosts asked of the previous process (log level, subscriptions). A
        2026-07-28 connection has neither (the log level travels with each request; updates come over
        ``subscriptions/listen``)."""
        if self.modern:
            return
        if self._log_level is not None and self.supports("logging"):
            await _quietly(session.send_request(_set_level(self._log_level), types.EmptyResult))
        for uri in list(self._subscriptions):
            req = types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
            await _quietly(session.send_request(req, types.EmptyResult))

    async def declare(self, capabilities: frozenset[str], timeout_s: float) -> None:
        """Connect again declaring exactly ``capabilities`` (the host's), so the upstream lists and offers what
        that host can serve; waits up to ``timeout_s`` for the new connection. No-op when they are unchanged."""
        if capabilities == self.declared:
            return
        log.info("upstream_capabilities_follow_host", upstream=self.name, declared=sorted(capabilities))
        self.declared = capabilities
        if self.state in ("failed", "stopped"):
            return
        self.request_restart()
        with anyio.move_on_after(timeout_s):
            while self.state != "ready" and self.state not in ("failed", "stopped"):
                await self._changed.wait()

    def request_restart(self) -> None:
        """Close the connection and open a new one (the owner task does it). Calls wait for the new one."""
        self._session = None
        self._set_state("down", "restart requested")
        self._restart.set()

    # --- calls ------------------------------------------------------------------------------------------------------

    async def wait_ready(self, timeout_s: float) -> ClientSession:
        """The live session, waiting up to ``timeout_s`` for a (re)start. Raises a fault when there is none."""
        if self.state == "ready" and self._session is not None and not self._ended.is_set():
            return self._session  # the hot path: no cancel scope, no timer
        with anyio.move_on_after(timeout_s):
            while True:
                if self.state == "ready" and self._session is not None and not self._ended.is_set():
                    return self._session
                if self.state in ("failed", "stopped"):
                    break
                await self._changed.wait()
        failure = self.start_failure
        if self.state in ("failed", "stopped") and failure is not None and failure.permanent:
            raise failure.fault(self.name, stopped=self.given_up)  # what it is (F1, D4...), in the server's words
        details: dict[str, Any] = {"upstream": self.name, "state": self.state, "last_error": self.last_error}
        if self.state in ("failed", "stopped"):
            reason = self.last_error or self.state
            raise PersistentOutage.of("unavailable", upstream=self.name, reason=reason, details=details)
        if self.last_error:
            raise ConnectFailure.of(
                "not_connected_error", upstream=self.name, state=self.state, error=self.last_error, details=details
            )
        raise ConnectFailure.of("not_connected", upstream=self.name, state=self.state, details=details)

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        meta: dict[str, Any] | None = None,
        *,
        timeout_s: float | None = None,
        on_progress: ProgressFn | None = None,
        progress_extends: bool = True,
    ) -> types.CallToolResult:
        """One attempt of a tool call. Returns the upstream's result (``isError`` ones too); raises ``Fault``.

        ``timeout_s`` bounds the attempt; progress from the upstream restarts it (when ``progress_extends``); the
        call's total time is the retry stage's scope around it. On timeout the SDK sends the upstream a
        cancellation, because the request is abandoned by cancellation of its scope."""
        target = await self.for_host()
        if target is not self:
            return await target.call_tool(
                name,
                arguments,
                meta,
                timeout_s=timeout_s,
                on_progress=on_progress,
                progress_extends=progress_extends,
            )
        session = await self.wait_ready(min(timeout_s or self.config.connect_timeout_s, self.config.connect_timeout_s))
        attempt_id: str | None = None
        if isinstance(self.config, RemoteUpstream) and self.config.transport == "streamable-http":
            # Tags the POST, so an HTTP error status (which the SDK reduces to -32603) can be read back.
            attempt_id = uuid.uuid4().hex
            meta = {**(meta or {}), ATTEMPT_META: attempt_id}
        params = types.CallToolRequestParams(name=name, arguments=arguments, _meta=meta or None)
        request = types.CallToolRequest(params=params)
        now = anyio.current_time()
        limit = now + timeout_s if timeout_s else math.inf

        # Registered with the host request's timers: stopped while the upstream waits for the host to answer.
        with anyio.CancelScope(deadline=limit) as scope, timing(scope):

            async def progress(progress: float, total: float | None, message: str | None) -> None:
                if progress_extends and timeout_s:
                    scope.deadline = max(scope.deadline, anyio.current_time() + timeout_s)
                if on_progress is not None:
                    await on_progress(progress, total, message)

            try:
                if self.modern:
                    result: types.CallToolResult = await self._with_input(session, request, progress)
                    note_upstream_error(None)
                    return result
                answer = await session.send_request(request, types.CallToolResult, progress_callback=progress)
                note_upstream_error(None)
                return answer
            except Fault:
                raise
            except Exception as exc:
                if isinstance(exc, MCPError):
                    note_upstream_error(exc.error)
                    if (oversized := _oversized(exc)) is not None:
                        raise oversized from None
                    self._restart_if_session_gone(exc)
                http = self._http_statuses.pop(attempt_id) if attempt_id else None
                if isinstance(exc, MCPError) and exc.code == MISSING_CAPABILITY:
                    http = None  # 2026-07-28 sends -32021 with HTTP 400: the JSON-RPC error says what it is
                fault = classify_http_status(*http) if http else classify_exception(exc, sent=True)
                if self._ended.is_set() and fault.retry_safety is RetrySafety.MAYBE_EXECUTED:
                    died = Fault.text("died_during_call", upstream=self.name, original=fault.message)
                    fault = fault.replace(message=died).with_details(keep=True, upstream_state="died")
                raise fault from exc
        elapsed = anyio.current_time() - now
        raise AttemptTimeout.of(
            "no_answer_within",
            upstream=self.name,
            method=name,
            elapsed_s=elapsed,
            details={"timeout_ms": int(elapsed * 1000), "upstream": self.name},
        )

    async def request(self, request: Any, result_type: type[R]) -> R:
        """Forward a non-tool request (resources, prompts, completion). SDK errors pass through as ``MCPError``;
        an upstream that does not answer within ``connect_timeout_s`` gets -32001 like any timed-out request."""
        if result_type in _WITH_INPUT and (target := await self.for_host()) is not self:
            return await target.request(request, result_type)
        session = await self.wait_ready(self.config.connect_timeout_s)
        try:
            if self.modern and result_type in _WITH_INPUT:
                result: R = await self._with_input(session, request, None)
                return result
            return await session.send_request(request, result_type, self.config.connect_timeout_s)
        except MCPError as exc:
            self._restart_if_session_gone(exc)
            raise

    async def _with_input(self, session: ClientSession, request: Any, progress: ProgressFn | None) -> Any:
        """A 2026-07-28 request that the upstream may answer with ``InputRequiredResult`` (SEP-2322): what it asks
        (sampling, elicitation, roots) goes to the host whose request this is, under the upstream's own keys, and
        the request is sent again with the answers and the upstream's ``requestState``, until it completes.

        Waiting for the host is not upstream time (the call's timers stop, see ``hostcontext``); nothing runs on
        the upstream meanwhile. A question the host cannot answer ends the request: -32021 for a capability it did
        not declare, as the upstream would have answered it directly."""
        adapter = _WITH_INPUT[_RESULT_OF_REQUEST[type(request)]]
        params = request.params
        timeout = None if isinstance(request, types.CallToolRequest) else self.config.connect_timeout_s
        for _ in range(MAX_INPUT_ROUNDS + 1):
            sent = type(request)(params=params)
            result = await session.send_request(
                sent, cast(Any, adapter), request_read_timeout_seconds=timeout, progress_callback=cast(Any, progress)
            )
            if not isinstance(result, types.InputRequiredResult):
                return result
            try:
                answers = await self._ask_host(result.input_requests or {})
            except _HostDidNotAnswer as exc:
                if isinstance(request, types.CallToolRequest):
                    raise exc.fault() from None
                raise MCPError(exc.error.code, exc.error.message, exc.error.data) from None
            params = params.model_copy(
                update={"input_responses": answers or None, "request_state": result.request_state}
            )
        raise MCPError(
            types.INTERNAL_ERROR,
            f"upstream {self.name!r} asked for input more than {MAX_INPUT_ROUNDS} times in one request",
        )

    async def _ask_host(self, requests: dict[str, Any]) -> dict[str, Any]:
        """Ask the host every question of one round at once (so a 2026-07-28 host gets them in one round too)."""
        answers: dict[str, BaseModel | types.ErrorData] = {}

        async def ask(key: str, question: Any) -> None:
            answers[key] = await self.hooks.server_request(self, question, key=key)

        async with anyio.create_task_group() as tg:
            for key, question in requests.items():
                tg.start_soon(ask, key, question)
        for key, answer in answers.items():
            if isinstance(answer, types.ErrorData):
                raise _HostDidNotAnswer(requests[key].method, answer)
        return answers

    async def set_log_level(self, level: types.LoggingLevel) -> None:
        self._log_level = level
        if self.supports("logging") and self._session is not None and not self.modern:
            await self._session.send_request(_set_level(level), types.EmptyResult, self.config.connect_timeout_s)

    async def subscribe(self, uri: str, on: bool) -> None:
        (self._subscriptions.add if on else self._subscriptions.discard)(uri)
        req: types.SubscribeRequest | types.UnsubscribeRequest = (
            types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
            if on
            else types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri))
        )
        await self.request(req, types.EmptyResult)

    def _restart_if_session_gone(self, exc: MCPError) -> None:
        """A remote upstream that forgot our session (it restarted, or expired it) answers every request with
        "Session terminated": reconnect, with a new handshake, instead of failing every later call."""
        if isinstance(self.config, RemoteUpstream) and "session terminated" in exc.error.message.lower():
            log.warning("upstream_session_lost", upstream=self.name)
            self.request_restart()

    def supports(self, capability: str) -> bool:
        caps = self.catalog.capabilities
        return caps is not None and getattr(caps, capability, None) is not None

    async def refresh(self, what: str = "tools") -> None:
        session = self._session
        if session is None:
            return
        if what == "tools":
            self.catalog.tools = await _pages(session, types.ListToolsRequest, types.ListToolsResult, "tools")
        elif what == "resources":
            self.catalog.resources = await _pages(
                session, types.ListResourcesRequest, types.ListResourcesResult, "resources"
            )
        elif what == "prompts":
            self.catalog.prompts = await _pages(session, types.ListPromptsRequest, types.ListPromptsResult, "prompts")
        await self.hooks.catalog_changed(self)

    # --- from the upstream ------------------------------------------------------------------------------------------

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            log.warning("upstream_transport_error", upstream=self.name, error=_reason(message))
            return
        kind = {
            types.ToolListChangedNotification: "tools",
            types.ResourceListChangedNotification: "resources",
            types.PromptListChangedNotification: "prompts",
        }.get(type(message))
        if kind is not None:
            await self._list_changed(kind)
        elif isinstance(message, types.ResourceUpdatedNotification):
            await self.hooks.resource_updated(self, str(message.params.uri))

    async def _list_changed(self, kind: str) -> None:
        """Re-list ``kind`` after a ``list_changed``, coalesced: at most one re-list in flight and one pending per
        kind, however many notifications arrive (the SDK runs each in its own task: a storm of 10,000 cost 10 s of
        CPU and 380 overlapping re-lists). A notification during a re-list marks one more re-list after it."""
        if kind in self._relisting:
            self._relist_pending.add(kind)
            return
        self._relisting.add(kind)
        log.info("upstream_list_changed", upstream=self.name, what=kind)
        try:
            while True:
                self._relist_pending.discard(kind)
                try:
                    await self.refresh(kind)
                except Exception as exc:
                    log.warning("upstream_refresh_failed", upstream=self.name, what=kind, error=_reason(exc))
                if kind not in self._relist_pending:
                    return
        finally:
            self._relisting.discard(kind)

    async def _listen(self, session: ClientSession) -> None:
        """A 2026-07-28 connection's list changes: they come only over ``subscriptions/listen`` in that era, and
        are re-listed as a handshake connection's ``list_changed`` is. A server that does not serve
        ``subscriptions/listen`` tells no one of its changes, directly or through the proxy."""
        caps = session.server_capabilities or types.ServerCapabilities()
        wanted = {
            "tools": caps.tools is not None and bool(caps.tools.list_changed),
            "prompts": caps.prompts is not None and bool(caps.prompts.list_changed),
            "resources": caps.resources is not None and bool(caps.resources.list_changed),
        }
        if not any(wanted.values()):
            return
        kinds: dict[type[Any], str] = {
            ToolsListChanged: "tools",
            PromptsListChanged: "prompts",
            ResourcesListChanged: "resources",
        }
        try:
            async with (
                listen(
                    session,
                    tools_list_changed=wanted["tools"],
                    prompts_list_changed=wanted["prompts"],
                    resources_list_changed=wanted["resources"],
                ) as changes,
                anyio.create_task_group() as relists,
            ):
                log.info("upstream_listening", upstream=self.name, what=sorted(k for k, on in wanted.items() if on))
                async for event in changes:
                    kind = kinds.get(type(event))
                    if kind is not None:
                        relists.start_soon(self._list_changed, kind)  # coalesced there
        except Exception as exc:  # -32601 from a server without it; a lost stream: the connection's own fate
            log.info("upstream_listen_unavailable", upstream=self.name, error=_reason(exc))

    async def _on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        await self.hooks.upstream_log(self, params)

    async def _on_sampling(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData:
        result = await self.hooks.server_request(self, types.CreateMessageRequest(params=params))
        if isinstance(result, types.ErrorData | types.CreateMessageResult | types.CreateMessageResultWithTools):
            return result
        return types.ErrorData(code=types.INTERNAL_ERROR, message="unexpected sampling result")

    async def _on_elicitation(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        result = await self.hooks.server_request(self, types.ElicitRequest(params=params))
        if isinstance(result, types.ErrorData | types.ElicitResult):
            return result
        return types.ErrorData(code=types.INTERNAL_ERROR, message="unexpected elicitation result")

    async def _on_list_roots(self, context: ClientRequestContext) -> types.ListRootsResult | types.ErrorData:
        result = await self.hooks.server_request(self, types.ListRootsRequest())
        if isinstance(result, types.ErrorData | types.ListRootsResult):
            return result
        return types.ErrorData(code=types.INTERNAL_ERROR, message="unexpected roots result")


MISSING_CAPABILITY = -32021
"""MissingRequiredClientCapability (2026-07-28, SEP-2575)."""

_RESULT_OF_REQUEST: dict[type[BaseModel], type[BaseModel]] = {
    types.CallToolRequest: types.CallToolResult,
    types.GetPromptRequest: types.GetPromptResult,
    types.ReadResourceRequest: types.ReadResourceResult,
}


class _HostDidNotAnswer(Exception):
    """A question of a 2026-07-28 upstream's ``InputRequiredResult`` the host refused or could not answer."""

    def __init__(self, method: str, error: types.ErrorData) -> None:
        super().__init__(error.message)
        self.method, self.error = method, error

    def fault(self) -> ProtocolMismatch:
        """For a tool call: the host's side, and nothing ran (the upstream asked for input and was not sent again)."""
        data = self.error.data if isinstance(self.error.data, dict) else {}
        details: dict[str, Any] = {"variant": "d", "side": "host", "method": self.method}
        if self.error.code == MISSING_CAPABILITY:
            details["missing_capability"] = data.get("requiredCapabilities") or {}
        return ProtocolMismatch.of(
            "host_unanswered",
            method=self.method,
            error=self.error.message,
            details=details,
            upstream_message=self.error.message,
            upstream_code=self.error.code,
            retry_safety=RetrySafety.NOT_SENT,
            side_effect_status=SideEffectStatus.NONE,
        )


def _stamp_host_envelope(session: ClientSession) -> None:
    """Tell a 2026-07-28 upstream, per request, what the *host* of that request declared: its capabilities (so the
    upstream asks only what that host can answer, as it would directly) and its log level.

    The SDK stamps the session's own envelope on every request; this amends it. Outside a host request
    (connecting) the proxy's own declaration stands."""

    def amend(data: dict[str, Any]) -> None:
        host = CURRENT_HOST.get()
        params = data.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        if host is None or not isinstance(meta, dict) or data.get("method") in _OWN_ENVELOPE_METHODS:
            return
        caps = meta.get(CLIENT_CAPABILITIES_META_KEY)
        if isinstance(caps, dict):
            meta[CLIENT_CAPABILITIES_META_KEY] = {
                name: value
                for name, value in caps.items()
                if name not in HOST_CAPABILITIES or name in host.capabilities
            }
        if host.log_level is None:
            meta.pop(LOG_LEVEL_META_KEY, None)
        else:
            meta[LOG_LEVEL_META_KEY] = host.log_level

    after_envelope_stamp(session, amend)


_OWN_ENVELOPE_METHODS = frozenset({"server/discover", "initialize", "subscriptions/listen"})


class _HttpStatuses:
    """HTTP error statuses of tools/call POSTs, by attempt id: the facts the SDK's stand-in error drops."""

    def __init__(self, limit: int = 1000) -> None:
        self._seen: dict[str, tuple[int, dict[str, str]]] = {}
        self._limit = limit

    async def observe(self, response: httpx2.Response) -> None:
        if response.status_code < 400 or response.request.method != "POST":
            return
        try:
            body = json.loads(response.request.content or b"{}")
        except ValueError:
            return
        params = body.get("params") if isinstance(body, dict) else None
        meta = params.get("_meta") if isinstance(params, dict) else None
        attempt = meta.get(ATTEMPT_META) if isinstance(meta, dict) else None
        if isinstance(attempt, str):
            if len(self._seen) >= self._limit:
                self._seen.pop(next(iter(self._seen)))
            self._seen[attempt] = (response.status_code, dict(response.headers))

    def pop(self, attempt: str) -> tuple[int, dict[str, str]] | None:
        return self._seen.pop(attempt, None)


async def _pages(session: ClientSession, request_type: Any, result_type: Any, attr: str) -> list[Any]:
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(10_000):  # a server that pages forever must not hang the proxy
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.send_request(request_type(params=params), result_type)
        items.extend(getattr(page, attr))
        cursor = page.next_cursor
        if not cursor:
            break
    return items


def _oversized(exc: MCPError) -> OversizedResult | None:
    """The E4 fault for the stand-in error ``stdio_upstream`` answers a too-large response with."""
    data = exc.error.data
    facts = data.get(OVERSIZED_META) if isinstance(data, dict) else None
    if not isinstance(facts, dict):
        return None
    size, limit = facts.get("original_size_bytes"), facts.get("max_message_bytes")
    return OversizedResult.of(
        "over_message_limit",
        suggest="narrow_or_raise_limit",
        size=size,
        limit=limit,
        details={"original_size_bytes": size, "returned_bytes": 0, "handle": None, "max_message_bytes": limit},
    )


def _set_level(level: types.LoggingLevel) -> types.SetLevelRequest:
    return types.SetLevelRequest(params=types.SetLevelRequestParams(level=level))


async def _quietly(aw: Awaitable[Any]) -> None:
    try:
        await aw
    except Exception as exc:
        log.debug("upstream_restore_failed", error=_reason(exc))


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _reason(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _reason(exc.exceptions[0])
    if isinstance(exc, TimeoutError):
        return "timed out during startup/handshake"
    text = str(exc) or type(exc).__name__
    return text if isinstance(exc, MCPError | Fault) else f"{type(exc).__name__}: {text}"
