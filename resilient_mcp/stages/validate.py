"""Validate stage: a tool's arguments checked against its ``inputSchema`` before the call leaves the proxy (B1-B3).

``Validate`` is built once per tool: the validator class comes from the schema's ``$schema`` (2020-12 when absent),
the schema itself is checked, and the validator is compiled with format checking. Per call it enforces the argument
size cap, that arguments are an object, and then reports *all* schema errors in one fault, each with a JSON path,
what was expected, what was got and a concrete fix. Invalid calls never reach ``call_next``. Optional safe coercions
(off by default) are applied only when they make the whole call valid, and are always reported to the model.

An upstream whose ``inputSchema`` is itself invalid is logged once (at compile time) and its tool is not validated:
refusing every call over the upstream's own mistake would make the tool unusable through the proxy.

Also here, as pure helpers for neighbours: ``suggest_tools`` (close names for an unknown tool, A1) and
``schema_diff`` (what changed between two input schemas, A3).
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import unquote

import mcp_types as types
import structlog
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
from jsonschema.exceptions import SchemaError, ValidationError, relevance  # type: ignore[import-untyped]
from jsonschema.protocols import Validator  # type: ignore[import-untyped]
from jsonschema.validators import validator_for  # type: ignore[import-untyped]
from referencing.exceptions import Unresolvable

from ..call.chain import CallNext, ToolCall, call_arguments_json
from ..faults import MalformedArguments, MissingRequiredArgument, SchemaViolation
from ..policy import ValidationRule
from ..text import canonical_json

_log = structlog.get_logger(__name__)

MAX_REPORTED_ERRORS = 20
"""More errors than this are counted, not listed: a wall of errors helps no model."""


def schema_hash(schema: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical_json(schema).encode()).hexdigest()


def compile_validator(schema: Mapping[str, Any], *, tool_name: str = "") -> Validator | None:
    """The validator for ``schema`` per its ``$schema``, or None (logged) when the schema itself is invalid."""
    cls = validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        _log.warning("input_schema_invalid_validation_skipped", tool=tool_name, error=exc.message[:300])
        return None
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


class Validate:
    """Refuses calls whose arguments do not fit the tool's input schema; see the module docstring."""

    def __init__(self, input_schema: Mapping[str, Any], rule: ValidationRule, *, tool_name: str = "") -> None:
        self._rule = rule
        self._tool_name = tool_name
        self._schema = input_schema
        self.schema_hash = schema_hash(input_schema)
        self.validator = compile_validator(input_schema, tool_name=tool_name) if rule.enabled else None
        """None when validation is off or the upstream's schema is invalid: only the payload checks run."""

    async def __call__(self, call: ToolCall, call_next: CallNext, /) -> types.CallToolResult:
        args, changes = self._payload(call)
        if self.validator is not None:
            errors = self._errors(args)
            if errors:
                fixed = self._coerce(args, errors) if self._rule.coerce else None
                if fixed is None:
                    call.record.decided_by = "validate"
                    raise self._fault(call, errors)
                args, more = fixed
                changes += more
        if not changes:
            return await call_next(call)
        _report(call, changes)
        return await call_next(replace(call, arguments=args))

    def _payload(self, call: ToolCall) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        raw: object = call.arguments
        if raw is None:
            return {}, []
        size = len(call_arguments_json(call).encode())  # computed once per call, shared with the hashes
        if size > self._rule.max_argument_bytes:
            call.record.decided_by = "validate"
            raise MalformedArguments.of(
                "too_large",
                suggest="send_smaller",
                tool=call.name,
                size=size,
                limit=self._rule.max_argument_bytes,
                details={"size_bytes": size, "max_bytes": self._rule.max_argument_bytes},
            )
        if isinstance(raw, dict):
            return raw, []
        unwrapped = _double_encoded(raw)
        if unwrapped is not None and self._rule.coerce:
            return unwrapped, [{"path": "$", "from": short(raw), "to": "object"}]
        call.record.decided_by = "validate"
        raise _not_an_object(call.name, raw, double_encoded=unwrapped is not None)

    def _errors(self, args: Any) -> list[ValidationError]:
        assert self.validator is not None
        try:
            return sorted(self.validator.iter_errors(args), key=sort_key)
        except Unresolvable as exc:  # a $ref the proxy cannot follow: the upstream remains the judge
            _log.warning("input_schema_unresolvable_ref", tool=self._tool_name, error=str(exc)[:300])
            return []

    def _coerce(self, args: dict[str, Any], errors: list[ValidationError]) -> tuple[dict[str, Any], list[Any]] | None:
        """Arguments with safe coercions applied, if they make the call fully valid; else None (nothing changed)."""
        planned: list[tuple[list[str | int], Any, Any]] = []
        for err in errors:
            if err.validator != "type" or not isinstance(err.instance, str):
                return None
            value = coerce_string(err.instance, err.validator_value)
            if value is NOT_COERCIBLE:
                return None
            planned.append((list(err.absolute_path), err.instance, value))
        fixed = copy.deepcopy(args)
        for path, _, value in planned:
            _set_at(fixed, path, value)
        if self._errors(fixed):
            return None
        return fixed, [{"path": json_path(p), "from": _compact(old), "to": _compact(new)} for p, old, new in planned]

    def _fault(self, call: ToolCall, errors: list[ValidationError]) -> MissingRequiredArgument | SchemaViolation:
        described = [entry for err in errors for entry in describe(err, self._schema)]
        listed = described[:MAX_REPORTED_ERRORS]
        details: dict[str, Any] = {"validation_errors": listed, "input_schema_hash": self.schema_hash}
        if len(described) > len(listed):
            details["errors_not_listed"] = len(described) - len(listed)
        n = len(described)
        if all(e["keyword"] == "required" for e in described):
            details["missing"] = [e["path"].removeprefix("$.") for e in described]
            return MissingRequiredArgument.of(
                "missing" if n > 1 else "missing_one",
                suggest="add_missing",
                tool=call.name,
                missing=", ".join(details["missing"]),
                details=details,
            )
        # The text carries each error's fix, for hosts that show the model only text.
        lines = [
            SchemaViolation.text("error_line", path=e["path"], fix=e.get("fix") or e["message"]) for e in listed[:5]
        ]
        if n > 5:
            lines.append(SchemaViolation.text("more_errors", more=n - 5))
        return SchemaViolation.of(
            "mismatch" if n > 1 else "mismatch_one",
            suggest="correct_all",
            tool=call.name,
            count=n,
            errors="".join(lines),
            details=details,
        )


def _report(call: ToolCall, changes: list[dict[str, Any]]) -> None:
    listed = "; ".join(f"{c['path']}: {short(c['from'])} -> {short(c['to'])}" for c in changes)
    call.record.notes.append(
        f"The proxy converted {len(changes)} argument value(s) to the type the tool's schema requires ({listed}). "
        "Send the right types next time."
    )
    call.record.extra.setdefault("coercions", []).extend(changes)


def _double_encoded(raw: object) -> dict[str, Any] | None:
    if isinstance(raw, str) and raw.lstrip().startswith("{"):
        try:
            parsed = json.loads(raw)
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return None


def _not_an_object(name: str, raw: object, *, double_encoded: bool) -> MalformedArguments:
    got = _TYPE_NAMES.get(type(raw), type(raw).__name__)
    return MalformedArguments.of(
        "not_an_object",
        suggest="unwrap_json" if double_encoded else "send_object",
        tool=name,
        got=got,
        details={"received_type": got, "expected": "object", "double_encoded": double_encoded},
    )


# --- error wording: one entry per problem, with path, expected, got and a concrete fix ----------------------------

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BOUNDS = {
    "minimum": "a number >= {}",
    "maximum": "a number <= {}",
    "exclusiveMinimum": "a number > {}",
    "exclusiveMaximum": "a number < {}",
    "multipleOf": "a multiple of {}",
    "minLength": "a string of at least {} characters",
    "maxLength": "a string of at most {} characters",
    "minItems": "an array of at least {} items",
    "maxItems": "an array of at most {} items",
    "minProperties": "an object with at least {} properties",
    "maxProperties": "an object with at most {} properties",
    "pattern": "a string matching the regular expression {}",
    "format": "a valid {} value",
}
_FORMAT_EXAMPLES = {
    "date": "2024-05-31",
    "date-time": "2024-05-31T13:45:00Z",
    "time": "13:45:00Z",
    "email": "name@example.com",
    "uuid": "123e4567-e89b-12d3-a456-426614174000",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "uri": "https://example.com/path",
}


def path_key(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if _IDENT.fullmatch(key) else f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def json_path(steps: Iterable[str | int]) -> str:
    """``["items", 0, "qty"]`` as ``$.items[0].qty``."""
    path = "$"
    for step in steps:
        path = path_key(path, step)
    return path


def short(value: Any, limit: int = 80) -> str:
    """``value`` as JSON text of at most ``limit`` characters."""
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def sort_key(err: ValidationError) -> tuple[list[tuple[int, str, int]], str]:
    steps = [(1, s, 0) if isinstance(s, str) else (0, "", s) for s in err.absolute_path]
    return steps, str(err.validator)


def _listing(values: Sequence[Any], limit: int = 20) -> str:
    text = ", ".join(short(v, 60) for v in values[:limit])
    return text + (f", … ({len(values) - limit} more)" if len(values) > limit else "")


def _json_type(value: Any) -> str:
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def _label(schema: Any) -> str:
    """A few words naming what a (sub)schema accepts."""
    if not isinstance(schema, dict):
        return short(schema, 40)
    if "title" in schema:
        return str(schema["title"])
    if "const" in schema:
        return short(schema["const"], 40)
    if "enum" in schema:
        return "one of " + _listing(list(schema["enum"]), 5)
    kind = schema.get("type")
    if kind == "object" and schema.get("required"):
        return "object with " + ", ".join(map(str, schema["required"]))
    if kind is not None:
        return kind if isinstance(kind, str) else " or ".join(kind)
    return short(schema, 60)


def _deref(schema: Any, root: Mapping[str, Any]) -> Any:
    """``schema`` with a local ``$ref`` ("#/$defs/x") replaced by its target; sibling keywords win."""
    for _ in range(8):  # a chain of refs, bounded against cycles
        ref = schema.get("$ref") if isinstance(schema, dict) else None
        if not isinstance(ref, str) or not ref.startswith("#"):
            return schema
        target: Any = root
        for part in [p for p in unquote(ref[1:]).split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                target = target.get(part) if isinstance(target, dict) else None
        if not isinstance(target, dict):
            return schema
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def describe(err: ValidationError, root: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``err`` as model-facing entries; an anyOf/oneOf error becomes the errors of its closest alternative."""
    if err.validator in ("oneOf", "anyOf") and err.context:
        closest = _closest_branch(err)
        if closest is not None:
            index, errors = closest
            entries = [entry for e in sorted(errors, key=sort_key) for entry in describe(e, root)]
            for entry in entries:
                entry["message"] += f" (closest alternative: #{index + 1} of {err.validator})"
            return entries
    path = json_path(err.absolute_path)
    if err.validator == "required":
        return [_required(err, path, root)]
    entry = {"path": path, "keyword": str(err.validator or "false"), "expected": None, "got": short(err.instance)}
    entry["message"] = f"{path}: {err.message[:200]}"
    entry.update(_expectation(err, path, root))
    return [entry]


def _closest_branch(err: ValidationError) -> tuple[int, list[ValidationError]] | None:
    branches: dict[int, list[ValidationError]] = {}
    for sub in err.context or ():
        branches.setdefault(int(sub.relative_schema_path[0]), []).append(sub)
    ranked = sorted((min(relevance(e) for e in errs), i) for i, errs in branches.items())
    if len(ranked) > 1 and ranked[0][0] == ranked[1][0]:
        return None  # no alternative is closer than another: name them all instead
    return ranked[0][1], branches[ranked[0][1]]


def _required(err: ValidationError, path: str, root: Mapping[str, Any]) -> dict[str, Any]:
    names = [n for n in err.validator_value if repr(n) in err.message]
    missing = str(names[0] if names else err.message.split("'")[1])
    prop = _deref(_props(err.schema).get(missing, {}), root)
    kind = _label(prop) if prop else None
    where = "the arguments" if path == "$" else path
    fix = f"Add '{missing}'" + (f" ({kind})" if kind else "") + f" to {where}."
    if prop.get("description"):
        fix += f" It is: {str(prop['description'])[:200]}"
    if "enum" in prop:
        fix += f" Allowed values: {_listing(list(prop['enum']))}."
    examples = prop.get("examples") if isinstance(prop.get("examples"), list) else []
    examples = examples or ([prop["default"]] if "default" in prop else [])
    if examples:
        fix += f" Example: {short(examples[0])}."
    entry = {"path": path_key(path, missing), "keyword": "required", "expected": kind or "present", "got": "missing"}
    return {**entry, "message": f"{path}: {err.message}", "fix": fix}


def _expectation(err: ValidationError, path: str, root: Mapping[str, Any]) -> dict[str, Any]:
    keyword, want, got = err.validator, err.validator_value, err.instance
    if keyword == "type":
        return {"expected": want, "fix": _type_fix(path, want, got)}
    if keyword == "enum":
        fix = f"Use one of: {_listing(list(want))}."
        words = [v for v in want if isinstance(v, str)]
        close = difflib.get_close_matches(got, words, 1) if isinstance(got, str) else []
        return {"expected": list(want)[:20], "fix": fix + (f" Did you mean {short(close[0])}?" if close else "")}
    if keyword == "const":
        return {"expected": want, "fix": f"Use exactly {short(want)} at {path}."}
    if keyword == "additionalProperties" and isinstance(got, dict):
        return _unexpected_properties(err, got)
    if keyword in _BOUNDS:
        bound = _BOUNDS[keyword].format(want)
        example = _FORMAT_EXAMPLES.get(want) if keyword == "format" else None
        return {"expected": bound, "fix": f"Use {bound} at {path}." + (f" Example: {example}." if example else "")}
    if keyword in ("oneOf", "anyOf"):
        alternatives = [_label(_deref(s, root)) for s in want]
        exactly = "exactly one" if keyword == "oneOf" else "one"
        return {"expected": alternatives, "fix": f"Make {path} match {exactly} of: {'; '.join(alternatives)}."}
    if keyword == "uniqueItems":
        return {"expected": "unique items", "fix": f"Remove the duplicate items from {path}."}
    if keyword is None:
        return {"expected": "nothing", "fix": f"Remove {path}: the schema allows no value there."}
    expected = {keyword: want if len(short(want)) <= 80 else short(want)}
    return {"expected": expected, "fix": f"Change {path} so that it satisfies '{keyword}': {err.message[:200]}"}


def _type_fix(path: str, want: str | list[str], got: Any) -> str:
    label = want if isinstance(want, str) else " or ".join(want)
    fix = f"Send {path} as {label}, not {_json_type(got)}."
    coerced = coerce_string(got, want) if isinstance(got, str) else NOT_COERCIBLE
    if isinstance(coerced, dict | list):
        return fix + " Send the JSON value itself, not a string holding it."
    return fix + (f" Write {short(coerced)} without quotes." if coerced is not NOT_COERCIBLE else "")


def _unexpected_properties(err: ValidationError, got: dict[str, Any]) -> dict[str, Any]:
    allowed = list(_props(err.schema))
    patterns = err.schema.get("patternProperties") or {}
    extras = [k for k in got if k not in allowed and not any(_search(p, k) for p in patterns)]
    fix = f"Remove {', '.join(repr(k) for k in extras)}; allowed properties: {', '.join(allowed) or 'none'}."
    for extra in extras:
        close = difflib.get_close_matches(extra, allowed, 1)
        if close:
            fix += f" Did you mean {close[0]!r} instead of {extra!r}?"
    return {"expected": allowed, "got": extras, "fix": fix}


KEY_CHARS = 256
"""How much of a host's argument key an upstream schema's ``patternProperties`` pattern is tried on (the pattern is
the upstream's and may backtrack: its cost is bounded by the cut)."""


def _search(pattern: str, text: str) -> bool:
    try:
        return re.search(pattern, text[:KEY_CHARS]) is not None
    except re.error:
        return False


# --- coercion -------------------------------------------------------------------------------------------------------

NOT_COERCIBLE: Any = object()
"""What ``coerce_string`` returns when no safe conversion exists."""
_INTEGER = re.compile(r"-?(0|[1-9]\d{0,17})")
_NUMBER = re.compile(r"-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?")
_TYPE_NAMES: dict[type, str] = {
    type(None): "null",
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    list: "array",
    dict: "object",
}


def coerce_string(text: str, wanted: str | Sequence[str]) -> Any:
    """``text`` as the first of the ``wanted`` JSON types it safely converts to, or ``NOT_COERCIBLE``."""
    for kind in [wanted] if isinstance(wanted, str) else wanted:
        if kind == "integer" and _INTEGER.fullmatch(text):
            return int(text)
        if kind == "number" and _NUMBER.fullmatch(text):
            number = float(text)
            return int(number) if _INTEGER.fullmatch(text) else number
        if kind == "boolean" and text in ("true", "false"):
            return text == "true"
        if kind in ("object", "array") and text.lstrip()[:1] in ("{", "["):
            try:
                parsed = json.loads(text)
            except ValueError:
                continue
            if isinstance(parsed, dict if kind == "object" else list):
                return parsed
    return NOT_COERCIBLE


def _compact(value: Any) -> Any:
    """A reported value as is when short, else as truncated JSON text (a coerced object can be large)."""
    return value if len(short(value, 200)) < 200 else short(value, 200)


def _set_at(doc: Any, path: list[str | int], value: Any) -> None:
    for step in path[:-1]:
        doc = doc[step]
    doc[path[-1]] = value


# --- helpers for neighbours: unknown-tool suggestions (A1), schema drift (A3) ---------------------------------------

_SEPARATORS = re.compile(r"__|\.|/|:")


def _base(name: str) -> str:
    return _SEPARATORS.split(name)[-1]


def suggest_tools(name: str, known: Sequence[str], limit: int = 5) -> list[str]:
    """Up to ``limit`` known tool names close to ``name``: typos, missing or extra prefixes, substrings."""
    wanted, wanted_base = name.lower(), _base(name.lower())
    scored: list[tuple[float, str]] = []
    for candidate in known:
        low = candidate.lower()
        base = _base(low)
        score = max(
            difflib.SequenceMatcher(None, wanted, low).ratio(),
            difflib.SequenceMatcher(None, wanted_base, base).ratio(),
        )
        if low == wanted or base == wanted_base:
            score = 1.5 if low == wanted else max(score, 1.2)
        elif len(wanted_base) >= 3 and (wanted_base in low or base in wanted):
            score = max(score, 0.9 if low.endswith(wanted_base) or low.startswith(wanted_base) else 0.75)
        if score >= 0.6:
            scored.append((score, candidate))
    scored.sort(key=lambda pair: (-pair[0], len(pair[1]), pair[1]))
    return [candidate for _, candidate in scored[:limit]]


_NOT_SHAPE = {"properties", "required", "items", "description", "title", "examples", "$comment"}


def schema_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """Properties added, removed and changed (by JSON path, nested objects and array items included), and changes
    to ``required``. Descriptions and titles are ignored: the diff is about the shape the arguments must have."""
    out: dict[str, Any] = {"added": [], "removed": [], "changed": {}, "required_added": [], "required_removed": []}
    _diff_object(old, new, "$", out)
    return out


def _props(schema: Mapping[str, Any]) -> dict[str, Any]:
    props = schema.get("properties")
    return {k: v for k, v in props.items() if isinstance(v, dict)} if isinstance(props, dict) else {}


def _diff_object(old: Mapping[str, Any], new: Mapping[str, Any], path: str, out: dict[str, Any]) -> None:
    before, after = _props(old), _props(new)
    out["added"] += [path_key(path, n) for n in sorted(after.keys() - before.keys())]
    out["removed"] += [path_key(path, n) for n in sorted(before.keys() - after.keys())]
    for name in sorted(before.keys() & after.keys()):
        _diff_property(before[name], after[name], path_key(path, name), out)
    required_before = set(old.get("required") or [])
    required_after = set(new.get("required") or [])
    out["required_added"] += [path_key(path, n) for n in sorted(required_after - required_before)]
    out["required_removed"] += [path_key(path, n) for n in sorted(required_before - required_after)]


def _diff_property(a: dict[str, Any], b: dict[str, Any], path: str, out: dict[str, Any]) -> None:
    delta = {
        key: {"old": a.get(key), "new": b.get(key)}
        for key in sorted((a.keys() | b.keys()) - _NOT_SHAPE)
        if a.get(key) != b.get(key)
    }
    items_a, items_b = a.get("items"), b.get("items")
    if isinstance(items_a, dict) and isinstance(items_b, dict):
        _diff_property(items_a, items_b, path + "[]", out)
    elif items_a != items_b:
        delta["items"] = {"old": items_a, "new": items_b}
    if delta:
        out["changed"][path] = delta
    _diff_object(a, b, path, out)
