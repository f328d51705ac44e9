"""The SQLite schema of the state store and every query, run by the store's worker (one thread at a time).

``sqlite.Worker`` calls these with the store's connection, in its thread or, for a claim when it is idle, in the event
loop's (``Worker.now``, inside ``sqlite.nonblocking``): there the store runs ``CLAIM``/``CLAIMS`` itself, one
statement and no call into this module; ``read_audit`` opens a separate read-only connection, which WAL lets
run beside a writing proxy. Schema version 1 (``meta.schema_version``)::

    idempotency(key PK, args_hash, tool, status in_flight|completed|unknown, result_json, created_at, expires_at)
    outputs(handle PK, tool, created_at, expires_at, size, manifest, data BLOB)   data = UTF-8 text, blob I/O
    audit(id PK, ts, session, upstream, tool, argument_keys JSON, arguments_hash, outcome, fault_type, attempts,
          latency_ms, decided_by)
    tasks(task_id PK, principal, status, created_at, expires_at, record JSON)        a tasks.TaskRecord

Every write that must be atomic across processes takes its transaction at once (``tx``: ``BEGIN IMMEDIATE``).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import structlog

from . import Claim, StateLimits
from .errors import StateError, state_errors

log = structlog.get_logger(__name__)

SCHEMA_VERSION = 1
BUSY_TIMEOUT_S = 5.0
"""How long the worker's statements wait for a lock another process holds (the event loop's never wait)."""


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
    # Used by one thread at a time, but not always the one that opened it (``sqlite.Worker.now``).
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
    try:
        with state_errors(path or uri):
            conn.row_factory = sqlite3.Row
            mode = str(conn.execute("PRAGMA journal_mode=WAL").fetchone()[0])
            conn.execute("PRAGMA synchronous=NORMAL")
            # Checkpoints (which fsync) run in the worker's maintenance (``checkpoint``), never in a commit that the
            # event loop's thread makes.
            conn.execute("PRAGMA wal_autocheckpoint=0")
            _migrate(conn)
    except BaseException:
        conn.close()
        raise
    return conn, mode


def checkpoint(conn: sqlite3.Connection) -> None:
    """Copy what the WAL holds back into the database file (``PASSIVE``: never waits for readers; nothing to do when
    nothing was written since the last one)."""
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")


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
            conn.execute(CLAIM, (key, args_hash, tool, now, expires_at))
    return row


CLAIM = "INSERT OR REPLACE INTO idempotency VALUES (?, ?, ?, 'in_flight', NULL, ?, ?)"
"""One claim: ``(key, args_hash, tool, created_at, expires_at)``, ``in_flight``."""
CLAIMS = CLAIM + ", (?, ?, ?, 'in_flight', NULL, ?, ?)"
"""A derived-key write's two claims (its key and its marker) in one statement: atomic without a transaction of its
own. The store runs ``CLAIM`` and ``CLAIMS`` for the claims its in-memory index granted, in the event loop's thread
when the connection is free (``sqlite.StateStore.begin_write``): committed (to the WAL) before the call is sent."""


def idem_claim(conn: sqlite3.Connection, key: str, args_hash: str, tool: str, now: float, expires_at: float) -> None:
    conn.execute(CLAIM, (key, args_hash, tool, now, expires_at))


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
