"""A wordless error result paired with what the upstream wrote on stderr while the call ran.

The Python SDK's ``MCPServer`` (mcp 2.x) answers a tool that crashed with only ``Error executing tool <name>`` and logs
the exception, with its traceback, to the server's stderr (``UnexpectedToolError``: "nothing from the original
reaches the client"). A stdio upstream's stderr passes through the proxy (``StderrTail``), so the words exist: the
connection keeps the lines written between sending a call and its answer, and this module picks the exception line
among them (the last line of a Python traceback that is not the SDK's own wrapper, or a Node ``Error:`` line).

``classify_result`` then reads those words instead of the wordless text, quotes them in ``upstream_message`` and says
they came from stderr (``details.words_from``). With another request in flight on the same connection the lines may be
another call's: nothing is attributed, and the observation says so. Text is scanned line by line with string
methods, bounded by ``MAX_STDERR_CHARS`` (no regular expression runs on the server's text).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

STDERR_META_KEY = "io.github.resilient-mcp/stderr"
"""Where the connection puts what it read on stderr for a wordless error result (``_meta`` of that result)."""
MAX_STDERR_CHARS = 16384
"""How much of what was written during a call is scanned (its end)."""
MAX_WORDS_CHARS = 400
"""How much of an exception line (with its wrapped continuation) is kept."""

_SDK_WRAPPERS = ("error executing tool", "error calling tool")
"""The SDKs' wordless answers for a crashed tool: mcp's ``Error executing tool <name>``, FastMCP's masked
``Error calling tool '<name>'``."""
_BOX = "│┃║|╭╮╰╯─━═ \t"
_STRUCTURAL = ("traceback", "the above exception", "during handling", "file ", "at ", "{", "}", "[")
_WRAP_WIDTH = 60
"""A line at least this long that is followed by more text was probably wrapped by the console (rich wraps at 80
columns, between words); a log record's own next line starts with its time, level or ``[``."""
_NAME_ENDINGS = ("Error", "Exception", "Exit", "Interrupt", "Warning", "Failure", "Timeout", "Fault")


def wordless(text: str) -> bool:
    """Whether an error result's text says nothing beyond "this tool failed": empty, or only the SDKs' wrappers
    ("Error executing tool x", nested, with an empty message after them)."""
    rest = text.strip()
    while rest:
        lowered = rest.lower()
        wrapper = next((w for w in _SDK_WRAPPERS if lowered.startswith(w)), None)
        if wrapper is None:
            return False
        rest = rest[len(wrapper) :].strip()
        name, _, after = rest.partition(":")
        if " " in name.strip().strip("'\""):
            return False  # "Error executing tool x failed badly": words
        rest = after.strip()
    return True


def _exception_name(head: str) -> bool:
    """Whether ``head`` (what precedes ": " on a line) is an exception's name: a dotted identifier whose last part is
    capitalised and either ends as exception names do or is qualified by its module (``docker.errors.NotFound``)."""
    if not head or " " in head or not head[0].isalpha():
        return False
    parts = head.split(".")
    if not all(p.replace("_", "").isalnum() for p in parts):
        return False
    last = parts[-1]
    return last[:1].isupper() and (last.endswith(_NAME_ENDINGS) or len(parts) > 1)


def _message_of(line: str) -> str | None:
    """The "Name: message" of an exception line, or ``None``."""
    stripped = line.strip(_BOX)
    head, sep, message = stripped.partition(": ")
    if not sep or not _exception_name(head) or not message.strip():
        return None
    return stripped


def _continued(lines: list[str], at: int, first: str) -> str:
    """``first`` with the lines a console wrapped it onto (bounded)."""
    words = first
    raw = lines[at].rstrip()
    for nxt in lines[at + 1 : at + 4]:
        piece = nxt.strip(_BOX)
        lowered = piece.lower()
        record = piece[:1].isdigit() or lowered.startswith(("info", "debug", "warning", "error", "critical"))
        if len(raw) < _WRAP_WIDTH or not piece or lowered.startswith(_STRUCTURAL) or record or _message_of(nxt):
            break
        words += " " + piece
        raw = nxt.rstrip()
    return words[:MAX_WORDS_CHARS]


def exception_words(text: str) -> str | None:
    """The exception line among what a server wrote on stderr during one call: the last one that is not an SDK's
    wordless wrapper (in a chained Python traceback the cause comes first, the SDK's wrapper last), with the lines a
    console wrapped it onto. ``None`` when there is none."""
    lines = text[-MAX_STDERR_CHARS:].splitlines()
    found: str | None = None
    for at, line in enumerate(lines):
        message = _message_of(line)
        if message is None:
            continue
        words = _continued(lines, at, message)
        if not wordless(words.partition(": ")[2]):
            found = words
    return found


def wrapper_seen(text: str, tool: str) -> bool:
    """Whether the SDK's own wrapper line for ``tool`` was written (it comes last: the traceback is complete)."""
    flat = " ".join(text[-MAX_STDERR_CHARS:].lower().split())  # a console may have wrapped it
    return f"error executing tool {tool.lower()}" in flat


def stderr_reading(meta: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    """What the connection put in a result's ``_meta``: (words, why none were attributed)."""
    entry = (meta or {}).get(STDERR_META_KEY)
    if not isinstance(entry, Mapping):
        return None, None
    words = entry.get("words")
    why = entry.get("unattributed")
    return (
        words[:MAX_WORDS_CHARS] if isinstance(words, str) and words else None,
        why[:200] if isinstance(why, str) and why else None,
    )
