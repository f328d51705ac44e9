"""Faults that change what a successful call returns (E2-E5, F4) or what the server lists (A2, A3, F4).

Each function takes the honest result (or tool list) and returns the faulty one; none of them does I/O.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import mcp_types as types

from .params import (
    CorruptionParams,
    DriftParams,
    IncompleteParams,
    InjectionParams,
    OutputSchemaParams,
    OversizedParams,
    RenameParams,
)


def _text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def _with(result: types.CallToolResult, text: str | None = None, **update: Any) -> types.CallToolResult:
    if text is not None:
        update["content"] = [types.TextContent(text=text)]
    return result.model_copy(update=update)


def break_output_schema(
    result: types.CallToolResult, params: OutputSchemaParams, tool: types.Tool | None
) -> types.CallToolResult:
    """E2: drop or retype a property of structuredContent, or leave structuredContent out."""
    if params.variant == "absent":
        return _with(result, structured_content=None)
    data = dict(result.structured_content or {})
    required = list((tool.output_schema or {}).get("required", [])) if tool is not None else []
    name = params.field or (required[0] if required else next(iter(data), "value"))
    if params.variant == "missing_field":
        data.pop(name, None)
    else:
        data[name] = "not-a-number" if isinstance(data.get(name), int | float) else 12345
    return _with(result, text=json.dumps(data), structured_content=data)


def make_incomplete(result: types.CallToolResult, params: IncompleteParams) -> types.CallToolResult:
    """E3: an empty result, JSON text cut in the middle, or a page without its cursor."""
    if params.variant == "empty":
        return _with(result, content=[], structured_content=None)
    if params.variant == "truncated_json":
        text = _text(result)
        return _with(result, text=text[: max(1, len(text) // 2)], structured_content=None)
    data = dict(result.structured_content or {})
    for key, value in data.items():  # the page's items ("orders", "entries", "events"), half of them
        if isinstance(value, list):
            data[key] = value[: max(0, len(value) // 2)]
    data["next_cursor"] = None
    return _with(result, text=json.dumps(data), structured_content=data)


def make_oversized(result: types.CallToolResult, params: OversizedParams) -> types.CallToolResult:
    """E4: the result's text repeated (line by line) up to ``size_bytes``."""
    base = _text(result) or "row"
    line = base if base.endswith("\n") else base + "\n"
    reps = params.size_bytes // max(1, len(line.encode())) + 1
    return _with(result, text=(line * reps).encode()[: params.size_bytes].decode("utf-8", "ignore"))


def corrupt(result: types.CallToolResult, params: CorruptionParams) -> types.CallToolResult:
    """E5: a negative quantity or a stale timestamp in a success (``noop`` is handled by not running the tool)."""
    data = dict(result.structured_content or {})
    if params.variant == "negative":
        for key, value in data.items():
            if isinstance(value, int) and not isinstance(value, bool):
                data[key] = -abs(value) - 1
    elif params.variant == "stale":
        data = {k: ("2019-01-01T00:00:00Z" if k.endswith("_at") else v) for k, v in data.items()}
    return _with(result, text=json.dumps(data), structured_content=data)


def noop_success() -> types.CallToolResult:
    """E5 noop: says it worked; nothing happened."""
    return types.CallToolResult(
        content=[types.TextContent(text='{"status": "ok"}')], structured_content={"status": "ok"}
    )


def inject_output(result: types.CallToolResult, params: InjectionParams) -> types.CallToolResult:
    """F4: instructions appended to the tool's output."""
    return _with(result, content=[*result.content, types.TextContent(text=params.text)])


def inject_description(tools: list[types.Tool], name: str, params: InjectionParams) -> list[types.Tool]:
    """F4 (variant): the instructions placed in a tool's description."""
    return [
        t.model_copy(update={"description": f"{t.description or ''} {params.text}"}) if t.name == name else t
        for t in tools
    ]


def rename(tools: list[types.Tool], name: str, params: RenameParams) -> list[types.Tool]:
    """A2: rename (or remove) a tool."""
    target = params.tool or name
    if params.remove:
        return [t for t in tools if t.name != target]
    new = params.to or f"{target}_v2"
    return [t.model_copy(update={"name": new}) if t.name == target else t for t in tools]


def drift(tools: list[types.Tool], name: str, params: DriftParams) -> list[types.Tool]:
    """A3: rename properties of a tool's inputSchema and add required ones."""
    target = params.tool or name
    out = []
    for t in tools:
        if t.name != target:
            out.append(t)
            continue
        schema = copy.deepcopy(t.input_schema)
        props: dict[str, Any] = schema.setdefault("properties", {})
        required: list[str] = schema.setdefault("required", [])
        for old, new in params.rename.items():
            if old in props:
                props[new] = props.pop(old)
            schema["required"] = required = [new if r == old else r for r in required]
        for prop, sub in params.add.items():
            props[prop] = sub
            required.append(prop)
        out.append(t.model_copy(update={"input_schema": schema}))
    return out


def alter(result: types.CallToolResult, p: Any, tool: types.Tool | None) -> types.CallToolResult:
    """The real ``result`` changed as the fault's parameters ``p`` say (E2 E3 E4 E5 F4); errors pass unchanged.

    Shared by the chaos server and the proxy's chaos mode, so one fault looks the same from either."""
    if result.is_error:
        return result
    if isinstance(p, OutputSchemaParams):
        return break_output_schema(result, p, tool)
    if isinstance(p, IncompleteParams):
        return make_incomplete(result, p)
    if isinstance(p, OversizedParams):
        return make_oversized(result, p)
    if isinstance(p, CorruptionParams):
        return corrupt(result, p)
    if isinstance(p, InjectionParams):
        return inject_output(result, p) if p.in_ == "output" else result
    raise AssertionError(f"no injection for {type(p).__name__}")  # pragma: no cover
