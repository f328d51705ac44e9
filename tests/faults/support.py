"""How the vocabulary tests read an error text: as the ``isError`` result of a tool, classified as the proxy does."""

from __future__ import annotations

import mcp_types as types

from resilient_mcp.faults import (
    Fault,
    MissingRequiredArgument,
    PermanentExecutionError,
    PermissionDenied,
    QuotaExhausted,
    RateLimited,
    SchemaViolation,
    SemanticArgumentRejection,
    StateConflict,
    TransientExecutionError,
    Unauthenticated,
)
from resilient_mcp.faults.classify import classify_result

B1, B2, B4 = MissingRequiredArgument, SchemaViolation, SemanticArgumentRejection
D1, D2, D4, D5 = TransientExecutionError, RateLimited, PermanentExecutionError, StateConflict
F1, F2, F3 = Unauthenticated, PermissionDenied, QuotaExhausted
"""The fault classes the tests name by their catalog codes (docs/fault-catalog.md)."""


def of_text(text: str, tool: types.Tool | None = None, hint: dict[str, object] | None = None) -> Fault:
    """The fault an error result of ``text`` is read as (``tool``: the tool that answered it, when the reading
    depends on it; ``hint``: a typed hint under the proxy's ``_meta`` error key)."""
    meta = {"io.github.resilient-mcp/error": hint} if hint is not None else None
    result = types.CallToolResult(content=[types.TextContent(text=text)], is_error=True, _meta=meta)
    fault = classify_result(result, tool=tool)
    assert fault is not None, text
    return fault


def reads_as(text: str, cls: type[Fault], transient: bool, tool: types.Tool | None = None) -> Fault:
    """``of_text``, asserting the fault's class and whether it is transient."""
    fault = of_text(text, tool)
    assert type(fault) is cls and fault.is_transient is transient, (text, fault)
    return fault
