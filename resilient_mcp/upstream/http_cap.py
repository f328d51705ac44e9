"""A byte cap on what an HTTP upstream (streamable HTTP, SSE) may send: the proxy's own ``max_message_bytes``.

The SDK reads a JSON response whole (``response.aread()``, no limit: a 500 MB result took the proxy to 2.6 GB, an
endless body to 3.6 GB) and stops an SSE stream at its first event over 1 MiB with an ``SSEError``, which a request
reports as "connection lost" (``C2``, maybe executed) and which tears a ``type: sse`` upstream down. ``CappedTransport``
sits under the SDK's httpx client and bounds every body as it arrives:

- a JSON (or any non-SSE) body is read up to the limit; past it the upstream's response is closed (the rest is never
  read) and the request gets the stand-in error ``stdio.oversized_response`` that the exception seam (``errors``) turns
  into ``E4_oversized_result`` (the result was produced; it is too large);
- an SSE stream is passed on one complete event at a time (line endings normalised to ``\\n``); an event over the
  limit is not kept. On a POST (streamable HTTP: the stream answers that request) the stream ends there with the
  stand-in error for the request's id. On a GET stream (the legacy SSE transport's, or streamable HTTP's standalone
  stream) the rest of the event is read and dropped as it arrives (the connection stays up), and the request it
  answered, found from the event's first or last bytes, gets the stand-in error.

Memory stays bounded by the limit (plus a chunk) however long the body is.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import structlog

from ..text.jsonlines import EDGE, edge_id
from .stdio import oversized_response

log = structlog.get_logger(__name__)

SDK_SSE_EVENT_LIMIT = 1024 * 1024
"""The MCP SDK's own limit of one SSE event (``sse_client`` cannot be given another): the cap of a ``type: sse``
upstream is at most this, so an event over it is answered E4 here instead of tearing the connection down."""
_DROPPED = ("content-encoding", "content-length", "transfer-encoding")


def _request_id(request: httpx2.Request) -> int | str | None:
    """The JSON-RPC id of a request POST (None for notifications, responses, GET and DELETE)."""
    if request.method != "POST":
        return None
    try:
        body = json.loads(request.content or b"null")
    except ValueError:
        return None
    if not isinstance(body, dict) or "method" not in body:
        return None
    found = body.get("id")
    return found if isinstance(found, int | str) and not isinstance(found, bool) else None


def _error_json(request_id: int | str, size: int, limit: int) -> bytes:
    message = oversized_response(request_id, size, limit).message
    return message.model_dump_json(by_alias=True, exclude_none=True).encode()


def _sniff_id(head: bytes, tail: bytes) -> int | str | None:
    """The id of the JSON-RPC message an SSE event carries, read from its first or last bytes."""
    at = head.find(b"data:")
    return edge_id(head[at + 5 :].lstrip(b" ") if at >= 0 else b"", tail.rstrip(b"\n"))


class _Skipped:
    """An SSE event over the limit, being read and dropped: its size, and its first and last bytes (for its id)."""

    def __init__(self, head: bytes, tail: bytes, size: int) -> None:
        self.head = head
        self.tail = tail
        self.size = size

    def add(self, data: bytes) -> None:
        self.size += len(data)
        self.tail = (self.tail + data[-EDGE:])[-EDGE:]


class _CappedEvents(httpx2.AsyncByteStream):
    """An SSE body passed on event by event; see the module docstring."""

    def __init__(self, response: httpx2.Response, limit: int, request_id: int | str | None, upstream: str) -> None:
        self._response = response
        self._limit = limit
        self._request_id = request_id
        self._upstream = upstream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        buf = bytearray()
        skipped: _Skipped | None = None
        last = b""  # the last byte seen while skipping (an event's end may straddle two chunks)
        cr = False
        async for raw in self._response.aiter_bytes():
            data = b"\r" + raw if cr else raw
            cr = data.endswith(b"\r")
            if cr:
                data = data[:-1]
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            while data:
                if skipped is not None:
                    end = (last + data).find(b"\n\n")
                    if end < 0:
                        skipped.add(data)
                        last, data = data[-1:], b""
                        continue
                    used = end + 2 - len(last)
                    skipped.add(data[:used])
                    data, last = data[used:], b""
                    if (answer := self._answer(skipped)) is not None:
                        yield answer
                    skipped = None
                    continue
                start = max(0, len(buf) - 1)
                buf += data
                data = b""
                end = buf.find(b"\n\n", start)
                while end >= 0:
                    yield bytes(buf[: end + 2])
                    del buf[: end + 2]
                    end = buf.find(b"\n\n")
                if len(buf) > self._limit:
                    if self._request_id is not None:  # this POST's stream answers that request: stop reading
                        log.warning("upstream_result_oversized", upstream=self._upstream, bytes=len(buf))
                        yield b"event: message\ndata: " + _error_json(self._request_id, len(buf), self._limit) + b"\n\n"
                        return
                    skipped = _Skipped(bytes(buf[:EDGE]), bytes(buf[-EDGE:]), len(buf))
                    last, buf = bytes(buf[-1:]), bytearray()
        if buf:
            yield bytes(buf)

    def _answer(self, skipped: _Skipped) -> bytes | None:
        found = _sniff_id(skipped.head, skipped.tail)
        log.warning("upstream_result_oversized", upstream=self._upstream, bytes=skipped.size, answered=found)
        if found is None:
            return None
        return b"event: message\ndata: " + _error_json(found, skipped.size, self._limit) + b"\n\n"

    async def aclose(self) -> None:
        await self._response.aclose()


class CappedTransport(httpx2.AsyncBaseTransport):
    """httpx transport that bounds every response body to ``limit`` bytes (decoded); see the module docstring."""

    def __init__(self, limit: int, upstream: str = "", inner: httpx2.AsyncBaseTransport | None = None) -> None:
        self.limit = limit
        self.upstream = upstream
        self._inner = inner or httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in _DROPPED]
        if response.headers.get("content-type", "").lower().startswith("text/event-stream"):
            stream = _CappedEvents(response, self.limit, _request_id(request), self.upstream)
            return httpx2.Response(
                response.status_code, headers=headers, stream=stream, request=request, extensions=response.extensions
            )
        body = await self._read(request, response)
        if isinstance(body, httpx2.Response):
            return body
        return httpx2.Response(
            response.status_code, headers=headers, content=body, request=request, extensions=response.extensions
        )

    async def _read(self, request: httpx2.Request, response: httpx2.Response) -> bytes | httpx2.Response:
        parts: list[bytes] = []
        size = 0
        try:
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > self.limit:
                    break
                parts.append(chunk)
        finally:
            await response.aclose()  # past the limit: the rest is never read (the connection is dropped)
        if size <= self.limit:
            return b"".join(parts)
        parts.clear()
        log.warning("upstream_result_oversized", upstream=self.upstream, bytes=size, limit=self.limit)
        request_id = _request_id(request)
        if request_id is None:
            raise httpx2.ReadError(f"the upstream's response is larger than max_message_bytes ({self.limit})")
        return httpx2.Response(
            200,
            headers={"content-type": "application/json"},
            content=_error_json(request_id, size, self.limit),
            request=request,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


def capped_client_factory(limit: int, upstream: str = "") -> Any:
    """An ``httpx_client_factory`` for the SDK's ``sse_client`` whose clients have a ``CappedTransport``."""

    def factory(
        headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None, auth: httpx2.Auth | None = None
    ) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            headers=headers, timeout=timeout, auth=auth, transport=CappedTransport(limit, upstream)
        )

    return factory
