"""The codes of documented JSON error bodies in an error text, found by parsing the JSON (bounded), never by pattern.

Servers often pass on the body an API answered. The shapes below are published; this module finds the code each
puts where its documentation says, and ``vocab.py`` decides what the code means:

    shape                                                   code found as
    RFC 9457 problem details {"type","title","status","detail"}   the status is read as an HTTP status by ``vocab``
    Google's API error model {"error": {"code", "status", "message", "details": [{"reason"}]}}  ("code", status)
    GraphQL {"errors": [{"message", "extensions": {"code"}}]} (Apollo Server's codes)              ("code", code)
    OAuth 2.0 {"error": "invalid_grant", "error_description"} (RFC 6749 §5.2, RFC 6750 §3.1)     ("snake", error)
    Slack Web API {"ok": false, "error": "channel_not_found"}                                     ("snake", error)
    Stripe {"error": {"type": "card_error", "code": "card_declined"}}                   ("snake", code), (.., type)
    Airtable {"error": {"type": "ROW_DOES_NOT_EXIST", "message"}} (an upper-case error type)      ("code", type)
    Kubernetes Status {"kind": "Status", "reason": "NotFound", "code": 404}                      ("k8s", reason)
    MongoDB {"code": 11000, "codeName": "DuplicateKey"}                                       ("mongo", codeName)
    any {"code": "NOT_FOUND"} / {"error_code": "QUOTA_EXCEEDED"}                                  ("code", code)

Bounds: the text is cut to ``vocab.MAX_SCAN_CHARS`` before it comes here; at most ``MAX_PARSES`` JSON values are
decoded (``json.JSONDecoder.raw_decode``, linear), nesting deeper than the interpreter allows is a failed parse, and
the walk visits at most ``MAX_NODES`` values ``MAX_DEPTH`` deep.
"""

from __future__ import annotations

import json
from typing import Any

MAX_PARSES = 4
MAX_DEPTH = 4
MAX_NODES = 200
MAX_CODE_CHARS = 64

_DECODER = json.JSONDecoder()
_CODE_KEYS = ("code", "error_code", "errorCode", "status", "reason")


def json_values(text: str) -> list[Any]:
    """The JSON objects that open at a ``{`` of ``text`` (at most ``MAX_PARSES`` decode attempts)."""
    out: list[Any] = []
    at = text.find("{")
    attempts = 0
    while at >= 0 and attempts < MAX_PARSES:
        attempts += 1
        try:
            value, end = _DECODER.raw_decode(text, at)
        except (ValueError, RecursionError):
            at = text.find("{", at + 1)
            continue
        if isinstance(value, dict):
            out.append(value)
        at = text.find("{", end)
    return out


def _code(value: Any) -> str | None:
    """A code-shaped string: one token, no spaces, not too long."""
    if not isinstance(value, str) or not value or len(value) > MAX_CODE_CHARS or " " in value:
        return None
    return value


def _snake(value: str) -> bool:
    return (value.islower() and "_" in value) or value in ("ratelimited",)


def error_codes(text: str) -> list[tuple[str, str]]:
    """The codes the documented error bodies in ``text`` carry, as (vocabulary, code), in the order they stand:
    ``reason`` fields first (Google's ``ErrorInfo.reason`` is narrower than the ``status`` beside it), then the
    others; ``"code"`` for upper-case codes (gRPC / Google / Apollo / a policy engine's), ``"snake"`` for
    lower-case ones (OAuth 2.0, Slack, Stripe), ``"k8s"`` for a Kubernetes ``Status`` reason, ``"mongo"`` for a
    MongoDB codeName."""
    found: list[tuple[str, str]] = []
    reasons: list[tuple[str, str]] = []  # Google's ErrorInfo reason names the cause its status only classes
    budget = [MAX_NODES]

    def add(kind: str, value: Any, into: list[tuple[str, str]] = found) -> None:
        code = _code(value)
        if code is None:
            return
        if kind == "auto":
            if code.isupper():
                kind = "code"
            elif _snake(code):
                kind = "snake"
            else:
                return
        into.append((kind, code))

    def walk(node: Any, depth: int) -> None:
        budget[0] -= 1
        if budget[0] < 0 or depth > MAX_DEPTH:
            return
        if isinstance(node, list):
            for item in node[:20]:
                walk(item, depth + 1)
            return
        if not isinstance(node, dict):
            return
        if node.get("kind") == "Status":
            add("k8s", node.get("reason"))
        if "codeName" in node:
            add("mongo", node.get("codeName"))
        for key in _CODE_KEYS:
            if key in node:
                add("auto", node[key], reasons if key == "reason" else found)
        error = node.get("error")
        if isinstance(error, str):
            add("auto", error)
        error_type = node.get("type")
        if isinstance(error_type, str) and error_type.endswith("_error"):
            add("snake", error_type)
        elif isinstance(error_type, str) and error_type.isupper() and "_" in error_type and depth > 0:
            # an API's error type under "error" (Airtable's {"error": {"type": "ROW_DOES_NOT_EXIST"}}): it names the
            # cause the HTTP status only classes (422 carries not-found and duplicates alike), so it is read first
            add("code", error_type)
        for key in ("error", "errors", "extensions", "details", "errorResponse", "writeErrors", "writeConcernError"):
            child = node.get(key)
            if isinstance(child, dict | list):
                walk(child, depth + 1)

    for value in json_values(text):
        walk(value, 0)
    return reasons + found
