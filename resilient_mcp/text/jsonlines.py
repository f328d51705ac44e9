"""JSON-RPC messages as lines of bytes from a peer, bounded before they are parsed: in bytes, in items, by their id.

Both ends of the proxy read newline-delimited JSON from a peer that may send anything: the host over stdio
(``host/stdio.py``) and a stdio upstream (``upstream/stdio.py``); the HTTP listener's body guard and the HTTP
upstream's byte cap read the same facts of a body or an SSE event. The pieces they share, below every floor:

- ``read_lines``: a byte stream split into lines in linear time; a line longer than the limit is never held whole
  (``Oversized`` keeps its size and its first and last ``EDGE`` bytes);
- ``edge_id``: the JSON-RPC id of a line read at its edges only, where the SDKs write it (first key after
  ``jsonrpc``, or last), so an oversized line (or any line, for the upstream's raw lane) is answered by its id
  without being parsed;
- ``items_at_most`` / ``count_items``: the JSON items of a message, bounded before parsing. ``json.loads`` of a body
  of 10^6 keys takes seconds and hundreds of megabytes, and the SDK then validates the result again: a cap on the
  message's bytes alone does not bound that. ``items_at_most`` is a cheap upper bound (four ``bytes.count``; a line
  of at most ``MAX_JSON_ITEMS`` bytes cannot exceed it); only a message over it is counted exactly, token by token,
  by ``count_items`` (meant for a worker thread: each step is one short match, so the event loop's thread gets the
  interpreter lock back every few milliseconds; ``json.loads`` would hold it for its whole parse).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio

MAX_JSON_ITEMS = 100_000
"""JSON items (strings and keys, numbers, literals, objects, arrays) one message may hold (``listen.max_json_items``'s
default, for stdio)."""

EDGE = 4096
"""Bytes kept of the start and of the end of an oversized line, to find its id."""

_ITEM = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[{]|-?[0-9][0-9.eE+-]*|true|false|null')
"""One JSON item: a string (object keys included), an object or array (its opening), a number or a literal."""

_ID = rb'(-?\d+|"(?:[^"\\]|\\.){0,256}")'
_HEAD_ID = re.compile(rb'\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*' + _ID)
_TAIL_ID = re.compile(rb'"id"\s*:\s*' + _ID + rb'\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*$')


class TooComplex(ValueError):
    """A message holds more JSON items than allowed."""


def items_at_most(data: bytes) -> int:
    """An upper bound of ``count_items(data)``: every item but the first follows a ``,``, ``:``, ``[`` or ``{``
    (inside strings too, which is why it is only a bound)."""
    return data.count(b",") + data.count(b":") + data.count(b"[") + data.count(b"{") + 1


def count_items(data: bytes, limit: int) -> int:
    """The JSON items of ``data``, counted token by token; raises ``TooComplex`` past ``limit``."""
    count = 0
    for _ in _ITEM.finditer(data):
        count += 1
        if count > limit:
            raise TooComplex(f"more than {limit} JSON items")
    return count


def edge_id(head: bytes | bytearray | memoryview, tail: bytes | bytearray | memoryview) -> int | str | None:
    """The id of a JSON-RPC line, read in its first bytes ``head`` when it is the first key (after ``jsonrpc``) or in
    its last bytes ``tail`` when it is the last (before it): how the SDK and the TypeScript SDK write their messages;
    ``None`` when it is in neither place. The upstream's raw lane reads every line's id so; the stdio readers read an
    oversized line's so (they keep only its edges)."""
    m = _HEAD_ID.match(head) or _TAIL_ID.search(tail)
    if m is None:
        return None
    text = m.group(1)
    if text[:1] != b'"':
        return int(text)
    try:
        found = json.loads(text)
    except ValueError:
        return None
    return found if isinstance(found, str) else None


@dataclass(slots=True)
class Oversized:
    """What is kept of a line over the limit: its size, its first and its last bytes."""

    head: bytearray
    tail: bytearray = field(default_factory=bytearray)
    size: int = 0

    def add(self, piece: bytes) -> None:
        self.size += len(piece)
        if len(self.head) < EDGE:
            self.head += piece[: EDGE - len(self.head)]
        self.tail += piece[-EDGE:]
        del self.tail[:-EDGE]

    def message_id(self) -> int | str | None:
        return edge_id(self.head, self.tail)


async def read_lines(
    receive: Callable[[], Awaitable[bytes]],
    limit: int,
    on_line: Callable[[bytes], Awaitable[None]],
    on_oversized: Callable[[Oversized], Awaitable[None]],
) -> None:
    """Split what ``receive`` returns (until ``anyio.EndOfStream``) into lines, in linear time. Lines longer than
    ``limit`` bytes are never held whole: ``on_oversized`` gets their size and edges instead."""
    parts: list[bytes] = []
    size = 0
    big: Oversized | None = None
    while True:
        try:
            chunk = await receive()
        except anyio.EndOfStream:
            break
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if big is not None:
                big.add(piece)
            elif size + len(piece) > limit:
                big = Oversized(bytearray())
                for part in parts:
                    big.add(part)
                big.add(piece)
                parts.clear()
            elif piece:
                parts.append(piece)
                size += len(piece)
            if end < 0:
                break
            if big is not None:
                await on_oversized(big)
                big = None
            elif parts:
                line = parts[0] if len(parts) == 1 else b"".join(parts)
                parts.clear()
                await on_line(line)
            size = 0
            start = end + 1
    if big is not None:
        await on_oversized(big)
    elif parts:
        await on_line(b"".join(parts))
