"""The model's answer: a strict JSON object, the diagnosis subset of the observation schema, or nothing."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import jsonschema  # type: ignore[import-untyped]

from ..faults import BY_TYPE, RepairAction

SUGGESTION_CHARS = 300

VERDICT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "resilient-mcp diagnosis verdict",
    "type": "object",
    "properties": {
        "fault_type": {"enum": sorted(t for t in BY_TYPE if t[:1].isupper())},
        "is_transient": {"type": "boolean"},
        "repair_action": {"enum": [a.value for a in RepairAction]},
        "max_retry": {"type": "integer", "minimum": 0, "maximum": 5},
        "suggestion": {"type": "string", "minLength": 1, "maxLength": SUGGESTION_CHARS},
    },
    "required": ["fault_type", "is_transient", "repair_action", "suggestion"],
    "additionalProperties": False,
}
_VALIDATOR = jsonschema.Draft202012Validator(VERDICT_SCHEMA)
_FENCED = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Verdict:
    fault_type: str
    is_transient: bool
    repair_action: RepairAction
    suggestion: str
    max_retry: int | None = None


def parse_verdict(text: str) -> Verdict | None:
    """The verdict in ``text`` (a JSON object, optionally in a ```json fence), or None when it is not exactly one
    valid against ``VERDICT_SCHEMA``."""
    fenced = _FENCED.match(text)
    try:
        data = json.loads(fenced.group(1) if fenced else text)
    except (ValueError, TypeError):
        return None
    if not _VALIDATOR.is_valid(data):
        return None
    suggestion = " ".join(str(data["suggestion"]).split())
    return Verdict(
        data["fault_type"], data["is_transient"], RepairAction(data["repair_action"]), suggestion, data.get("max_retry")
    )
