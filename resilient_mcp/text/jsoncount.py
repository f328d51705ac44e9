"""Counting the items of a JSON document before parsing it, so a message of a million keys is refused, not built.

``json.loads`` of a body of 10^6 keys takes seconds and hundreds of megabytes, and the SDK then validates the result
again: a cap on the message's bytes alone does not bound that. ``items_at_most`` is a cheap upper bound (four
``bytes.count``); only a message over it is counted exactly, token by token, by ``count_items`` (meant for a worker
thread: each step is one short match, so the event loop's thread gets the interpreter lock back every few
milliseconds; ``json.loads`` would hold it for its whole parse, in a thread or not). The HTTP listener's body guard
and the stdio transport both use them.
"""

from __future__ import annotations

import re

MAX_JSON_ITEMS = 100_000
"""JSON items (strings and keys, numbers, literals, objects, arrays) one message may hold (``listen.max_json_items``'s
default, for stdio)."""

_ITEM = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[{]|-?[0-9][0-9.eE+-]*|true|false|null')
"""One JSON item: a string (object keys included), an object or array (its opening), a number or a literal."""


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
