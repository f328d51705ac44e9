"""The raw tools/call lane of a stdio upstream: the request written as one JSON-RPC line, its answer taken off the
wire by the reader before any pydantic parsing, and handed to the waiting call.

On the SDK's path (``ClientSession.send_request``) every tool call builds a request model, passes the dispatcher,
two memory streams (session → writer task, reader task → session) and a response stream of its own, and every line
the upstream writes is validated whole as a ``JSONRPCMessage`` before the dispatcher looks at its id: per call that
hopping, not the call, was most of the proxy's client-side time (benchmarks/README.md, "Where a call's time goes").
Here ``RawCalls.call_tool`` writes the line to the process's stdin itself and waits on a one-shot event; the stdio
reader (``stdio._Pump``) reads the id of each line from its first or last bytes (``take``) and, for one of this
lane's ids, parses the line once (``pydantic_core.from_json``, in a worker thread from 1 MiB as the reader does) and
wakes the call. Every other line (notifications, server→client requests such as sampling, elicitation and roots,
answers to the SDK's own ids) goes to the SDK's session exactly as before.

What is kept, and how:

- ids: integers from ``FIRST_ID`` (2**30) to ``2**31 - 1``, then again from 2**30: a 32-bit integer and a safe
  JavaScript number (the Node servers parse ids with ``JSON.parse``), never reached by the SDK session's own counter
  (it counts from 0, one per request, and starts again with each connection). An answer whose id is the string form
  (``"1073741824"``) is matched as the SDK matches it (``coerce_request_id``);
- the request is the SDK's: the same params (``name``, ``arguments`` unless ``None``, ``_meta`` without its ``None``
  values) and, as the SDK always adds for our calls (``calls.Upstream`` always passes a progress callback), the
  request's id as ``_meta.progressToken``;
- ``sent``: the attempt (``errors.Attempt``) turns sent when the line was handed to the pipe; a write that fails
  first ("Connection closed", as the SDK raises for a closed write stream) was not sent. A pipe the server stopped
  reading ends the session as the SDK's writer does (the reader's stream is closed: the connection restarts);
- answers: a result is validated against the negotiated version's result shape (as the SDK's
  ``validate_server_result``), later revisions' keys dropped, and validated into ``types.CallToolResult``
  (``call_tool_result``); a JSON-RPC error becomes the ``MCPError`` the SDK raises. A line with one of our ids that
  is not a well-formed answer (no JSON, a result that is not an object, an error without a code) goes on to the SDK
  as every line did: unreadable (logged, kept in the stderr tail), the call left waiting, as it was;
- an answer too large (``max_message_bytes``): the reader's stand-in error (``OVERSIZED_META``, E4) is handed to the
  call as it is to an SDK request, matched by the id found at the line's edges or as the one request in flight;
- order: what the server wrote before an answer (a log message, a notification) reaches the proxy's handlers
  before the call's result, as on the SDK's path (``RawCalls.after_session_message``);
- progress: ``notifications/progress`` for one of our tokens is routed by the reader to the call's callback (in a task
  of its own, its exceptions logged, as the SDK runs it): the attempt's deadline moves on and the host is told;
- cancellation and timeouts: a call cancelled after its line was written (the attempt's deadline, the host's cancel,
  the proxy stopping) writes ``notifications/cancelled`` for its id ("caller cancelled", shielded, at most 5 s, as
  the SDK's courtesy cancel), and a late answer is dropped;
- the end of the process: when the reader reaches the end of stdout, the connection's ``ended`` is set first and
  then every waiting call fails with "Connection closed" (``CONNECTION_CLOSED``), as the SDK fails its requests, so
  the seam maps it to the same fault (the upstream died during the call); a restart fails them the same way, before
  the session closes.

The predicate (``calls.Upstream._raw_lane``): a tool call takes this lane when

- the connection is a stdio upstream started by ``stdio_upstream`` (not Windows, not a test's transport), the lane
  is on (``RAW_SWITCH``) and attached to the live process;
- the connection speaks a handshake-era version (not 2026-07-28: input-required rounds and the per-request envelope
  are the SDK's);
- no OpenTelemetry tracing is in play: no global tracer provider is set (the SDK's client span would record) and no
  span is current (the SDK would put its ``traceparent`` into ``_meta``): with the proxy's tracing on, calls take
  the SDK's path.

Everything else (2026-07-28, HTTP, SSE, other requests, listings) takes the SDK's path. ``RAW_SWITCH=off``
(``RESILIENT_MCP_RAW_UPSTREAM_CALLS=off`` in the proxy's environment) turns the lane off for connections started
after it is set.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
import anyio.lowlevel
import anyio.to_thread
import mcp_types as types
import pydantic_core
import structlog
from mcp.shared.dispatcher import ProgressFnT, coerce_request_id
from mcp.shared.exceptions import MCPError
from mcp_types.methods import SERVER_RESULTS
from opentelemetry import trace
from pydantic import BaseModel, TypeAdapter, ValidationError

from ..adapters.sdk import ABANDON_WRITE_TIMEOUT_S, later_revision_fields
from ..text.jsonlines import edge_id
from .errors import Attempt

log = structlog.get_logger(__name__)

RAW_SWITCH = "RESILIENT_MCP_RAW_UPSTREAM_CALLS"
"""``off`` turns the lane off."""
FIRST_ID = 1 << 30
"""The first id of the lane's requests (see the module docstring)."""
_ID_END = 1 << 31
_EDGE = 512
"""How many bytes at each end of a line are searched for its id."""
_SNIFF_BYTES = 1 << 16
"""Lines up to this size whose id is not at an edge (a notification, an unusual key order) are parsed to look."""
_THREAD_PARSE_BYTES = 1 << 20
_CLOSED = types.ErrorData(code=types.CONNECTION_CLOSED, message="Connection closed")
_METHOD = "tools/call"


def enabled() -> bool:
    """Whether the lane is on (``RAW_SWITCH`` is not ``off``)."""
    return os.environ.get(RAW_SWITCH, "").lower() != "off"


def untraced() -> bool:
    """No OpenTelemetry tracing the SDK's path would take part in (see the predicate in the module docstring)."""
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return False
    return not trace.get_current_span().get_span_context().is_valid


class Wire(Protocol):
    """What the lane needs of the stdio reader and writer of one process (``stdio._Pump``)."""

    async def send_line(self, data: bytes) -> None:
        """Write ``data`` to the process's stdin; raises ``anyio.ClosedResourceError``/``BrokenResourceError``/
        ``OSError`` when it cannot."""
        ...

    def spawn(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """Run ``fn(*args)`` in a task of the reader's task group."""
        ...

    def track(self, request_id: int, on: bool) -> None:
        """A request of the lane is in flight (``on``) or no longer: how an oversized answer is matched."""
        ...


@dataclass(eq=False, slots=True)
class _Waiting:
    done: anyio.Event
    on_progress: ProgressFnT | None
    outcome: dict[str, Any] | types.ErrorData | None = None
    after_session: bool = False
    """A message went to the SDK's session while this call waited (see ``after_session_message``)."""


class RawCalls:
    """The lane of one upstream process (see the module docstring): created with the transport, attached to the
    process's reader and writer, closed when either ends."""

    def __init__(self, on_end: Callable[[], None]) -> None:
        self._on_end = on_end
        self._wire: Wire | None = None
        self._pending: dict[int, _Waiting] = {}
        self._next = FIRST_ID
        self.closed = False
        self.calls = 0
        """Tool calls sent over the lane (what tests and benchmarks read to know the lane was taken)."""

    # --- the reader's side --------------------------------------------------------------------------------------

    def attach(self, wire: Wire) -> None:
        self._wire = wire

    @property
    def live(self) -> bool:
        return self._wire is not None and not self.closed

    @property
    def waiting(self) -> bool:
        """Some call of the lane waits for its answer (else the reader need not look)."""
        return bool(self._pending)

    async def take(self, line: bytes) -> bool:
        """Whether ``line`` (one whole line from the process's stdout) was for this lane and is taken: the answer to
        one of its calls, or progress of one. ``False``: it goes on to the SDK's session, untouched."""
        found = _edge_id(line)
        if found is not None and found not in self._pending:
            return False  # the SDK's (or a server's request): not parsed here
        if found is None and len(line) > _SNIFF_BYTES:
            return False
        try:
            message = (
                await anyio.to_thread.run_sync(pydantic_core.from_json, line)
                if len(line) >= _THREAD_PARSE_BYTES
                else pydantic_core.from_json(line)
            )
        except ValueError:
            return False
        if type(message) is not dict or message.get("jsonrpc") != "2.0":
            return False
        if "method" in message:
            return self._progress(message)
        key = _key(message.get("id"))
        if key is None or key not in self._pending:
            return False
        outcome: dict[str, Any] | types.ErrorData
        if "error" not in message and type(message.get("result")) is dict:
            outcome = message["result"]
        elif "result" not in message and "error" in message:
            try:
                outcome = types.ErrorData.model_validate(message["error"], by_name=False)
            except ValidationError:
                return False
        else:
            return False
        self._resolve(key, outcome)
        return True

    def after_session_message(self) -> None:
        """The reader handed a message to the SDK's session while calls wait: a log or a notification the server
        wrote before an answer must reach the proxy before the call's result does, as on the SDK's path (where the
        session spawns its handler before it wakes the request's waiter, which then takes one more step). The reader
        lets the session run before it takes the next line; the call takes one step after it wakes."""
        for waiting in self._pending.values():
            waiting.after_session = True

    def fail(self, request_id: int | str, error: types.ErrorData) -> bool:
        """Answer the lane's call ``request_id`` with ``error`` (the reader's stand-in for an oversized answer).
        ``False``: not one of the lane's calls."""
        key = _key(request_id)
        if key is None or key not in self._pending:
            return False
        self._resolve(key, error)
        return True

    def ended(self) -> None:
        """The process's stdout ended: the connection ended (set first, so the seam sees it), then every call
        waiting fails as the SDK's do. Not after ``close`` (a restart closes the lane before the streams, and a
        restart is no end of the process)."""
        if not self.closed:
            self._on_end()
            self.close()

    def close(self) -> None:
        """No more calls; every call waiting fails with "Connection closed". Idempotent."""
        self.closed = True
        for key in list(self._pending):
            self._resolve(key, _CLOSED)

    def _resolve(self, key: int, outcome: dict[str, Any] | types.ErrorData) -> None:
        waiting = self._pending.pop(key)
        if self._wire is not None:
            self._wire.track(key, False)
        waiting.outcome = outcome
        waiting.done.set()

    def _progress(self, message: dict[str, Any]) -> bool:
        if message.get("method") != "notifications/progress" or "id" in message:
            return False
        params = message.get("params")
        if type(params) is not dict:
            return False
        key, progress = _key(params.get("progressToken")), params.get("progress")
        if key is None or isinstance(progress, bool) or not isinstance(progress, int | float):
            return False
        waiting = self._pending.get(key)
        if waiting is None or waiting.on_progress is None or self._wire is None:
            return False
        total, text = params.get("total"), params.get("message")
        self._wire.spawn(
            _shielded,
            waiting.on_progress,
            float(progress),
            float(total) if isinstance(total, int | float) else None,
            text if isinstance(text, str) else None,
        )
        return True

    # --- the caller's side ----------------------------------------------------------------------------------------

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        meta: dict[str, Any] | None,
        attempt: Attempt,
        progress: ProgressFnT | None,
        version: str,
    ) -> types.CallToolResult:
        """One ``tools/call`` over the lane: the upstream's result, or the ``MCPError`` the SDK would raise."""
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        out_meta = {k: v for k, v in meta.items() if v is not None} if meta else {}
        rid = self._new_id()
        if progress is not None:
            out_meta["progressToken"] = rid
        if out_meta:
            params["_meta"] = out_meta
        line = pydantic_core.to_json({"jsonrpc": "2.0", "id": rid, "method": _METHOD, "params": params}) + b"\n"
        raw = await self._request(rid, line, attempt, progress)
        return call_tool_result(raw, version)

    def _new_id(self) -> int:
        rid = self._next
        while rid in self._pending:
            rid = rid + 1 if rid + 1 < _ID_END else FIRST_ID
        self._next = rid + 1 if rid + 1 < _ID_END else FIRST_ID
        return rid

    async def _request(self, rid: int, line: bytes, attempt: Attempt, progress: ProgressFnT | None) -> dict[str, Any]:
        wire = self._wire
        if wire is None or self.closed:
            raise MCPError(code=types.CONNECTION_CLOSED, message="Connection closed")
        waiting = _Waiting(anyio.Event(), progress)
        self._pending[rid] = waiting
        wire.track(rid, True)
        self.calls += 1
        written = False
        try:
            # A cancellation before the write means nothing was sent; from here on the line may have left.
            await anyio.lowlevel.checkpoint_if_cancelled()
            written = True
            try:
                await wire.send_line(line)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                written = False
                raise MCPError(code=types.CONNECTION_CLOSED, message="Connection closed") from None
            attempt.sent = True
            await waiting.done.wait()
            if waiting.after_session:
                await anyio.lowlevel.checkpoint()
        except anyio.get_cancelled_exc_class():
            if written and waiting.outcome is None and not self.closed:
                await self._cancel(wire, rid)
            raise
        finally:
            if self._pending.get(rid) is waiting:
                del self._pending[rid]
                wire.track(rid, False)
        outcome = waiting.outcome
        if isinstance(outcome, types.ErrorData):
            raise MCPError(code=outcome.code, message=outcome.message, data=outcome.data)
        assert outcome is not None
        return outcome

    async def _cancel(self, wire: Wire, rid: int) -> None:
        """The SDK's courtesy cancel for a request its caller abandoned: shielded, bounded, its failure logged."""
        params = {"requestId": rid, "reason": "caller cancelled"}
        note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}
        with anyio.move_on_after(ABANDON_WRITE_TIMEOUT_S, shield=True) as scope:
            try:
                await wire.send_line(pydantic_core.to_json(note) + b"\n")
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                log.debug("upstream_cancel_dropped", request_id=rid)
        if scope.cancelled_caught:
            log.warning("upstream_cancel_gave_up", request_id=rid, reason="transport write blocked")


def call_tool_result(raw: dict[str, Any], version: str) -> types.CallToolResult:
    """The chain's ``CallToolResult`` of a raw result, checked as the SDK's ``send_request`` checks it: the
    negotiated version's result shape, then without the keys only a later revision has."""
    ttl = raw.get("ttlMs")  # the SDK floors a negative ttlMs first (2026-07-28 caching)
    if isinstance(ttl, int | float) and not isinstance(ttl, bool) and ttl < 0:
        raw["ttlMs"] = 0
    surface = _surface(version)
    if surface is not None:
        surface.validate_python(raw, by_name=False)
    if not (foreign := later_revision_fields(_METHOD, version)).isdisjoint(raw):
        raw = {key: value for key, value in raw.items() if key not in foreign}
    return types.CallToolResult.model_validate(raw, by_name=False)


_SURFACES: dict[str, TypeAdapter[Any] | None] = {}


def _surface(version: str) -> TypeAdapter[Any] | None:
    if version not in _SURFACES:
        row: type[BaseModel] | Any = SERVER_RESULTS.get((_METHOD, version))
        _SURFACES[version] = TypeAdapter(row) if row is not None else None
    return _SURFACES[version]


def _key(value: object) -> int | None:
    """The lane's key of a request id read off the wire (``"7"`` is 7, as the SDK correlates); ``None``: not an id
    the lane could have sent."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    key = coerce_request_id(value)
    return key if isinstance(key, int) else None


def _edge_id(line: bytes) -> int | str | None:
    """``edge_id`` of a whole line, a string id read as the SDK correlates it (``"7"`` is 7)."""
    view = memoryview(line)
    found = edge_id(view[:_EDGE], view[max(0, len(line) - _EDGE) :])
    return coerce_request_id(found) if isinstance(found, str) else found


async def _shielded(fn: ProgressFnT, progress: float, total: float | None, message: str | None) -> None:
    try:
        await fn(progress, total, message)
    except Exception:
        log.exception("upstream_progress_callback_raised")
