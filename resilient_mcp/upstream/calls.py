"""What is asked of a live upstream connection: tool calls, other requests, and 2026-07-28 input rounds.

Calls go through ``send_request`` (never ``ClientSession.call_tool``, which validates output and lists tools behind
our back), or, for a tool call to a stdio upstream that ``_raw_lane`` allows, through the raw lane of ``rawcall``
(the same request and result without the SDK's dispatcher); each inside the exception seam of ``errors``: a tool
call's attempt raises only ``Fault``; any other request passes the upstream's ``MCPError`` to the host as it is. A
2026-07-28 upstream that answers ``InputRequiredResult`` has its questions relayed to the host
(``UpstreamHooks.server_request``) and the request sent again with the answers, round by round.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any, Self, TypeVar, cast

import anyio
import mcp_types as types
import structlog
from mcp import ClientSession
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, TypeAdapter

from ..call.chain import HostEnvelope, timing
from ..faults import AttemptTimeout, ConnectFailure, Fault, PersistentOutage
from ..faults.error_results import result_text
from ..faults.stderr_words import STDERR_META_KEY, exception_words, wordless, wrapper_seen
from ..policy.config import RemoteUpstream
from .connection import Connection, host_meta, set_level
from .errors import UPSTREAM_ERROR, WRITING, Attempt, HostDidNotAnswer, attempt_failed, upstream_errors
from .rawcall import RawCalls, untraced

log = structlog.get_logger(__name__)

R = TypeVar("R", bound=BaseModel)
ProgressFn = Callable[[float, float | None, str | None], Awaitable[None]]

MAX_INPUT_ROUNDS = 16
"""How many input-required rounds (2026-07-28) one request to a modern upstream may take before it is given up."""

_WITH_INPUT: dict[type[BaseModel], TypeAdapter[Any]] = {
    types.CallToolResult: TypeAdapter(types.CallToolResult | types.InputRequiredResult),
    types.GetPromptResult: TypeAdapter(types.GetPromptResult | types.InputRequiredResult),
    types.ReadResourceResult: TypeAdapter(types.ReadResourceResult | types.InputRequiredResult),
}
"""Results a 2026-07-28 upstream may answer with an ``InputRequiredResult`` instead (SEP-2322)."""

_RESULT_OF_REQUEST: dict[type[BaseModel], type[BaseModel]] = {
    types.CallToolRequest: types.CallToolResult,
    types.GetPromptRequest: types.GetPromptResult,
    types.ReadResourceRequest: types.ReadResourceResult,
}


class Upstream(Connection):
    """A supervised connection to one upstream server, and the requests made over it."""

    def _attempt(self) -> Attempt:
        """What the exception seam needs to know of one request over this connection."""
        streamable = isinstance(self.config, RemoteUpstream) and self.config.transport == "streamable-http"
        return Attempt(
            self.name,
            ended=self._ended.is_set,
            session_lost=self._session_lost,
            remote=isinstance(self.config, RemoteUpstream),
            # Tags the POST, so an HTTP error status (which the SDK reduces to -32603) can be read back.
            http_statuses=self._http_statuses if streamable else None,
        )

    def _watched(self, read: Any, write: Any) -> tuple[Any, Any]:
        return WatchedRead(read, self._ended.set), WatchedWrite(write)

    def _session_lost(self) -> None:
        """A remote upstream that forgot our session (it restarted, or expired it) answers every request with
        "Session terminated": reconnect, with a new handshake, instead of failing every later call."""
        log.warning("upstream_session_lost", upstream=self.name)
        self.request_restart()

    # --- which connection, and its session ------------------------------------------------------------------------

    async def for_host(self, host: HostEnvelope | None) -> Self:
        """The connection that serves the request of ``host`` in the host's own era (``None``: no host request).

        ``protocol: auto``: a 2026-07-28 host is served over a second connection in that era (opened at its first
        request, waited for up to ``connect_timeout_s``), when the server speaks it; everything else, and every
        host when the server does not, is served over the handshake-era connection. Each host thus meets the
        server as it would directly: a tool that asks the handshake way (a request mid-call) works for a
        handshake-era host, one that answers ``InputRequiredResult`` reaches a 2026-07-28 host with its own keys."""
        if host is None or not host.modern or self.twin_of is not None or self.config.protocol != "auto":
            return self
        if self.modern or self._follows_2026_host():  # this connection is already in the host's era, or is its one
            return self
        twin = self._twin or self._open_twin()
        if twin is None:
            return self
        if twin.state != "ready":
            with anyio.move_on_after(self.config.connect_timeout_s):
                while twin.state not in ("ready", "failed", "stopped"):
                    await twin.wait_changed()
        return twin if twin.state == "ready" and twin.modern else self

    @asynccontextmanager
    async def running(self, ready_within_s: float) -> AsyncIterator[Self]:
        """This upstream supervised in a task group of its own and ready (``wait_ready``: its start-up fault raised)
        within ``ready_within_s``; stopped on exit. For an upstream used without a proxy (the error-corpus collector,
        tests)."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.run)
            try:
                await self.wait_ready(ready_within_s)
                yield self
            finally:
                tg.cancel_scope.cancel()

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
            why = self.last_error or self.state
            raise PersistentOutage.of("unavailable", upstream=self.name, reason=why, details=details)
        if self.last_error:
            raise ConnectFailure.of(
                "not_connected_error", upstream=self.name, state=self.state, error=self.last_error, details=details
            )
        raise ConnectFailure.of("not_connected", upstream=self.name, state=self.state, details=details)

    # --- requests ---------------------------------------------------------------------------------------------------

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        meta: dict[str, Any] | None = None,
        *,
        timeout_s: float | None = None,
        on_progress: ProgressFn | None = None,
        progress_extends: bool = True,
        host: HostEnvelope | None = None,
    ) -> types.CallToolResult:
        """One attempt of a tool call. Returns the upstream's result (``isError`` ones too); raises ``Fault``.

        ``timeout_s`` bounds the attempt; progress from the upstream restarts it (when ``progress_extends``); the
        call's total time is the retry stage's scope around it. On timeout the SDK sends the upstream a
        cancellation, because the request is abandoned by cancellation of its scope. ``host``: the host request the
        call serves (its era, its declaration toward a 2026-07-28 upstream, its timers, who answers questions)."""
        target = await self.for_host(host)
        if target is not self:
            return await target.call_tool(
                name,
                arguments,
                meta,
                timeout_s=timeout_s,
                on_progress=on_progress,
                progress_extends=progress_extends,
                host=host,
            )
        session = await self.wait_ready(min(timeout_s or self.config.connect_timeout_s, self.config.connect_timeout_s))
        with self._stderr_window() as window:
            result = await self._send_call(
                session, name, arguments, meta, timeout_s, on_progress, progress_extends, host
            )
            if result.meta and STDERR_META_KEY in result.meta:  # only the connection says what stderr held
                kept = {k: v for k, v in result.meta.items() if k != STDERR_META_KEY}
                result = result.model_copy(update={"meta": kept})
            if window is not None and result.is_error and wordless(result_text(result)):
                result = await self._with_stderr_words(result, window, name)
            return result

    async def _send_call(
        self,
        session: ClientSession,
        name: str,
        arguments: dict[str, Any] | None,
        meta: dict[str, Any] | None,
        timeout_s: float | None,
        on_progress: ProgressFn | None,
        progress_extends: bool,
        host: HostEnvelope | None,
    ) -> types.CallToolResult:
        # The exception seam of ``errors`` (``upstream_faults``), spelled out here so that a success never enters that
        # module: what the attempt raises becomes a ``Fault`` there (``attempt_failed``), with ``sent`` known.
        attempt = self._attempt()
        token = WRITING.set(attempt)
        try:
            meta = host_meta(meta, host) if self.modern else meta
            if attempt.http_statuses is not None:
                meta = attempt.tag(meta)
            raw = self._raw_lane()
            began = anyio.current_time()
            # Registered with the host request's timers: stopped while the upstream waits for the host to answer.
            with anyio.CancelScope(deadline=began + timeout_s if timeout_s else math.inf) as scope, timing(host, scope):
                progress = _extending(scope, timeout_s if progress_extends else None, on_progress)
                if raw is not None:
                    version = session.protocol_version or "2025-11-25"  # as the SDK's send_request
                    result = await raw.call_tool(name, arguments, meta, attempt, progress, version)
                else:
                    params = types.CallToolRequestParams(name=name, arguments=arguments, _meta=meta or None)
                    request = types.CallToolRequest(params=params)
                    if self.modern:
                        result = await self._with_input(session, request, progress, host)
                    else:
                        result = await session.send_request(request, types.CallToolResult, progress_callback=progress)
            if scope.cancelled_caught:
                elapsed = anyio.current_time() - began
                raise AttemptTimeout.of(
                    "no_answer_within",
                    upstream=self.name,
                    method=name,
                    elapsed_s=elapsed,
                    details={"timeout_ms": int(elapsed * 1000), "upstream": self.name},
                )
        except Fault:
            raise
        except Exception as exc:
            raise attempt_failed(attempt, exc) from exc
        finally:
            WRITING.reset(token)
        if (sink := UPSTREAM_ERROR.get()) is not None:
            sink.error = None  # the upstream answered with a result (``errors.note_upstream_error``)
        return result

    def _raw_lane(self) -> RawCalls | None:
        """The raw lane, when this tool call may take it (the predicate of ``rawcall``'s docstring): a stdio process
        with a live lane, a handshake-era connection, no tracing the SDK's path would take part in."""
        raw = self._raw
        if raw is None or not raw.live or self.modern or not untraced():
            return None
        return raw

    # --- a wordless error result and the server's stderr ------------------------------------------------------------

    @contextmanager
    def _stderr_window(self) -> Iterator[_Window | None]:
        """The stderr written while one request is in flight on a stdio upstream (``None`` for other transports). A
        request that overlaps another (either way) is not alone: its lines cannot be told apart."""
        if self._tail is None:
            yield None
            return
        window = _Window(self._tail.written, alone=not self._windows)
        for other in self._windows:
            other.alone = False
        self._windows.add(window)
        try:
            yield window
        finally:
            self._windows.discard(window)

    async def _with_stderr_words(
        self, result: types.CallToolResult, window: _Window, tool: str
    ) -> types.CallToolResult:
        """``result`` (an error that says nothing) with the exception line the server wrote on stderr during the
        call, in its ``_meta`` (``STDERR_META_KEY``; an upstream's own value there is replaced). The line is waited
        for briefly: the server wrote it before its answer, but the pipe is relayed by another task. Until the
        SDK's own wrapper line for this tool shows the traceback is complete, at most ``STDERR_SETTLE_S``."""
        assert self._tail is not None
        with anyio.move_on_after(STDERR_SETTLE_S):
            while not wrapper_seen(self._tail.since(window.mark), tool):
                await self._tail.grown()
        entry: dict[str, Any]
        if not window.alone:
            entry = {"unattributed": "another request was in flight on this connection: its lines may be that one's"}
        else:
            words = exception_words(self._tail.since(window.mark))
            entry = {"words": words} if words else {"unattributed": "no exception line on stderr during the call"}
        meta = {**(result.meta or {}), STDERR_META_KEY: entry}
        return result.model_copy(update={"meta": meta})

    async def request(self, request: Any, result_type: type[R], host: HostEnvelope | None = None) -> R:
        """Forward a non-tool request (resources, prompts, completion) on behalf of ``host``'s request. SDK errors
        pass through as ``MCPError``; an upstream that does not answer within ``connect_timeout_s`` gets -32001 like
        any timed-out request."""
        if result_type in _WITH_INPUT and (target := await self.for_host(host)) is not self:
            return await target.request(request, result_type, host)
        session = await self.wait_ready(self.config.connect_timeout_s)
        with self._stderr_window(), upstream_errors(self._attempt()):
            if self.modern and result_type in _WITH_INPUT:
                params = request.params
                request = type(request)(params=params.model_copy(update={"meta": host_meta(params.meta, host)}))
                result: R = await self._with_input(session, request, None, host)
                return result
            return await session.send_request(request, result_type, self.config.connect_timeout_s)

    async def _with_input(
        self, session: ClientSession, request: Any, progress: ProgressFnT | None, host: HostEnvelope | None
    ) -> Any:
        """A 2026-07-28 request that the upstream may answer with ``InputRequiredResult`` (SEP-2322): what it asks
        (sampling, elicitation, roots) goes to the host whose request this is, under the upstream's own keys, and
        the request is sent again with the answers and the upstream's ``requestState``, until it completes.

        Waiting for the host is not upstream time (the call's timers stop, see ``HostEnvelope``); nothing runs on
        the upstream meanwhile. A question the host cannot answer ends the request (``HostDidNotAnswer``, mapped
        at the seam): -32021 for a capability it did not declare, as the upstream would have answered it."""
        adapter = _WITH_INPUT[_RESULT_OF_REQUEST[type(request)]]
        params = request.params
        timeout = None if isinstance(request, types.CallToolRequest) else self.config.connect_timeout_s
        for _ in range(MAX_INPUT_ROUNDS + 1):
            sent = type(request)(params=params)
            result = await session.send_request(
                sent, cast(Any, adapter), request_read_timeout_seconds=timeout, progress_callback=progress
            )
            if not isinstance(result, types.InputRequiredResult):
                return result
            answers = await self._ask_host(result.input_requests or {}, host)
            params = params.model_copy(
                update={"input_responses": answers or None, "request_state": result.request_state}
            )
        raise MCPError(
            types.INTERNAL_ERROR,
            f"upstream {self.name!r} asked for input more than {MAX_INPUT_ROUNDS} times in one request",
        )

    async def _ask_host(self, requests: dict[str, Any], host: HostEnvelope | None) -> dict[str, Any]:
        """Ask the host every question of one round at once (so a 2026-07-28 host gets them in one round too)."""
        answers: dict[str, BaseModel | types.ErrorData] = {}

        async def ask(key: str, question: Any) -> None:
            answers[key] = await self.hooks.server_request(self, question, key=key, host=host)

        async with anyio.create_task_group() as tg:
            for key, question in requests.items():
                tg.start_soon(ask, key, question)
        for key, answer in answers.items():
            if isinstance(answer, types.ErrorData):
                raise HostDidNotAnswer(requests[key].method, answer)
        return answers

    async def set_log_level(self, level: types.LoggingLevel) -> None:
        self._log_level = level
        if self.supports("logging") and self._session is not None and not self.modern:
            await self._session.send_request(set_level(level), types.EmptyResult, self.config.connect_timeout_s)

    async def subscribe(self, uri: str, on: bool) -> None:
        (self._subscriptions.add if on else self._subscriptions.discard)(uri)
        req: types.SubscribeRequest | types.UnsubscribeRequest = (
            types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
            if on
            else types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri))
        )
        await self.request(req, types.EmptyResult)


class WatchedRead:
    """Delegates to a transport's read stream and reports its end: how a dead stdio process is noticed at once (by
    the supervisor, and by the seam: a call whose connection ended meanwhile says the upstream died)."""

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

    def __aiter__(self) -> WatchedRead:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._inner.__anext__()
        except StopAsyncIteration:
            self._on_end()
            raise

    async def __aenter__(self) -> WatchedRead:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        result: bool | None = await self._inner.__aexit__(*exc)
        return result

    def __getattr__(self, name: str) -> Any:  # last_context and friends
        return getattr(self._inner, name)


def note_written(message: Any) -> None:
    """The session wrote ``message`` to the transport: if it is a request of the current attempt, that is sent."""
    attempt = WRITING.get()
    if attempt is not None and isinstance(message, types.JSONRPCRequest):
        attempt.sent = True


class WatchedWrite:
    """Delegates to a transport's write stream and tells the seam what was written (``note_written``): how an
    attempt knows whether its request left (a write into a stream already closed raises, and then nothing was
    sent)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def send(self, item: Any) -> None:
        await self._inner.send(item)
        note_written(getattr(item, "message", None))

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> WatchedWrite:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        result: bool | None = await self._inner.__aexit__(*exc)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


STDERR_SETTLE_S = 0.5
"""How long a wordless error result waits for the server's stderr to show the exception (only then)."""


@dataclass(eq=False, slots=True)
class _Window:
    mark: int
    """``StderrTail.written`` when the request was sent."""
    alone: bool = True
    """No other request was in flight on this connection at any time during this one."""


def _extending(scope: anyio.CancelScope, extend_s: float | None, on_progress: ProgressFn | None) -> ProgressFnT:
    """The progress callback of one attempt: progress moves its deadline ``extend_s`` on (``None``: never) and is
    passed to ``on_progress``."""

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        if extend_s:
            scope.deadline = max(scope.deadline, anyio.current_time() + extend_s)
        if on_progress is not None:
            await on_progress(progress, total, message)

    return progress
