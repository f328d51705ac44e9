"""Logging: one structlog pipeline, configured once, always to stderr (stdout is the JSON-RPC wire in stdio mode).

Console rendering on a TTY, JSON lines otherwise. Standard-library logging (the SDK, httpx, uvicorn) is routed through
the same handler on stderr, so nothing any library logs can reach stdout.

Every line, ours and the libraries', passes two processors before it is rendered:

- ``redact_urls``: in every string, a URL's user-info (``https://user:secret@host``) and the values of its query
  parameters (``?token=...``) are replaced by ``***`` (an upstream URL may carry a credential);
- ``bound_values``: every string is cut to ``MAX_VALUE_CHARS`` and every list, tuple, set or mapping to
  ``MAX_ITEMS`` items, with a note of what was left out (a 1 MB tool name or 10^6 argument keys must not make a
  1 MB log line).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, MutableMapping
from typing import Any, Literal

import structlog

from ..text.redact import redact

Level = Literal["debug", "info", "warning", "error"]
Format = Literal["auto", "console", "json"]


MAX_VALUE_CHARS = 2000
"""Longest string value in a log line (the event name included); longer ones are cut with a note."""
MAX_ITEMS = 50
"""Most items of a list, tuple, set or mapping in a log line; the rest are counted, not shown."""
MAX_TRACEBACK_CHARS = 20_000
_MAX_DEPTH = 6


def bound(value: Any, depth: int = 0, chars: int = MAX_VALUE_CHARS) -> Any:
    """``value`` with URLs redacted, strings cut to ``chars`` and collections to ``MAX_ITEMS``."""
    if isinstance(value, str):
        if len(value) > chars:  # redacted whole first: a cut must not leave half a URL's secret unredacted
            return redact(value)[:chars] + f"…[{len(value) - chars} more chars]"
        return redact(value)
    if isinstance(value, bytes | bytearray):
        return bound(value[: MAX_VALUE_CHARS + 1].decode("utf-8", "replace"), depth) if value else ""
    if depth >= _MAX_DEPTH and isinstance(value, Mapping | list | tuple | set | frozenset):
        return f"<{type(value).__name__} of {len(value)} items>"
    if isinstance(value, Mapping):
        out = {bound(str(k), depth + 1): bound(v, depth + 1) for k, v in _first(value.items())}
        if len(value) > MAX_ITEMS:
            out["…"] = f"{len(value) - MAX_ITEMS} more items"
        return out
    if isinstance(value, list | tuple | set | frozenset):
        items = [bound(v, depth + 1) for v in _first(value)]
        if len(value) > MAX_ITEMS:
            items.append(f"…{len(value) - MAX_ITEMS} more items")
        return items
    return value


def _first(items: Any) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if len(out) == MAX_ITEMS:
            break
        out.append(item)
    return out


def bound_values(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: ``bound`` applied to every value of the event (private ``_`` keys are left alone)."""
    for key, value in list(event_dict.items()):
        if not key.startswith("_"):
            event_dict[key] = bound(value, chars=MAX_TRACEBACK_CHARS if key == "exception" else MAX_VALUE_CHARS)
    return event_dict


def configure_logging(level: Level = "info", fmt: Format = "auto") -> None:
    numeric = getattr(logging, level.upper())
    use_console = fmt == "console" or (fmt == "auto" and sys.stderr.isatty())
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: structlog.typing.Processor = (
        structlog.dev.ConsoleRenderer(colors=True) if use_console else structlog.processors.JSONRenderer()
    )
    safe: list[structlog.typing.Processor] = [structlog.processors.format_exc_info, bound_values]
    structlog.configure(
        processors=[*shared, *safe, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *safe, renderer],
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    # The SDK and uvicorn are chatty at info; keep them at warning unless debugging.
    root.setLevel(numeric if numeric <= logging.DEBUG else max(numeric, logging.WARNING))
