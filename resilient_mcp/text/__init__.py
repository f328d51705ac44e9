"""Text as UTF-8 bytes and JSON as one text, the leaf every floor may use (imports nothing of the package).

- ``utf8_len``, ``iter_utf8``: a text's length in UTF-8 bytes without encoding it, and its encoding chunk by chunk;
- ``utf8_head``: the longest prefix within a UTF-8 byte budget, never splitting a character;
- ``cut_text``: the same, but a text that is a JSON document is cut after its last complete value (or an opening
  bracket) and its open arrays and objects are closed, so the head is valid JSON and no token is ever split;
- ``json_shape``: a small description of a JSON value (top-level type, keys, array lengths) for a value too large
  to show;
- ``canonical_json``: one text per JSON value (sorted keys, compact), so equal values hash equal.

All the cutting functions look only at the first ``budget`` characters of a text: the cost is a small multiple of
the cap, however large the text. Beside this module: ``jsonlines`` (a peer's JSON lines, bounded) and ``redact`` (URL
credentials out of a text).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import mcp_types as types

SEPARATOR = "\n\n"
"""Between the texts of two content items in a stored output."""
_JSON_START = re.compile(r"\s*[\[{]")
_TOKEN = re.compile(r'\s+|"(?:[^"\\]++|\\.)*+"|[{}\[\],:]|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null|(.)', re.S)
"""JSON tokens; possessive, so a string the head cuts short fails in linear time (then ``(.)`` takes its quote)."""
_MAX_DEPTH = 64
_SHAPE_KEYS = 20
_SHAPE_DEPTH = 3
_CHUNK_CHARS = 64 * 1024


def iter_utf8(parts: Iterable[str], chunk_chars: int = _CHUNK_CHARS) -> Iterator[bytes]:
    """``parts`` encoded as UTF-8, chunk by chunk (never a whole copy). Lone surrogates become ``?``."""
    for part in parts:
        for i in range(0, len(part), chunk_chars):
            yield part[i : i + chunk_chars].encode("utf-8", "replace")


def utf8_len(text: str) -> int:
    """Length of ``text`` in UTF-8 bytes, as ``iter_utf8`` encodes it, without encoding it whole."""
    if text.isascii():
        return len(text)
    return sum(len(chunk) for chunk in iter_utf8((text,)))


def item_text(item: Any) -> str | None:
    """The text a content item carries (text content, embedded text resource), or None."""
    if isinstance(item, types.TextContent):
        return item.text
    if isinstance(item, types.EmbeddedResource) and isinstance(item.resource, types.TextResourceContents):
        return item.resource.text
    return None


def utf8_head(text: str, budget: int) -> str:
    """The longest prefix of ``text`` whose UTF-8 encoding fits in ``budget`` bytes."""
    prefix = text[: max(budget, 0)]
    if prefix.isascii():
        return prefix
    data = prefix.encode("utf-8", "replace")
    if len(data) <= budget:
        return prefix
    cut = budget
    while cut > 0 and data[cut] & 0xC0 == 0x80:  # a continuation byte: the cut would split a character
        cut -= 1
    return data[:cut].decode("utf-8")


def cut_text(text: str, budget: int) -> tuple[str, int]:
    """``text`` cut to ``budget`` UTF-8 bytes: (what to show, how many bytes of ``text`` it covers).

    A JSON document (starting with ``{`` or ``[``) stays valid JSON: what is shown is a prefix ending after a
    complete value, plus the brackets that close it, so it covers fewer bytes than it shows."""
    if _JSON_START.match(text):
        head = utf8_head(text, budget - _MAX_DEPTH)
        found = json_prefix(head)
        if found is not None:
            end, closers = found
            return head[:end] + closers, utf8_len(head[:end])
    head = utf8_head(text, budget)
    return head, utf8_len(head)


def json_prefix(head: str, max_depth: int = _MAX_DEPTH) -> tuple[int, str] | None:
    """For ``head``, the start of a JSON document: the end of a prefix that ends after a complete value or an opening
    bracket, and the brackets that close it. None if ``head`` does not look like JSON.

    Of the possible cuts, the shallowest one that keeps at least half of ``head`` wins (whole array elements rather
    than an element cut in the middle); failing that, the last one."""
    stack: list[str] = []
    cuts: dict[int, tuple[int, str]] = {}  # depth -> last cut at that depth
    key_next = False
    for m in _TOKEN.finditer(head):
        token, end = m.group(), m.end()
        if m.group(1) is not None:  # not a JSON token
            if token == '"' or m.start() >= len(head) - 8:
                break  # a string (or literal) that the head cuts short: the cuts so far stand
            return None  # this is not JSON after all
        first = token[0]
        if first.isspace() or first == ":":
            continue
        if first == ",":
            key_next = stack[-1:] == ["}"]
            continue
        if first in "{[":
            stack.append("}" if first == "{" else "]")
            if len(stack) > max_depth:
                break
            key_next = first == "{"
        elif first in "}]":
            if not stack or stack.pop() != first:
                return None
        elif end == len(head) and first != '"':
            break  # a number or literal at the very end may go on past the head
        elif key_next:
            key_next = False
            continue  # an object key: the prefix may not end here
        cuts[len(stack)] = (end, "".join(reversed(stack)))
        if not stack:
            return cuts[0]  # a complete document
    if not cuts:
        return None
    for depth in sorted(cuts):
        if cuts[depth][0] * 2 >= len(head):
            return cuts[depth]
    return max(cuts.values())


def json_shape(value: Any, depth: int = 0) -> Any:
    """A small description of a JSON value: types, up to 20 keys per object, array lengths, 3 levels deep."""
    if isinstance(value, dict):
        if depth >= _SHAPE_DEPTH:
            return f"object ({len(value)} keys)"
        shape = {str(k): json_shape(v, depth + 1) for k, v in list(value.items())[:_SHAPE_KEYS]}
        if len(value) > _SHAPE_KEYS:
            shape["…"] = f"{len(value) - _SHAPE_KEYS} more keys"
        return shape
    if isinstance(value, list):
        if not value or depth >= _SHAPE_DEPTH:
            return f"array ({len(value)})"
        return {"array": len(value), "items": json_shape(value[0], depth + 1)}
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return f"string ({len(value)} chars)"
    return "null" if value is None else type(value).__name__


canonical_json: Callable[[Any], str] = functools.partial(
    json.dumps, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
)
"""``value`` as canonical JSON: sorted keys, compact separators, non-ASCII kept; non-JSON values via ``str``. (A
partial of ``json.dumps``, not a function of its own: every call's identity computes it, and it costs no frame.)"""
