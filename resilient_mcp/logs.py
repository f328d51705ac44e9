"""Logging: one structlog pipeline, configured once, always to stderr (stdout is the JSON-RPC wire in stdio mode).

Console rendering on a TTY, JSON lines otherwise. Standard-library logging (the SDK, uvicorn) is routed through the
same handler on stderr, so nothing any library logs can reach stdout.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal

import structlog

Level = Literal["debug", "info", "warning", "error"]
Format = Literal["auto", "console", "json"]


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
    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    # The SDK and uvicorn are chatty at info; keep them at warning unless debugging.
    root.setLevel(numeric if numeric <= logging.DEBUG else max(numeric, logging.WARNING))
