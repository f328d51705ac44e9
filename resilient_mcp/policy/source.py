"""Loading admin-edited YAML/JSON files so that every error names the file, the line and the key.

``load_document`` parses a file and remembers where each key stands; ``validate_document`` runs a strict pydantic
model over the data and turns its errors into one ``SourceError`` whose message lists each problem as
``file:line: key.path: what is wrong``. YAML is a superset of JSON, so one parser serves both.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)

Loc = tuple[str | int, ...]


class SourceError(Exception):
    """A file a person edits is wrong. The message is complete and says what to change."""

    def __init__(self, path: str | os.PathLike[str], problems: list[str]) -> None:
        self.path = str(path)
        self.problems = problems
        head = f"{self.path}: {len(problems)} problem{'s' if len(problems) != 1 else ''}"
        super().__init__(head + "".join(f"\n  {p}" for p in problems))


@dataclass(slots=True)
class Document:
    path: str
    data: Any
    lines: dict[Loc, int] = field(default_factory=dict)
    """1-based line of each key path seen in the file."""

    def line_of(self, loc: Loc) -> int | None:
        """The line of ``loc`` or of its closest ancestor present in the file."""
        while loc:
            if loc in self.lines:
                return self.lines[loc]
            loc = loc[:-1]
        return self.lines.get((), None)


class _LineLoader(yaml.SafeLoader):
    pass


def _no_duplicates(loader: _LineLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first at line {seen[key] + 1})", key_node.start_mark
            )
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicates)


def _index(node: yaml.Node, loc: Loc, out: dict[Loc, int]) -> None:
    out.setdefault(loc, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node)
            out[(*loc, key)] = key_node.start_mark.line + 1
            _index(value_node, (*loc, key), out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _index(item, (*loc, i), out)


def strip_json_comments(text: str) -> str:
    """JSON with comments (JSONC: VS Code's and Zed's settings files) as plain JSON: ``//`` and ``/* */`` comments
    outside strings become spaces (newlines kept, so line numbers stay right)."""
    out: list[str] = []
    i, n, in_string = 0, len(text), False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(" " * (end - i))
            i = end
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:end]))
            i = end
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def _jsonc(text: str, path: str) -> bool:
    """A JSON file (by its name, or a file that opens with a comment) that may hold comments."""
    if "//" not in text and "/*" not in text:
        return False
    return Path(path).suffix.lower() in (".json", ".jsonc") or text.lstrip().startswith(("//", "/*"))


def parse_text(text: str, path: str) -> Document:
    if _jsonc(text, path):
        text = strip_json_comments(text)
    try:
        data = yaml.load(text, Loader=_LineLoader)
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        problem = exc.problem or exc.context or "not valid YAML/JSON"
        line = mark.line + 1 if mark else "?"
        raise SourceError(path, [f"{path}:{line}: not valid YAML/JSON ({where}): {problem}"]) from None
    except yaml.YAMLError as exc:
        raise SourceError(path, [f"{path}: not valid YAML/JSON: {exc}"]) from None
    lines: dict[Loc, int] = {}
    if node is not None:
        _index(node, (), lines)
    return Document(path=path, data=data, lines=lines)


def load_document(path: str | os.PathLike[str]) -> Document:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SourceError(p, [f"{p}: file not found"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SourceError(p, [f"{p}: cannot read: {exc}"]) from None
    return parse_text(text, str(p))


def _describe(err: Any) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        return "unknown key (check the spelling; see the reference in docs/reference.md)"
    if kind == "missing":
        return "required key is missing"
    msg = str(err["msg"])
    inp = err.get("input")
    if kind not in ("value_error", "assertion_error") and inp is not None and not isinstance(inp, dict | list):
        msg += f" (got {inp!r})"
    return re.sub(r"^Value error, ", "", msg)


def format_loc(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _data_loc(loc: Loc, data: Any) -> Loc:
    """pydantic puts union tags and validator names into ``loc``; keep only the parts that walk the data."""
    out: list[str | int] = []
    for i, part in enumerate(loc):
        if part == "[key]":  # pydantic's marker for an error in a dict key: the key itself is already named
            continue
        in_list = isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data)
        if (isinstance(data, dict) and part in data) or in_list:
            data = data[part]
        elif i == len(loc) - 1 and isinstance(data, dict):
            pass  # a missing or unknown key: name it
        else:
            continue
        out.append(part)
    return tuple(out)


def validation_problems(exc: ValidationError, doc: Document, prefix: Loc = (), data: Any = None) -> list[str]:
    problems = []
    for err in exc.errors():
        full = (*prefix, *_data_loc(err["loc"], data))
        line = doc.line_of(full)
        where = f"{doc.path}:{line}" if line else doc.path
        problems.append(f"{where}: {format_loc(full)}: {_describe(err)}")
    return problems


def validate_document(model: type[M], doc: Document, *, data: Any = None, prefix: Loc = ()) -> M:
    """Validate ``doc.data`` (or ``data``, a part of it found at ``prefix``) against ``model``."""
    payload = doc.data if data is None else data
    if payload is None:
        payload = {}
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        raise SourceError(doc.path, validation_problems(exc, doc, prefix, payload)) from None


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_env(value: str, environ: Mapping[str, str] | None = None, *, where: str = "") -> str:
    """Replace ``${VAR}`` and ``${VAR:-default}`` with environment values; a missing variable is an error."""
    env = os.environ if environ is None else environ

    def sub(m: re.Match[str]) -> str:
        name, default = m.group(1), m.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default
        raise KeyError(f"{where}environment variable {name} is not set (use ${{{name}:-default}} for a fallback)")

    return _VAR.sub(sub, value)
