"""The client side of a stdio upstream: spawn the server in its own process group, read its stdout in linear time,
bound every message, and take the whole group down on every stop.

Why not the SDK's ``stdio_client``: it rebuilds its text buffer for every 64 KB chunk (``(buffer + chunk).split``),
so a message of n bytes costs O(n²): 16 MB took 2.4 s, 32 MB 7.5 s, 50 MB and more never arrived and stalled every
other session while they were read. It also kills the server's process group only when the leader outlives its grace
period, so a child the server started (``sleep`` in the same group) outlived the proxy.

Here:

- the reader keeps the parts of the current line and joins them once, at its newline (linear time); a message of
  more than ``max_message_bytes`` is not kept: the rest of its line is read and dropped as it arrives (memory stays
  bounded), and the request it answers gets an error response tagged ``OVERSIZED_META`` that the exception seam
  (``errors.to_fault``) turns into an ``E4_oversized_result`` observation instead of letting the call run into its
  timeout. The answered request is found from the message's ``"id"`` (read from its first or last bytes), or,
  failing that, is the one request in flight;
- large lines are parsed in a worker thread, so the event loop serves other sessions meanwhile;
- with a ``RawCalls`` lane (``rawcall``), a line answering one of the lane's tool calls (or its progress) is handed
  to that call before any pydantic parsing (``RawCalls.take``); the lane writes its requests to stdin itself. Every
  other line goes to the SDK's session as before;
- stopping (restart, EOF, SIGTERM of the proxy, an upstream that exits) follows the spec's order (close stdin, wait
  up to 2 s) and then *always* terminates the process group (SIGTERM, SIGKILL after 2 s), even when the server
  itself already exited: what it started in its group goes with it;
- a SIGKILL of the proxy runs none of that. For it a tiny watchdog (``sh``, in its own session) holds the read end
  of a pipe whose write end only the proxy has: when the proxy dies, however, the kernel closes that end and the
  watchdog kills the upstream's process group. On a normal stop the proxy disarms it first. A process that left the
  group (``setsid``, a daemon) escapes both, as with any process-group scheme.

Windows keeps the SDK's ``stdio_client`` (Job Objects).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread
import mcp_types as types
import structlog
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from ..adapters.process import close_transport, stdin_writer
from ..call.meta import OVERSIZED_META
from ..spawn.prestart import Watchdog, adopt, unadopted
from ..spawn.prestart import arm_watchdog as _arm_watchdog
from ..text.jsonlines import Oversized, read_lines
from .rawcall import RawCalls
from .startup import StderrTail

log = structlog.get_logger(__name__)

DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""The largest message a stdio upstream may send (one JSON-RPC line, in bytes); larger results become E4."""
OVERSIZED_CODE = -32099

GRACE_S = 2.0
"""How long a server may take to exit after its stdin is closed (the SDK's value)."""
KILL_AFTER_S = 2.0
"""How long the group has between SIGTERM and SIGKILL."""
_REAP_S = 2.0
STDERR_DRAIN_S = 0.5
"""How long the end of a relayed stderr is waited for once the server exited (a child of it may hold the pipe)."""
_CHUNK = 1 << 16
_THREAD_PARSE_BYTES = 1 << 20
"""Lines at least this long are parsed in a worker thread."""
_MAX_PENDING_IDS = 10_000

Streams = tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return exc


def _parse_large(line: bytes) -> SessionMessage | Exception:
    """Same result as ``_parse``; for large documents ``json.loads`` then Python-mode validation is several times
    faster (and holds the GIL for less time) than pydantic's JSON mode."""
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_python(json.loads(line), by_name=False))
    except ValueError as exc:
        return exc


async def parse_line(line: bytes) -> SessionMessage | Exception:
    """One message; a long line is parsed in a worker thread so the event loop keeps serving meanwhile."""
    if len(line) >= _THREAD_PARSE_BYTES:
        return await anyio.to_thread.run_sync(_parse_large, line)
    return _parse(line)


def oversized_error(size: int, limit: int) -> types.ErrorData:
    """The stand-in error of a request whose response was too large to read."""
    return types.ErrorData(
        code=OVERSIZED_CODE,
        message=f"the upstream's response ({size} bytes) is larger than max_message_bytes ({limit}); not read",
        data={OVERSIZED_META: {"original_size_bytes": size, "max_message_bytes": limit}},
    )


def oversized_response(request_id: int | str, size: int, limit: int) -> SessionMessage:
    """The stand-in answer to a request whose response was too large to read."""
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=oversized_error(size, limit)))


class _InFlight:
    """Ids of requests sent and not yet answered (bounded): how an oversized response without a readable id is
    still matched, when only one request is waiting."""

    def __init__(self) -> None:
        self._ids: dict[int | str, None] = {}

    def sent(self, message: Any) -> None:
        if isinstance(message, types.JSONRPCRequest):
            if len(self._ids) >= _MAX_PENDING_IDS:
                self._ids.pop(next(iter(self._ids)))
            self._ids[message.id] = None
        elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
            self._ids.pop((message.params or {}).get("requestId"), None)  # type: ignore[arg-type]

    def track(self, request_id: int, on: bool) -> None:
        """A request of the raw lane was written (``on``), or is answered or abandoned."""
        if not on:
            self._ids.pop(request_id, None)
            return
        if len(self._ids) >= _MAX_PENDING_IDS:
            self._ids.pop(next(iter(self._ids)))
        self._ids[request_id] = None

    def answered(self, message: Any) -> None:
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError) and message.id is not None:
            self._ids.pop(message.id, None)

    def match(self, found: int | str | None) -> int | str | None:
        if found is not None:
            return found if found in self._ids else None
        return next(iter(self._ids)) if len(self._ids) == 1 else None


@asynccontextmanager
async def stdio_upstream(
    command: str,
    args: list[str],
    env: dict[str, str],
    cwd: str | None,
    *,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    errlog: Any = None,
    tail: StderrTail | None = None,
    raw: RawCalls | None = None,
) -> AsyncIterator[Streams]:
    """Start ``command`` in a new process group and yield ``(read_stream, write_stream)`` as the SDK's
    ``stdio_client`` does. Raises ``OSError`` when it cannot be started.

    With ``tail``, the server's stderr is relayed to the proxy's (or ``errlog``) through a pipe and its end kept in
    ``tail``, with the lines of stdout that are not JSON-RPC: what the server said when it fails to start.

    A process ``prestart`` started for exactly this command line, environment and directory is adopted instead of
    starting another (only with ``tail``, whose piped stderr it was started with).

    With ``raw``, that lane's tool calls are written and answered here (``rawcall``); it is closed (its calls
    failed) when stdout ends or the transport closes."""
    process, watchdog = await _start([command, *args], env, cwd, tail, errlog)
    pump = _Pump(process, max_message_bytes, tail, errlog, raw)
    async with anyio.create_task_group() as tg:
        pump.spawn = tg.start_soon
        tg.start_soon(pump.read)
        tg.start_soon(pump.write)
        if tail is not None:
            tg.start_soon(pump.relay_stderr)
        if raw is not None:
            raw.attach(pump)
        try:
            yield pump.read_stream, pump.write_stream
        finally:
            if raw is not None:
                raw.close()
            with anyio.CancelScope(shield=True):
                pump.read_stream.close()
                pump.write_stream.close()
                await _stop(process, watchdog, pump.stderr_done if tail is not None else None)
            tg.cancel_scope.cancel()


async def _start(
    argv: list[str], env: dict[str, str], cwd: str | None, tail: StderrTail | None, errlog: Any
) -> tuple[anyio.abc.Process, Watchdog]:
    """The server's process (adopted from ``prestart``, or started in its own group) and its watchdog."""
    started = adopt(argv, env, cwd) if tail is not None else None
    if started is not None:
        log.debug("upstream_prestart_adopted", pid=started[0].pid)
        return started
    await stop_unadopted()  # started for a command line nobody asks for
    stderr: Any = subprocess.PIPE if tail is not None else (sys.stderr if errlog is None else errlog)
    process = await anyio.open_process(argv, env=env, cwd=cwd, stderr=stderr, start_new_session=True)
    try:
        return process, await _arm_watchdog(process.pid)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await _stop(process, None)
        raise


class _Pump:
    """The session's side of one server process: its stdout read into messages, messages written to its stdin, its
    stderr relayed (and its end kept in ``tail``)."""

    def __init__(
        self, process: anyio.abc.Process, limit: int, tail: StderrTail | None, errlog: Any, raw: RawCalls | None = None
    ) -> None:
        assert process.stdout is not None and process.stdin is not None
        self._process, self._limit, self._tail, self._errlog = process, limit, tail, errlog
        self._raw = raw
        self._handed = False
        """A message went to the session while a raw call waited, and the session has not run since."""
        self._writer = stdin_writer(process) if raw is not None else None
        self.spawn: Callable[..., Any] = _no_spawn
        self._to_session, self.read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        self.write_stream, self._from_session = anyio.create_memory_object_stream[SessionMessage](0)
        self._in_flight = _InFlight()
        self.stderr_done = anyio.Event()

    async def _deliver(self, item: SessionMessage | Exception) -> None:
        if isinstance(item, SessionMessage):
            self._in_flight.answered(item.message)
        else:
            log.warning("upstream_message_unreadable", error=str(item)[:500])
        await self._to_session.send(item)
        if self._raw is not None and self._raw.waiting:
            self._handed = True
            self._raw.after_session_message()

    async def _on_line(self, line: bytes) -> None:
        if line.strip():
            raw = self._raw
            if raw is not None and raw.waiting:
                if self._handed:
                    # What the server wrote before an answer is handled first, as on the SDK's path (where one
                    # dispatcher reads both): its session takes the message just handed before the call wakes.
                    self._handed = False
                    await anyio.lowlevel.checkpoint()
                if await raw.take(line):
                    return
            item = await parse_line(line)
            if self._tail is not None and not isinstance(item, SessionMessage):
                self._tail.unreadable(line)
            await self._deliver(item)

    async def _on_oversized(self, big: Oversized) -> None:
        request_id = self._in_flight.match(big.message_id())
        log.warning(
            "upstream_message_oversized",
            size_bytes=big.size,
            max_message_bytes=self._limit,
            answered_request=request_id is not None,
        )
        if request_id is not None:
            raw = self._raw
            if raw is not None and raw.fail(request_id, oversized_error(big.size, self._limit)):
                return
            await self._deliver(oversized_response(request_id, big.size, self._limit))

    async def read(self) -> None:
        stdout = self._process.stdout
        assert stdout is not None
        try:
            async with self._to_session:
                await read_lines(lambda: stdout.receive(_CHUNK), self._limit, self._on_line, self._on_oversized)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError, OSError):
            pass  # the session or the pipe is gone: the read stream's end tells the session
        if self._raw is not None:
            self._raw.ended()  # and the lane's calls, as the session's

    # --- what the raw lane needs (``rawcall.Wire``) ---

    async def send_line(self, data: bytes) -> None:
        """A line of the raw lane to the server's stdin, beside the SDK's messages (each write is whole: asyncio
        buffers it at once), written to asyncio's writer directly where there is one: no checkpoint after it, as
        anyio's ``send`` ends with (the caller goes on to wait for the answer anyway). A server that stopped reading
        ends the session, as ``write`` does."""
        stdin = self._process.stdin
        assert stdin is not None
        writer = self._writer
        try:
            if writer is None:
                await stdin.send(data)
            elif writer.is_closing():  # closed by ``_stop``, or the pipe is gone: asyncio would drop the line
                raise anyio.BrokenResourceError
            else:
                try:
                    writer.write(data)
                    await writer.drain()
                except (ConnectionError, RuntimeError) as exc:  # what anyio's send maps so
                    raise anyio.BrokenResourceError from exc
        except (anyio.BrokenResourceError, OSError):
            await self._to_session.aclose()
            raise

    def track(self, request_id: int, on: bool) -> None:
        self._in_flight.track(request_id, on)

    async def write(self) -> None:
        stdin = self._process.stdin
        assert stdin is not None
        try:
            async with self._from_session:
                async for message in self._from_session:
                    self._in_flight.sent(message.message)
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await stdin.send(data.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await self._to_session.aclose()  # the server stopped reading: the session sees the end, not a hang

    async def relay_stderr(self) -> None:
        """The server's stderr to the proxy's (or ``errlog``), its end kept in ``tail``; written as the proxy's own
        log lines are (so a server is held up by a full stderr exactly as it was when it wrote there itself)."""
        assert self._process.stderr is not None and self._tail is not None
        fd = self._errlog.fileno() if self._errlog is not None else 2
        try:
            while chunk := await _receive_or_end(self._process.stderr):
                self._tail.add(chunk)
                with suppress(OSError):
                    _write_all(fd, chunk)
        finally:
            self.stderr_done.set()


def _no_spawn(*args: Any) -> None:
    raise RuntimeError("the pump's task group is not running")


async def stop_unadopted() -> None:
    """Stop every prestarted process nobody adopted (``prestart``), as any upstream is stopped."""
    for process, watchdog in unadopted():
        log.info("upstream_prestart_unused", pid=process.pid)
        with anyio.CancelScope(shield=True):
            await _stop(process, watchdog)


async def _receive_or_end(stream: anyio.abc.ByteReceiveStream) -> bytes:
    try:
        return await stream.receive(_CHUNK)
    except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        return b""


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


async def _stop(
    process: anyio.abc.Process,
    watchdog: Watchdog,
    stderr_done: anyio.Event | None = None,
) -> None:
    """Close stdin, give the server ``GRACE_S`` to exit, then terminate its whole group (always), disarm the
    watchdog and release the pipes. A relayed stderr is read to its end first (bounded: ``STDERR_DRAIN_S``), so the
    last words of a server that exited are kept."""
    from mcp.os.posix.utilities import terminate_posix_process_tree

    if process.stdin is not None:
        # bounded: closing waits for buffered data to be written, which a server that stopped reading never allows
        with anyio.move_on_after(GRACE_S), suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
    if await _exited(process, GRACE_S) and stderr_done is not None:
        with anyio.move_on_after(STDERR_DRAIN_S):
            await stderr_done.wait()
    await terminate_posix_process_tree(process, KILL_AFTER_S)
    if not await _exited(process, _REAP_S):
        log.warning("upstream_process_survived_kill", pid=process.pid)
    if watchdog is not None:
        await _disarm(*watchdog)
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await stream.aclose()
    close_transport(process)


async def _exited(process: anyio.abc.Process, timeout_s: float, poll_s: float = 0.01) -> bool:
    """Whether ``process`` has exited (and been reaped) within ``timeout_s``. Polls ``returncode``: ``wait()`` on
    asyncio also waits for the pipes' EOF, which a child that inherited them delays."""
    for _ in range(max(1, round(timeout_s / poll_s))):
        if process.returncode is not None:
            return True
        await anyio.sleep(poll_s)
    return process.returncode is not None


async def _disarm(proc: anyio.abc.Process, write_end: int) -> None:
    with suppress(OSError):
        os.write(write_end, b"disarm\n")
    with suppress(OSError):
        os.close(write_end)
    if not await _exited(proc, _REAP_S):
        with suppress(ProcessLookupError):
            proc.kill()
    with contextlib.suppress(Exception):
        await proc.aclose()
