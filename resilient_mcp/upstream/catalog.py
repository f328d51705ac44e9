"""What one upstream offers: its catalog read page by page at connect time, and re-read, coalesced, after a change.

``list_catalog`` reads every list the server declared (tools, resources, resource templates, prompts), every page;
a list that fails while the rest works costs that list only (``UpstreamCatalog.unlisted``). ``Relists`` runs the
re-lists that ``list_changed`` notifications (or ``subscriptions/listen`` events) ask for, at most one in flight and
one pending per kind.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
import structlog
from mcp import ClientSession
from mcp.shared.exceptions import MCPError

from .errors import reason

log = structlog.get_logger(__name__)

MAX_PAGES = 10_000
"""A server that pages forever must not hang the proxy."""


@dataclass(slots=True)
class UpstreamCatalog:
    """What one upstream offers, all pages read."""

    tools: list[types.Tool] = field(default_factory=list)
    resources: list[types.Resource] = field(default_factory=list)
    resource_templates: list[types.ResourceTemplate] = field(default_factory=list)
    prompts: list[types.Prompt] = field(default_factory=list)
    capabilities: types.ServerCapabilities | None = None
    server_info: types.Implementation | None = None
    instructions: str | None = None
    protocol_version: str | None = None
    unlisted: dict[str, str] = field(default_factory=dict)
    """List methods the upstream declared and failed to answer at connect time (method -> code and message): served
    as empty lists."""


_LISTS: dict[str, tuple[Any, Any, str]] = {
    "tools": (types.ListToolsRequest, types.ListToolsResult, "tools"),
    "resources": (types.ListResourcesRequest, types.ListResourcesResult, "resources"),
    "resource_templates": (
        types.ListResourceTemplatesRequest,
        types.ListResourceTemplatesResult,
        "resource_templates",
    ),
    "prompts": (types.ListPromptsRequest, types.ListPromptsResult, "prompts"),
}
"""Catalog field -> (request, result, the result's item field)."""


async def list_pages(session: ClientSession, what: str) -> list[Any]:
    """Every item of one list (``tools``, ``resources``, ``resource_templates``, ``prompts``), all pages read."""
    request_type, result_type, attr = _LISTS[what]
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.send_request(request_type(params=params), result_type)
        items.extend(getattr(page, attr))
        cursor = page.next_cursor
        if not cursor:
            break
    return items


def _declared_lists(caps: types.ServerCapabilities) -> list[str]:
    lists = ["tools"] if caps.tools is not None else []
    if caps.resources is not None:
        lists += ["resources", "resource_templates"]
    if caps.prompts is not None:
        lists.append("prompts")
    return lists


async def list_catalog(session: ClientSession, upstream: str) -> UpstreamCatalog:
    """The catalog of a session that completed its handshake: every list its server declared."""
    caps = session.server_capabilities or types.ServerCapabilities()
    cat = UpstreamCatalog(
        capabilities=caps,
        server_info=session.server_info,
        instructions=session.instructions,
        protocol_version=session.protocol_version,
    )
    for field_name in _declared_lists(caps):
        try:
            items = await list_pages(session, field_name)
        except MCPError as exc:
            # A capability declared but not implemented (-32601), or a list that fails while the rest works,
            # costs that list only: the tools stay usable, as they are for a client that never asks for it. The
            # tools' own list is the reason to connect: only "not implemented" is tolerated there.
            if field_name == "tools" and exc.code != types.METHOD_NOT_FOUND:
                raise
            method = _LISTS[field_name][0].model_fields["method"].default
            cat.unlisted[method] = f"{exc.code}: {_cut(exc.message, 200)}"
            log.warning(
                "upstream_list_failed",
                upstream=upstream,
                method=method,
                code=exc.code,
                error=_cut(exc.message, 200),
                hint="served without it; the other lists and the tools are unaffected",
            )
            continue
        setattr(cat, field_name, items)
    return cat


class Relists:
    """Re-lists after ``list_changed``, coalesced: at most one re-list in flight and one pending per kind, however
    many notifications arrive (the SDK runs each in its own task: a storm of 10,000 cost 10 s of CPU and 380
    overlapping re-lists). A notification during a re-list marks one more re-list after it."""

    def __init__(self, upstream: str, refresh: Callable[[str], Awaitable[None]]) -> None:
        self._upstream = upstream
        self._refresh = refresh
        self._running: set[str] = set()
        """The kinds (tools, resources, prompts) being re-listed now."""
        self._pending: set[str] = set()
        """The kinds with a ``list_changed`` received during their re-list: one more re-list follows it."""

    async def changed(self, kind: str) -> None:
        if kind in self._running:
            self._pending.add(kind)
            return
        self._running.add(kind)
        log.info("upstream_list_changed", upstream=self._upstream, what=kind)
        try:
            while True:
                self._pending.discard(kind)
                try:
                    await self._refresh(kind)
                except Exception as exc:
                    log.warning("upstream_refresh_failed", upstream=self._upstream, what=kind, error=reason(exc))
                if kind not in self._pending:
                    return
        finally:
            self._running.discard(kind)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
