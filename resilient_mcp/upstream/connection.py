"""One supervised client connection per upstream MCP server: supervision, restart with backoff, transport, era twins.

``Connection.run`` is the owner task: it opens the transport (stdio | streamable HTTP | SSE) and the
``ClientSession``, performs the handshake, lists every page of the upstream's catalog, and then waits until the
connection dies or a restart is asked for; it then closes both *in the same task that opened them* (anyio cancel
scopes demand it) and starts again with exponential backoff. A stdio process that exits is noticed at once, not on
the next call, by watching the end of its read stream.

``protocol: auto`` serves each host in its own era: a 2026-07-28 host's requests go over a second connection, the
twin (``for_host``), opened at its first request. Upstream notifications and server→client requests are handed to
``UpstreamHooks`` (implemented by the proxy). What is asked of a live connection (tool calls, other requests, input
rounds) is ``calls.Upstream``, this class's one subclass; what those requests raise is mapped in ``errors``.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any, Literal, Protocol, Self
from urllib.parse import urlsplit

import anyio
import anyio.abc
import httpx2
import mcp_types as types
import structlog
from mcp import ClientSession, StdioServerParameters
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
from mcp_types import CLIENT_CAPABILITIES_META_KEY, LOG_LEVEL_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

from .. import __version__
from ..adapters.sdk import after_envelope_stamp, negotiate_auto
from ..call.chain import HOST_CAPABILITIES, HostEnvelope
from ..call.meta import HOST_META
from ..policy.config import RemoteUpstream, StdioUpstream, stdio_environment
from .catalog import Relists, UpstreamCatalog, list_catalog, list_pages
from .errors import HttpStatuses, reason
from .http_cap import SDK_SSE_EVENT_LIMIT, CappedTransport, capped_client_factory
from .rawcall import RawCalls
from .rawcall import enabled as raw_lane_enabled
from .startup import STOP_AFTER, StartFailure, StderrTail, classify_start_failure, exited_for_good
from .stdio import stdio_upstream

log = structlog.get_logger(__name__)

TransportFactory = Callable[[], AbstractAsyncContextManager[Any]]
"""Opens a connection and yields ``(read, write)``: how tests put an in-process server behind an upstream."""
State = Literal["starting", "ready", "down", "failed", "stopped"]

CLIENT_INFO = types.Implementation(name="resilient-mcp", version=__version__)


class UpstreamHooks(Protocol):
    """What an upstream hands to the proxy's server side."""

    async def catalog_changed(self, upstream: Connection) -> None: ...

    async def upstream_log(self, upstream: Connection, params: types.LoggingMessageNotificationParams) -> None: ...

    async def resource_updated(self, upstream: Connection, uri: str) -> None: ...

    async def server_request(
        self,
        upstream: Connection,
        request: types.ServerRequest,
        key: str | None = None,
        host: HostEnvelope | None = None,
    ) -> BaseModel | types.ErrorData:
        """Relay a sampling / elicitation / roots request to the host whose call caused it. ``key`` is the name a
        2026-07-28 upstream gave the request in its ``InputRequiredResult`` (kept toward a 2026-07-28 host), ``host``
        the request it came inside of (2026-07-28: known exactly; else ``None``, and the proxy attributes it)."""
        ...


class NoHost:
    """``UpstreamHooks`` for an upstream used without a host (the error-corpus collector, tests): catalog changes,
    logs and resource updates are dropped, and a request for the host (sampling, elicitation, roots) is refused with
    ``reason``."""

    def __init__(self, reason: str = "no host is connected to answer it") -> None:
        self.reason = reason

    async def catalog_changed(self, upstream: Connection) -> None:
        return None

    async def upstream_log(self, upstream: Connection, params: types.LoggingMessageNotificationParams) -> None:
        return None

    async def resource_updated(self, upstream: Connection, uri: str) -> None:
        return None

    async def server_request(
        self,
        upstream: Connection,
        request: types.ServerRequest,
        key: str | None = None,
        host: HostEnvelope | None = None,
    ) -> BaseModel | types.ErrorData:
        return types.ErrorData(code=types.INVALID_REQUEST, message=self.reason)


class Connection:
    """A supervised connection to one upstream server (the calls are ``calls.Upstream``'s)."""

    # What it says of itself (each set by the supervisor as it happens; read by the proxy, the status page, metrics).
    restarts = 0
    """Times a ready connection ended (the process exited, the session was lost, a restart was asked for)."""
    start_failure: StartFailure | None = None
    """Why the last start failed (``None`` once connected): classified, with the server's words."""
    given_up = False
    """Not restarted any more: its starts failed permanently ``STOP_AFTER`` times in a row."""
    _served_before = False
    """Once it has served, a restart that ends without words is a crash to retry, not a configuration to fix."""
    on_state: Callable[[Connection], None] | None = None
    """Told of every state change (the ops recorders: status page, metrics); must not block or raise."""
    # Its era.
    modern = False
    """This connection speaks 2026-07-28: a twin's, or the one connection of a single 2026-07-28 host
    (``host_speaks_2026``) to a server that speaks that era."""
    host_speaks_2026 = False
    """Single stdio host whose opening request was in the 2026-07-28 era (set before ``run``): with ``protocol:
    auto`` this connection is negotiated as that host would connect directly (``server/discover`` first, then
    ``initialize`` for a server that does not answer it), so the host meets the server in its own era over one
    process, never a second one."""
    handshake_only = False
    """A twin found that the server does not speak 2026-07-28: the handshake connection serves every host."""

    def __init__(
        self,
        name: str,
        config: StdioUpstream | RemoteUpstream,
        hooks: UpstreamHooks,
        *,
        backoff_initial_s: float = 0.25,
        backoff_max_s: float = 30.0,
        transport: TransportFactory | None = None,
        twin_of: Self | None = None,
    ) -> None:
        self.name = name
        self._transport_override = transport
        self.config = config
        self.hooks = hooks
        self.catalog = UpstreamCatalog()
        self.state: State = "starting"
        self.last_error: str | None = None
        self.start_failures = 0
        self._session: ClientSession | None = None
        self._changed = anyio.Event()
        self._restart = anyio.Event()
        self._ended = anyio.Event()
        self._backoff = (backoff_initial_s, backoff_max_s)
        self._log_level: types.LoggingLevel | None = None
        self._subscriptions: set[str] = set()
        self.refused_tools: list[str] = []
        """Why tools this upstream lists are not routed to it (another upstream's prefix), from the last catalog
        build; shown on the status page."""
        self._relists = Relists(name, self.refresh)
        self._http_statuses = HttpStatuses()
        self.twin_of = twin_of
        """Set on the 2026-07-28 connection an ``auto`` upstream opens for 2026-07-28 hosts: the upstream it serves."""
        self._twin: Self | None = None
        self._twins: anyio.abc.TaskGroup | None = None
        self._connecting = True
        self._tail = StderrTail() if isinstance(config, StdioUpstream) else None
        self._raw: RawCalls | None = None
        """The raw tools/call lane of the current stdio process (``rawcall``), when it has one."""
        self._windows: set[Any] = set()
        """The requests in flight whose stderr is watched (``Upstream._stderr_window``)."""
        self.handshake_began: float | None = None
        """When the current attempt's handshake timer (``connect_timeout_s``) started: after the transport opened
        (a process spawned), ``None`` before. What a wait for this upstream's own verdict counts from."""
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

    def _notify(self) -> None:
        """Wake the waiters of ``wait_changed`` without a change of state (the handshake timer started)."""
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_changed(self) -> None:
        """Until the next state change."""
        await self._changed.wait()

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
        initial_s, max_s = self._backoff
        backoff = initial_s
        log.info("upstream_starting", upstream=self.name, transport=self._describe(), era=self._era())
        permanent_in_row = 0
        try:
            while True:
                try:
                    await self._connect_and_serve()
                    backoff = initial_s
                    permanent_in_row = 0
                    if self.handshake_only:
                        log.info("upstream_speaks_handshake_era_only", upstream=self.name)
                        return
                except Exception as exc:
                    if not self._connecting:  # the connection was up: not a start-up failure
                        self._set_state("down", reason(exc))
                        log.warning("upstream_connection_failed", upstream=self.name, error=reason(exc))
                    else:
                        permanent_in_row = self._start_failed(exc, permanent_in_row, backoff)
                        if self.given_up:
                            return
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, max_s)
        finally:
            self._session = None
            self._set_state("stopped")

    def _start_failed(self, exc: Exception, permanent_in_row: int, backoff: float) -> int:
        """Record a failed start: classified, said, and given up after ``STOP_AFTER`` permanent failures in a row.
        Returns the new count of permanent failures in a row."""
        failure = self.start_failure = classify_start_failure(exc, self._tail, served_before=self._served_before)
        first = self.state == "starting" or self.start_failures == 0
        self.start_failures += 1
        permanent_in_row = permanent_in_row + 1 if failure.permanent else 0
        summary = failure.summary()
        given_up = permanent_in_row >= STOP_AFTER
        # A permanent failure is reported at once (the host's first answer says it), then retried a few times with
        # backoff, then the upstream is left stopped (and says why).
        failed = failure.permanent or self.start_failures >= 2
        self._set_state("failed" if failed else "down", summary)
        log.warning(
            "upstream_start_failed" if first else "upstream_connect_failed",
            upstream=self.name,
            error=summary,
            fault=failure.fault_type,
            permanent=failure.permanent,
            retry_in_s=None if given_up else round(backoff, 2),
            failures=self.start_failures,
        )
        if given_up:
            self.given_up = True
            self.last_error = f"not restarted after {permanent_in_row} failed starts: {summary}"
            log.error(
                "upstream_not_restarted",
                upstream=self.name,
                fault=failure.fault_type,
                error=summary,
                hint="fix the server's configuration (credentials, arguments, paths), then restart "
                "the proxy; `resilient-mcp check --connect` shows the same",
            )
        return permanent_in_row

    async def _connect_and_serve(self) -> None:
        """One connection's life: open, handshake, list, serve until it ends or a restart is asked for."""
        self._starting()
        async with AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(self._transport())
            session = await stack.enter_async_context(self._session_over(read, write))
            stack.callback(self._close_raw)  # before the session closes: the lane's calls fail as the SDK's do
            self.handshake_began = anyio.current_time()
            self._notify()
            with anyio.fail_after(self.config.connect_timeout_s):
                if not await self._handshake(session):
                    return
                await self._read_catalog(session)
            self._ready(session)
            if self.twin_of is None:
                await self.hooks.catalog_changed(self)
            await self._serve(session)
            self._session = None
            self.restarts += 1
            died = self._ended.is_set()
            self._set_state("down", "the upstream process exited" if died else "restart requested")
            log.warning("upstream_died" if died else "upstream_restarting", upstream=self.name)
        if died and (failure := exited_for_good(self._tail)) is not None:
            # It answered initialize, then exited saying why it cannot work (a wrong password found on its first
            # connection to a database): a failed start, reported as what it is, and backed off to a stop.
            self._connecting = True
            raise failure

    def _close_raw(self) -> None:
        if self._raw is not None:
            self._raw.close()
            self._raw = None

    def _starting(self) -> None:
        self.handshake_began = None
        self._ended = anyio.Event()
        self._restart = anyio.Event()
        self._connecting = True
        if self._tail is not None:
            self._tail.clear()
        if self.start_failure is None or not self.start_failure.permanent:
            self._set_state("starting")  # (after a permanent failure it stays "failed": calls are answered at once)

    def _watched(self, read: Any, write: Any) -> tuple[Any, Any]:
        """``read`` and ``write`` as the session uses them: watched by the class that makes requests over them
        (``calls.Upstream``: the end of ``read`` sets ``_ended``, and a write tells the exception seam what left)."""
        raise NotImplementedError

    def _session_over(self, read: Any, write: Any) -> ClientSession:
        read, write = self._watched(read, write)
        return ClientSession(
            read,
            write,
            # A capability is declared by handing the SDK its callback: only those the hosts can serve.
            sampling_callback=self._on_sampling if "sampling" in self.declared else None,
            elicitation_callback=self._on_elicitation if "elicitation" in self.declared else None,
            list_roots_callback=self._on_list_roots if "roots" in self.declared else None,
            logging_callback=self._on_log,
            message_handler=self._on_message,
            client_info=CLIENT_INFO,
        )

    async def _handshake(self, session: ClientSession) -> bool:
        """Open the session in this connection's era. ``False``: a twin found the server speaks only the handshake
        era (the handshake-era connection then serves every host)."""
        self.modern = False
        if self.twin_of is None and not self._follows_2026_host():
            await session.initialize()
            return True
        # The twin, or a single 2026-07-28 host's one connection: server/discover first; a server that answers it
        # (2026-07-28) is spoken to in that era. Anything else (-32601 from TypeScript servers, a handshake-only
        # answer) falls back to initialize: then a twin is not needed (the handshake-era connection serves every
        # host), and a single host's connection stays up in the handshake era, the host's requests bridged.
        await negotiate_auto(session)
        if session.protocol_version in MODERN_PROTOCOL_VERSIONS:
            self.modern = True
            _stamp_host_envelope(session)
        elif self.twin_of is not None:
            self.handshake_only = True
            return False
        return True

    async def _read_catalog(self, session: ClientSession) -> None:
        if self.twin_of is None:
            self.catalog = await list_catalog(session, self.name)
            await self._restore_session_state(session)
        else:  # the catalog, list changes, subscriptions and log level are the handshake connection's
            self.catalog = UpstreamCatalog(
                capabilities=session.server_capabilities,
                server_info=session.server_info,
                protocol_version=session.protocol_version,
            )

    def _ready(self, session: ClientSession) -> None:
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

    async def _serve(self, session: ClientSession) -> None:
        """Until the process exits or a restart is asked for (a 2026-07-28 connection listens for list changes)."""
        async with anyio.create_task_group() as tg:

            async def until(ev: anyio.Event) -> None:
                await ev.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(until, self._ended)
            tg.start_soon(until, self._restart)
            if self.modern and self.twin_of is None:
                tg.start_soon(self._listen, session)

    # --- eras -------------------------------------------------------------------------------------------------------

    @property
    def twin(self) -> Self | None:
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

    def _open_twin(self) -> Self | None:
        if self._twins is None:  # not running (yet)
            return None
        initial_s, max_s = self._backoff
        twin = self._twin = type(self)(
            self.name,
            self.config,
            self.hooks,
            backoff_initial_s=initial_s,
            backoff_max_s=max_s,
            transport=self._transport_override,
            twin_of=self,
        )
        self._twins.start_soon(twin.run, name=f"upstream:{self.name}:2026-07-28")
        return twin

    # --- transports -------------------------------------------------------------------------------------------------

    @asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[Any, Any]]:
        cfg = self.config
        if self._transport_override is not None:
            async with self._transport_override() as streams:
                yield streams[0], streams[1]
        elif isinstance(cfg, StdioUpstream):
            async with self._stdio(cfg) as streams:
                yield streams
        elif cfg.transport == "sse":  # the SDK's 1 MiB event limit is fixed there: events are capped below it
            limit = min(cfg.max_message_bytes, SDK_SSE_EVENT_LIMIT)
            factory = capped_client_factory(limit, self.name)
            async with sse_client(cfg.url, headers=dict(cfg.headers) or None, httpx_client_factory=factory) as streams:
                yield streams
        else:
            async with self._streamable_http(cfg) as streams:
                yield streams

    def _stdio(self, cfg: StdioUpstream) -> AbstractAsyncContextManager[tuple[Any, Any]]:
        if sys.platform == "win32":  # Job Objects: the SDK's transport
            params = StdioServerParameters(
                command=cfg.command, args=list(cfg.args), env=stdio_environment(cfg), cwd=cfg.cwd
            )
            return stdio_client(params, errlog=sys.stderr)
        # linear-time reader, size guard, process-group teardown (stdio_upstream)
        env = get_default_environment() | stdio_environment(cfg)
        raw = self._raw = RawCalls(self._ended.set) if raw_lane_enabled() else None
        return stdio_upstream(
            cfg.command,
            list(cfg.args),
            env,
            cfg.cwd,
            max_message_bytes=cfg.max_message_bytes,
            tail=self._tail,
            raw=raw,
        )

    @asynccontextmanager
    async def _streamable_http(self, cfg: RemoteUpstream) -> AsyncIterator[tuple[Any, Any]]:
        timeout = httpx2.Timeout(cfg.connect_timeout_s, read=None)
        hooks = {"response": [self._http_statuses.observe]}
        capped = CappedTransport(cfg.max_message_bytes, self.name)  # bodies and events: max_message_bytes
        async with (
            httpx2.AsyncClient(headers=dict(cfg.headers), timeout=timeout, event_hooks=hooks, transport=capped) as http,
            streamable_http_client(cfg.url, http_client=http, max_sse_event_size=None) as streams,
        ):
            yield streams[0], streams[1]

    def _describe(self) -> str:
        cfg = self.config
        if isinstance(cfg, StdioUpstream):
            return f"stdio: {cfg.command}"
        parts = urlsplit(cfg.url)  # no user-info or query in logs: they may hold credentials
        return f"{cfg.transport}: {parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}{parts.path}"

    # --- the session's state ----------------------------------------------------------------------------------------

    async def _restore_session_state(self, session: ClientSession) -> None:
        """After a restart, re-apply what hosts asked of the previous process (log level, subscriptions). A
        2026-07-28 connection has neither (the log level travels with each request; updates come over
        ``subscriptions/listen``)."""
        if self.modern:
            return
        if self._log_level is not None and self.supports("logging"):
            await _quietly(session.send_request(set_level(self._log_level), types.EmptyResult))
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

    def supports(self, capability: str) -> bool:
        caps = self.catalog.capabilities
        return caps is not None and getattr(caps, capability, None) is not None

    # --- from the upstream ------------------------------------------------------------------------------------------

    async def refresh(self, what: str = "tools") -> None:
        session = self._session
        if session is None:
            return
        if what in ("tools", "resources", "prompts"):
            setattr(self.catalog, what, await list_pages(session, what))
        await self.hooks.catalog_changed(self)

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            log.warning("upstream_transport_error", upstream=self.name, error=reason(message))
            return
        kind = {
            types.ToolListChangedNotification: "tools",
            types.ResourceListChangedNotification: "resources",
            types.PromptListChangedNotification: "prompts",
        }.get(type(message))
        if kind is not None:
            await self._relists.changed(kind)
        elif isinstance(message, types.ResourceUpdatedNotification):
            await self.hooks.resource_updated(self, str(message.params.uri))

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
                        relists.start_soon(self._relists.changed, kind)  # coalesced there
        except Exception as exc:  # -32601 from a server without it; a lost stream: the connection's own fate
            log.info("upstream_listen_unavailable", upstream=self.name, error=reason(exc))

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


def _stamp_host_envelope(session: ClientSession) -> None:
    """Tell a 2026-07-28 upstream, per request, what the *host* of that request declared: its capabilities (so the
    upstream asks only what that host can answer, as it would directly) and its log level.

    The SDK stamps the session's own envelope on every request; this amends it with what the request carried under
    the private ``HOST_META`` key (``host_meta``; the adapter removes the key). A request without it (connecting,
    the proxy's own listings) keeps the proxy's own declaration."""

    def amend(data: dict[str, Any], host: Any) -> None:
        params = data.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        if not isinstance(host, dict) or not isinstance(meta, dict) or data.get("method") in _OWN_ENVELOPE_METHODS:
            return
        caps = meta.get(CLIENT_CAPABILITIES_META_KEY)
        declared = host.get("capabilities") or ()
        if isinstance(caps, dict):
            meta[CLIENT_CAPABILITIES_META_KEY] = {
                name: value for name, value in caps.items() if name not in HOST_CAPABILITIES or name in declared
            }
        level = host.get("log_level")
        if level is None:
            meta.pop(LOG_LEVEL_META_KEY, None)
        else:
            meta[LOG_LEVEL_META_KEY] = level

    after_envelope_stamp(session, amend, HOST_META)


def host_meta(meta: dict[str, Any] | None, host: HostEnvelope | None) -> dict[str, Any] | None:
    """``meta`` with the host's declaration under ``HOST_META``, for a request to a 2026-07-28 upstream on behalf of
    ``host`` (read back and removed by ``_stamp_host_envelope``)."""
    if host is None:
        return meta
    return {**(meta or {}), HOST_META: {"capabilities": sorted(host.capabilities), "log_level": host.log_level}}


_OWN_ENVELOPE_METHODS = frozenset({"server/discover", "initialize", "subscriptions/listen"})


def set_level(level: types.LoggingLevel) -> types.SetLevelRequest:
    return types.SetLevelRequest(params=types.SetLevelRequestParams(level=level))


async def _quietly(aw: Awaitable[Any]) -> None:
    try:
        await aw
    except Exception as exc:
        log.debug("upstream_restore_failed", error=reason(exc))
