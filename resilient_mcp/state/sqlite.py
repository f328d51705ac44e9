"""The embedded state store, the default backend: idempotency records, stored outputs and the audit trail in SQLite.

One SQLite file (``state.sqlite3``) in the state directory: ``$XDG_STATE_HOME/resilient-mcp``, else
``~/.local/state/resilient-mcp``; ``":memory:"`` gives a private in-memory database for tests. The schema is
versioned in a ``meta`` table; a newer schema than this code knows is refused rather than damaged.

Nothing here blocks the event loop: a dedicated thread runs the queries, one at a time, in the order asked
(``Worker``; ``schema`` holds the tables and the queries), except a claim (below) when the connection is free and
nothing is queued before it: that short commit, one statement (``schema.CLAIM``/``CLAIMS``, atomic without a
transaction of its own), runs in the event loop's thread (``Worker.now``, inside ``nonblocking``), where a database
locked by another process fails at once (busy timeout 0) and sends it to the thread after all. A handoff to the
thread and back cost more than the commit itself (two context switches and a wake-up of the event loop). Audit
entries are fire-and-forget: ``record`` appends to a bounded in-memory queue (entries beyond it are dropped and
counted) and the worker writes them in batches. Between jobs the worker deletes expired rows and trims each table to
its row and byte bounds (``StateLimits``), at most every ``prune_interval_s``; storing an output also trims the
outputs table (that path is rare, never the hot path).

Idempotency records are also kept in memory (``IdempotencyIndex``: loaded from SQLite when the store
opens, updated by every operation) while this store is the only user of its database, so a held record and ``get``
answer without a round trip to the worker; only the replay of a completed result reads SQLite. A claim is the one
write a call waits for: ``begin`` (and ``begin_write``, both records of a derived-key write in one transaction) is
committed (to the WAL, in the event loop's thread when the connection is free) before it returns, so once the call
is sent a crash of the proxy leaves a record that reads as "outcome unknown" after a restart. Every other write to
the records (``settle_write``, ``complete``, ``release``...) is queued to the worker (write-behind, in order) and
returns at once. A record loaded from a previous process keeps its status: ``in_flight`` (that process stopped
mid-call) reads as "outcome unknown", ``completed`` replays. As soon as another process (or another store of this
process) opens the same database, the store stops trusting its index and asks SQLite on every call, atomically
across processes, as it always did where POSIX locks are missing.

Stored outputs are UTF-8 text written and read in chunks through SQLite's incremental blob I/O, so a 50 MB result
is never copied whole in memory. Writes survive a crash of the proxy (WAL, ``synchronous=NORMAL``); several proxy
processes may share one directory (``BEGIN IMMEDIATE`` and a busy timeout). No commit checkpoints the WAL (its fsyncs
take milliseconds): the worker's maintenance does, every ``CHECKPOINT_S``.

The in-memory index of idempotency records (``IdempotencyIndex``, at the end) lets ``StateStore.begin``/``get``
answer without a disk round trip: an implementation detail of this backend, not of the ``IdempotencyStore``
protocol (Redis has its own way to be fast). It holds every live record's metadata (key, arguments hash, status,
times), never a result: a completed record's result is read from SQLite when it is replayed (the rare path), so the
index stays small (~200 bytes a record) whatever the results weigh.

The index is only trusted while this store is the sole user of its database (``SoleUser``): every process that opens
a state directory holds a POSIX read lock on ``state.sqlite3.users``; ``F_GETLK`` tells, without taking anything,
whether another process holds one too, and a per-process count covers two stores of one process. From the moment
another user is seen the store goes back, for good, to asking SQLite on every ``begin``/``get`` (atomic across
processes with ``BEGIN IMMEDIATE``). Where POSIX locks do not exist (Windows) the index is never used. The question
costs a system call that releases the GIL (and may wait for it: ~0.1 ms on a busy 2-core machine), so it is asked
after every job of the worker thread, and on the event loop only when the last answer is older than ``RECHECK_S``
(50 ms): a process that opens the database is seen within that time at the latest (another store of this process at
once).
"""

from __future__ import annotations

import asyncio
import collections
import os
import queue
import secrets
import sqlite3
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import mcp_types as types
import structlog

from ..call.chain import call_arguments_hash, keyed_fingerprint
from ..text import iter_utf8, utf8_len
from . import AuditFields, Claim, IdempotencyRecord, StateLimits, default_state_dir, output_key
from . import schema as sql
from .errors import StateError, state_errors
from .tasks import TaskRecord

if TYPE_CHECKING:
    from ..call.chain import ToolCall

log = structlog.get_logger(__name__)

T = TypeVar("T")
Clock = Callable[[], float]

CHECKPOINT_S = 1.0
"""How often the worker's maintenance checkpoints the WAL (commits never do: ``schema.connect``)."""


def _locate(state_dir: str | Path | None) -> tuple[str, str, Path | None]:
    """(read-write URI, read-only URI, database file) of a state directory; ``":memory:"`` has no file."""
    if str(state_dir) == ":memory:":
        uri = f"file:resilient-mcp-{uuid.uuid4().hex}?mode=memory&cache=shared"
        return uri, uri, None
    path = (Path(state_dir) if state_dir is not None else default_state_dir()).absolute() / "state.sqlite3"
    uri = path.as_uri()
    return uri, f"{uri}?mode=ro", path


def recent_audit(
    state_dir: str | Path | None = None, limit: int = 50, session: str | None = None
) -> list[dict[str, Any]]:
    """The newest audit rows of a state directory, read beside a running proxy (for ``resilient-mcp audit``)."""
    _, read_uri, path = _locate(state_dir)
    if path is None or not path.exists():
        return []
    with state_errors(path, doing="read the state database"):
        return sql.read_audit(read_uri, limit, session)


SECRET_FILE = "secret.key"
"""The per-installation key of the audit's argument hashes, in the state directory (0600, 64 hex digits)."""


def load_secret(directory: Path) -> bytes:
    """The installation's secret in ``directory``, created (0600, published atomically) if missing."""
    path = directory / SECRET_FILE
    with state_errors(path, doing="create", hint="; check the state directory's owner"):
        _publish_secret(path)
    sql.private(path)
    try:
        key = bytes.fromhex(path.read_text(encoding="ascii").strip())
    except (OSError, ValueError) as exc:
        key, reason = b"", str(exc)
    else:
        reason = f"{len(key)} bytes"
    if len(key) < 32:
        raise StateError(
            f"{path} is not a resilient-mcp secret ({reason}; 64 hex digits expected): delete it and a new one is "
            "made (argument hashes already in the audit will no longer match new ones)"
        )
    return key


def _publish_secret(path: Path) -> None:
    if path.exists():
        return
    temp = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, (secrets.token_hex(32) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(temp, path)  # atomic, and never replaces a secret another proxy published meanwhile
    except FileExistsError:
        pass
    finally:
        temp.unlink()


class StateStore:
    """The SQLite implementation of ``IdempotencyStore``, ``OutputStore`` and ``AuditStore`` (and of the observe
    stage's ``AuditSink``). Open with ``await StateStore.open(state_dir)``, close with ``aclose()``."""

    def __init__(self, state_dir: str | Path | None, *, clock: Clock, limits: StateLimits) -> None:
        self._uri, self._read_uri, self.path = _locate(state_dir)
        self.limits = limits
        self.journal_mode = ""
        """``wal`` for a file database (``memory`` for ``":memory:"``)."""
        self.audit_dropped = 0
        self._clock = clock
        self._conn: sqlite3.Connection | None = None
        self._worker: Worker | None = None
        self._audit: collections.deque[AuditFields] = collections.deque()
        self._next_flush = self._next_prune = self._next_checkpoint = 0.0
        self._index = IdempotencyIndex(limits.idempotency_max_rows)
        self._sole: SoleUser | None = None
        self._next_index_prune = 0.0
        self._hash_key = secrets.token_bytes(32)
        """Replaced by the state directory's secret when the store opens (``":memory:"`` keeps this one)."""
        self._settling: dict[str, _Settle] = {}
        """Completed writes whose settling is queued, by key: delivered before it is written (``forget``, most often
        in the same step), the record is deleted instead, in that one transaction, and its result never serialised."""
        self._settle_lock = threading.Lock()

    @classmethod
    async def open(
        cls, state_dir: str | Path | None = None, *, clock: Clock = time.time, limits: StateLimits | None = None
    ) -> StateStore:
        """Open (creating if needed) the store of ``state_dir`` (default ``default_state_dir()``; ``":memory:"``)."""
        store = cls(state_dir, clock=clock, limits=limits or StateLimits())
        worker = Worker(store._maintain, store.limits.flush_interval_s)
        worker.inline_guard = store._nonblocking
        try:
            await worker.call(store._connect)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await worker.stop()
            raise
        store._worker = worker
        return store

    async def aclose(self) -> None:
        """Write queued audit entries, close the database and stop the worker. Idempotent."""
        worker, self._worker = self._worker, None
        if worker is None:
            return
        with anyio.CancelScope(shield=True):
            try:
                await worker.call(self._shutdown)
            finally:
                await worker.stop()

    async def __aenter__(self) -> StateStore:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # --- worker-side helpers (these run in the worker thread) ----------------------------------------------------

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StateError("the state store is closed")
        return self._conn

    def _connect(self) -> None:
        self._conn, self.journal_mode = sql.connect(self._uri, self.path)
        try:
            if self.path is not None:
                self._hash_key = load_secret(self.path.parent)
            # The first reads of the tables: a file damaged in the middle (a valid header, garbage pages) fails
            # here, and is the same one-line error as a file that is not a database at all.
            with state_errors(self.path or self._uri):
                sql.prune(self._conn, self.limits, self._clock())
                live = sql.idem_live(self._conn, self._clock())
        except BaseException:
            self._conn.close()
            self._conn = None  # the worker's maintenance never touches a database that failed to open
            raise
        self._sole = SoleUser(self.path)
        self._index.load(live)
        self._next_index_prune = time.monotonic() + self.limits.prune_interval_s
        self._next_prune = time.monotonic() + self.limits.prune_interval_s
        self._next_flush = time.monotonic() + self.limits.flush_interval_s

    def _shutdown(self) -> None:
        try:
            self._write_audit()
        finally:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()
            if self._sole is not None:
                self._sole.close()

    def _maintain(self) -> None:
        if self._conn is None:
            return
        if self._sole is not None:
            self._sole.check()
        now = time.monotonic()
        if self._audit and (len(self._audit) >= self.limits.audit_batch or now >= self._next_flush):
            self._write_audit()
            self._next_flush = now + self.limits.flush_interval_s
        if now >= self._next_prune:
            self._next_prune = now + self.limits.prune_interval_s
            sql.prune(self._conn, self.limits, self._clock())
        if now >= self._next_checkpoint:
            self._next_checkpoint = now + CHECKPOINT_S
            sql.checkpoint(self._conn)

    def _nonblocking(self) -> AbstractContextManager[None]:
        """What the event loop's thread runs its SQLite work in (``Worker.now``): a lock held by another process
        fails at once, and the work goes to the worker, which waits for it."""
        return nonblocking(self._db())

    def _write_audit(self) -> None:
        entries = [self._audit.popleft() for _ in range(len(self._audit))]
        if entries:
            sql.audit_write(self._db(), entries)

    @property
    def backend_errors(self) -> int:
        """Failed SQLite jobs, writes and maintenance runs since the store opened (``/metrics``)."""
        return self._worker.errors if self._worker is not None else 0

    def idempotency_counts(self) -> dict[str, int]:
        """Live idempotency records by status (in_flight, completed, unknown), from the in-memory index."""
        return self._index.count_by_status()

    async def _run(self, fn: Callable[[], T]) -> T:
        if self._worker is None:
            raise StateError("the state store is closed")
        return await self._worker.call(fn)

    async def _now(self, fn: Callable[[], T]) -> T:
        """``_run`` for a short write the call waits for (a claim): in the event loop's thread when the connection
        is free (``Worker.now``: no handoff to the worker and back), else in the worker."""
        worker = self._worker
        if worker is None:
            raise StateError("the state store is closed")
        now = getattr(worker, "now", None)  # (a stand-in worker without it runs every job inline anyway)
        if now is not None:
            done, value = now(fn)
            if done:
                return cast(T, value)
        return await worker.call(fn)

    def _queue(self, fn: Callable[[], object]) -> None:
        if self._worker is None:
            raise StateError("the state store is closed")
        self._worker.submit(fn)

    # --- IdempotencyStore ----------------------------------------------------------------------------------------

    async def begin(
        self, key: str, *, args_hash: str, tool: str, now: float, expires_at: float
    ) -> IdempotencyRecord | None:
        if not self._indexed():
            return await self._now(lambda: _record(sql.idem_begin(self._db(), key, args_hash, tool, now, expires_at)))
        if self._index.over_bound() or time.monotonic() >= self._next_index_prune:
            self._prune_index()
        held = self._index.get(key, now)
        if held is not None and held.status == "completed":  # a replay: its result is in SQLite
            record = await self._run(lambda: _record(sql.idem_get(self._db(), key, now)))
            if record is not None:
                return record
            self._index.delete(key)  # trimmed from the disk by its byte bound: the claim is free
        elif held is not None:
            return _from_held(key, held)
        self._index.claim(key, Held(args_hash, tool, "in_flight", now, expires_at))
        # Committed before the call is sent (one synchronous write): a crash from here on reads as outcome unknown.
        try:
            await self._now(lambda: self._db().execute(sql.CLAIM, (key, args_hash, tool, now, expires_at)))
        except Exception:
            self._index.delete(key)
            raise
        return None

    async def begin_write(self, key: str, marker: str, claim: Claim) -> tuple[IdempotencyRecord | None, ...]:
        if not self._indexed():
            rows = await self._now(lambda: sql.idem_begin_write(self._db(), key, marker, claim))
            return _record(rows[0]), _record(rows[1])
        if self._index.over_bound() or time.monotonic() >= self._next_index_prune:
            self._prune_index()
        mine = self._index.get(key, claim.now)
        if mine is not None and mine.status == "completed":  # a replay: its result is in SQLite
            record = await self._run(lambda: _record(sql.idem_get(self._db(), key, claim.now)))
            if record is not None:
                return record, None
        held = self._index.get(marker, claim.now)
        self._index.claim(key, Held(claim.args_hash, claim.tool, "in_flight", claim.now, claim.expires_at))
        if held is None:
            marked = Held(claim.args_hash, claim.tool, "in_flight", claim.now, claim.marker_expires_at)
            self._index.claim(marker, marked)
        # The one synchronous write before the call is sent: the claims are committed (one statement), so a crash of
        # this process from here on reads as "outcome unknown" after a restart.
        claims: tuple[object, ...] = (key, claim.args_hash, claim.tool, claim.now, claim.expires_at)
        if held is None:
            claims += (marker, claim.args_hash, claim.tool, claim.now, claim.marker_expires_at)
        statement = sql.CLAIM if held is not None else sql.CLAIMS
        try:
            await self._now(lambda: self._db().execute(statement, claims))
        except Exception:  # not claimed after all (the stage logs it and sends the call unguarded)
            self._index.delete(key)
            if held is None:
                self._index.delete(marker)
            raise
        return None, (_from_held(marker, held) if held is not None else None)

    async def settle_write(
        self, key: str, marker: str | None, result: types.CallToolResult | None, *, expires_at: float
    ) -> None:
        if result is not None:
            self._index.update(key, "completed", expires_at)
        else:
            self._index.delete(key)
        if marker is not None:
            self._index.delete(marker)

        settle = _Settle(key, marker, result, expires_at)
        if self._indexed():
            if result is not None:
                with self._settle_lock:
                    self._settling[key] = settle  # (``forget`` before it is written: nothing to keep)
            self._queue(lambda: self._write_settle(settle))  # write-behind, in order: every later operation sees it
        else:  # another process shares the database: it sees the claims gone before this host has the answer
            await self._now(lambda: self._write_settle(settle))

    def _write_settle(self, settle: _Settle) -> None:
        with self._settle_lock:
            settle.started = True
            if self._settling.get(settle.key) is settle:
                del self._settling[settle.key]
        done = settle.result is not None and not settle.forgotten
        text: str | None = None
        if done and settle.result is not None:
            text = settle.result.model_dump_json(by_alias=True, exclude_none=True)
            if len(text) > self.limits.idempotency_max_result_bytes:
                log.info("idempotency_result_not_kept", key=settle.key, bytes=len(text))
                text = None
        sql.idem_settle_write(self._db(), settle.key, settle.marker, text, settle.expires_at, done)

    def _indexed(self) -> bool:
        """Whether the in-memory index answers (the store is open and the sole user of its database)."""
        if self._worker is None:
            raise StateError("the state store is closed")
        return self._sole is not None and self._sole.alone()

    def _prune_index(self, *, write: bool = True) -> None:
        """Expire and trim the index; ``write``: delete what was trimmed from SQLite too (``prune`` trims it alike)."""
        self._next_index_prune = time.monotonic() + self.limits.prune_interval_s
        trimmed = self._index.prune(self._clock())
        for key in trimmed if write else ():
            self._queue(lambda k=key: sql.idem_delete(self._db(), k))  # type: ignore[misc]

    # complete / mark_unknown / release / settle_write settle a call that has already happened: the writes are
    # queued (write-behind) and return at once, off the call's path. The worker runs jobs in order, so every later
    # operation of this store sees them; a failure is logged by the worker. A crash before a settling job ran leaves
    # the record in_flight (the claim was committed before the call was sent), which a later identical call reads as
    # "outcome unknown".

    async def complete(self, key: str, result: types.CallToolResult, *, expires_at: float) -> None:
        self._index.update(key, "completed", expires_at)

        def job() -> None:
            text: str | None = result.model_dump_json(by_alias=True, exclude_none=True)
            if text is not None and len(text) > self.limits.idempotency_max_result_bytes:
                log.info("idempotency_result_not_kept", key=key, bytes=len(text))
                text = None
            sql.idem_update(self._db(), key, "completed", text, expires_at)

        self._queue(job)

    async def mark_unknown(self, key: str, *, expires_at: float) -> None:
        self._index.update(key, "unknown", expires_at)
        self._queue(lambda: sql.idem_update(self._db(), key, "unknown", None, expires_at))

    async def release(self, key: str) -> None:
        self.forget(key)

    def forget(self, key: str) -> None:
        self._index.delete(key)
        with self._settle_lock:
            settle = self._settling.pop(key, None)
            if settle is not None and not settle.started:  # its settling deletes the record instead of completing it
                settle.forgotten = True
                return
        self._queue(lambda: sql.idem_delete(self._db(), key))

    async def get(self, key: str, *, now: float) -> IdempotencyRecord | None:
        if self._indexed():
            held = self._index.get(key, now)
            if held is None or held.status != "completed":
                return None if held is None else _from_held(key, held)
        return await self._run(lambda: _record(sql.idem_get(self._db(), key, now)))

    # --- OutputStore ---------------------------------------------------------------------------------------------

    async def put_output(self, tool: str, parts: Sequence[str], manifest: str, owner: str = "") -> str | None:
        handle = secrets.token_hex(16)
        key = output_key(handle, owner)

        def job() -> str | None:
            size = sum(utf8_len(p) for p in parts)
            if size + len(manifest) > self.limits.outputs_max_bytes:
                log.warning("output_not_stored", tool=tool, bytes=size, limit=self.limits.outputs_max_bytes)
                return None
            now = self._clock()
            row = (key, tool, now, now + self.limits.output_ttl_s, size, manifest)
            sql.output_put(self._db(), row, iter_utf8(parts))
            sql.prune_outputs(self._db(), self.limits, now)
            return handle

        return await self._run(job)

    async def read_output(self, handle: str, offset: int, length: int, owner: str = "") -> tuple[bytes, int] | None:
        key = output_key(handle, owner)
        return await self._run(lambda: sql.output_read(self._db(), key, offset, length, self._clock()))

    async def output_manifest(self, handle: str, owner: str = "") -> str | None:
        key = output_key(handle, owner)
        return await self._run(lambda: sql.output_manifest(self._db(), key, self._clock()))

    # --- TaskStore (``resilient_mcp.tasks``) ----------------------------------------------------------------------

    async def put_task(self, record: TaskRecord, max_per_principal: int) -> None:
        row = (record.task_id, record.principal, record.status, record.created_at, record.expires_at, record.to_json())
        await self._run(lambda: sql.task_put(self._db(), row, max_per_principal, self._clock()))

    async def get_task(self, task_id: str) -> TaskRecord | None:
        raw = await self._run(lambda: sql.task_get(self._db(), task_id, self._clock()))
        return None if raw is None else TaskRecord.from_json(raw)

    async def list_tasks(self, principal: str | None = None, limit: int = 100) -> list[TaskRecord]:
        rows = await self._run(lambda: sql.task_list(self._db(), principal, limit, self._clock()))
        return [TaskRecord.from_json(raw) for raw in rows]

    # --- AuditStore ----------------------------------------------------------------------------------------------

    def call_fingerprint(self, call: ToolCall) -> str:
        """``keyed_fingerprint`` with this installation's secret: identical calls match, arguments stay unreadable."""
        return keyed_fingerprint(call, self._hash_key)

    def arguments_hash(self, call: ToolCall) -> str:
        """The audit's hash of ``call``'s arguments: HMAC-SHA-256 keyed with this installation's secret."""
        return call_arguments_hash(call, self._hash_key)

    def record(self, entry: AuditFields) -> None:
        if len(self._audit) >= self.limits.audit_queue:
            self.audit_dropped += 1
            if self.audit_dropped & (self.audit_dropped - 1) == 0:  # 1, 2, 4, 8, ...: log, but not every drop
                log.warning("audit_queue_full", dropped=self.audit_dropped, queue=self.limits.audit_queue)
            return
        self._audit.append(entry)
        if len(self._audit) == self.limits.audit_batch and self._worker is not None:
            self._worker.wake()

    async def flush(self) -> None:
        """Write every queued audit entry now."""
        await self._run(self._write_audit)

    def recent_audit(self, limit: int = 50, session: str | None = None) -> list[dict[str, Any]]:
        """Newest audit rows first (what is still queued is not seen: ``await flush()`` first)."""
        return sql.read_audit(self._read_uri, limit, session)

    async def prune(self) -> dict[str, int]:
        """Expire and trim now (the worker also does it every ``prune_interval_s``). Rows deleted per table."""
        if self._indexed():
            self._prune_index(write=False)
        return await self._run(lambda: sql.prune(self._db(), self.limits, self._clock()))


@dataclass(eq=False, slots=True)
class _Settle:
    """How a derived-key write ended (``settle_write``), as the worker writes it."""

    key: str
    marker: str | None
    result: types.CallToolResult | None
    expires_at: float
    forgotten: bool = False
    """The host had the result before this was written (``forget``): delete the record rather than complete it."""
    started: bool = False


def _from_held(key: str, held: Held) -> IdempotencyRecord:
    return IdempotencyRecord(key, held.args_hash, held.tool, held.status, held.created_at, held.expires_at)  # type: ignore[arg-type]


def _record(row: sqlite3.Row | None) -> IdempotencyRecord | None:
    if row is None:
        return None
    text = row["result_json"]
    result = types.CallToolResult.model_validate_json(text) if text is not None else None
    return IdempotencyRecord(
        key=row["key"],
        args_hash=row["args_hash"],
        tool=row["tool"],
        status=row["status"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        result=result,
    )


# --- the worker thread ---------------------------------------------------------------------------------------------


@dataclass(eq=False, slots=True)
class _Job:
    fn: Callable[[], Any]
    token: anyio.lowlevel.EventLoopToken
    done: anyio.Event
    loop: asyncio.AbstractEventLoop | None
    """On asyncio the worker hands the result back with ``call_soon_threadsafe`` and moves on at once; elsewhere
    it waits for the event loop (``anyio.from_thread.run_sync``)."""
    behind: list[Callable[[], object]]
    """Write-behind jobs submitted before this one: run first, in order."""
    value: Any = None
    error: BaseException | None = None


_STOP, _WAKE = object(), object()


class Worker:
    """The thread that runs the SQLite connection's slow or waiting work: jobs run one at a time, in order; after
    each job (and every ``tick_s`` when idle) it runs ``idle`` (audit batches, pruning, checkpoints).

    Whoever uses the connection holds ``_busy``: this thread for a job, the write-behind jobs before it and
    ``idle``; the event loop's thread for ``now``, which runs a short job in the caller's thread at once when the
    connection is free and nothing asked before is still queued (never waiting for the lock: a handoff to this thread
    and back costs more than a claim's commit, ~0.1 ms and two context switches on a busy 2-core machine).

    Write-behind jobs (``submit``) submitted in one step of the event loop wake the thread once, when that step is
    over (a call's settling and its delivery's delete: one wake-up, not two); a job that is waited for and queued
    before that, or a ``now`` that finds them still waiting, takes them along. Always in the order submitted. Here
    they run beside the event loop, after the host has its answer (run in the event loop's thread instead, they
    measured slower: the next request waited for them). A job that ``now`` runs and that finds the database locked by
    another process (``inline_guard`` makes it fail at once rather than wait) goes to this thread, with every job
    after it."""

    def __init__(self, idle: Callable[[], None], tick_s: float) -> None:
        self._jobs: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._behind: deque[Callable[[], object]] = deque()
        self._order = threading.Lock()
        """Held while write-behind jobs are taken: by ``call`` (with the job it queues) or by the worker (only when
        no job is queued), so a job never overtakes one submitted before it."""
        self._busy = threading.Lock()
        """Held by whoever uses the connection (this thread, or the event loop's in ``now``)."""
        self._asked = 0
        """Jobs queued by ``call`` (written by the event loop's thread only)."""
        self._answered = 0
        """Jobs this thread has run (written by this thread only): ``_asked - _answered`` are still queued."""
        self._kick_due = False
        self._idle, self._tick_s = idle, tick_s
        self.inline_guard: Callable[[], AbstractContextManager[object]] = nullcontext
        """Entered around work the event loop's thread does on the connection: the store makes a locked database
        fail at once there (``busy``) instead of waiting for it."""
        self.errors = 0
        """State backend errors so far (failed jobs, writes and maintenance): the ``/metrics`` counter."""
        self._thread = threading.Thread(target=self._run, name="resilient-mcp-state", daemon=True)
        self._thread.start()

    async def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` in the worker (after every job submitted before). The wait is shielded: a store operation once
        asked for is always finished."""
        loop = _asyncio_loop()
        with self._order:
            job = _Job(fn, anyio.lowlevel.current_token(), anyio.Event(), loop, _take(self._behind))
            self._asked += 1
            self._jobs.put(job)
        with anyio.CancelScope(shield=True):
            await job.done.wait()
        if job.error is not None:
            raise job.error
        return cast(T, job.value)

    def now(self, fn: Callable[[], T]) -> tuple[bool, T | None]:
        """Run ``fn`` here, at once, after the write-behind jobs submitted before it: ``(True, its value)``; or
        ``(False, None)`` without running it when the connection is in use, a job asked before is still queued or
        the database is locked by another process (``busy``): then ``call`` it. Never waits."""
        if not self._busy.acquire(blocking=False):
            return False, None
        try:
            if self._asked != self._answered:
                return False, None
            with self.inline_guard():
                if not self._behind_here():
                    return False, None
                try:
                    return True, fn()
                except Exception as exc:
                    if busy(exc):
                        return False, None
                    self.errors += 1
                    raise
        finally:
            self._busy.release()

    def submit(self, fn: Callable[[], object]) -> None:
        """Queue ``fn`` without waiting for it (write-behind); a failure is logged. Jobs keep their order."""
        self._behind.append(fn)
        if self._kick_due:
            return
        loop = _asyncio_loop()
        if loop is None:
            self._jobs.put(_WAKE)
        else:  # once this step of the event loop is over: the jobs it submits go together
            self._kick_due = True
            loop.call_soon(self._kick)

    def _kick(self) -> None:
        self._kick_due = False
        if self._behind:  # (else a job that was waited for took them along)
            self._jobs.put(_WAKE)

    def _behind_here(self) -> bool:
        """Run the write-behind jobs in the caller's thread (``_busy`` held). False when one found the database
        locked: it and the jobs after it are put back, first in line, for this thread (woken)."""
        with self._order:
            jobs = _take(self._behind)
        for i, fn in enumerate(jobs):
            try:
                fn()
            except Exception as exc:
                if busy(exc):
                    self._behind.extendleft(reversed(jobs[i:]))
                    self._jobs.put(_WAKE)
                    return False
                self.errors += 1
                log.exception("state_write_failed")
        return True

    def wake(self) -> None:
        self._jobs.put(_WAKE)

    async def stop(self) -> None:
        self._jobs.put(_STOP)
        await anyio.to_thread.run_sync(self._thread.join)

    def _run(self) -> None:
        while True:
            try:
                item = self._jobs.get(timeout=self._tick_s)
            except queue.Empty:
                item = None
            with self._busy:
                if isinstance(item, _Job):
                    self._write_behind(item.behind)
                    self._execute(item)
                with self._order:  # (a job queued meanwhile takes them along; the last wake-up takes them all)
                    behind = _take(self._behind) if item is _STOP or self._jobs.empty() else []
                self._write_behind(behind)
                if item is _STOP:
                    return
                try:
                    self._idle()
                except Exception:
                    self.errors += 1
                    log.exception("state_maintenance_failed")

    def _write_behind(self, jobs: list[Callable[[], object]]) -> None:
        for fn in jobs:
            try:
                fn()
            except Exception:
                self.errors += 1
                log.exception("state_write_failed")

    def _execute(self, job: _Job) -> None:
        try:
            job.value = job.fn()
        except BaseException as exc:
            job.error = exc
            self.errors += isinstance(exc, Exception)
        self._answered += 1  # before the caller resumes: its next ``now`` sees nothing queued
        try:
            if job.loop is not None:
                job.loop.call_soon_threadsafe(job.done.set)
            else:
                anyio.from_thread.run_sync(job.done.set, token=job.token)
        except Exception:  # the event loop that asked has gone away
            log.debug("state_result_undelivered")


@contextmanager
def nonblocking(conn: sqlite3.Connection) -> Iterator[None]:
    """While inside (the event loop's thread on the connection: ``Worker.now``), a database locked by another
    connection fails at once (``SQLITE_BUSY``) instead of waiting up to ``schema.BUSY_TIMEOUT_S``; a transaction left
    open by a failure is rolled back on the way out."""
    conn.execute("PRAGMA busy_timeout=0")
    try:
        yield
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        conn.execute(f"PRAGMA busy_timeout={int(sql.BUSY_TIMEOUT_S * 1000)}")


def busy(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite's "database is locked" (another connection holds the lock): nothing was done."""
    code = getattr(exc, "sqlite_errorcode", None) if isinstance(exc, sqlite3.OperationalError) else None
    return code is not None and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)  # (or an extended code)


def _take(jobs: deque[Callable[[], object]]) -> list[Callable[[], object]]:
    """Every job in ``jobs``, oldest first, removed (``popleft`` is atomic: ``submit`` may append meanwhile)."""
    taken: list[Callable[[], object]] = []
    with suppress(IndexError):
        while True:
            taken.append(jobs.popleft())
    return taken


def _asyncio_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # not asyncio (trio)
        return None


# --- the in-memory index of idempotency records -------------------------------------------------------------------


@dataclass(slots=True)
class Held:
    """What the index knows of one record (the result, if any, stays in SQLite)."""

    args_hash: str
    tool: str
    status: str
    created_at: float
    expires_at: float


class IdempotencyIndex:
    """Live idempotency records by key. Used on the event loop only (no locking)."""

    def __init__(self, max_rows: int) -> None:
        self.max_rows = max_rows
        self._slack = max(16, max_rows // 20)
        """Automatic trims wait for this many rows over the bound, so a full index is not sorted on every call."""
        self._rows: dict[str, Held] = {}

    def __len__(self) -> int:
        return len(self._rows)

    def load(self, rows: Iterable[Any]) -> None:
        """Rows of ``(key, args_hash, tool, status, created_at, expires_at)``, as SQLite has them."""
        for key, args_hash, tool, status, created_at, expires_at in rows:
            self._rows[key] = Held(args_hash, tool, status, created_at, expires_at)

    def get(self, key: str, now: float) -> Held | None:
        held = self._rows.get(key)
        if held is not None and held.expires_at <= now:
            del self._rows[key]
            return None
        return held

    def claim(self, key: str, held: Held) -> None:
        self._rows[key] = held

    def update(self, key: str, status: str, expires_at: float) -> None:
        held = self._rows.get(key)
        if held is not None:  # as SQLite's UPDATE: nothing when the row is gone
            held.status, held.expires_at = status, expires_at

    def delete(self, key: str) -> None:
        self._rows.pop(key, None)

    def over_bound(self) -> bool:
        return len(self._rows) > self.max_rows + self._slack

    def prune(self, now: float) -> list[str]:
        """Drop expired records, then trim completed ones, oldest first, to ``max_rows`` as SQLite's prune does
        (in-flight and outcome-unknown records stay until they expire). Returns the keys trimmed (not the
        expired ones)."""
        for key in [k for k, h in self._rows.items() if h.expires_at <= now]:
            del self._rows[key]
        excess = len(self._rows) - self.max_rows
        if excess <= 0:
            return []
        done = sorted((kv for kv in self._rows.items() if kv[1].status == "completed"), key=lambda kv: kv[1].created_at)
        victims = [k for k, _ in done[:excess]]
        for key in victims:
            del self._rows[key]
        return victims

    def count_by_status(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for held in self._rows.values():
            counts[held.status] = counts.get(held.status, 0) + 1
        return counts


_open_in_process: dict[str, int] = {}
_open_lock = threading.Lock()


RECHECK_S = 0.05


class SoleUser:
    """Whether one database file has a single user (this store): see the module docstring."""

    def __init__(self, path: Path | None) -> None:
        self._key = str(path) if path is not None else None
        self._fd: int | None = None
        self._alone = path is None  # ":memory:" databases are private to their store
        self._checked_at = 0.0
        if path is None:
            return
        with _open_lock:
            _open_in_process[self._key or ""] = _open_in_process.get(self._key or "", 0) + 1
        if sys.platform == "win32":
            return
        import fcntl

        fd = os.open(f"{path}.users", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # a read lock: never refused by other readers
        except OSError:
            os.close(fd)  # someone holds a write lock: not alone
            return
        self._fd = fd
        self._alone = True
        self.check()

    def alone(self) -> bool:
        """``check()``, or its answer when it is younger than ``RECHECK_S`` (what the event loop asks per call)."""
        if self._alone and _open_in_process.get(self._key or "", 0) > 1:  # another store of this process: exact
            self._alone = False
        if self._alone and time.monotonic() - self._checked_at > RECHECK_S:
            return self.check()
        return self._alone

    def check(self) -> bool:
        """True while no other store (in this process or another) uses the database. Once False, always False."""
        if not self._alone or self._fd is None:
            return self._alone
        with _open_lock:
            others_here = _open_in_process.get(self._key or "", 0) > 1
        if others_here or _other_process_holds(self._fd):
            self._alone = False
        self._checked_at = time.monotonic()
        return self._alone

    def close(self) -> None:
        if self._key is not None:
            with _open_lock:
                n = _open_in_process.get(self._key, 0) - 1
                if n > 0:
                    _open_in_process[self._key] = n
                else:
                    _open_in_process.pop(self._key, None)
            self._key = None
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # releases this process's lock
        self._alone = False


def _other_process_holds(fd: int) -> bool:
    """``F_GETLK`` for a write lock over the file: a conflicting (read) lock can only be another process's."""
    import fcntl
    import struct

    # F_GETLK asks without taking anything (taking a write lock to test would replace our own read lock: POSIX locks
    # are per process). ``struct flock`` is short, short, off_t, off_t, pid_t on Linux; elsewhere its layout differs.
    if sys.platform.startswith("linux"):
        request = struct.pack("hhqqi", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        answer = fcntl.fcntl(fd, fcntl.F_GETLK, request)
        return bool(struct.unpack("hhqqi", answer)[0] != fcntl.F_UNLCK)
    return True  # elsewhere: assume shared (the durable path), never wrongly alone
