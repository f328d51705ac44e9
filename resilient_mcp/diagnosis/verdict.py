"""The model's answer: a strict JSON object, or nothing.

Two shapes are read. The **closed answer** (``ANSWER_SCHEMA``, what the prompt asks for): one of a few kinds of
cause (``KINDS``), the argument to change if one is named, and whether the model is sure; the engine maps the kind to
the catalog (fault type, transient, repair action) and words the advice itself, so the model writes no free text the
model of the session reads. ``unclear`` or not sure is an abstention: the rules' "unrecognised" stands. The **full
verdict** (``VERDICT_SCHEMA``, the diagnosis subset of the observation schema, with a model-written suggestion) is
still read from a provider that answers it.

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
class Kind:
    """A kind of cause in the closed answer: what it means to the model (``meaning``), and the catalog verdict the
    engine makes of it (``fault_type``, transient, repair action) with the advice the engine words (``advice``,
    ``{argument}`` filled with the named argument or "the argument the error names")."""

    meaning: str
    fault_type: str
    transient: bool
    repair: RepairAction
    advice: str


KINDS: dict[str, Kind] = {
    "bad_argument_value": Kind(
        "the tool ran and rejected a value the caller passed: an unknown name, ref, branch, revision, id, table, "
        "column, sheet or range; a wrong format; out of range; options that conflict; invalid SQL or command",
        "B4_semantic_argument_rejection",
        False,
        RepairAction.FIX_PARAMETER,
        "The tool rejected the value of {argument}: change that value as the error text says; the same call "
        "fails the same way.",
    ),
    "missing_resource": Kind(
        "a file, directory, page, record, entity, queue or job the call names does not exist",
        "D4_permanent_execution_error",
        False,
        RepairAction.SWITCH_TOOL,
        "What {argument} names does not exist: look it up with a listing or search tool first.",
    ),
    "state_conflict": Kind(
        "the world is not as the call assumed: it already exists, it changed since it was read, the text to "
        "replace is not there, nothing to commit",
        "D5_state_conflict",
        False,
        RepairAction.VERIFY_STATE,
        "The current state is not what the call assumed: read it again before deciding the next call.",
    ),
    "service_unavailable": Kind(
        "a site, database or service behind the tool could not be reached, is down or busy",
        "D1_transient_execution_error",
        True,
        RepairAction.BACKOFF_RETRY,
        "A service behind the tool did not answer: wait before trying this call later.",
    ),
    "not_permitted": Kind(
        "refused by a policy, sandbox, allow-list, read-only mode or a missing privilege",
        "F2_permission_denied_or_approval_required",
        False,
        RepairAction.ASK_USER,
        "The server refused this by its configuration or permissions: tell the user; the same call is refused.",
    ),
    "bad_credentials": Kind(
        "a password, token or key is missing, wrong or expired",
        "F1_unauthenticated",
        False,
        RepairAction.ASK_USER,
        "The server's credentials were refused: tell the user; no call fixes them.",
    ),
    "server_broken": Kind(
        "the server, its data file or its configuration is broken; no argument can fix it",
        "D4_permanent_execution_error",
        False,
        RepairAction.ASK_USER,
        "The server or its data is broken: tell the user; no other argument fixes it.",
    ),
}
"""The kinds of cause a model may name, in the prompt's order; ``unclear`` (not here) abstains."""
UNCLEAR = "unclear"

ANSWER_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "resilient-mcp diagnosis answer",
    "type": "object",
    "properties": {
        "kind": {"enum": [*KINDS, UNCLEAR]},
        "argument": {"type": ["string", "null"], "maxLength": 64},
        "sure": {"type": "boolean"},
    },
    "required": ["kind", "argument", "sure"],
    "additionalProperties": False,
}
"""The closed answer the prompt asks for (also sent as the endpoint's ``response_format`` where it takes a schema)."""
_ANSWER_VALIDATOR = jsonschema.Draft202012Validator(ANSWER_SCHEMA)


@dataclass(frozen=True, slots=True)
class Verdict:
    fault_type: str
    is_transient: bool
    repair_action: RepairAction
    suggestion: str
    max_retry: int | None = None
    kind: str | None = None
    """The closed answer's kind (None: a full verdict); ``unclear`` with ``sure`` False is an abstention."""
    sure: bool = True
    argument: str | None = None
    """The argument the closed answer names (not yet checked against the tool's arguments)."""

    @property
    def abstains(self) -> bool:
        """The model could not tell (``unclear``) or was not sure: the rules' "unrecognised" stands."""
        return self.kind == UNCLEAR or not self.sure


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
    valid against ``ANSWER_SCHEMA`` or ``VERDICT_SCHEMA`` or is longer than ``MAX_ANSWER_CHARS``."""
    if len(text) > MAX_ANSWER_CHARS:
        return None
    try:
        data = json.loads(unfenced(text))
    except (ValueError, TypeError, RecursionError):
        return None
    if _ANSWER_VALIDATOR.is_valid(data):
        name = data["kind"]
        kind = KINDS.get(name, KINDS["server_broken"])  # unclear: never applied (``abstains``)
        argument = data["argument"] if isinstance(data["argument"], str) and data["argument"].strip() else None
        return Verdict(
            kind.fault_type, kind.transient, kind.repair, kind.advice, None, name, bool(data["sure"]), argument
        )
    if not _VALIDATOR.is_valid(data):
        return None
    suggestion = " ".join(str(data["suggestion"]).split())
    return Verdict(
        data["fault_type"], data["is_transient"], RepairAction(data["repair_action"]), suggestion, data.get("max_retry")
    )
