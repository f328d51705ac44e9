"""How a reported fault looks on the wire: an ``isError`` result, a JSON-RPC error, or an HTTP status.

Shared by the chaos server, the proxy's chaos mode and the shim, so one plan means the same thing everywhere.
Defaults follow what real servers send: validation errors as ``isError`` results (SEP-1303), unknown tools and
protocol mismatches as JSON-RPC errors with the spec's codes, and typed hints
``_meta["io.github.resilient-mcp/error"] = {type, retryable, retry_after_ms, field}`` on every ``isError`` result
unless the rule says ``typed: false``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from ..faults.error_results import ERROR_META_KEY
from .params import ErrorParams


@dataclass(frozen=True, slots=True)
class _Spec:
    as_: str
    type: str
    retryable: bool
    message: str
    code: int
    status: int
    retry_after_ms: int | None = None


_SERVER_ERROR = -32000
_SPECS: dict[str, _Spec] = {
    "A1": _Spec("jsonrpc", "unknown_tool", False, "Unknown tool: {tool}", types.INVALID_PARAMS, 404),
    "A4": _Spec(
        "jsonrpc", "unsupported", False, "Unsupported protocol version", types.UNSUPPORTED_PROTOCOL_VERSION, 400
    ),
    "B1": _Spec(
        "result",
        "invalid_argument",
        False,
        "Input validation error: '{field}' is a required property",
        types.INVALID_PARAMS,
        400,
    ),
    "B2": _Spec(
        "result",
        "invalid_argument",
        False,
        "Input validation error: '{field}' has an invalid value",
        types.INVALID_PARAMS,
        400,
    ),
    "B3": _Spec("jsonrpc", "invalid_argument", False, "Invalid request", types.INVALID_REQUEST, 400),
    "B4": _Spec(
        "result",
        "invalid_argument",
        False,
        "'{field}' was rejected: the date must be in the future",
        types.INVALID_PARAMS,
        422,
    ),
    "D1": _Spec(
        "result", "unavailable", True, "The service is temporarily unavailable; try again", types.INTERNAL_ERROR, 503
    ),
    "D2": _Spec("result", "rate_limited", True, "Rate limit exceeded; slow down", _SERVER_ERROR, 429, 1000),
    "D4": _Spec("result", "not_found", False, "Not found", _SERVER_ERROR, 404),
    "D5": _Spec("result", "aborted", False, "The record changed since you read it", _SERVER_ERROR, 409),
    "F1": _Spec(
        "result", "unauthenticated", False, "Authentication required: the access token expired", _SERVER_ERROR, 401
    ),
    "F2": _Spec("result", "permission_denied", False, "Permission denied for this operation", _SERVER_ERROR, 403),
    "F3": _Spec("result", "resource_exhausted", False, "Daily quota exhausted", _SERVER_ERROR, 429, 86_400_000),
}

_A4: dict[str, tuple[int, str, Any]] = {
    "a": (
        types.UNSUPPORTED_PROTOCOL_VERSION,
        "Unsupported protocol version",
        {"supported": ["2026-07-28"], "requested": "2025-11-25"},
    ),
    "b": (
        types.METHOD_NOT_FOUND,
        "Tool {tool} requires task-augmented execution (execution.taskSupport: required)",
        None,
    ),
    "c": (types.METHOD_NOT_FOUND, "Method not found", "tools/call"),
    "d": (
        types.MISSING_REQUIRED_CLIENT_CAPABILITY,
        "Missing required client capability",
        {"requiredCapabilities": {"sampling": {}}},
    ),
}
_D5 = {
    "aborted": "The record changed since you read it",
    "already_exists": "An order with this client_ref exists",
    "failed_precondition": "The order must be cancelled before it can be deleted",
}


def reported_as(fault: str, params: ErrorParams) -> str:
    """result | jsonrpc | http: how this rule reports its fault."""
    return params.as_ or _SPECS[fault[:2]].as_


def _message(fault: str, params: ErrorParams, tool: str) -> str:
    spec = _SPECS[fault[:2]]
    text = params.message or (_D5.get(params.variant or "", spec.message) if fault[:2] == "D5" else spec.message)
    return text.format(tool=tool, field=params.field or "value")


def hint(fault: str, params: ErrorParams) -> dict[str, Any]:
    """The typed hint (``_meta["io.github.resilient-mcp/error"]``) of this fault."""
    spec = _SPECS[fault[:2]]
    kind = params.type or (params.variant if fault[:2] == "D5" and params.variant else spec.type)
    out: dict[str, Any] = {"type": kind, "retryable": spec.retryable if params.retryable is None else params.retryable}
    after = params.retry_after_ms if params.retry_after_ms is not None else spec.retry_after_ms
    if after is not None:
        out["retry_after_ms"] = after
    if params.field is not None:
        out["field"] = params.field
    return out | params.details


def error_result(fault: str, params: ErrorParams, tool: str) -> types.CallToolResult:
    """The fault as an ``isError`` tool result (typed unless ``typed: false``)."""
    meta = {ERROR_META_KEY: hint(fault, params)} if params.typed else None
    text = _message(fault, params, tool)
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True, _meta=meta)


def error_exception(fault: str, params: ErrorParams, tool: str) -> MCPError:
    """The fault as the JSON-RPC error a server would answer with."""
    if fault[:2] == "A4":
        code, message, data = _A4.get(params.variant or "a", _A4["a"])
        return MCPError(params.code or code, params.message or message.format(tool=tool), data)
    hinted: Any = hint(fault, params) if params.typed and fault[:2] != "A1" else None
    return MCPError(params.code or _SPECS[fault[:2]].code, _message(fault, params, tool), hinted)


def http_error(fault: str, params: ErrorParams, tool: str) -> tuple[int, dict[str, str], str]:
    """The fault as an HTTP response of the MCP endpoint: status, headers, body."""
    spec = _SPECS[fault[:2]]
    status = params.status or spec.status
    headers: dict[str, str] = {}
    after = params.retry_after_ms if params.retry_after_ms is not None else spec.retry_after_ms
    if after is not None and status in (429, 503):
        headers["Retry-After"] = str(math.ceil(after / 1000))
    if status == 401:
        headers["WWW-Authenticate"] = 'Bearer error="invalid_token"'
    return status, headers, _message(fault, params, tool)


def realize_error(fault: str, params: ErrorParams, tool: str) -> types.CallToolResult:
    """An ``isError`` result, or raises the JSON-RPC error, as the rule asks (``as: http`` is the shim's)."""
    if reported_as(fault, params) == "jsonrpc":
        raise error_exception(fault, params, tool)
    return error_result(fault, params, tool)
