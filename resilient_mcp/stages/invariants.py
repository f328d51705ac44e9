"""Checks of a successful result against the policy's ``result_invariants``: corruption that looks like success.

The data checked is the result's ``structuredContent``, else its text content parsed as JSON (all text blocks joined;
only when the whole text is one JSON value). ``check`` returns the violations, each ``{"path", "message"}`` with a
JSON path (``$.orders``), at most ``MAX_VIOLATIONS``; an empty list means the result keeps its promise. A result with
no JSON data breaks every invariant that reads fields (``required``, ``fields``, ``json_schema``).
"""

from __future__ import annotations

import json
import re
from itertools import islice
from typing import Any

import mcp_types as types
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
from jsonschema.validators import validator_for  # type: ignore[import-untyped]

from ..policy import FieldCheck, ResultInvariants

__all__ = ["MAX_VIOLATIONS", "Invariants", "result_data"]

MAX_VIOLATIONS = 20
ABSENT: Any = object()
"""What ``value_at`` returns where the path leads nowhere (``None`` is a value a result can hold)."""
_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def result_data(result: types.CallToolResult) -> Any:
    """The data of a successful result: structuredContent, else the text parsed as JSON, else ``None``."""
    if result.structured_content is not None:
        return result.structured_content
    text = "".join(c.text for c in result.content if isinstance(c, types.TextContent)).strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _no_content(result: types.CallToolResult) -> bool:
    return all(isinstance(c, types.TextContent) and not c.text.strip() for c in result.content)


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, str | list | dict) and len(value) == 0)


def value_at(data: Any, path: str) -> Any:
    """The value at a dotted path (``order.items.0.id``: keys, and list indexes as digits), or ``ABSENT``."""
    value = data
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return ABSENT
    return value


def _json_path(path: str) -> str:
    return "$" + "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in path.split("."))


def _is(value: Any, kind: str) -> bool:
    if isinstance(value, bool) and kind != "boolean":
        return False
    return isinstance(value, _TYPES[kind])


def _field(value: Any, check: FieldCheck) -> str | None:
    """Why ``value`` breaks ``check``, or None."""
    if check.non_empty and _empty(value):
        return "is empty"
    if check.type is not None and not _is(value, check.type):
        return f"is not of type {check.type}"
    sized = isinstance(value, str | list | dict)
    if check.min_items is not None and (not sized or len(value) < check.min_items):
        return f"has fewer than {check.min_items} items" if sized else "has no items to count"
    if check.max_items is not None and (not sized or len(value) > check.max_items):
        return f"has more than {check.max_items} items" if sized else "has no items to count"
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if check.minimum is not None and (not number or value < check.minimum):
        return f"is less than {check.minimum:g}" if number else "is not a number"
    if check.maximum is not None and (not number or value > check.maximum):
        return f"is greater than {check.maximum:g}" if number else "is not a number"
    if check.pattern is not None and (not isinstance(value, str) or re.search(check.pattern, value) is None):
        return f"does not match {check.pattern!r}"
    return None


class Invariants:
    """One tool's ``result_invariants``, compiled once (the JSON Schema's validator) when the chain is built."""

    def __init__(self, rule: ResultInvariants) -> None:
        self.rule = rule
        schema = rule.json_schema
        self._validator = None if schema is None else validator_for(schema, default=Draft202012Validator)(schema)

    def check(self, result: types.CallToolResult) -> list[dict[str, str]]:
        """The ways ``result`` (a success) breaks the invariants; empty when it keeps them."""
        rule, data = self.rule, result_data(result)
        found: list[dict[str, str]] = []
        if rule.non_empty and (_empty(data) if data is not None else _no_content(result)):
            found.append({"path": "$", "message": "the result is empty"})
        if data is None and rule.needs_data:
            found.append({"path": "$", "message": "the result carries no JSON data (structuredContent or JSON text)"})
            return found
        for path in rule.required:
            if value_at(data, path) is ABSENT:
                found.append({"path": _json_path(path), "message": "is missing"})
        for path, check in rule.fields.items():
            value = value_at(data, path)
            if value is ABSENT:
                if check.required and path not in rule.required:
                    found.append({"path": _json_path(path), "message": "is missing"})
                continue
            why = _field(value, check)
            if why is not None:
                found.append({"path": _json_path(path), "message": why})
        if self._validator is not None:
            for error in islice(self._validator.iter_errors(data), MAX_VIOLATIONS):
                message = error.message if len(error.message) <= 200 else error.message[:199] + "…"
                found.append({"path": error.json_path, "message": message})
        return found[:MAX_VIOLATIONS]
