"""The upstream boundary's one exception seam: what a request to an upstream raises becomes a fault, here only.

After httpx's ``map_httpcore_exceptions``: the code that talks to the SDK runs inside ``upstream_faults(attempt)``
(a tool call: every exception becomes a ``Fault``) or ``upstream_errors(attempt)`` (resources, prompts, completion:
the upstream's ``MCPError`` reaches the host as it was), and nothing above sees an SDK, transport or anyio exception
of a tool call. ``to_fault`` is the mapping itself, pure:

    a Fault                                  unchanged (raised below the seam on purpose: no live session...)
    HostDidNotAnswer                         ProtocolMismatch (host_unanswered), not sent again
    MCPError with OVERSIZED_META data        OversizedResult (the stdio reader's stand-in for a line too large)
    an HTTP error status of the attempt's    classify_http_status (the SDK reduces it to -32603 "Server returned
    POST (streamable HTTP)                   an error response"); not for -32021, whose JSON-RPC error says more
    anything else                            classify_exception(exc, sent=attempt.sent)
    ... when the connection ended meanwhile  a maybe-executed fault says the upstream died during the call

``Attempt.sent`` is known, not assumed: it turns true when the request was handed to the transport (the write stream
of the session), so a request that the SDK could not even write ("Connection closed" from a stream already closed)
is a fault that did not reach the upstream. The sensors that learn it wrap the session's streams and live with the
calls that use them (``calls.WatchedWrite``: what was written, under ``WRITING``; ``calls.WatchedRead``: the
stream's end, the process died); a tool call's attempt runs the seam inline (``calls.Upstream._send_call``, the
same as ``upstream_faults``) and enters this module only when it raises (``attempt_failed``). Side effects at the
seam: the JSON-RPC error (or its absence) is noted for a task that watches the call (``note_upstream_error``), and
a remote upstream that forgot the session ("Session terminated") is reconnected.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import httpx2
import mcp_types as types
from mcp.shared.exceptions import MCPError

from ..call.meta import ATTEMPT_META, OVERSIZED_META
from ..faults import Fault, OversizedResult, ProtocolMismatch, RetrySafety, SideEffectStatus
from ..faults.classify import classify_exception, classify_http_status

MISSING_CAPABILITY = -32021
"""MissingRequiredClientCapability (2026-07-28, SEP-2575)."""

HttpStatus = tuple[int, dict[str, str]]


@dataclass(slots=True)
class ErrorSink:
    """Where the seam notes, for a task that watches the call, whether the upstream answered the attempt with a
    JSON-RPC error: such a task reports ``failed`` (with the error), where a tool that ran and said it failed
    (``result.isError``) reports ``completed``. Both reach the chain as faults, hence this note beside them."""

    error: types.ErrorData | None = None


UPSTREAM_ERROR: ContextVar[ErrorSink | None] = ContextVar("resilient_mcp_task_upstream_error", default=None)
"""The sink of the call the current task watches (set by ``tasks.bridge`` around the work it runs)."""


def note_upstream_error(error: types.ErrorData | None) -> None:
    """The upstream answered the current call's attempt with ``error`` (``None``: it answered with a result)."""
    sink = UPSTREAM_ERROR.get()
    if sink is not None:
        sink.error = error


class HostDidNotAnswer(Exception):
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

    def mcp_error(self) -> MCPError:
        """For any other request: the host's own error, as the upstream would have answered it directly."""
        return MCPError(self.error.code, self.error.message, self.error.data)


@dataclass(slots=True)
class Attempt:
    """One request to an upstream, as the seam sees it: what it needs to map what the request raises."""

    upstream: str
    ended: Callable[[], bool]
    """Whether the connection ended (the process exited) since the attempt began."""
    session_lost: Callable[[], None]
    """Reconnect: the remote upstream forgot our session."""
    remote: bool = False
    http_statuses: HttpStatuses | None = None
    """Where the HTTP error statuses of this connection's POSTs are kept (streamable HTTP only)."""
    http_id: str | None = None
    """The id that tags this attempt's POST (``ATTEMPT_META``), to read its HTTP status back."""
    sent: bool = False
    """The request was handed to the transport: it may have reached the upstream."""

    def tag(self, meta: dict[str, Any] | None) -> dict[str, Any] | None:
        """``meta`` with this attempt's id, when its HTTP status can be read back (streamable HTTP)."""
        if self.http_statuses is None:
            return meta
        self.http_id = self.http_statuses.new_id()
        return {**(meta or {}), ATTEMPT_META: self.http_id}


WRITING: ContextVar[Attempt | None] = ContextVar("resilient_mcp_upstream_attempt", default=None)
"""The attempt whose request the current task is writing (``calls.WatchedWrite`` marks it sent)."""


def attempt_failed(attempt: Attempt, exc: Exception) -> Fault:
    """What a tool call's ``attempt`` raising ``exc`` (not a ``Fault``) becomes: the seam's mapping, entered only on a
    failure (``calls.Upstream`` runs an attempt with ``WRITING`` set to it and calls this from its ``except``)."""
    if isinstance(exc, MCPError):
        note_upstream_error(exc.error)
        _observe(attempt, exc)
    http = attempt.http_statuses.pop(attempt.http_id) if attempt.http_statuses and attempt.http_id else None
    return to_fault(exc, sent=attempt.sent, http=http, died=attempt.ended(), upstream=attempt.upstream)


@contextmanager
def upstream_faults(attempt: Attempt) -> Iterator[Attempt]:
    """The seam of a tool call as a block: everything raised inside becomes a ``Fault`` (cancellation passes, as it
    must). ``calls.Upstream`` spells the same out inline, so that a success never enters this module."""
    token = WRITING.set(attempt)
    try:
        yield attempt
    except Fault:
        raise
    except Exception as exc:
        raise attempt_failed(attempt, exc) from exc
    else:
        note_upstream_error(None)
    finally:
        WRITING.reset(token)


@contextmanager
def upstream_errors(attempt: Attempt) -> Iterator[Attempt]:
    """The seam of any other request: the upstream's ``MCPError`` passes to the host as it is (a question the host
    did not answer becomes the host's own error); a lost session is reconnected."""
    token = WRITING.set(attempt)
    try:
        yield attempt
    except HostDidNotAnswer as exc:
        raise exc.mcp_error() from None
    except MCPError as exc:
        _observe(attempt, exc)
        raise
    finally:
        WRITING.reset(token)


def _observe(attempt: Attempt, exc: MCPError) -> None:
    if attempt.remote and session_terminated(exc):
        attempt.session_lost()


def session_terminated(exc: MCPError) -> bool:
    """A remote upstream that forgot our session (it restarted, or expired it) answers every request so."""
    return "session terminated" in exc.error.message.lower()


def to_fault(
    exc: BaseException, *, sent: bool, http: HttpStatus | None = None, died: bool = False, upstream: str = ""
) -> Fault:
    """The fault an exception of a tool call's attempt means (the module docstring's table)."""
    if isinstance(exc, Fault):
        return exc
    if isinstance(exc, HostDidNotAnswer):
        return exc.fault()
    if isinstance(exc, MCPError):
        if (oversized := _oversized(exc)) is not None:
            return oversized
        if exc.code == MISSING_CAPABILITY:
            http = None  # 2026-07-28 sends -32021 with HTTP 400: the JSON-RPC error says what it is
    fault = classify_http_status(*http) if http else classify_exception(exc, sent=sent)
    if died and fault.retry_safety is RetrySafety.MAYBE_EXECUTED:
        died_text = Fault.text("died_during_call", upstream=upstream, original=fault.message)
        return fault.replace(message=died_text).with_details(keep=True, upstream_state="died")
    return fault


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


class HttpStatuses:
    """HTTP error statuses of tools/call POSTs, by attempt id: the facts the SDK's stand-in error drops."""

    def __init__(self, limit: int = 1000) -> None:
        self._seen: dict[str, HttpStatus] = {}
        self._limit = limit

    @staticmethod
    def new_id() -> str:
        return uuid.uuid4().hex

    async def observe(self, response: httpx2.Response) -> None:
        """An httpx ``response`` event hook: keeps the status of an error answer to a tagged POST."""
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

    def pop(self, attempt: str) -> HttpStatus | None:
        return self._seen.pop(attempt, None)


def reason(exc: BaseException) -> str:
    """One line for a log: what failed (the first leaf of a group; an ``MCPError``'s or a fault's own words)."""
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return reason(exc.exceptions[0])
    if isinstance(exc, TimeoutError):
        return "timed out during startup/handshake"
    text = str(exc) or type(exc).__name__
    return text if isinstance(exc, MCPError | Fault) else f"{type(exc).__name__}: {text}"
