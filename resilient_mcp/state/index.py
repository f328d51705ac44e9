"""The in-memory index of idempotency records that lets ``StateStore.begin``/``get`` answer without a disk round trip.

An implementation detail of the SQLite store (``state.py``), not of the ``IdempotencyStore`` protocol: another
backend (Redis) has its own way to be fast. The index holds every live record's metadata (key, arguments hash,
status, times), never a result: a completed record's result is read from SQLite when it is replayed (the rare
path), so the index stays small (~200 bytes a record) whatever the results weigh.

The index is only trusted while this store is the sole user of its database (``SoleUser``): every process that opens
a state directory holds a POSIX read lock on ``state.sqlite3.users``; ``F_GETLK`` tells, without taking anything,
whether another process holds one too, and a per-process count covers two stores of one process. From the moment
another user is seen the store goes back, for good, to asking SQLite on every ``begin``/``get`` (atomic across
processes with ``BEGIN IMMEDIATE``). Where POSIX locks do not exist (Windows) the index is never used. The question
costs a system call that releases the GIL (and may wait for it: ~0.1 ms on a busy 2-core machine), so it is asked
after every job of the worker thread, and on the event loop only when the last answer is older than
``RECHECK_S`` (50 ms): a process that opens the database is seen within that time at the latest (another store of
this process at once).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


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
