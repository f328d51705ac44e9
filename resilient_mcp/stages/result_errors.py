"""Success-shaped failures: a successful result (``isError`` false) that the policy's ``result_errors`` say is a
failure (a server that answers a database error as text, or ``{"result": "error"}``), turned into a classified fault.

Without ``result_errors`` nothing here runs: a success is never reinterpreted. Matching is plain: a prefix or a
substring of the result's text (its first ``MAX_TEXT_CHARS`` characters), or one field of its data (structuredContent,
else the text parsed as JSON) equal to a value; no regular expression. The fault is the entry's ``fault_type`` when
it names one (``details.basis`` ``policy``), else what the classifier reads in the text, exactly as for an ``isError``
result. Either way the tool ran and answered: nothing is ``not_sent``.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types

from ..faults import BY_TYPE, Fault
from ..faults.error_results import answered, classify_text, result_text
from ..faults.vocab import Basis
from ..policy import ResultError
from .invariants import ABSENT, result_data, value_at

__all__ = ["MAX_TEXT_CHARS", "success_shaped_failure"]

MAX_TEXT_CHARS = 65_536
_UNSET: Any = object()


def _fold(text: str, rule: ResultError) -> str:
    return text.casefold() if rule.ignore_case else text


def _equal(value: Any, wanted: Any, ignore_case: bool) -> bool:
    if isinstance(value, bool) != isinstance(wanted, bool):  # true is not 1
        return False
    if ignore_case and isinstance(value, str) and isinstance(wanted, str):
        return value.casefold() == wanted.casefold()
    return bool(value == wanted)


def _matches(rule: ResultError, text: str, result: types.CallToolResult, data: list[Any]) -> bool:
    if rule.prefix is not None:
        return _fold(text.lstrip(), rule).startswith(_fold(rule.prefix, rule))
    if rule.contains is not None:
        return _fold(rule.contains, rule) in _fold(text, rule)
    assert rule.json_path is not None
    if data[0] is _UNSET:
        data[0] = result_data(result)
    value = value_at(data[0], rule.json_path.partition(".")[2]) if rule.json_path != "$" else data[0]
    return value is not ABSENT and _equal(value, rule.equals, rule.ignore_case)


def success_shaped_failure(
    result: types.CallToolResult, rules: list[ResultError], *, tool: types.Tool | None
) -> Fault | None:
    """The fault a successful ``result`` is by the first matching entry of ``rules``; ``None`` when none matches."""
    if result.is_error or not rules:
        return None
    text = result_text(result)
    head = text[:MAX_TEXT_CHARS]
    data: list[Any] = [_UNSET]
    for n, rule in enumerate(rules):
        if not _matches(rule, head, result, data):
            continue
        by = "prefix" if rule.prefix is not None else "contains" if rule.contains is not None else "json_path"
        matched = {"index": n, "by": by}
        if rule.fault_type is not None:
            cls = BY_TYPE[rule.fault_type]
            details = {"basis": Basis.POLICY.value, "result_error": matched}
            fault = cls.of("tool_error_typed", fault_type=cls.fault_type, details=details)  # the class's defaults
        else:
            fault = classify_text(head, tool).with_details(result_error=matched)
        return answered(fault, result, text)
    return None
