"""The proxy's core: upstream lifecycle, the routing snapshot, and everything that flows from upstreams to hosts.

``Proxy`` owns the supervised upstreams and the ``Router`` (routing.py) its pipeline sees. It rebuilds the
``Routing`` (catalog + one compiled chain per tool) when an upstream's catalog or the policy changed, outside every
call: a change marks the routing stale; the next host request, or the proxy's announcer task (which then tells the
hosts ``list_changed``), rebuilds it. A call runs on the routing it started with.
It implements ``UpstreamHooks``: upstream log messages, resource updates, list changes and server→client requests
(sampling, elicitation, roots) are relayed to the host whose call caused them, or to every connected host.
"""

from __future__ import annotations

import math
import uuid
import warnings
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import structlog
from mcp.server import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, PromptsListChanged, ResourcesListChanged, ToolsListChanged
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.message import ServerMessageMetadata
from pydantic import BaseModel

from ..adapters.sdk import host_connection
from ..call.chain import HostEnvelope
from ..policy import Policy
from ..policy.config import ProxyConfig
from ..stages.output import mark_description
from ..state.stored_outputs import http_principal
from ..tasks.bridge import Bridges
from ..upstream import Connection, TransportFactory, Upstream, host_capability_names
from .catalog import CatalogConflict, build_catalog, prefixes_for
from .host_errors import host_errors, relay_error
from .pipeline import Pipeline
from .routing import CallLayer, CompiledTool, Router, Routing, treatment

MISSING_CAPABILITY = -32021
"""MissingRequiredClientCapability (2026-07-28, SEP-2575): the answer to a request the host cannot serve."""

_CAPABILITY_OF = {"sampling/createMessage": "sampling", "elicitation/create": "elicitation", "roots/list": "roots"}

log = structlog.get_logger(__name__)

Ctx = ServerRequestContext[Any, Any]


class Sessions:
    """The hosts connected to the proxy: who to tell about list changes and upstream logs. Bounded (LRU)."""

    def __init__(self, limit: int = 10_000) -> None:
        self._sessions: OrderedDict[str, ServerSession] = OrderedDict()
        self._limit = limit

    def touch(self, key: str, session: ServerSession) -> None:
        self._sessions[key] = session
        self._sessions.move_to_end(key)
        while len(self._sessions) > self._limit:
            self._sessions.popitem(last=False)

    def all(self) -> list[ServerSession]:
        return list(self._sessions.values())

    def get(self, key: str) -> ServerSession | None:
        return self._sessions.get(key)

    def __len__(self) -> int:
        return len(self._sessions)


_CONNECTION_KEYS: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()
_SESSION_KEYS: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()
"""The key of each ``ServerSession`` seen (the SDK builds one per request; the stdio raw lane one per connection)."""
PER_REQUEST = "http-request:"
"""The session key prefix of a connection that carries one request (stateless HTTP, 2026-07-28-era HTTP)."""


def session_key(ctx: Ctx) -> str:
    """The id of the host connection a request came on: one per connection, never chosen by the client.

    The SDK builds one ``Connection`` per host connection: one per stdio proxy process, one per MCP HTTP session,
    and one per request in stateless HTTP and for 2026-07-28-era HTTP clients (whose requests are self-contained).
    Each gets a fresh random id the first time it is seen, readable in logs and the audit trail:
    ``stdio:<clientInfo.name>:<random>``, ``http:<mcp-session-id the SDK issued>``, ``http-request:<random>``.
    So two proxy processes of one host (two IDE windows, two agent runs) are two sessions, and a header a client
    sends in stateless mode names nothing: guards and replay of writes keyed by their arguments never cross
    connections (explicit idempotency keys are shared by every session of one principal, by design)."""
    key = _SESSION_KEYS.get(ctx.session)
    if key is not None:  # a session that serves many requests (the stdio raw lane's): its connection is known
        return key
    connection = host_connection(ctx.session)
    key = _CONNECTION_KEYS.get(connection)
    if key is None:
        key = _CONNECTION_KEYS[connection] = _new_session_key(ctx, connection)
    _SESSION_KEYS[ctx.session] = key
    return key


def output_owner(request: object, session: str) -> str:
    """Who may read what a request stores: its host ``session`` and, over HTTP, its principal
    (``stored_outputs.owner_principal`` reads it back).

    Over stdio the proxy has one host: the session key says which. A stateful HTTP session is already bound to the
    token that opened it (the SDK refuses it to any other), and the owner names both. Stateless HTTP has no session
    to bind to: the owner is the principal alone."""
    scope = getattr(request, "scope", None)
    if not isinstance(scope, Mapping) or scope.get("type") != "http":
        return session
    principal = http_principal(scope)
    headers = getattr(request, "headers", None)
    sid = headers.get("mcp-session-id") if headers is not None else None
    return f"{principal} {sid}" if sid else principal


def _new_session_key(ctx: Ctx, connection: object) -> str:
    token = uuid.uuid4().hex[:12]
    if getattr(ctx.request, "headers", None) is not None:  # HTTP
        sid = getattr(connection, "session_id", None)
        return f"http:{sid}" if sid else f"{PER_REQUEST}{token}"
    params = ctx.session.client_params
    name = params.client_info.name if params is not None else "host"
    return f"stdio:{name}:{token}"


class Proxy:
    def __init__(
        self,
        config: ProxyConfig,
        policy: Policy,
        pipeline_factory: Callable[[Router, Policy], Pipeline],
        *,
        transports: dict[str, TransportFactory] | None = None,
        calls: CallLayer | None = None,
    ) -> None:
        """``calls`` wraps how the pipeline's terminal sends a tool call to an upstream (chaos mode's seam)."""
        self.config = config
        self.policy = policy.mark_local(config.local_upstreams())
        transports = transports or {}
        self.upstreams: dict[str, Upstream] = {
            name: Upstream(name, up, self, transport=transports.get(name))
            for name, up in config.enabled_upstreams().items()
        }
        self.prefixes = prefixes_for(
            {name: up.prefix for name, up in config.enabled_upstreams().items()}, config.prefix_separator
        )
        self.sessions = Sessions()
        self.bus = InMemorySubscriptionBus()
        self._active: dict[str, list[Ctx]] = {name: [] for name in self.upstreams}
        self._last_ctx: Ctx | None = None
        self._subscribers: dict[str, set[str]] = {}
        self.router = Router(self.upstreams, self.prefixes, calls)
        self.pipeline = pipeline_factory(self.router, policy)
        self._announced: Routing = self.router.routing
        """The routing the hosts were last told about (``list_changed`` is sent for what differs)."""
        self._started = False
        self.single_host = False
        """Serving one host over stdio: upstreams are then connected with that host's own capabilities."""
        self._refused: dict[int, set[str]] = {}
        self._envelopes: dict[int, HostEnvelope] = {}
        """The host request of each call in flight (by ``id(ctx)``): its timers stop while the host is asked."""
        self.bridges = Bridges()
        """2026-07-28 hosts: upstream requests become InputRequiredResults (see bridge.py)."""
        self.tasks = self.pipeline.services.tasks
        """Durable tasks for 2026-07-28 hosts that declare the extension (``resilient_mcp.tasks``)."""
        self.tasks.settings = policy.tasks
        self._follow_lock = anyio.Lock()

    # --- lifecycle --------------------------------------------------------------------------------------------------

    @asynccontextmanager
    async def running(self, *, startup_timeout_s: float | None = None) -> AsyncIterator[Proxy]:
        """Start every upstream, wait until each is ready or has failed, build the routing; stop all on exit."""
        await self.pipeline.open(self.state_dir(), self.config.state)
        conflict: CatalogConflict | None = None
        try:
            async with anyio.create_task_group() as tg:
                self.bridges.bind(tg)
                self.tasks.bind(tg, self.pipeline.services.store)
                for up in self.upstreams.values():
                    tg.start_soon(up.run, name=f"upstream:{up.name}")
                await self._wait_started(startup_timeout_s)
                try:
                    self.rebuild(strict=True)
                except CatalogConflict as exc:  # raised below, once the upstreams are closed (not in a group)
                    conflict = exc
                    tg.cancel_scope.cancel()
                if conflict is None:
                    self._started = True
                    self._announced = self.routing
                    tg.start_soon(self._announce_changes, name="proxy:announcer")
                    try:
                        yield self
                    finally:
                        tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await self.tasks.shutdown()
                await self.pipeline.aclose()
        if conflict is not None:
            raise conflict

    def state_dir(self) -> str:
        raw = self.config.state_dir
        return raw if raw == ":memory:" else str(self.config.state_path())

    async def _wait_started(self, timeout_s: float | None) -> None:
        # Each upstream bounds its own handshake by its connect_timeout_s, counted from when its transport opened (a
        # process spawned); this outer bound is only a safety net, counted from the same moment and longer, so that
        # the upstream's own verdict (timed out, failed, why) is what the start reports. Counted from before the
        # spawn instead, a spawn slowed by load used up the margin and the start reported "starting" with no
        # reason. ``timeout_s`` (a caller's own limit) counts from now, for all upstreams together.
        with anyio.move_on_after(timeout_s if timeout_s else math.inf):
            for up in self.upstreams.values():
                await _started_or_late(up)
        for up in self.upstreams.values():
            if up.state != "ready":
                log.error(
                    "upstream_unavailable_at_startup",
                    upstream=up.name,
                    state=up.state,
                    error=up.last_error,
                    hint="its tools answer with an 'upstream unavailable' observation; the others are served",
                )

    # --- routing ----------------------------------------------------------------------------------------------------

    @property
    def routing(self) -> Routing:
        """The routing for a host request that starts now: rebuilt first if something changed meanwhile."""
        if self.router.stale and self._started:
            self.rebuild()
        return self.router.routing

    def rebuild(self, *, strict: bool = False) -> None:
        """Recompute the catalog and compile one chain per visible tool; swap the routing in one assignment."""
        catalog = build_catalog(self.upstreams, self.prefixes, strict=strict, previous=self.router.routing.catalog)
        chains: dict[str, CompiledTool] = {}
        visible: list[types.Tool] = []
        for name, entry in catalog.tools.items():
            if not self.policy.is_visible(entry.upstream, entry.name, name):
                continue
            assert entry.tool is not None
            chains[name] = self.pipeline.compile(entry)
            visible.append(mark_description(entry.tool, entry.upstream).model_copy(update={"name": name}))
        visible.extend(t for t in self.pipeline.proxy_tools() if t.name not in catalog.tools)
        self.router.stale = False
        self.router.routing = Routing(catalog=catalog, chains=chains, visible_tools=visible)
        self.pipeline.services.public_names = {(e.upstream, e.name): public for public, e in catalog.tools.items()}
        self._log_treatment(treatment(chains))

    def _log_treatment(self, rows: list[dict[str, str]]) -> None:
        """Say (once per change) which tools are treated how and why: the start-up log's answer to "is it retried?"."""
        if rows == self.pipeline.services.treatment:
            return
        self.pipeline.services.treatment = rows
        groups: dict[tuple[str, str, str, str], list[str]] = {}
        for row in rows:
            key = (row["upstream"], row["effect"], row["effect_from"], row["retried_on"])
            groups.setdefault(key, []).append(row["tool"])
        for (upstream, effect, why, retried), tools in groups.items():
            shown = tools if len(tools) <= 20 else [*tools[:20], f"... {len(tools) - 20} more"]
            log.info("tool_treatment", upstream=upstream, effect=effect, why=why, retried_on=retried, tools=shown)

    def set_policy(self, policy: Policy) -> None:
        self.policy = policy.mark_local(self.config.local_upstreams())
        self.pipeline.set_policy(policy)
        self.tasks.settings = policy.tasks
        self.rebuild()

    # --- calls in flight --------------------------------------------------------------------------------------------

    @asynccontextmanager
    async def in_flight(self, upstream: str, ctx: Ctx, envelope: HostEnvelope | None = None) -> AsyncIterator[None]:
        """Mark ``ctx`` as a call running on ``upstream``: where its server→client requests and logs are sent.
        ``envelope``: that request's, whose timers stop while its host answers a handshake-era upstream."""
        active = self._active.setdefault(upstream, [])
        active.append(ctx)
        if envelope is not None and envelope.ctx is ctx:
            self._envelopes[id(ctx)] = envelope
        try:
            yield
        finally:
            active.remove(ctx)
            if ctx not in active:
                self._refused.pop(id(ctx), None)
                self._envelopes.pop(id(ctx), None)

    def calls_in_flight(self, upstream: str) -> int:
        """How many host calls are running on ``upstream`` now."""
        return len(self._active.get(upstream, ()))

    def refused_capabilities(self, ctx: Ctx) -> set[str]:
        """The host capabilities the proxy refused an upstream on behalf of ``ctx``'s call (so far)."""
        return self._refused.get(id(ctx), set())

    def serve_one_host(self, capabilities: types.ClientCapabilities | None, *, modern: bool = False) -> None:
        """Single-host stdio mode, before ``running``: connect every upstream once, declaring what the host declared
        in its opening request (``host/opening.py``), or nothing when that is not known (``follow_host`` then
        reconnects only for a host that turns out to declare more). ``modern``: that request is in the 2026-07-28
        era, so every ``protocol: auto`` upstream's one connection is negotiated as the host would (2026-07-28 when
        the server speaks it), instead of a handshake connection and a second one for the host."""
        self.single_host = True
        declared = host_capability_names(capabilities)
        for up in self.upstreams.values():
            up.declared = declared
            up.host_speaks_2026 = modern

    async def follow_host(self, ctx: Ctx) -> None:
        """With a single stdio host, connect every upstream declaring exactly the host's capabilities (once they are
        known), so a server that registers tools only for capable clients lists what this host can use."""
        if not self.single_host or not self._started:
            return
        caps = ctx.session.client_capabilities
        if caps is None:
            return
        wanted = host_capability_names(caps)
        if all(up.declared == wanted for up in self.upstreams.values()) and not self._follow_lock.locked():
            return
        async with self._follow_lock:  # a reconnect under way (from another request of the host) is waited for
            if all(up.declared == wanted for up in self.upstreams.values()):
                return
            async with anyio.create_task_group() as tg:
                for up in self.upstreams.values():
                    tg.start_soon(up.declare, wanted, up.config.connect_timeout_s)
            self.rebuild()  # the re-listed catalogs, before this host's first answer (not inside a call)

    def seen(self, ctx: Ctx) -> None:
        self._last_ctx = ctx
        key = session_key(ctx)
        if not key.startswith(PER_REQUEST):  # a one-request connection can be told nothing later: not kept
            self.sessions.touch(key, ctx.session)

    def answering(self, upstream: str) -> Ctx | None:
        """The call whose host should answer a request the upstream makes, when that host is unambiguous.

        The SDK does not say which of our calls an upstream's request belongs to; when calls of several hosts are
        in flight on that upstream, or none is and several hosts are connected, nobody is asked (a wrong guess
        would show one host another's prompt)."""
        active = self._active.get(upstream)
        if active:
            # A call whose upstream work is parked on a question to its (2026-07-28) host is not the one asking now,
            # unless every call is parked (then one of them asks more at once).
            running = [c for c in active if not self.bridges.waiting_on_host(c)] or active
            return running[-1] if len({session_key(c) for c in running}) == 1 else None
        return self._last_ctx if len(self.sessions) == 1 else None

    # --- UpstreamHooks ----------------------------------------------------------------------------------------------

    async def catalog_changed(self, upstream: Connection) -> None:
        """An upstream listed again (connected, refreshed, told us): rebuild soon, outside the call that caused it."""
        if self._started:
            self.router.tools_changed()

    async def _announce_changes(self) -> None:
        """The announcer task: after each change, rebuild (if no request did yet) and tell the hosts what differs."""
        while True:
            await self.router.wait_changed()
            before, after = self._announced, self.routing
            self._announced = after
            changed = [
                kind
                for kind, old, new in (
                    ("tools", before.visible_tools, after.visible_tools),
                    ("prompts", before.catalog.prompt_list(), after.catalog.prompt_list()),
                    ("resources", list(before.catalog.resources), list(after.catalog.resources)),
                )
                if old != new
            ]
            for kind in changed:
                await self._notify_list_changed(kind)

    async def _notify_list_changed(self, kind: str) -> None:
        log.info("list_changed_sent", what=kind, hosts=len(self.sessions.all()))
        for session in self.sessions.all():
            with host_errors("notify_failed", what=kind):  # a gone host must not stop the others
                if kind == "tools":
                    await session.send_tool_list_changed()
                elif kind == "prompts":
                    await session.send_prompt_list_changed()
                else:
                    await session.send_resource_list_changed()
        event: ToolsListChanged | PromptsListChanged | ResourcesListChanged = (
            ToolsListChanged()
            if kind == "tools"
            else PromptsListChanged()
            if kind == "prompts"
            else ResourcesListChanged()
        )
        await self.bus.publish(event)

    async def upstream_log(self, upstream: Connection, params: types.LoggingMessageNotificationParams) -> None:
        active = self._active.get(upstream.name)
        targets: list[tuple[ServerSession, Any]]
        if not active:  # not about a call: every connected host hears the upstream
            targets = [(s, None) for s in self.sessions.all()]
        elif (ctx := self.answering(upstream.name)) is not None:
            targets = [(ctx.session, ctx.request_id)]
        else:  # calls of several hosts in flight: the message cannot be attributed, so it goes to nobody
            log.debug("upstream_log_unattributed", upstream=upstream.name)
            targets = []
        logger = params.logger or upstream.name
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            for session, request_id in targets:
                with host_errors("log_forward_failed"):
                    await session.send_log_message(params.level, params.data, logger, related_request_id=request_id)

    async def subscribe(self, uri: str, session: str, upstream: Upstream) -> None:
        """A host subscribes: the upstream is asked once, for the first subscriber of the URI."""
        subscribers = self._subscribers.setdefault(uri, set())
        if not subscribers:
            await upstream.subscribe(uri, True)
        subscribers.add(session)

    async def unsubscribe(self, uri: str, session: str, upstream: Upstream) -> None:
        subscribers = self._subscribers.get(uri, set())
        subscribers.discard(session)
        if not subscribers:
            self._subscribers.pop(uri, None)
            await upstream.subscribe(uri, False)

    async def resource_updated(self, upstream: Connection, uri: str) -> None:
        for key in self._subscribers.get(uri, ()):  # only the hosts that subscribed to this URI
            session = self.sessions.get(key)
            if session is None:
                continue
            with host_errors("notify_failed", what="resource_updated"):
                await session.send_resource_updated(uri)

    async def server_request(
        self,
        upstream: Connection,
        request: types.ServerRequest,
        key: str | None = None,
        host: HostEnvelope | None = None,
    ) -> BaseModel | types.ErrorData:
        """What an upstream asks during a host's request, answered by that host (or refused at once).

        A 2026-07-28 upstream asks inside the request (``InputRequiredResult``, ``key`` is its name for the
        question, ``host`` the request it asks inside of), so the host is known exactly; a handshake-era upstream
        asks with a request of its own, which is
        attributed to the only host with calls in flight on it. While the host is being asked, the timeouts of its
        call stand still: that time is the host's, not the upstream's."""
        ctx = host.ctx if host is not None and upstream.modern else self.answering(upstream.name)
        envelope = host if host is not None and host.ctx is ctx else self._envelopes.get(id(ctx))
        if envelope is None:
            return await self._ask_host(upstream, request, key, ctx)
        with envelope.timers.paused():
            return await self._ask_host(upstream, request, key, ctx)

    async def _ask_host(
        self, upstream: Connection, request: types.ServerRequest, key: str | None, ctx: Ctx | None
    ) -> BaseModel | types.ErrorData:
        if ctx is None:
            active = self._active.get(upstream.name) or []
            log.info(
                "server_request_unattributed",
                upstream=upstream.name,
                method=request.method,
                calls=len(active),
                parked=sum(self.bridges.waiting_on_host(c) for c in active),
                hosts=len(self.sessions),
            )
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message=f"resilient-mcp: no connected host can answer {request.method} for upstream {upstream.name!r}",
            )
        capability = _CAPABILITY_OF.get(request.method)
        if capability is not None and capability not in host_capability_names(ctx.session.client_capabilities):
            # Refused at once, never relayed nor left to time out: the host never said it could answer.
            if ctx in self._active.get(upstream.name, []):
                self._refused.setdefault(id(ctx), set()).add(capability)
            log.info("server_request_refused", upstream=upstream.name, method=request.method, missing=capability)
            return types.ErrorData(
                code=MISSING_CAPABILITY,
                message=f"The host did not declare the {capability!r} capability ({request.method} refused by "
                "resilient-mcp)",
                data={"requiredCapabilities": {capability: {}}},
            )
        bridge = self.bridges.for_ctx(ctx)
        if bridge is not None:  # a 2026-07-28 host: asked with an InputRequiredResult, answered on its retry
            return await bridge.ask(request, key)
        if not ctx.session.can_send_request:
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message=f"resilient-mcp: the host's connection ({ctx.protocol_version}) cannot carry a request from "
                f"the server; {request.method} for upstream {upstream.name!r} cannot be relayed",
            )
        result_type: type[BaseModel]
        if isinstance(request, types.CreateMessageRequest):
            result_type = types.CreateMessageResultWithTools if request.params.tools else types.CreateMessageResult
        elif isinstance(request, types.ElicitRequest):
            result_type = types.ElicitResult
        else:
            result_type = types.ListRootsResult
        related = ctx.request_id if ctx in self._active.get(upstream.name, []) else None
        try:
            return await ctx.session.send_request(
                request,
                result_type,
                metadata=ServerMessageMetadata(related_request_id=related) if related is not None else None,
            )
        except Exception as exc:  # the host's own error, or a relay that broke (``host_errors``)
            return relay_error(exc, request.method)


async def _started_or_late(up: Upstream) -> None:
    """Until ``up`` has started or failed, or has been silent past its own connect timeout and a margin counted from
    when its handshake began (before that, the spawn itself is given as long)."""
    own = up.config.connect_timeout_s
    limit = own + max(2.0, 0.25 * own)
    waiting_since = anyio.current_time()
    while up.state == "starting" or (up.state == "down" and up.start_failures < 2):
        since = up.handshake_began if up.handshake_began is not None else waiting_since
        left = since + limit - anyio.current_time()
        if left <= 0:
            return
        with anyio.move_on_after(left):
            await up.wait_changed()
