"""Stored outputs: how the full copy of a capped result is laid out, and how hosts and models read it back.

A capped result is stored (``OutputStore.put_output``) as

1. its **text**: the texts of its text items and embedded text resources, then its structuredContent as JSON when
   that was dropped, joined by a blank line, as UTF-8 (a result with one text item stores exactly that text);
2. a **manifest**: the result as JSON with each of those texts replaced by its byte span in (1), ``"$text": [start,
   end]``. ``StoredOutputs.load_result`` rebuilds the original result exactly.

It is read back through

- the proxy tool ``read_stored_output(handle, offset=0, length=50000)``, advertised when output caps are on: one page
  of the text. Offsets and lengths are bytes of the UTF-8 text; a page never ends inside a character and says where
  the next one starts, so pages read in sequence reassemble the text byte for byte (an offset inside a character
  starts the page at that character);
- the resource ``resilient-mcp://outputs/{handle}``: the whole text, and each binary item as a blob (``#item-N``).

An unknown or expired handle is ``StoredOutputMissing`` (the tool answers it with an ``isError`` result).

Every stored output has an owner (``proxy.output_owner``): the host session that made the call, and over HTTP the bearer
token it authenticated with. It is stored under its handle bound to that owner, so a handle that leaks to another
session, or another token, reads as unknown there.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

import mcp_types as types
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser

from ..call.meta import PAGE_META
from . import OutputStore

OUTPUT_URI_PREFIX = "resilient-mcp://outputs/"
DEFAULT_PAGE_BYTES = 50_000
MAX_PAGE_BYTES = 1_000_000

READ_STORED_OUTPUT_TOOL = types.Tool(
    name="read_stored_output",
    title="Read a stored tool output",
    description="Read a page of a tool output that resilient-mcp truncated. The truncation note names the handle and "
    "the offset where the part you saw ends. Offsets and lengths are in bytes of UTF-8 text; each page says where "
    "the next one starts.",
    input_schema={
        "type": "object",
        "properties": {
            "handle": {"type": "string", "description": "The handle from the truncation note."},
            "offset": {"type": "integer", "minimum": 0, "default": 0, "description": "Byte offset to start at."},
            "length": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_PAGE_BYTES,
                "default": DEFAULT_PAGE_BYTES,
                "description": "Bytes to read at most.",
            },
        },
        "required": ["handle"],
        "additionalProperties": False,
    },
    annotations=types.ToolAnnotations(
        read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    ),
)

STORED_OUTPUT_TEMPLATE = types.ResourceTemplate(
    uri_template=OUTPUT_URI_PREFIX + "{handle}",
    name="stored_output",
    title="Stored tool output",
    description="The full text (and binary items) of a tool output that resilient-mcp truncated.",
    mime_type="text/plain",
)


ANONYMOUS = "anonymous"
"""The principal of an HTTP request when the listener has no ``auth_tokens``."""


def http_principal(scope: Mapping[str, Any]) -> str:
    """Who sent an HTTP request: ``token-N`` for the N-th of ``listen.auth_tokens`` (set by the listener's bearer
    check), else ``anonymous``."""
    user = scope.get("user")
    return user.display_name if isinstance(user, AuthenticatedUser) else ANONYMOUS


def owner_principal(owner: str) -> str:
    """The bearer-token principal (``token-N``) in an ``output_owner`` string, or "" when there is none (stdio, or an
    HTTP listener without ``auth_tokens``: one principal, nothing to keep apart)."""
    principal = owner.partition(" ")[0]
    return principal if principal.startswith("token-") else ""


class StoredOutputMissing(LookupError):
    """No stored output under this handle: it expired, was trimmed away, or never existed."""


class Page(NamedTuple):
    text: str
    next_offset: int | None
    """Where the next page starts; None after the last page."""
    total: int
    """Size of the whole stored text, in bytes."""


def build_manifest(
    result: types.CallToolResult, spans: Mapping[int, tuple[int, int]], structured_span: tuple[int, int] | None
) -> str:
    """The manifest of ``result`` whose item texts (content index -> byte span) are in the stored text."""
    items: list[dict[str, Any]] = []
    for i, item in enumerate(result.content):
        if i not in spans:
            items.append(item.model_dump(mode="json", by_alias=True, exclude_none=True))
        elif isinstance(item, types.TextContent):
            items.append(
                {**item.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"text"}), "$text": spans[i]}
            )
        else:
            dumped = item.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"resource": {"text"}})
            dumped["resource"]["$text"] = spans[i]
            items.append(dumped)
    body = result.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"content", "structured_content"})
    body["content"] = items
    if structured_span is not None:
        body["structuredContent"] = {"$text": structured_span}
    elif result.structured_content is not None:
        body["structuredContent"] = result.structured_content
    return json.dumps(body, ensure_ascii=False)


def _continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


class StoredOutputs:
    """Reading stored outputs back: pages, the whole result, the proxy tool and the resource."""

    def __init__(self, store: OutputStore) -> None:
        self._store = store

    async def read_page(self, handle: str, offset: int = 0, length: int = DEFAULT_PAGE_BYTES, owner: str = "") -> Page:
        """Up to ``length`` bytes of the stored text from ``offset``, cut at character boundaries."""
        if offset < 0 or length < 1:
            raise ValueError("offset must be >= 0 and length >= 1")
        length = min(length, MAX_PAGE_BYTES)
        window = max(0, offset - 3)  # a character starts at most 3 bytes before any offset inside it
        got = await self._store.read_output(handle, window, offset - window + length + 4, owner)
        if got is None:
            raise StoredOutputMissing(handle)
        data, total = got
        start = min(offset - window, len(data))
        while 0 < start < len(data) and _continuation(data[start]):
            start -= 1
        end = min(offset - window + length, len(data))
        if end < len(data):
            while end > start and _continuation(data[end]):
                end -= 1
            if end == start:  # the page is shorter than its first character: give the whole character
                end += 1
                while end < len(data) and _continuation(data[end]):
                    end += 1
        stop = window + end
        return Page(data[start:end].decode("utf-8", "replace"), stop if stop < total else None, total)

    async def _text(self, handle: str, span: list[int], owner: str) -> str:
        got = await self._store.read_output(handle, span[0], span[1] - span[0], owner)
        if got is None:
            raise StoredOutputMissing(handle)
        return got[0].decode("utf-8", "replace")

    async def load_result(self, handle: str, owner: str = "") -> types.CallToolResult:
        """The original result, rebuilt from the manifest and the stored text."""
        manifest = await self._store.output_manifest(handle, owner)
        if manifest is None:
            raise StoredOutputMissing(handle)
        body = json.loads(manifest)
        for item in body["content"]:
            holder = item.get("resource") if "$text" not in item else item
            if isinstance(holder, dict) and "$text" in holder:
                holder["text"] = await self._text(handle, holder.pop("$text"), owner)
        structured = body.get("structuredContent")
        if isinstance(structured, dict) and list(structured) == ["$text"]:
            body["structuredContent"] = json.loads(await self._text(handle, structured["$text"], owner))
        return types.CallToolResult.model_validate(body)

    async def call_read_stored_output(self, args: Mapping[str, Any] | None, owner: str = "") -> types.CallToolResult:
        """The ``read_stored_output`` proxy tool, for the calls of ``owner``."""
        args = args or {}
        handle, offset, length = args.get("handle"), args.get("offset", 0), args.get("length", DEFAULT_PAGE_BYTES)
        if not isinstance(handle, str) or not _is_int(offset) or not _is_int(length) or offset < 0 or length < 1:
            return _error(
                "read_stored_output needs handle (a string from a truncation note), offset (an integer "
                f">= 0) and length (an integer from 1 to {MAX_PAGE_BYTES})."
            )
        try:
            page = await self.read_page(handle, offset, length, owner)
        except StoredOutputMissing:
            return _error(
                f"No stored output has the handle {handle!r}: it expired, never existed, or was stored for "
                "another session. Call the original tool again, with a narrower request."
            )
        stop = page.total if page.next_offset is None else page.next_offset
        start = stop - len(page.text.encode("utf-8", "replace"))
        where = f"bytes {start}-{stop} of {page.total}"
        if page.next_offset is None:
            trailer = f"[resilient-mcp: {where}; end of the stored output]"
        else:
            trailer = f'[resilient-mcp: {where}; next page: read_stored_output(handle="{handle}", offset={stop})]'
        facts = {"handle": handle, "offset": start, "next_offset": page.next_offset, "total": page.total}
        return types.CallToolResult(
            content=[types.TextContent(text=page.text), types.TextContent(text=trailer)], meta={PAGE_META: facts}
        )

    async def read_stored_output_resource(self, uri: str, owner: str = "") -> types.ReadResourceResult:
        """The resource ``resilient-mcp://outputs/{handle}``, for ``owner``: the whole text, then each binary item."""
        handle = uri.removeprefix(OUTPUT_URI_PREFIX)
        manifest = await self._store.output_manifest(handle, owner) if uri.startswith(OUTPUT_URI_PREFIX) else None
        got = await self._store.read_output(handle, 0, 2**62, owner) if manifest is not None else None
        if manifest is None or got is None:
            raise StoredOutputMissing(uri)
        contents: list[types.TextResourceContents | types.BlobResourceContents] = [
            types.TextResourceContents(uri=uri, mime_type="text/plain", text=got[0].decode("utf-8", "replace"))
        ]
        for i, item in enumerate(json.loads(manifest)["content"]):
            blob = item.get("data") or (item.get("resource") or {}).get("blob")
            if isinstance(blob, str):
                mime = item.get("mimeType") or (item.get("resource") or {}).get("mimeType")
                contents.append(types.BlobResourceContents(uri=f"{uri}#item-{i}", mime_type=mime, blob=blob))
        return types.ReadResourceResult(contents=contents)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
