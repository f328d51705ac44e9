"""What a model sees of a failed call is its text, and nothing else: the competent text reader and the text-only
view of the proxy's observation.

Hosts show a model a tool result's text content. They do not show ``_meta``, a JSON-RPC error's ``data``, and this
benchmark does not count ``structuredContent`` of an error result as shown either (hosts differ; most render the
text). So both reading policies work from ``Outcome.text`` only:

- ``read_text`` is the competent text reader (the reference policy): what a careful model does with the words of
  an error, identical with and without the proxy. It recognises approval and permission refusals, unknown tools
  (with or without "did you mean"), schema and type errors ("is not of type", "is a required property", "was
  rejected"), rate limits and quotas, timeouts and transport failures ("refused", "Server returned an error
  response", HTTP 5xx), broken output schemas (and reads the data an error text carries), not-found, conflicts,
  and any "call X(...)" advice; a write whose outcome is unknown is checked with a read before it is re-issued.
- ``visible_observation`` rebuilds from the text what the proxy's L2/L3 text shows: the ``(repair_action=...,
  max_retry=..., retry_after_ms=...)`` line, the verify call, "Did you mean" candidates, degraded data and the
  listed validation errors. ``repair_follower`` follows it and falls back to ``read_text``.
"""

from __future__ import annotations

import ast
import json
import re
from difflib import get_close_matches
from typing import Any

from .repair import Decision
from .spec import ORDERS

_ADVICE = re.compile(r"\((repair_action=[^)]*)\)")
_CALL = re.compile(r"[Cc]all (\w+)\(([^)]*)\)")
_KV = re.compile(r"(\w+)=('[^']*'|\"[^\"]*\"|[\w.-]+)")
_DID_YOU_MEAN = re.compile(r"[Dd]id you mean:?\s*([\w, ]+)")
_DEGRADED = re.compile(r"Degraded data[^\n]*:\n(.*)", re.DOTALL)
_INSTANCE = re.compile(r"On instance(?:\[[^\]]*\])?:\n(.*)", re.DOTALL)
_WAIT = re.compile(r"(?:[Ww]ait|retry after|[Rr]etry-[Aa]fter:?|try again in)\s*(\d+(?:\.\d+)?)\s*(ms|s\b|sec|second)")

APPROVAL = re.compile(
    r"approv|permission|denied|forbidden|unauthori[sz]ed|\b40[13]\b|expired|credential|not allowed|declined",
    re.IGNORECASE,
)
UNKNOWN_TOOL = re.compile(r"unknown tool|no such tool|tool \S+ (?:is )?not found|no longer offered", re.IGNORECASE)
SCHEMA = re.compile(
    r"is not of type|required property|missing|invalid (?:argument|param|value|request param)|validation error"
    r"|was unexpected|additional properties|was rejected|is not one of|input schema",
    re.IGNORECASE,
)
RATE = re.compile(r"rate.?limit|too many requests|\b429\b|slow down", re.IGNORECASE)
QUOTA = re.compile(r"quota|daily limit", re.IGNORECASE)
OUTPUT = re.compile(r"structured content|outputSchema|output schema|does not match its declared", re.IGNORECASE)
BEFORE_RUN = re.compile(r"refused|connect call failed|unavailable|not sent|did not run", re.IGNORECASE)
TRANSIENT = re.compile(
    r"timed? ?out|timeout|unavailable|try again|temporar|\b50[234]\b|bad gateway|connection|refused|"
    r"Server returned an error response|internal error|-32603|overloaded|closed|validation errors? for CallToolResult"
    r"|did not answer|cancelled|is failing|re-tested",
    re.IGNORECASE,
)
NOT_FOUND = re.compile(r"not found|no such|does not exist|\bno order\b", re.IGNORECASE)
CONFLICT = re.compile(r"conflict|stale|version|already exists|changed", re.IGNORECASE)
ALTERNATIVES = ORDERS.alternatives
"""The order shop's alternative reads; a scenario in another domain brings its own (``Domain.alternatives``)."""
CONTEXT = ORDERS.context
_REQUIRED = re.compile(r"'(\w+)' is a required property|missing required argument:? '?(\w+)|Add '(\w+)'")


def _value(raw: str) -> Any:
    raw = raw.strip()
    if raw[:1] in "'\"":
        return raw[1:-1]
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def advised_call(text: str) -> tuple[str, dict[str, Any]] | None:
    """A ``call tool(k=v, ...)`` the text advises ("Call get_order(client_ref='R1') to check ...")."""
    found = _CALL.search(text)
    if found is None:
        return None
    return found.group(1), {k: _value(v) for k, v in _KV.findall(found.group(2))}


def wait_seconds(text: str, default: float = 1.0) -> float:
    found = _WAIT.search(text)
    if found is None:
        return default
    n = float(found.group(1))
    return n / 1000 if found.group(2) == "ms" else n


def data_in_text(text: str) -> str | None:
    """The data an error text carries: the proxy's degraded data, or the instance a schema error quotes."""
    found = _DEGRADED.search(text)
    if found:
        return found.group(1).strip()
    found = _INSTANCE.search(text)
    if found:
        try:
            value = ast.literal_eval(found.group(1).strip())
        except (ValueError, SyntaxError):
            return None
        return json.dumps(value) if isinstance(value, dict) else None
    return None


def visible_observation(text: str) -> dict[str, Any] | None:
    """The proxy's observation as far as its text shows it; None when the text has no repair advice (L0, L1)."""
    found = _ADVICE.search(text)
    if found is None:
        return None
    fields = {k: _value(v) for k, v in _KV.findall(found.group(1))}
    details: dict[str, Any] = {}
    call = advised_call(text)
    if call is not None:
        details["verify_with"] = {"tool": call[0], "args": call[1]}
    cands = _DID_YOU_MEAN.search(text)
    if cands:
        details["candidates"] = [c.strip() for c in cands.group(1).split(",") if c.strip()]
    data = data_in_text(text)
    if data is not None:
        details["degraded_text"] = data
    paths = re.findall(r"^\s*- \$\.(\w+)", text, re.MULTILINE) + re.findall(r"Add '(\w+)'", text)
    if paths:
        details["missing"] = paths
    added = re.search(r"added: ([\w, ]+)", text)
    if added:
        details["tools_added"] = [a.strip() for a in added.group(1).split(",") if a.strip()]
    use = re.search(r"Use ([\w, ]+) instead", text)
    if use:
        details["alternatives"] = [a.strip() for a in use.group(1).split(",")]
    return {**fields, "details": details}


def _fields_named(text: str) -> list[str]:
    return re.findall(r"'(\w+)'|\$\.(\w+)|^(\w+):", text, re.MULTILINE)


def fixed_arguments(text: str, args: Any, context: dict[str, Any] = CONTEXT) -> Any:
    """The arguments with every field the text names taken from the task context, unexpected ones removed, and a
    JSON string decoded; None when nothing changes."""
    if isinstance(args, str):
        try:
            decoded = json.loads(args)
        except ValueError:
            return None
        return decoded if isinstance(decoded, dict) else None
    if not isinstance(args, dict):
        return None
    new = dict(args)
    for groups in _fields_named(text):
        name = next((g for g in groups if g), "")
        if name in context and new.get(name) != context[name]:
            new[name] = context[name]
    for name, value in context.items():  # a field the text names in passing ("qty: '2' is not of type ...")
        if name in new and new[name] != value and re.search(rf"\b{name}\b", text):
            new[name] = value
    for name in re.findall(r"'(\w+)' was unexpected|[Rr]emove '(\w+)'", text):
        for n in name:
            new.pop(n, None)
    return new if new != args else None


def remap_to_schema(
    args: dict[str, Any], schema: dict[str, Any], context: dict[str, Any] = CONTEXT
) -> dict[str, Any] | None:
    """Arguments rebuilt for a tool's current input schema (what a model does after reading the new schema):
    properties the schema lost move to a new one of the same JSON type; new required ones come from the context."""
    props = schema.get("properties") or {}
    if not props:
        return None
    new = {k: v for k, v in args.items() if k in props}
    lost = {k: v for k, v in args.items() if k not in props}
    for value in lost.values():
        kind = {bool: "boolean", int: "integer", float: "number", str: "string"}.get(type(value), "object")
        free = [p for p, d in props.items() if p not in new and isinstance(d, dict) and d.get("type") == kind]
        if free:
            new[free[0]] = value
    for name in schema.get("required") or []:
        if name not in new and name in context:
            new[name] = context[name]
    for name in props:
        if name not in new and name in context:
            new[name] = context[name]
    return new if new != args else None


def read_text(
    text: str,
    *,
    tool: str,
    args: Any,
    write: bool,
    tries: int,
    fixes: int,
    tools: list[str],
    verify: Any,
    context: dict[str, Any] = CONTEXT,
    alternatives: dict[str, dict[str, Any]] = ALTERNATIVES,
) -> Decision:
    """The competent reader's decision about a failed call from its text alone. ``verify`` is the read that shows
    whether the current write happened (what a model picks from its tool list), or None for reads; ``context`` and
    ``alternatives`` are the domain's (the user's request, the reads that give a fact another way)."""
    call = advised_call(text)
    if APPROVAL.search(text) and not RATE.search(text):
        return Decision("stop", status="asked_user")
    if UNKNOWN_TOOL.search(text):
        cands = _DID_YOU_MEAN.search(text)
        named = [c.strip() for c in cands.group(1).split(",")] if cands else []
        known = [n for n in named if n in tools and n != tool] or get_close_matches(
            tool, [t for t in tools if t != tool], 1
        )
        if known and fixes < 2:
            return Decision("call", tool=known[0], args=args)
        return Decision("refresh") if tries < 1 else Decision("skip", status="degraded")
    named_alt = re.search(r"alternatives?: ([\w, ]+)|Use ([\w, ]+) instead", text)
    if named_alt and not write and fixes < 1:
        alts = [a.strip() for a in (named_alt.group(1) or named_alt.group(2)).split(",")]
        alt = next((a for a in alts if a in tools and a != tool), None)
        if alt is not None:
            return Decision("call", tool=alt, args=dict(alternatives.get(alt, {})))
    if QUOTA.search(text):
        if not write:
            alt = next((a for a in alternatives if a in tools and a != tool), None)
            if alt is not None and fixes < 1:
                return Decision("call", tool=alt, args=dict(alternatives[alt]))
            return Decision("skip", status="degraded")
        return Decision("stop", status="aborted")
    if RATE.search(text):
        if tries < 3:
            return Decision("repeat", wait_s=wait_seconds(text), counts_as_retry=True)
        return Decision("stop", status="failed")
    if OUTPUT.search(text):
        if tries < 1:
            return Decision("repeat", counts_as_retry=True)
        data = data_in_text(text)
        return Decision("fact", value=data) if data else Decision("skip", status="degraded")
    if SCHEMA.search(text) and fixes < 3:
        needed = [n for g in _REQUIRED.findall(text) for n in g if n]
        if any(n not in context and not (isinstance(args, dict) and n in args) for n in needed) and fixes < 1:
            return Decision("refresh", tool=tool)  # a parameter the task does not know: read the tool's schema
        fixed = fixed_arguments(text, args, context)
        if fixed is not None:
            return Decision("call", tool=tool, args=fixed)
        return Decision("refresh", tool=tool) if fixes < 1 else Decision("stop", status="asked_user")
    if CONFLICT.search(text) and write:
        if call is not None:
            return Decision("verify", tool=call[0], args=call[1])
        return Decision("verify", tool=verify[0], args=verify[1]) if verify else Decision("stop", status="aborted")
    if TRANSIENT.search(text):
        if write and not BEFORE_RUN.search(text) and verify is not None:
            target = call or verify
            return Decision("verify", tool=target[0], args=target[1])
        if tries < 3:
            return Decision("repeat", wait_s=wait_seconds(text), counts_as_retry=True)
        alt = next((a for a in alternatives if a in tools and a != tool), None)
        if not write and alt is not None and fixes < 1:  # the tool stays down: get the fact another way
            return Decision("call", tool=alt, args=dict(alternatives[alt]))
        return Decision("stop", status="failed")
    if NOT_FOUND.search(text):
        if write:
            return Decision("stop", status="asked_user")
        alt = next((a for a in alternatives if a in tools and a != tool), None)
        if alt is not None and fixes < 1:
            return Decision("call", tool=alt, args=dict(alternatives[alt]))
        return Decision("skip", status="degraded")
    return Decision("stop", status="failed")
