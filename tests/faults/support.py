"""How the vocabulary tests read an error text: as the ``isError`` result of a tool, classified as the proxy does."""

from __future__ import annotations

import mcp_types as types

from resilient_mcp.faults import Fault
from resilient_mcp.faults.classify import classify_result


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
