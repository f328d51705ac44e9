"""The fault classifier: every upstream outcome (an exception, an ``isError`` result, an HTTP status) -> one ``Fault``.

Pure and total: it never raises, never does I/O, and maps anything it does not recognise to a conservative fault
(maybe executed). ``upstream/errors.py`` calls it at the upstream's exception seam; nothing above it sees SDK
exceptions.

Exceptions (``classify_exception``; ``sent`` says whether the request may have left the proxy):

    Fault                               passed through unchanged
    MCPError -32001 REQUEST_TIMEOUT     AttemptTimeout, maybe_executed
    MCPError -32000 CONNECTION_CLOSED   ConnectionLost (sent) | ConnectFailure (not sent)
    MCPError -32602 "unknown tool"      UnknownTool, rejected      (other -32602: SchemaViolation, rejected,
                                                                    details.schema_drift_candidate)
    MCPError -32601                     ProtocolMismatch (c), rejected
    MCPError -32600 / -32700            MalformedArguments, rejected (catalog B3); -32600 "Session terminated" ->
                                        ConnectionLost, rejected (the session expired before dispatch); the SDK's
                                        stand-ins for an HTTP answer it could not read (an empty or non-JSON body,
                                        an unexpected content type, 202 to a request) -> MalformedResponse (E1),
                                        maybe_executed
    MCPError -32603                     GatewayError when it is the SDK's stand-in for an HTTP error status, else
                                        TransientExecutionError (catalog D1), maybe_executed, ``tool_level``: the
                                        tool's execution error (its own circuit counts it, never the upstream's)
    MCPError -32022 / -32021 / -32020   ProtocolMismatch (a) transient / (d) / header mismatch, rejected
    MCPError -32042                     PermissionDenied (URL elicitation required), ask_user
    MCPError, other codes (e.g. 0)      PermanentExecutionError, maybe_executed (an untyped upstream failure)
    httpx2.HTTPStatusError              classify_http_status
    httpx2 connect/pool timeout, ConnectError, ConnectionRefusedError, FileNotFoundError, PermissionError
                                        ConnectFailure, not_sent
    TimeoutError, httpx2 read timeout   AttemptTimeout (sent) | ConnectFailure (not sent: a connect timeout)
    other OSError, httpx2 network errors, anyio EndOfStream / ClosedResourceError / BrokenResourceError
                                        ConnectionLost (sent) | ConnectFailure (not sent)
    pydantic.ValidationError, ValueError from JSON decoding
                                        MalformedResponse, maybe_executed
    an exception group                  its first leaf
    anything else                       GatewayError, maybe_executed, the exception text as upstream_message

HTTP statuses (``classify_http_status``): 401 Unauthenticated, 403 PermissionDenied, 408 AttemptTimeout (rejected),
409 StateConflict, 429 RateLimited (rejected: refused before dispatch) with Retry-After, or QuotaExhausted when the
server asks for an hour or more, 400/413/422 MalformedArguments, 404 GatewayError (rejected: session or endpoint
gone), 500/502/504 GatewayError maybe_executed. **503**: rejected when the response carries a Retry-After (RFC 9110
§15.6.4: the server is refusing load and says when to come back) or the caller says its 503s mean "not processed";
otherwise maybe_executed (catalog C4).

``isError`` results: ``classify_result`` (defined in ``error_results.py``, re-exported here) reads a typed hint first
(the convention ``_meta["io.github.resilient-mcp/error"]``, or a chained resilient-mcp's own fault observation) and
falls back to conservative text heuristics. An MCPError whose ``data`` is a chained resilient-mcp's observation is
read back as that fault.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pydantic
from mcp.shared.exceptions import MCPError

from . import (
    AttemptTimeout,
    ConnectFailure,
    ConnectionLost,
    Fault,
    GatewayError,
    MalformedArguments,
    MalformedResponse,
    MissingRequiredArgument,
    PermanentExecutionError,
    PermissionDenied,
    ProtocolMismatch,
    QuotaExhausted,
    RateLimited,
    RepairAction,
    RetrySafety,
    SchemaViolation,
    SideEffectStatus,
    StateConflict,
    Unauthenticated,
    UnknownTool,
    vocab,
)
from .error_results import (
    ERROR_META_KEY,
    FAULT_META_KEY,
    QUOTA_RETRY_AFTER_MS,
    classify_result,
    classify_text,
    fault_from_observation,
    result_text,
)
from .vocab import Basis

__all__ = [
    "ERROR_META_KEY",
    "FAULT_META_KEY",
    "QUOTA_RETRY_AFTER_MS",
    "classify_exception",
    "classify_http_status",
    "classify_result",
    "parse_retry_after",
    "result_text",
]

_SDK_HTTP_STANDIN = "server returned an error response"  # mcp/client/streamable_http.py, any non-404 HTTP error
_SDK_UNREADABLE_RESPONSE = (  # mcp/client/streamable_http.py: the answer to our POST could not be read
    "failed to parse json response",
    "failed to parse sse message",
    "unexpected content type",
    "server answered a request with 202 accepted",
)


def parse_retry_after(value: str, now: datetime) -> int | None:
    """A ``Retry-After`` value (delay-seconds or an HTTP-date, RFC 9110 §10.2.3) as milliseconds from ``now``.

    ``None`` when the value is invalid; a date in the past gives 0. A naive ``now`` is taken as UTC."""
    value = value.strip()
    if value.isdigit():
        return int(value) * 1000
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0, int((when - now).total_seconds() * 1000))


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is not None:
        return value
    lowered = name.lower()
    return next((v for k, v in headers.items() if k.lower() == lowered), None)


def classify_http_status(
    status: int,
    headers: Mapping[str, str],
    *,
    now: datetime | None = None,
    unavailable_not_processed: bool = False,
    message: str | None = None,
) -> Fault:
    """The fault an HTTP error status of the MCP endpoint means (see the module docstring for the table)."""
    raw_after = _header(headers, "retry-after")
    after = parse_retry_after(raw_after, now or datetime.now(UTC)) if raw_after is not None else None
    details: dict[str, Any] = {"http_status": status, "basis": Basis.STANDARD_CODE.value}
    common: dict[str, Any] = {"details": details, "upstream_code": status, "upstream_message": message}
    not_run: dict[str, Any] = {
        **common,
        "retry_safety": RetrySafety.REJECTED,
        "side_effect_status": SideEffectStatus.NONE,
    }
    if status == 401:
        scheme = (_header(headers, "www-authenticate") or "").split(" ", 1)[0]
        if scheme:
            details["auth_scheme"] = scheme
        return Unauthenticated.of("http_401", **common)
    if status == 403:
        return PermissionDenied.of("http_403", **common)
    if status == 429:
        if after is not None and after >= QUOTA_RETRY_AFTER_MS:
            return QuotaExhausted.of("http_429", retry_after_ms=after, **common)
        return RateLimited.of("http_429", retry_after_ms=after, **common)
    if status == 408:
        return AttemptTimeout.of("http_status", status=status, **not_run)
    if status == 409:
        return StateConflict.of("http_409", **common)
    if status in (400, 413, 422):
        return MalformedArguments.of("http_status", status=status, retry_safety=RetrySafety.REJECTED, **common)
    if status == 404:
        return GatewayError.of("http_status", status=status, **not_run)
    if status == 503 and (after is not None or unavailable_not_processed):
        return GatewayError.of("http_status", status=status, retry_after_ms=after, **not_run)
    if status >= 500:
        return GatewayError.of("http_status", status=status, retry_after_ms=after, **common)
    if status >= 400:
        return PermanentExecutionError.of("http_status", status=status, **not_run)
    return MalformedResponse.of("unexpected_http_status", status=status, **common)


def classify_exception(exc: BaseException, *, sent: bool) -> Fault:
    """The fault an exception from the upstream call means. ``sent``: the request may have reached the upstream.

    Cancellation must be re-raised by the caller before classifying; it is not a fault."""
    if isinstance(exc, Fault):
        return exc
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return classify_exception(exc.exceptions[0], sent=sent)
    if isinstance(exc, MCPError):
        # a JSON-RPC / MCP code with a defined meaning
        return _from_mcp_error(exc, sent=sent).with_details(keep=True, basis=Basis.STANDARD_CODE.value)
    if isinstance(exc, httpx2.HTTPStatusError):
        return classify_http_status(exc.response.status_code, exc.response.headers, message=str(exc))
    return _from_transport(exc, sent=sent).with_details(keep=True, basis=Basis.OBSERVED.value)


def _lost(exc: BaseException, *, sent: bool, what: str) -> Fault:
    text = str(exc) or type(exc).__name__
    observed = {"basis": Basis.OBSERVED.value}
    if sent:
        return ConnectionLost.of("lost_after_send", what=what, upstream_message=text, details=observed)
    return ConnectFailure.of("unreachable", what=what, upstream_message=text, details=observed)


def _from_transport(exc: BaseException, *, sent: bool) -> Fault:
    text = str(exc) or type(exc).__name__
    name = type(exc).__name__
    if isinstance(exc, httpx2.ConnectTimeout | httpx2.PoolTimeout | httpx2.ConnectError | ConnectionRefusedError):
        return ConnectFailure.of("connect", exception=name, upstream_message=text)
    if isinstance(exc, FileNotFoundError | PermissionError):
        return ConnectFailure.of("not_started", exception=name, upstream_message=text)
    if isinstance(exc, TimeoutError | httpx2.TimeoutException):
        if not sent:
            return ConnectFailure.of("connect_timeout", upstream_message=text)
        return AttemptTimeout.of("no_answer", upstream_message=text)
    if isinstance(exc, OSError | httpx2.TransportError | anyio.EndOfStream | anyio.ClosedResourceError):
        return _lost(exc, sent=sent, what=name)
    if isinstance(exc, anyio.BrokenResourceError):
        return _lost(exc, sent=sent, what=name)
    if isinstance(exc, pydantic.ValidationError | json.JSONDecodeError | UnicodeDecodeError):
        return MalformedResponse.of("unparsable", details={"parse_error": _short(text)}, upstream_message=text)
    return GatewayError.of("unexpected", exception=name, details={"exception_type": name}, upstream_message=text)


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _names_unknown_tool(lowered: str) -> bool:
    """ "unknown tool", or "tool ... not found" within 80 characters (the SDKs' -32602 wordings). Linear."""
    if "unknown tool" in lowered:
        return True
    at = lowered.find("tool")
    return at >= 0 and 0 <= lowered.find("not found", at) - at <= 90


def _read_message(exc: MCPError, kw: dict[str, Any]) -> Fault:
    """An upstream's JSON-RPC error whose code alone says nothing of the fault (-32603, -32000 from a server, an
    application code): its message read like any other error text. A bare code is never evidence of a transient
    fault; an unrecognised message is said so (``details.basis``), never transient, and may have executed."""
    fault = classify_text(exc.message)
    if fault.details.get("basis") == Basis.UNRECOGNISED.value:
        details = {**fault.details, "upstream_code": exc.code}
        fault = PermanentExecutionError.of("untyped", details=details, retry_safety=RetrySafety.MAYBE_EXECUTED)
    refused = fault.retry_safety is RetrySafety.NOT_SENT  # the upstream got the call and refused it
    return fault.replace(
        upstream_message=kw["upstream_message"],
        upstream_code=kw["upstream_code"],
        retry_safety=RetrySafety.REJECTED if refused else fault.retry_safety,
    )


def _from_mcp_error(exc: MCPError, *, sent: bool) -> Fault:
    code, msg = exc.code, exc.message
    lowered = msg.lower()
    kw: dict[str, Any] = {"upstream_message": msg, "upstream_code": code}
    if isinstance(exc.data, Mapping) and isinstance(exc.data.get("fault_type"), str):
        chained = fault_from_observation(exc.data, upstream_message=msg)
        if chained is not None:
            return chained
    rejected: dict[str, Any] = {**kw, "retry_safety": RetrySafety.REJECTED, "side_effect_status": SideEffectStatus.NONE}
    if code == types.REQUEST_TIMEOUT:
        return AttemptTimeout.of("no_answer", **kw)
    if code == types.CONNECTION_CLOSED and lowered.startswith("connection closed"):  # the SDK's own, on EOF
        return _lost(exc, sent=sent, what="connection closed")
    if code == types.CONNECTION_CLOSED:  # a server's generic -32000 "Server error": its message says what failed
        return _read_message(exc, kw)
    if code == types.INVALID_PARAMS:
        if _names_unknown_tool(lowered):
            return UnknownTool.of("reported", **rejected)
        reading = vocab.read(msg)
        if reading is not None and reading.rule.fault is MissingRequiredArgument:  # the validator names an absent one
            # (also a drift candidate: a schema that gained a required argument is refused the same way)
            return MissingRequiredArgument.of("reported", details={"schema_drift_candidate": True}, **rejected)
        return SchemaViolation.of("upstream_rejected", details={"schema_drift_candidate": True}, **rejected)
    if code == types.METHOD_NOT_FOUND:
        return ProtocolMismatch.of("no_tool_calls", details={"variant": "c"}, **rejected)
    if code == types.INVALID_REQUEST and "session terminated" in lowered:
        return ConnectionLost.of("session_expired", **rejected)
    if code in (types.INVALID_REQUEST, types.PARSE_ERROR) and lowered.startswith(_SDK_UNREADABLE_RESPONSE):
        return MalformedResponse.of("unreadable_http", details={"parse_error": _short(msg)}, **kw)
    if code in (types.INVALID_REQUEST, types.PARSE_ERROR):
        return MalformedArguments.of("unreadable_request", **rejected)
    if code == types.INTERNAL_ERROR:
        if lowered == _SDK_HTTP_STANDIN:
            return GatewayError.of("http_error_status", **kw)
        # The upstream is alive and answered: the tool itself failed. Its own circuit counts it, the upstream's not.
        return _read_message(exc, kw).replace(tool_level=True)
    return _from_spec_code(exc, kw, rejected)


def _from_spec_code(exc: MCPError, kw: dict[str, Any], rejected: dict[str, Any]) -> Fault:
    code, data = exc.code, exc.data if isinstance(exc.data, Mapping) else {}
    if code == types.UNSUPPORTED_PROTOCOL_VERSION:
        details = {"variant": "a", "supported_versions": data.get("supported", data.get("supportedVersions"))}
        # Transient only through renegotiation, which the terminal does once (drift.recover): the retry stage
        # must not repeat the identical request.
        return ProtocolMismatch.of("protocol_version", transient=False, details=details, **rejected)
    if code == types.MISSING_REQUIRED_CLIENT_CAPABILITY:
        details = {"variant": "d", "missing_capability": data.get("capability", data.get("requiredCapabilities"))}
        return ProtocolMismatch.of("client_capability", details=details, repair_action=RepairAction.ABORT, **rejected)
    if code == types.HEADER_MISMATCH:
        return ProtocolMismatch.of("headers", details={"variant": "headers"}, **rejected)
    if code == types.URL_ELICITATION_REQUIRED:
        return PermissionDenied.of(
            "browser_authorization", details={"elicitations": data.get("elicitations")}, **rejected
        )
    return _read_message(exc, kw)
