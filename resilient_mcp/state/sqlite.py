"""The SQLite side of the state store: the worker thread that owns the connection, the schema and every query.

Everything here except ``Worker.call``/``Worker.stop`` runs in the worker thread (or, for ``read_audit``, in a
separate read-only connection that WAL lets run beside a writing proxy). ``state.StateStore`` is the async face.
Schema version 1 (``meta.schema_version``)::

    idempotency(key PK, args_hash, tool, status in_flight|completed|unknown, result_json, created_at, expires_at)
    outputs(handle PK, tool, created_at, expires_at, size, manifest, data BLOB)   data = UTF-8 text, blob I/O
    audit(id PK, ts, session, upstream, tool, argument_keys JSON, arguments_hash, outcome, fault_type, attempts,
          latency_ms, decided_by)
    tasks(task_id PK, principal, status, created_at, expires_at, record JSON)        a tasks.TaskRecord

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
import json
import os
import queue
import sqlite3
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import structlog

from .errors import StateError, state_errors

log = structlog.get_logger(__name__)

T = TypeVar("T")
SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class StateLimits:
    """Bounds of the store. Every table expires rows and is trimmed (oldest first) to its row and byte bounds."""

    idempotency_max_rows: int = 50_000
    idempotency_max_bytes: int = 64_000_000
    idempotency_max_result_bytes: int = 1_000_000
    """A completed result larger than this (as JSON) is not kept: its replay only says that the write completed."""
    outputs_max_rows: int = 200
    outputs_max_bytes: int = 256_000_000
    """Also the largest single stored output."""
    output_ttl_s: float = 3600.0
    audit_max_rows: int = 100_000
    audit_ttl_s: float = 30 * 86_400.0
    audit_queue: int = 10_000
    """Audit entries waiting for the worker; more are dropped and counted (``StateStore.audit_dropped``)."""
    audit_batch: int = 256
    flush_interval_s: float = 0.5
    prune_interval_s: float = 60.0


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
    """The one thread that owns the SQLite connection: jobs run one at a time, in order; after each job (and every
    ``tick_s`` when idle) it runs ``idle`` (audit batches, pruning).

    Write-behind jobs (``submit``) submitted in one step of the event loop wake the thread once, when that step is
    over (a call's settling and its delivery's delete: one wake-up, not two); a job that is waited for and queued
    before that takes them along. Always in the order submitted. Waking the thread is the expensive part of a job
    on a busy machine (the event loop and the worker then contend for the GIL and the cores)."""

    def __init__(self, idle: Callable[[], None], tick_s: float) -> None:
        self._jobs: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._behind: deque[Callable[[], object]] = deque()
        self._order = threading.Lock()
        """Held while write-behind jobs are taken: by ``call`` (with the job it queues) or by the worker (only when
        no job is queued), so a job never overtakes one submitted before it."""
        self._kick_due = False
        self._idle, self._tick_s = idle, tick_s
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
            self._jobs.put(job)
        with anyio.CancelScope(shield=True):
            await job.done.wait()
        if job.error is not None:
            raise job.error
        return cast(T, job.value)

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
        try:
            if job.loop is not None:
                job.loop.call_soon_threadsafe(job.done.set)
            else:
                anyio.from_thread.run_sync(job.done.set, token=job.token)
        except Exception:  # the event loop that asked has gone away
            log.debug("state_result_undelivered")


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


@contextmanager
def tx(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction, taken at once (``BEGIN IMMEDIATE``) so a read-then-write is atomic across processes."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


# --- schema --------------------------------------------------------------------------------------------------------

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS idempotency (
        key TEXT PRIMARY KEY, args_hash TEXT NOT NULL, tool TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('in_flight', 'completed', 'unknown')),
        result_json TEXT, created_at REAL NOT NULL, expires_at REAL NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS idempotency_expiry ON idempotency (expires_at)",
    """CREATE TABLE IF NOT EXISTS outputs (
        handle TEXT PRIMARY KEY, tool TEXT NOT NULL, created_at REAL NOT NULL, expires_at REAL NOT NULL,
        size INTEGER NOT NULL, manifest TEXT NOT NULL, data BLOB NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS outputs_expiry ON outputs (expires_at)",
    """CREATE TABLE IF NOT EXISTS audit (
        id INTEGER PRIMARY KEY, ts REAL NOT NULL, session TEXT NOT NULL, upstream TEXT NOT NULL,
        tool TEXT NOT NULL, argument_keys TEXT NOT NULL, arguments_hash TEXT NOT NULL, outcome TEXT NOT NULL,
        fault_type TEXT, attempts INTEGER NOT NULL, latency_ms INTEGER NOT NULL, decided_by TEXT)""",
    "CREATE INDEX IF NOT EXISTS audit_session ON audit (session, id)",
    "CREATE INDEX IF NOT EXISTS audit_ts ON audit (ts)",
    # Added within version 1 (older code ignores the table): durable tasks (``resilient_mcp.tasks``).
    """CREATE TABLE IF NOT EXISTS tasks (
        task_id TEXT PRIMARY KEY, principal TEXT NOT NULL, status TEXT NOT NULL, created_at REAL NOT NULL,
        expires_at REAL NOT NULL, record TEXT NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS tasks_principal ON tasks (principal, created_at)",
)


PRIVATE_SUFFIXES = ("", "-wal", "-shm", "-journal", ".users")
"""The database file, SQLite's companions and the proxies' lock file: all created (or tightened to) 0600."""


def make_private(path: Path) -> None:
    """Create ``path`` as an empty 0600 file if it does not exist, and take group/other permissions off it and its
    SQLite companions if they have them. SQLite gives the -wal and -shm files the database file's permissions, so
    the folder's own permissions (a Docker volume, a ``mkdir -p`` folder) no longer decide who can read results."""
    os.close(os.open(path, os.O_RDONLY | os.O_CREAT, 0o600))
    for suffix in PRIVATE_SUFFIXES:
        private(path.with_name(path.name + suffix))


def private(path: Path) -> None:
    """Remove group and other permission bits from ``path`` (if it exists)."""
    try:
        mode = path.stat().st_mode
        if mode & 0o077:
            os.chmod(path, mode & 0o700)
    except FileNotFoundError:
        return
    except PermissionError as exc:
        log.warning("state_file_not_private", path=str(path), error=str(exc))


def connect(uri: str, path: Path | None) -> tuple[sqlite3.Connection, str]:
    """Open (creating the directory and schema if needed) and return the connection and its journal mode."""
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with state_errors(path, doing="create the state database"):
            make_private(path)
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=5.0)
    try:
        with state_errors(path or uri):
            conn.row_factory = sqlite3.Row
            mode = str(conn.execute("PRAGMA journal_mode=WAL").fetchone()[0])
            conn.execute("PRAGMA synchronous=NORMAL")
            _migrate(conn)
    except BaseException:
        conn.close()
        raise
    return conn, mode


def _migrate(conn: sqlite3.Connection) -> None:
    with tx(conn):
        conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        version = int(row[0]) if row else 0
        if version > SCHEMA_VERSION:
            raise StateError(
                f"the state database has schema version {version}; this resilient-mcp knows up to "
                f"{SCHEMA_VERSION}: use a newer resilient-mcp or another state directory"
            )
        for statement in _SCHEMA:  # version 0 -> 1; later versions add their steps here
            conn.execute(statement)
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))


# --- idempotency ---------------------------------------------------------------------------------------------------

_IDEM = "SELECT key, args_hash, tool, status, result_json, created_at, expires_at FROM idempotency"


def idem_begin(
    conn: sqlite3.Connection, key: str, args_hash: str, tool: str, now: float, expires_at: float
) -> sqlite3.Row | None:
    with tx(conn):
        row: sqlite3.Row | None = conn.execute(f"{_IDEM} WHERE key = ? AND expires_at > ?", (key, now)).fetchone()
        if row is None:
            conn.execute(
                "INSERT OR REPLACE INTO idempotency VALUES (?, ?, ?, 'in_flight', NULL, ?, ?)",
                (key, args_hash, tool, now, expires_at),
            )
    return row


def idem_claim(conn: sqlite3.Connection, key: str, args_hash: str, tool: str, now: float, expires_at: float) -> None:
    """Write a claim the in-memory index already granted (it is authoritative while the store is the sole user)."""
    conn.execute(
        "INSERT OR REPLACE INTO idempotency VALUES (?, ?, ?, 'in_flight', NULL, ?, ?)",
        (key, args_hash, tool, now, expires_at),
    )


def idem_begin_write(
    conn: sqlite3.Connection, key: str, marker: str, claim: Claim
) -> tuple[sqlite3.Row | None, sqlite3.Row | None]:
    """``IdempotencyStore.begin_write`` in one transaction (the store is not the sole user of the database)."""
    with tx(conn):
        own: sqlite3.Row | None = conn.execute(f"{_IDEM} WHERE key = ? AND expires_at > ?", (key, claim.now)).fetchone()
        if own is not None and own["status"] == "completed":
            return own, None
        idem_claim(conn, key, claim.args_hash, claim.tool, claim.now, claim.expires_at)
        held: sqlite3.Row | None = conn.execute(
            f"{_IDEM} WHERE key = ? AND expires_at > ?", (marker, claim.now)
        ).fetchone()
        if held is None:
            idem_claim(conn, marker, claim.args_hash, claim.tool, claim.now, claim.marker_expires_at)
    return None, held


def idem_claim_write(conn: sqlite3.Connection, key: str, marker: str | None, claim: Claim) -> None:
    """Write a derived-key write's claims the in-memory index granted (``marker``: ``None`` when it was held), in one
    transaction: committed (to the WAL) before the call is sent, so it survives a crash of the proxy."""
    with tx(conn):
        idem_claim(conn, key, claim.args_hash, claim.tool, claim.now, claim.expires_at)
        if marker is not None:
            idem_claim(conn, marker, claim.args_hash, claim.tool, claim.now, claim.marker_expires_at)


def idem_settle_write(
    conn: sqlite3.Connection, key: str, marker: str | None, result_json: str | None, expires_at: float, done: bool
) -> None:
    """``IdempotencyStore.settle_write`` in one transaction: ``key`` completed (``done``) or deleted; ``marker``
    deleted."""
    with tx(conn):
        if done:
            idem_update(conn, key, "completed", result_json, expires_at)
        else:
            idem_delete(conn, key)
        if marker is not None:
            idem_delete(conn, marker)


def idem_live(conn: sqlite3.Connection, now: float) -> list[tuple[str, str, str, str, float, float]]:
    """Every unexpired record without its result: what the in-memory index is loaded with."""
    query = "SELECT key, args_hash, tool, status, created_at, expires_at FROM idempotency WHERE expires_at > ?"
    return [tuple(r) for r in conn.execute(query, (now,)).fetchall()]


def idem_get(conn: sqlite3.Connection, key: str, now: float) -> sqlite3.Row | None:
    row: sqlite3.Row | None = conn.execute(f"{_IDEM} WHERE key = ? AND expires_at > ?", (key, now)).fetchone()
    return row


def idem_update(conn: sqlite3.Connection, key: str, status: str, result_json: str | None, expires_at: float) -> None:
    conn.execute(
        "UPDATE idempotency SET status = ?, result_json = ?, expires_at = ? WHERE key = ?",
        (status, result_json, expires_at, key),
    )


def idem_delete(conn: sqlite3.Connection, key: str) -> None:
    conn.execute("DELETE FROM idempotency WHERE key = ?", (key,))


# --- outputs -------------------------------------------------------------------------------------------------------


def output_put(conn: sqlite3.Connection, row: tuple[str, str, float, float, int, str], chunks: Iterable[bytes]) -> None:
    """Insert ``(handle, tool, created_at, expires_at, size, manifest)`` and write the text chunk by chunk."""
    with tx(conn):
        cur = conn.execute("INSERT INTO outputs VALUES (?, ?, ?, ?, ?, ?, zeroblob(?))", (*row, row[4]))
        if row[4]:
            with conn.blobopen("outputs", "data", cast(int, cur.lastrowid)) as blob:
                for chunk in chunks:
                    blob.write(chunk)


def output_read(
    conn: sqlite3.Connection, handle: str, offset: int, length: int, now: float
) -> tuple[bytes, int] | None:
    row = conn.execute("SELECT rowid, size FROM outputs WHERE handle = ? AND expires_at > ?", (handle, now)).fetchone()
    if row is None:
        return None
    size = int(row["size"])
    start = min(max(offset, 0), size)
    end = min(size, start + max(length, 0))
    if end <= start:
        return b"", size
    with conn.blobopen("outputs", "data", int(row["rowid"]), readonly=True) as blob:
        blob.seek(start)
        return blob.read(end - start), size


def output_manifest(conn: sqlite3.Connection, handle: str, now: float) -> str | None:
    row = conn.execute("SELECT manifest FROM outputs WHERE handle = ? AND expires_at > ?", (handle, now)).fetchone()
    return None if row is None else str(row[0])


# --- audit ---------------------------------------------------------------------------------------------------------

AUDIT_FIELDS = (
    "ts",
    "session",
    "upstream",
    "tool",
    "argument_keys",
    "arguments_hash",
    "outcome",
    "fault_type",
    "attempts",
    "latency_ms",
    "decided_by",
)


def audit_write(conn: sqlite3.Connection, entries: Sequence[Any]) -> None:
    rows = [
        tuple(json.dumps(list(v)) if f == "argument_keys" else v for f in AUDIT_FIELDS for v in (getattr(e, f),))
        for e in entries
    ]
    with tx(conn):
        conn.executemany(f"INSERT INTO audit ({', '.join(AUDIT_FIELDS)}) VALUES ({', '.join('?' * 11)})", rows)


def read_audit(uri: str, limit: int, session: str | None) -> list[dict[str, Any]]:
    """The ``limit`` most recent audit rows (newest first), through a separate read-only connection."""
    conn = sqlite3.connect(uri, uri=True, timeout=5.0)
    try:
        conn.row_factory = sqlite3.Row
        where, args = ("WHERE session = ?", (session, limit)) if session is not None else ("", (limit,))
        query = f"SELECT {', '.join(AUDIT_FIELDS)} FROM audit {where} ORDER BY id DESC LIMIT ?"
        rows = conn.execute(query, args).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []
        raise
    finally:
        conn.close()
    return [{**dict(r), "argument_keys": json.loads(r["argument_keys"])} for r in rows]


# --- tasks ---------------------------------------------------------------------------------------------------------

_TERMINAL = "status IN ('completed', 'failed', 'cancelled')"


def task_put(conn: sqlite3.Connection, row: tuple[str, str, str, float, float, str], bound: int, now: float) -> None:
    """Insert or replace ``(task_id, principal, status, created_at, expires_at, record)``; then drop the principal's
    expired records and its oldest terminal ones beyond ``bound``."""
    with tx(conn):
        conn.execute("INSERT OR REPLACE INTO tasks VALUES (?, ?, ?, ?, ?, ?)", row)
        conn.execute("DELETE FROM tasks WHERE principal = ? AND expires_at <= ?", (row[1], now))
        excess = int(conn.execute("SELECT COUNT(*) FROM tasks WHERE principal = ?", (row[1],)).fetchone()[0]) - bound
        if excess > 0:
            conn.execute(
                f"DELETE FROM tasks WHERE task_id IN (SELECT task_id FROM tasks WHERE principal = ? AND {_TERMINAL} "
                "ORDER BY created_at LIMIT ?)",
                (row[1], excess),
            )


def task_get(conn: sqlite3.Connection, task_id: str, now: float) -> str | None:
    row = conn.execute("SELECT record FROM tasks WHERE task_id = ? AND expires_at > ?", (task_id, now)).fetchone()
    return None if row is None else str(row[0])


def task_list(conn: sqlite3.Connection, principal: str | None, limit: int, now: float) -> list[str]:
    where, args = ("AND principal = ?", (now, principal, limit)) if principal is not None else ("", (now, limit))
    query = f"SELECT record FROM tasks WHERE expires_at > ? {where} ORDER BY created_at DESC LIMIT ?"
    return [str(r[0]) for r in conn.execute(query, args).fetchall()]


# --- bounds --------------------------------------------------------------------------------------------------------


def prune(conn: sqlite3.Connection, limits: StateLimits, now: float) -> dict[str, int]:
    """Delete expired rows, then trim every table to its bounds, oldest first. Returns rows deleted per table."""
    with tx(conn):
        idem = conn.execute("DELETE FROM idempotency WHERE expires_at <= ?", (now,)).rowcount
        # Only completed records are trimmed before they expire: an in-flight or outcome-unknown record is what keeps
        # a write from running twice, so it stays until its window ends even past the bounds.
        done = "status = 'completed'"
        idem += _trim_rows(conn, "idempotency", "key", "created_at", limits.idempotency_max_rows, where=done)
        size = "COALESCE(LENGTH(CAST(result_json AS BLOB)), 0)"
        idem += _trim_bytes(conn, "idempotency", "key", size, "created_at", limits.idempotency_max_bytes, where=done)
        audit = conn.execute("DELETE FROM audit WHERE ts < ?", (now - limits.audit_ttl_s,)).rowcount
        audit += _trim_rows(conn, "audit", "id", "id", limits.audit_max_rows)
        tasks = conn.execute("DELETE FROM tasks WHERE expires_at <= ?", (now,)).rowcount
    return {"idempotency": idem, "outputs": prune_outputs(conn, limits, now), "audit": audit, "tasks": tasks}


def prune_outputs(conn: sqlite3.Connection, limits: StateLimits, now: float) -> int:
    with tx(conn):
        n = conn.execute("DELETE FROM outputs WHERE expires_at <= ?", (now,)).rowcount
        n += _trim_rows(conn, "outputs", "handle", "created_at", limits.outputs_max_rows)
        size = "size + LENGTH(CAST(manifest AS BLOB))"
        n += _trim_bytes(conn, "outputs", "handle", size, "created_at", limits.outputs_max_bytes)
    return n


def _trim_rows(conn: sqlite3.Connection, table: str, key: str, order: str, max_rows: int, *, where: str = "1") -> int:
    """Delete the first rows by ``order`` among those matching ``where`` until the table is within ``max_rows``."""
    excess = int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]) - max_rows
    if excess <= 0:
        return 0
    query = f"DELETE FROM {table} WHERE {key} IN (SELECT {key} FROM {table} WHERE {where} ORDER BY {order} LIMIT ?)"
    return conn.execute(query, (excess,)).rowcount


def _trim_bytes(
    conn: sqlite3.Connection, table: str, key: str, size: str, order: str, max_bytes: int, *, where: str = "1"
) -> int:
    total = int(conn.execute(f"SELECT COALESCE(SUM({size}), 0) FROM {table}").fetchone()[0])
    victims: list[tuple[Any]] = []
    if total > max_bytes:
        for k, n in conn.execute(f"SELECT {key}, {size} FROM {table} WHERE {where} ORDER BY {order}").fetchall():
            if total <= max_bytes:
                break
            victims.append((k,))
            total -= int(n)
    conn.executemany(f"DELETE FROM {table} WHERE {key} = ?", victims)
    return len(victims)


# --- the in-memory index of idempotency records -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Claim:
    """What ``IdempotencyStore.begin_write`` writes: the call's fingerprint and tool, when, and the two expiries."""

    args_hash: str
    tool: str
    now: float
    expires_at: float
    """Of the call's own record (in flight: the window plus the call's total timeout)."""
    marker_expires_at: float
    """Of the upstream-wide record (``unknown_outcome_s``)."""


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
