"""The downstream stdio transport: the SDK's ``stdio_server`` contract without a worker thread per line.

The SDK's ``stdio_server`` reads each line of stdin and writes (then flushes) each message to stdout through
``anyio.wrap_file``, i.e. three worker-thread round trips per request and response; on a 2-core machine that is a
large part of a proxied call's cost. Here stdin and stdout are asyncio pipe transports on private duplicates of
fds 0 and 1, read and written on the event loop. As in the SDK, while serving fd 0 points at the null device and fd 1
at stderr (a child process or a stray ``print`` cannot corrupt the wire), and both are restored on exit.

Same streams as the SDK yields (``SessionMessage`` in and out, one JSON-RPC message a line), with three differences a
host notices: a line that is not JSON, nests deeper than the parser allows, or is not a JSON-RPC message is answered
at once with -32700 / -32600 (the SDK hands it to the session, which answers nothing: the host waited for its own
timeout); a line longer than ``MAX_LINE_BYTES`` is read through without being kept and refused with -32600 (a 300 MB
line took the proxy to 1.4 GB resident); and a line of more than ``MAX_JSON_ITEMS`` JSON items is counted, not
parsed, and refused with -32600 (10^6 keys took 7.5 s and left 269 MB resident). Lines are split in linear time.
When stdin/stdout are not pipes, sockets or terminals (a regular file, ``/dev/null``), or the event loop is not
asyncio, it falls back to the SDK's ``stdio_server``.

Each message is written, whole, by the task that sends it (``_Wire``: no writer task in between), so the SDK's
messages and the raw tools/call lane's answers (``toolcall``: ``raw`` takes the calls it accepts off the SDK's path)
keep their order. When the host's input ends, the reader cancels the lane's calls in flight and nothing else (they
are answered "Connection closed", as the SDK answers its own requests still running when it sees the end of its
stream); every request read before is answered, and what was written is flushed before the transport closes
(``tests/host/test_stdio_drain.py``).
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any, Protocol, cast

import anyio
import anyio.to_thread
import mcp_types as types
import pydantic_core
import structlog
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from ..text.jsonlines import EDGE, MAX_JSON_ITEMS, Oversized, TooComplex, count_items, items_at_most, read_lines

log = structlog.get_logger(__name__)

_CHUNK = 1 << 16
_FLUSH_S = 5.0
_LARGE_LINE = 1 << 20
"""Lines at least this long are parsed in a worker thread, with ``json.loads``."""
MAX_LINE_BYTES = 32 * 1024 * 1024
"""The longest message a host may send over stdio; a longer line is read through (not kept) and refused."""

Streams = tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]


def _streamable(fd: int, *, reading: bool = False) -> bool:
    """Whether asyncio can drive ``fd`` as a pipe transport (pipe, socket or character device). A character device
    is read only when it is a terminal: epoll cannot watch ``/dev/null`` (the SDK's reader serves it); written, it
    never needs watching."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    chr_ok = stat.S_ISCHR(mode) and (not reading or os.isatty(fd))
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or chr_ok


def _on_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # another event loop (trio)
        return False
    return True


@asynccontextmanager
async def stdio_transport(raw: RawLane | None = None) -> AsyncIterator[Streams | Any]:
    """``(read_stream, write_stream)`` over this process's stdin and stdout, for ``Server.run``. ``raw``: the lane
    that takes the tools/call requests it accepts off the SDK's path (``toolcall.RawToolCalls``)."""
    if sys.platform == "win32" or not (_streamable(0, reading=True) and _streamable(1) and _on_asyncio()):
        async with stdio_server() as streams:
            yield streams
        return
    wire_in, wire_out = _claim(0, os.O_RDONLY), _claim(1, os.O_WRONLY)
    try:
        async with _serve(wire_in, wire_out, raw) as streams:
            yield streams
    finally:
        _restore(1, wire_out)
        _restore(0, wire_in)


def _claim(fd: int, flags: int) -> int:
    """A private duplicate of ``fd`` (the wire); ``fd`` itself is pointed at the null device (stdin) or stderr."""
    import fcntl  # POSIX only; never reached on Windows

    private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    diversion = os.open(os.devnull, flags) if flags == os.O_RDONLY else os.dup(2)
    try:
        os.dup2(diversion, fd)
    finally:
        os.close(diversion)
    return private


def _restore(fd: int, private: int) -> None:
    """Point ``fd`` back at the wire and close the private duplicate (the transports never close it)."""
    with suppress(OSError):
        os.dup2(private, fd)
    with suppress(OSError):
        os.close(private)


class RawLane(Protocol):
    """What the transport asks of the raw tools/call lane (``toolcall.RawToolCalls``)."""

    def accepts(self, message: Any) -> bool: ...

    def cancelled(self, message: Any) -> None: ...

    async def run(
        self, message: dict[str, Any], send: Callable[[bytes], Awaitable[None]], scope: anyio.CancelScope
    ) -> None:
        """Answer ``message``; ``scope`` (entered by ``run``) is cancelled when the host's input ends."""
        ...


class _Wire:
    """The host's stdout as the SDK's write stream: each message is written, whole, by the task that sends it (no
    writer task and memory stream in between), so the SDK's messages and the raw lane's answers keep their order."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._closed = self._broken = False

    async def send_line(self, data: bytes) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        if self._broken:
            raise anyio.BrokenResourceError
        try:
            self._writer.write(data)
            await self._writer.drain()
        except ConnectionError:  # the host closed its end: nothing more can be delivered
            if not self._broken:
                log.info("stdout_closed")
            self._broken = True
            raise anyio.BrokenResourceError from None

    async def send(self, message: SessionMessage) -> None:
        await self.send_line(message.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n")

    async def answer(self, error: types.JSONRPCError) -> None:
        """Answer a line the session never sees."""
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await self.send_line(error.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n")

    async def flush(self) -> None:
        """Close to senders; what was written is in the pipe when this returns (bounded by ``_FLUSH_S``)."""
        self._closed = True
        with anyio.move_on_after(_FLUSH_S, shield=True), suppress(ConnectionError):
            await self._writer.drain()

    async def aclose(self) -> None:
        self._closed = True

    def close(self) -> None:
        self._closed = True

    async def __aenter__(self) -> _Wire:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._closed = True


@asynccontextmanager
async def _serve(wire_in: int, wire_out: int, raw: RawLane | None) -> AsyncIterator[Streams]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_CHUNK, loop=loop)
    read_transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader, loop=loop), os.fdopen(wire_in, "rb", buffering=0, closefd=False)
    )
    write_transport, write_protocol = await loop.connect_write_pipe(
        lambda: asyncio.streams.FlowControlMixin(loop=loop), os.fdopen(wire_out, "wb", buffering=0, closefd=False)
    )
    write_transport.set_write_buffer_limits(high=0)  # drain() returns once a message is wholly in the pipe
    wire = _Wire(asyncio.StreamWriter(write_transport, write_protocol, None, loop))
    incoming_send, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](0)

    async def receive() -> bytes:
        if chunk := await reader.read(_CHUNK):
            return chunk
        raise anyio.EndOfStream

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_Lines(wire, incoming_send, raw).read_all, receive)
            try:
                yield incoming, cast(MemoryObjectSendStream[SessionMessage], wire)
            finally:
                # The caller is done: what it sent is written (bounded), and a stdin still open is not waited for.
                await wire.flush()
                tg.cancel_scope.cancel()
    finally:
        read_transport.close()
        write_transport.close()


class _Lines:
    """The host's lines: each is refused, run by the raw lane, or handed to the SDK's session."""

    def __init__(self, wire: _Wire, to_session: Any, raw: RawLane | None) -> None:
        self._wire, self._to_session, self._raw = wire, to_session, raw
        self._raw_calls: dict[anyio.CancelScope, asyncio.Task[None]] = {}
        """The raw lane's calls running, each an asyncio task of its own with a cancel scope of its own."""

    async def read_all(self, receive: Callable[[], Awaitable[bytes]]) -> None:
        """Every line until the host's input ends. The raw lane's calls run in tasks of this reader's own: at the
        end of input (or when the reader is cancelled) each one's scope is cancelled, so they end as the SDK's
        in-flight requests do ("Connection closed", unless answered), and are waited for; nothing else is cancelled
        (the session still answers what it read, then sees the end of its stream)."""
        async with self._to_session:
            try:
                await read_lines(receive, MAX_LINE_BYTES, self.on_line, self.on_oversized)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
            finally:
                await self._end_raw_calls()

    def _start_raw_call(self, message: dict[str, Any]) -> None:
        """One call of the lane in a plain asyncio task (an anyio task group's ``start_soon`` built a task handle,
        an event and a cancel scope per call: ~40 µs of a ~500 µs call); its scope (the lane's call enters it as
        its own) is what ends it with the input, as the task group's scope did (cancelled at every checkpoint until
        the call exits it)."""
        scope = anyio.CancelScope()
        self._raw_calls[scope] = asyncio.get_running_loop().create_task(self._raw_call(scope, message))

    async def _raw_call(self, scope: anyio.CancelScope, message: dict[str, Any]) -> None:
        assert self._raw is not None
        try:
            await self._raw.run(message, self._wire.send_line, scope)
        except Exception:  # ``run`` answers what the chain raises: this is the lane's own bug, not the proxy's end
            log.exception("tool_call_lane_failed", request_id=message.get("id"))
        finally:
            self._raw_calls.pop(scope, None)  # (stored before the task first runs)

    async def _end_raw_calls(self) -> None:
        if not self._raw_calls:
            return
        for scope in self._raw_calls:
            scope.cancel()
        with anyio.CancelScope(shield=True):
            await asyncio.wait(list(self._raw_calls.values()))

    async def on_line(self, line: bytes) -> None:
        if not line.strip():
            return
        if len(line) >= MAX_JSON_ITEMS and items_at_most(line) > MAX_JSON_ITEMS:  # (a shorter line cannot be)
            try:
                await anyio.to_thread.run_sync(count_items, line, MAX_JSON_ITEMS)
            except TooComplex as exc:
                log.warning("stdin_message_too_complex", size_bytes=len(line), reason=str(exc))
                message = f"Invalid Request: a message of {exc}; send fewer or smaller arguments"
                await self._wire.answer(_error(_line_id(line), types.INVALID_REQUEST, message))
                return
        if self._raw is not None and len(line) < _LARGE_LINE and _TOOLS_CALL in line:
            message = _raw_message(line)
            if message is not None and self._raw.accepts(message):
                self._start_raw_call(message)
                return
        elif self._raw is not None and len(line) < _LARGE_LINE and _CANCELLED in line:
            self._raw.cancelled(_raw_message(line))  # now, before the next line: then on to the SDK as well
        item = await anyio.to_thread.run_sync(_parse, line) if len(line) >= _LARGE_LINE else _parse(line)
        if isinstance(item, Exception):
            log.warning("stdin_message_unreadable", error=_first_line(item), size_bytes=len(line))
            await self._wire.answer(_refusal(line, item))
        else:
            await self._to_session.send(item)

    async def on_oversized(self, big: Any) -> None:
        log.warning("stdin_message_too_large", size_bytes=big.size, max_line_bytes=MAX_LINE_BYTES)
        message = f"Invalid Request: a message of {big.size} bytes is larger than the {MAX_LINE_BYTES}-byte limit"
        await self._wire.answer(_error(big.message_id(), types.INVALID_REQUEST, message))


_TOOLS_CALL = b'"tools/call"'
_CANCELLED = b'"notifications/cancelled"'


def _raw_message(line: bytes) -> Any:
    """The line parsed as the SDK's parser reads it (``None`` when it cannot be, or holds NaN or Infinity: those
    lines keep the SDK's path)."""
    try:
        return pydantic_core.from_json(line, allow_inf_nan=False)
    except ValueError:
        return None


def _parse(line: bytes) -> SessionMessage | Exception:
    """One JSON-RPC message, or the error as a value. Bytes that are not UTF-8 are replaced, not refused, as the
    SDK's text wrapper does. A large line is decoded with ``json.loads`` and validated in Python mode: the same
    message, several times faster than pydantic's JSON mode for documents with many keys."""
    try:
        if len(line) >= _LARGE_LINE:
            return SessionMessage(types.jsonrpc_message_adapter.validate_python(json.loads(line), by_name=False))
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except Exception as exc:
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            text = line.decode("utf-8", "replace")
        else:
            if len(line) < _LARGE_LINE:
                return exc
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(text, by_name=False))
    except Exception as exc:
        return exc


def _line_id(line: bytes) -> int | str | None:
    """The JSON-RPC id of a line, read from its first or last few kilobytes only (never parsed whole)."""
    edges = Oversized(bytearray(line[:EDGE]))
    edges.add(line[-EDGE:])
    return edges.message_id()


def _first_line(exc: Exception, limit: int = 200) -> str:
    text = str(exc).splitlines()
    detail = text[1].strip() if len(text) > 1 else (text[0] if text else type(exc).__name__)
    return detail[:limit]


def _error(request_id: Any, code: int, message: str) -> types.JSONRPCError:
    rid = request_id if isinstance(request_id, int | str) and not isinstance(request_id, bool) else None
    return types.JSONRPCError(jsonrpc="2.0", id=rid, error=types.ErrorData(code=code, message=message))


def _refusal(line: bytes, exc: Exception) -> types.JSONRPCError:
    """-32700 for what is not JSON (or nests deeper than the parser's limit), -32600 for JSON that is not one
    JSON-RPC message; the id is echoed when it can be read."""
    if isinstance(exc, ValidationError) and exc.errors()[0]["type"] == "json_invalid":
        return _error(None, types.PARSE_ERROR, f"Parse error: {_first_line(exc)}")
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return _error(None, types.PARSE_ERROR, f"Parse error: {_first_line(exc)}")
    if isinstance(data, list):
        return _error(None, types.INVALID_REQUEST, "Invalid Request: JSON-RPC batches are not supported")
    rid = data.get("id") if isinstance(data, dict) else None
    return _error(rid, types.INVALID_REQUEST, f"Invalid Request: {_first_line(exc)}")
