"""The model's answer: a strict JSON object, the diagnosis subset of the observation schema, or nothing.

The answer is model (or host) text: it is cut to ``MAX_ANSWER_CHARS`` before anything reads it, and read without a
regular expression (the fenced-JSON regex with DOTALL backtracked: an unclosed fence and 2,000 spaces cost 29 s on
the event loop), so parsing costs time linear in a bounded length."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import jsonschema  # type: ignore[import-untyped]

from ..faults import BY_TYPE, RepairAction

SUGGESTION_CHARS = 300
MAX_ANSWER_CHARS = 16_384
"""The longest answer read as a verdict (``providers.MAX_TOKENS`` tokens are ~1,500 characters); a longer one is
not one valid verdict and is discarded unread."""

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
_FENCE = "```"


@dataclass(frozen=True, slots=True)
class Verdict:
    fault_type: str
    is_transient: bool
    repair_action: RepairAction
    suggestion: str
    max_retry: int | None = None


def unfenced(text: str) -> str:
    """``text`` without a Markdown code fence around it (```` ```json ... ``` ````), or as it is when it has none
    (an opening fence without its closing one is not a fence). String methods only: linear, no backtracking."""
    body = text.strip()
    if not (len(body) >= 2 * len(_FENCE) and body.startswith(_FENCE) and body.endswith(_FENCE)):
        return text
    body = body[len(_FENCE) : -len(_FENCE)]
    if body.startswith("json"):
        body = body[len("json") :]
    return body


def parse_verdict(text: str) -> Verdict | None:
    """The verdict in ``text`` (a JSON object, optionally in a ```json fence), or None when it is not exactly one
    valid against ``VERDICT_SCHEMA`` or is longer than ``MAX_ANSWER_CHARS``."""
    if len(text) > MAX_ANSWER_CHARS:
        return None
    try:
        data = json.loads(unfenced(text))
    except (ValueError, TypeError, RecursionError):
        return None
    if not _VALIDATOR.is_valid(data):
        return None
    suggestion = " ".join(str(data["suggestion"]).split())
    return Verdict(
        data["fault_type"], data["is_transient"], RepairAction(data["repair_action"]), suggestion, data.get("max_retry")
    )
