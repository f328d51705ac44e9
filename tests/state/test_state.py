"""The embedded SQLite state store: WAL, persistence across reopen, expiry, bounds, batched audit."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import mcp_types as types
import pytest

from resilient_mcp.state import StateError, StateLimits, default_state_dir
from resilient_mcp.state import sqlite as state_sqlite
from resilient_mcp.state.sqlite import StateStore, recent_audit
from tests.conftest import FakeClock

pytestmark = pytest.mark.anyio

T = TypeVar("T")


@dataclass(frozen=True)
class Entry:
    ts: float
    session: str
    upstream: str = "up"
    tool: str = "up__write"
    argument_keys: tuple[str, ...] = ("path",)
    arguments_hash: str = "abc"
    outcome: str = "ok"
    fault_type: str | None = None
    attempts: int = 1
    latency_ms: int = 3
    decided_by: str | None = None


def result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content={"n": 1})


class WatchedWorker(state_sqlite.Worker):
    """The store's worker thread, watched: the threads its jobs ran in, the round trips (``call``) asked of it and the
    jobs run at once in the caller's thread instead (``now``)."""

    def __init__(self, idle: Callable[[], None], tick_s: float) -> None:
        self.threads: set[int] = set()
        self.round_trips = 0
        self.inline = 0
        super().__init__(idle, tick_s)

    def noted(self, fn: Callable[[], T]) -> Callable[[], T]:
        def job() -> T:
            self.threads.add(threading.get_ident())
            return fn()

        return job

    async def call(self, fn: Callable[[], T]) -> T:
        self.round_trips += 1
        return await super().call(self.noted(fn))

    def submit(self, fn: Callable[[], object]) -> None:
        super().submit(self.noted(fn))

    def now(self, fn: Callable[[], T]) -> tuple[bool, T | None]:
        done, value = super().now(fn)
        self.inline += done
        return done, value


@pytest.fixture
def workers(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[WatchedWorker]]:
    """The workers of the stores the test opens, each a ``WatchedWorker``."""
    opened: list[WatchedWorker] = []

    def watched(idle: Callable[[], None], tick_s: float) -> WatchedWorker:
        opened.append(WatchedWorker(idle, tick_s))
        return opened[-1]

    monkeypatch.setattr(state_sqlite, "Worker", watched)
    yield opened


async def test_file_database_is_in_wal_mode_with_a_schema_version(tmp_path: Path) -> None:
    async with await StateStore.open(tmp_path) as store:
        assert store.journal_mode == "wal"
    conn = sqlite3.connect(tmp_path / "state.sqlite3")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "1"
    conn.close()


async def test_a_database_from_a_newer_version_is_refused_not_damaged(tmp_path: Path) -> None:
    await (await StateStore.open(tmp_path)).aclose()
    conn = sqlite3.connect(tmp_path / "state.sqlite3")
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(StateError, match="schema version 99"):
        await StateStore.open(tmp_path)


async def test_completed_idempotency_record_survives_close_and_reopen(tmp_path: Path, clock: FakeClock) -> None:
    store = await StateStore.open(tmp_path, clock=clock)
    now = clock()
    assert await store.begin("k", args_hash="h", tool="up/write", now=now, expires_at=now + 60) is None
    await store.complete("k", result("done"), expires_at=now + 60)
    await store.aclose()

    async with await StateStore.open(tmp_path, clock=clock) as reopened:
        record = await reopened.get("k", now=now + 1)
        assert record is not None and record.status == "completed" and record.args_hash == "h"
        assert record.result == result("done")


async def test_begin_claims_a_key_once_and_then_returns_the_holder(tmp_path: Path) -> None:
    async with await StateStore.open(tmp_path) as store:
        assert await store.begin("k", args_hash="h1", tool="t", now=10.0, expires_at=70.0) is None
        holder = await store.begin("k", args_hash="h2", tool="t", now=11.0, expires_at=71.0)
        assert holder is not None and holder.status == "in_flight" and holder.args_hash == "h1"
        await store.mark_unknown("k", expires_at=80.0)
        holder = await store.get("k", now=12.0)
        assert holder is not None and holder.status == "unknown"
        await store.release("k")
        assert await store.get("k", now=12.0) is None


async def test_expired_records_are_ignored_and_pruned(tmp_path: Path, clock: FakeClock) -> None:
    async with await StateStore.open(tmp_path, clock=clock) as store:
        now = clock()
        await store.begin("old", args_hash="h", tool="t", now=now, expires_at=now + 5)
        clock.now += 10
        assert await store.get("old", now=clock()) is None
        assert await store.begin("old", args_hash="h2", tool="t", now=clock(), expires_at=clock() + 5) is None
        clock.now += 10
        assert (await store.prune())["idempotency"] == 1


async def test_a_result_too_large_to_keep_is_recorded_as_completed_without_it(tmp_path: Path) -> None:
    limits = StateLimits(idempotency_max_result_bytes=1000)
    async with await StateStore.open(tmp_path, limits=limits) as store:
        await store.begin("k", args_hash="h", tool="t", now=1.0, expires_at=9e9)
        await store.complete("k", result("x" * 5000), expires_at=9e9)
        record = await store.get("k", now=2.0)
        assert record is not None and record.status == "completed" and record.result is None


async def test_idempotency_rows_are_trimmed_to_the_bound_completed_first(tmp_path: Path) -> None:
    limits = StateLimits(idempotency_max_rows=2)
    async with await StateStore.open(tmp_path, limits=limits) as store:
        for i, key in enumerate(["unknown", "done", "running"]):
            await store.begin(key, args_hash="h", tool="t", now=float(i), expires_at=9e9)
        await store.mark_unknown("unknown", expires_at=9e9)
        await store.complete("done", result("r"), expires_at=9e9)
        assert (await store.prune())["idempotency"] == 1
        assert await store.get("done", now=5.0) is None
        assert await store.get("unknown", now=5.0) is not None


async def test_stored_output_reads_back_by_byte_range_and_expires(tmp_path: Path, clock: FakeClock) -> None:
    text = "héllo wörld ✓ " * 1000
    async with await StateStore.open(tmp_path, clock=clock, limits=StateLimits(output_ttl_s=60)) as store:
        handle = await store.put_output("up__read", [text, "\n\n", "tail"], '{"content": []}')
        assert handle is not None
        whole = text.encode() + b"\n\ntail"
        got = await store.read_output(handle, 5, 100)
        assert got == (whole[5:105], len(whole))
        assert await store.read_output(handle, len(whole) + 10, 5) == (b"", len(whole))
        assert await store.output_manifest(handle) == '{"content": []}'
        clock.now += 61
        assert await store.read_output(handle, 0, 10) is None
        assert await store.output_manifest(handle) is None


async def test_outputs_are_bounded_by_rows_and_bytes_oldest_first(tmp_path: Path, clock: FakeClock) -> None:
    limits = StateLimits(outputs_max_rows=2, outputs_max_bytes=2500)
    async with await StateStore.open(tmp_path, clock=clock, limits=limits) as store:
        handles = []
        for _ in range(3):
            clock.now += 1
            handles.append(await store.put_output("t", ["a" * 1000], "{}"))
        assert await store.read_output(str(handles[0]), 0, 1) is None
        assert await store.read_output(str(handles[2]), 0, 1) == (b"a", 1000)
        clock.now += 1
        assert await store.put_output("t", ["b" * 3000], "{}") is None  # larger than the whole table may hold
        clock.now += 1
        await store.put_output("t", ["c" * 2000], "{}")
        assert await store.read_output(str(handles[1]), 0, 1) is None  # 1000 + 2000 bytes > 2500


async def test_audit_entries_are_written_in_batches_and_read_newest_first(tmp_path: Path) -> None:
    async with await StateStore.open(tmp_path) as store:
        for i in range(3):
            store.record(Entry(ts=1000.0 + i, session="s1" if i < 2 else "s2"))
        await store.flush()
        rows = store.recent_audit(limit=10)
        assert [r["ts"] for r in rows] == [1002.0, 1001.0, 1000.0]
        assert rows[0]["argument_keys"] == ["path"] and rows[0]["session"] == "s2"
        assert [r["session"] for r in store.recent_audit(limit=10, session="s1")] == ["s1", "s1"]
    assert len(recent_audit(tmp_path, limit=2)) == 2  # the CLI path: a separate read-only connection


async def test_a_full_audit_batch_is_written_without_an_explicit_flush(tmp_path: Path) -> None:
    async with await StateStore.open(tmp_path, limits=StateLimits(audit_batch=2, flush_interval_s=3600)) as store:
        store.record(Entry(ts=time.time(), session="s"))
        store.record(Entry(ts=time.time(), session="s"))  # fills the batch: the worker is woken
        await store.prune()  # a later job: the worker handled the wake-up (and wrote the batch) before it
        assert len(store.recent_audit()) == 2


async def test_the_audit_queue_is_bounded_and_counts_what_it_drops(tmp_path: Path) -> None:
    limits = StateLimits(audit_queue=2, audit_batch=100, flush_interval_s=3600)  # no timed flush during the test
    async with await StateStore.open(tmp_path, limits=limits) as store:
        for i in range(5):
            store.record(Entry(ts=float(i), session="s"))
        assert store.audit_dropped == 3
        await store.flush()
        assert len(store.recent_audit()) == 2


async def test_audit_rows_expire_and_are_trimmed_to_the_bound(tmp_path: Path) -> None:
    clock = FakeClock(now=100_000.0)
    limits = StateLimits(audit_max_rows=3, audit_ttl_s=1000)
    async with await StateStore.open(tmp_path, clock=clock, limits=limits) as store:
        for ts in [10.0, 99_500.0, 99_600.0, 99_700.0, 99_800.0]:
            store.record(Entry(ts=ts, session="s"))
        await store.flush()
        assert (await store.prune())["audit"] == 2
        assert [r["ts"] for r in store.recent_audit()] == [99_800.0, 99_700.0, 99_600.0]


async def test_queries_handed_to_the_worker_run_in_its_one_thread_not_the_event_loop(
    tmp_path: Path, workers: list[WatchedWorker]
) -> None:
    async with await StateStore.open(tmp_path) as store:
        await store.begin("k", args_hash="h", tool="t", now=1.0, expires_at=9e9)
        await store.complete("k", result("r"), expires_at=9e9)
        assert await store.get("k", now=2.0) is not None  # a completed record is read back from SQLite
        handle = await store.put_output("t", ["abc"], "{}")
        assert handle is not None and await store.read_output(handle, 0, 3) == (b"abc", 3)
        store.record(Entry(ts=1.0, session="s"))
        await store.flush()
    [worker] = workers
    assert worker.round_trips >= 4
    assert len(worker.threads) == 1 and threading.get_ident() not in worker.threads


async def test_memory_store_serves_every_protocol_without_a_file() -> None:
    async with await StateStore.open(":memory:") as store:
        assert store.path is None
        await store.begin("k", args_hash="h", tool="t", now=1.0, expires_at=9e9)
        handle = await store.put_output("t", ["abc"], "{}")
        assert handle is not None and await store.read_output(handle, 1, 5) == (b"bc", 3)
        store.record(Entry(ts=1.0, session="s"))
        await store.flush()
        assert len(store.recent_audit()) == 1


async def test_a_closed_store_refuses_calls(tmp_path: Path) -> None:
    store = await StateStore.open(tmp_path)
    await store.aclose()
    await store.aclose()  # idempotent
    with pytest.raises(StateError):
        await store.get("k", now=0.0)


def test_default_state_dir_follows_xdg_state_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert default_state_dir() == tmp_path / "resilient-mcp"
    monkeypatch.setenv("XDG_STATE_HOME", "relative/ignored")
    assert default_state_dir() == Path.home() / ".local" / "state" / "resilient-mcp"


# --- the in-memory index of idempotency records ------------------------------------------------------------------


async def disk_records(store: StateStore) -> dict[str, tuple[object, ...]]:
    """Every idempotency row as ``(args_hash, tool, status, created_at, expires_at)``, read from the database file
    once the writes queued before are written."""
    await store.flush()  # the worker runs jobs in order: every write queued before this one is on disk
    assert store.path is not None
    conn = sqlite3.connect(f"{store.path.as_uri()}?mode=ro", uri=True)
    try:
        query = "SELECT key, args_hash, tool, status, created_at, expires_at FROM idempotency"
        return {r[0]: tuple(r[1:]) for r in conn.execute(query).fetchall()}
    finally:
        conn.close()


async def memory_matches_disk(store: StateStore, keys: set[str], now: float) -> dict[str, tuple[object, ...]]:
    """Assert that what the store answers from memory (each key's record, the counts by status) is what the disk
    holds; return the disk's rows."""
    disk = await disk_records(store)
    found = {key: await store.get(key, now=now) for key in keys}
    answered = {k: (r.args_hash, r.tool, r.status, r.created_at, r.expires_at) for k, r in found.items() if r}
    assert answered == disk
    assert store.idempotency_counts() == Counter(row[2] for row in disk.values())
    return disk


async def test_a_restarted_store_replays_completed_records_and_holds_in_flight_ones(tmp_path: Path) -> None:
    async with await StateStore.open(tmp_path) as first:
        await first.begin("done", args_hash="h1", tool="t", now=10.0, expires_at=9e9)
        await first.complete("done", result("stored"), expires_at=9e9)
        await first.begin("running", args_hash="h2", tool="t", now=11.0, expires_at=9e9)  # the process "dies" here
    async with await StateStore.open(tmp_path) as restarted:
        replay = await restarted.begin("done", args_hash="h1", tool="t", now=20.0, expires_at=9e9)
        held = await restarted.begin("running", args_hash="h2", tool="t", now=20.0, expires_at=9e9)
    assert replay is not None and replay.status == "completed" and replay.result == result("stored")
    assert held is not None and held.status == "in_flight" and held.created_at == 11.0 and held.result is None


async def test_held_records_are_answered_without_the_worker_and_a_claim_waits_only_for_its_durable_write(
    tmp_path: Path, workers: list[WatchedWorker]
) -> None:
    async with await StateStore.open(tmp_path) as store:
        await store.begin("k", args_hash="h", tool="t", now=1.0, expires_at=9e9)
        await store.mark_unknown("k", expires_at=9e9)
        [worker] = workers
        before = worker.round_trips + worker.inline
        holder = await store.begin("k", args_hash="h2", tool="t", now=2.0, expires_at=9e9)
        assert holder is not None and holder.status == "unknown" and holder.args_hash == "h"
        assert await store.get("absent", now=3.0) is None
        assert worker.round_trips + worker.inline == before, "a held record or a get waited for the worker"
        assert await store.begin("new", args_hash="h", tool="t", now=2.0, expires_at=9e9) is None
        assert worker.round_trips + worker.inline == before + 1, "a claim is one synchronous write"
        assert (await store.get("new", now=3.0)) is not None and worker.round_trips + worker.inline == before + 1
        # The claim is committed when begin returns (no flush): a crash from here on reads as outcome unknown.
        assert store.path is not None
        conn = sqlite3.connect(f"{store.path.as_uri()}?mode=ro", uri=True)
        try:
            assert conn.execute("SELECT status FROM idempotency WHERE key = 'new'").fetchall() == [("in_flight",)]
        finally:
            conn.close()


async def test_what_the_store_answers_from_memory_stays_equal_to_the_disk_through_every_operation(
    tmp_path: Path,
) -> None:
    clock = FakeClock(100.0)
    limits = StateLimits(idempotency_max_rows=3)
    keys = ["a", "b", "c", "d", "e"]
    async with await StateStore.open(tmp_path, clock=clock, limits=limits) as store:
        for i, key in enumerate(keys):
            await store.begin(key, args_hash=f"h{i}", tool="t", now=100.0 + i, expires_at=200.0)
        await store.complete("a", result("r"), expires_at=300.0)
        await store.mark_unknown("b", expires_at=150.0)
        await store.release("c")
        await store.begin("c", args_hash="again", tool="t", now=106.0, expires_at=400.0)
        await memory_matches_disk(store, set(keys), clock())
        clock.now = 160.0  # "b" expired
        await store.prune()  # expiry, then trimmed to 3 rows, completed first
        assert set(await memory_matches_disk(store, set(keys), clock())) == {"c", "d", "e"}


async def test_two_stores_on_one_database_claim_each_key_once(tmp_path: Path) -> None:
    async with await StateStore.open(tmp_path) as one, await StateStore.open(tmp_path) as other:
        assert await one.begin("k", args_hash="h", tool="t", now=1.0, expires_at=9e9) is None
        holder = await other.begin("k", args_hash="h", tool="t", now=2.0, expires_at=9e9)
        assert holder is not None and holder.status == "in_flight"
        await other.complete("k", result("r"), expires_at=9e9)
        await other.flush()  # complete is write-behind: the other store sees it once written
        seen = await one.get("k", now=3.0)
        assert seen is not None and seen.status == "completed"


async def test_records_that_keep_a_write_from_running_twice_are_never_trimmed_before_they_expire(
    tmp_path: Path,
) -> None:
    limits = StateLimits(idempotency_max_rows=1)
    async with await StateStore.open(tmp_path, limits=limits) as store:
        for i, key in enumerate(["unknown", "running", "done"]):
            await store.begin(key, args_hash="h", tool="t", now=float(i), expires_at=9e9)
        await store.mark_unknown("unknown", expires_at=9e9)
        await store.complete("done", result("r"), expires_at=9e9)
        assert (await store.prune())["idempotency"] == 1  # only the completed one, although 2 rows stay over bound
        assert await store.get("done", now=5.0) is None
        for key in ("unknown", "running"):
            held = await store.get(key, now=5.0)
            assert held is not None and held.status in ("unknown", "in_flight"), key
